import type { Problem } from './browser-rules.js';

export type PolicyType = 'boolean' | 'integer' | 'string' | 'list' | 'dictionary';
/** Policy name -> value type, as the installed Chromium describes it. */
export type PolicySchema = Record<string, PolicyType>;

/**
 * Policies browserd manages itself: extension installation and settings, proxy settings,
 * remote debugging, developer tools (which would cut off CDP) and the policy test page we
 * read the schema from. A session may not override them.
 */
const MANAGED_EXACT = new Set([
  'BlockExternalExtensions',
  'MandatoryExtensionsForIncognitoNavigation',
  'CloudExtensionRequestEnabled',
  'EnableProxyOverrideRulesForAllUsers',
  'RemoteDebuggingAllowed',
  'DeveloperToolsAvailability',
  'DeveloperToolsAvailabilityAllowlist',
  'DeveloperToolsAvailabilityBlocklist',
  'DeveloperToolsDisabled',
  'PolicyTestPageEnabled',
  'CommandLineFlagSecurityWarningsEnabled',
]);
const MANAGED_PREFIXES = ['Extension', 'Proxy'];

export function isServiceManagedPolicy(name: string): boolean {
  return MANAGED_EXACT.has(name) || MANAGED_PREFIXES.some((p) => name.startsWith(p));
}

function typeOk(t: PolicyType, v: unknown): boolean {
  switch (t) {
    case 'boolean':
      return typeof v === 'boolean';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'string':
      return typeof v === 'string';
    case 'list':
      return Array.isArray(v);
    case 'dictionary':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
  }
}

const TYPE_WORDS: Record<PolicyType, string> = {
  boolean: 'a boolean',
  integer: 'an integer',
  string: 'a string',
  list: 'a list (JSON array)',
  dictionary: 'a dictionary (JSON object)',
};

/**
 * Policies every session runs with. file:// is blocked so nobody (an agent over CDP, a
 * person in the live view) reads the server's files through the browser.
 */
export const BASE_POLICY_BLOCKLIST = ['file://*'];

/** The policy file a session gets: the caller's policies with browserd's base rules merged in. */
export function sessionPolicy(user: Record<string, unknown> | null): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...(user ?? {}) };
  const theirs = Array.isArray(merged.URLBlocklist) ? (merged.URLBlocklist as unknown[]) : [];
  merged.URLBlocklist = [...BASE_POLICY_BLOCKLIST, ...theirs.filter((e) => !BASE_POLICY_BLOCKLIST.includes(e as string))];
  return merged;
}

/**
 * The session's egress as a mandatory policy. Policy outranks every other proxy setting
 * (the command line, an extension's chrome.proxy, the settings page), so nothing inside
 * the session can move its traffic off browserd's bridge.
 */
export function proxyPolicy(proxy: { server: string; bypassList: string }): Record<string, unknown> {
  return { ProxySettings: { ProxyMode: 'fixed_servers', ProxyServer: proxy.server, ProxyBypassList: proxy.bypassList } };
}

/** Every problem with a chrome_policy object: blocked, unknown or wrongly typed policies, each named. */
export function checkChromePolicy(policy: Record<string, unknown>, schema: PolicySchema): Problem[] {
  const out: Problem[] = [];
  for (const [name, value] of Object.entries(policy)) {
    const field = `chrome_policy.${name}`;
    if (isServiceManagedPolicy(name)) out.push({ field, message: 'is managed by browserd and cannot be set per session' });
    else if (!Object.hasOwn(schema, name)) out.push({ field, message: 'is not a policy this Chromium knows' });
    else if (!typeOk(schema[name]!, value)) out.push({ field, message: `must be ${TYPE_WORDS[schema[name]!]}` });
    else if (name === 'URLAllowlist' && (value as unknown[]).some((e) => typeof e === 'string' && /^\s*file:/i.test(e))) {
      out.push({ field, message: "may not allow file: URLs (browserd blocks them so the server's files stay out of reach)" });
    }
  }
  return out;
}
