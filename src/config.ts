import path from 'node:path';
import { captchaSolverVars } from './captcha/captcha-config.js';
import type { SolverConfig } from './captcha/solver-client.js';

/** Regions a node can serve; the contract's Region enum. */
export const REGIONS = ['us-east', 'eu-west', 'ap-southeast'] as const;
export type Region = (typeof REGIONS)[number];

export type StoreConfig = { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string };

export interface Config {
  host: string;
  port: number;
  /** Base of every URL handed to clients, without a trailing slash. Null until the port is known (port 0). */
  publicUrl: string | null;
  dataDir: string;
  store: StoreConfig;
  apiKey: string | null;
  maxSessions: number;
  /** Requests per minute allowed per API key; 0 disables the limit. */
  rateLimitPerMinute: number;
  chromiumPath: string;
  /** Unprivileged account that runs Chromium and Xvfb when browserd runs as root. */
  sessionUser: string;
  /** The regions this node serves (BROWSERD_REGION, comma-separated); `region` is the first. */
  regions: Region[];
  region: Region;
  nodeId: string | null;
  logLevel: string;
  /** How often the inactivity reaper runs, in ms (the contract fixes 5 s; tests keep it). */
  reaperIntervalMs: number;
  /**
   * Key-encryption key of vault items (BROWSERD_VAULT_KEK, 32 bytes). Absent: the key file
   * `<data dir>/vault.key` is used, created (mode 0600) at the first start.
   */
  vaultKek?: Buffer;
  /** The `link` wallet provider (BROWSERD_LINK_URL and its OAuth client). Absent: wallets cannot use it. */
  link?: LinkProviderConfig;
  /**
   * The default stealth proxy (BROWSERD_STEALTH_PROXY_URL: http, https or socks5 URL, may carry
   * credentials): the egress of stealth sessions whose proxy is the default. Absent: direct.
   */
  stealthProxyUrl?: string;
  /**
   * Warm start: how many pre-launched browsers this node keeps ready, per kind
   * (BROWSERD_WARM_HEADLESS, BROWSERD_WARM_HEADFUL; 0 disables that kind), and the least
   * time between two refill launches (BROWSERD_WARM_REFILL_GAP_MS). See docs/warm-start.md.
   */
  warm: { headless: number; headful: number; refillGapMs: number };
  /** Interval of the telemetry `screenshot` category's viewport captures, in ms (BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS). */
  telemetryScreenshotIntervalMs: number;
  /** Telemetry events kept per session, newest first (BROWSERD_TELEMETRY_RETAINED_EVENTS; docs/telemetry.md). */
  telemetryRetainedEvents: number;
  /** The CAPTCHA solver service of stealth sessions (BROWSERD_CAPTCHA_SOLVER_*; docs/captcha.md). Absent: detect and report only. */
  captchaSolver?: SolverConfig;
}

export interface LinkProviderConfig {
  /** Base URL of the provider's API and OAuth endpoints, without a trailing slash. */
  url: string;
  clientId: string;
  clientSecret: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function intVar(env: NodeJS.ProcessEnv, name: string, dflt: number, min: number, max: number, problems: string[]): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  if (!/^\d+$/.test(raw.trim())) {
    problems.push(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
    return dflt;
  }
  const n = Number(raw.trim());
  if (n < min || n > max) problems.push(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function normalizePublicUrl(raw: string, problems: string[]): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    problems.push(`BROWSERD_PUBLIC_URL must be an absolute http(s) URL, got "${raw}"`);
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    problems.push(`BROWSERD_PUBLIC_URL must use http or https, got "${u.protocol}"`);
    return null;
  }
  if (u.search || u.hash || u.username || u.password) {
    problems.push('BROWSERD_PUBLIC_URL must not carry credentials, a query or a fragment');
    return null;
  }
  return u.toString().replace(/\/+$/, '');
}

/** Public URL derived from the listen address when none is configured. */
export function defaultPublicUrl(host: string, port: number): string {
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${port}`;
}

/** Environment -> typed config. Pure: reads only the object it is given. Throws ConfigError listing every bad value. */
export function loadConfig(env: NodeJS.ProcessEnv, cwd = process.cwd()): Config {
  const problems: string[] = [];
  const host = (env.BROWSERD_HOST ?? '').trim() || '127.0.0.1';
  if (!/^[A-Za-z0-9.:\-[\]]+$/.test(host)) problems.push(`BROWSERD_HOST is not a host name or address: "${host}"`);
  const port = intVar(env, 'BROWSERD_PORT', 8080, 0, 65535, problems);

  const dataDir = path.resolve(cwd, (env.BROWSERD_DATA_DIR ?? '').trim() || './data');

  let store: StoreConfig = { kind: 'sqlite', file: path.join(dataDir, 'browserd.sqlite') };
  const dbUrl = (env.BROWSERD_DATABASE_URL ?? '').trim();
  if (dbUrl) {
    let parsed: URL | null = null;
    try {
      parsed = new URL(dbUrl);
    } catch {
      /* reported below */
    }
    if (!parsed || (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:')) {
      problems.push('BROWSERD_DATABASE_URL must be a postgres:// or postgresql:// URL (leave it unset for the embedded SQLite store)');
    } else {
      store = { kind: 'postgres', url: dbUrl };
    }
  }

  const apiKeyRaw = env.BROWSERD_API_KEY;
  let apiKey: string | null = null;
  if (apiKeyRaw !== undefined && apiKeyRaw !== '') {
    if (!/^[\x21-\x7e]{16,256}$/.test(apiKeyRaw)) {
      problems.push('BROWSERD_API_KEY must be 16 to 256 printable characters without spaces');
    } else apiKey = apiKeyRaw;
  }

  const maxSessions = intVar(env, 'BROWSERD_MAX_SESSIONS', 16, 1, 10000, problems);
  const rateLimitPerMinute = intVar(env, 'BROWSERD_RATE_LIMIT', 600, 0, 1_000_000, problems);
  const reaperIntervalMs = intVar(env, 'BROWSERD_REAPER_INTERVAL_MS', 5000, 100, 60_000, problems);
  const warm = {
    headless: intVar(env, 'BROWSERD_WARM_HEADLESS', 2, 0, 64, problems),
    headful: intVar(env, 'BROWSERD_WARM_HEADFUL', 1, 0, 64, problems),
    refillGapMs: intVar(env, 'BROWSERD_WARM_REFILL_GAP_MS', 1500, 0, 600_000, problems),
  };

  const telemetryScreenshotIntervalMs = intVar(env, 'BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS', 5000, 250, 3_600_000, problems);
  const telemetryRetainedEvents = intVar(env, 'BROWSERD_TELEMETRY_RETAINED_EVENTS', 10_000, 100, 1_000_000, problems);

  const regions = ((env.BROWSERD_REGION ?? '').trim() || 'us-east').split(',').map((r) => r.trim()) as Region[];
  for (const r of regions) if (!REGIONS.includes(r)) problems.push(`BROWSERD_REGION must be one or more (comma-separated) of ${REGIONS.join(', ')}, got "${r}"`);
  const region = regions[0]!;

  const nodeId = (env.BROWSERD_NODE_ID ?? '').trim() || null;
  if (nodeId !== null && !/^[a-z0-9-]{1,63}$/.test(nodeId)) problems.push('BROWSERD_NODE_ID must be 1 to 63 of a-z, 0-9 and -');

  const logLevel = (env.BROWSERD_LOG_LEVEL ?? '').trim() || 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`BROWSERD_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const chromiumPath = (env.BROWSERD_CHROMIUM_PATH ?? '').trim() || '/usr/lib/chromium/chromium';
  if (!path.isAbsolute(chromiumPath)) problems.push('BROWSERD_CHROMIUM_PATH must be an absolute path');
  const sessionUser = (env.BROWSERD_SESSION_USER ?? '').trim() || 'browserd';
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(sessionUser)) problems.push('BROWSERD_SESSION_USER must be a system user name');

  const publicRaw = (env.BROWSERD_PUBLIC_URL ?? '').trim();
  const publicUrl = publicRaw ? normalizePublicUrl(publicRaw, problems) : port === 0 ? null : defaultPublicUrl(host, port);

  const vaultKek = vaultKekVar(env, problems);
  const link = linkVars(env, problems);
  const stealthProxyUrl = stealthProxyVar(env, problems);
  const captchaSolver = captchaSolverVars(env, problems);

  if (problems.length) throw new ConfigError(problems);
  return {
    host,
    port,
    publicUrl,
    dataDir,
    store,
    apiKey,
    maxSessions,
    rateLimitPerMinute,
    chromiumPath,
    sessionUser,
    regions: [...new Set(regions)],
    region,
    nodeId,
    logLevel,
    reaperIntervalMs,
    warm,
    telemetryScreenshotIntervalMs,
    telemetryRetainedEvents,
    ...(vaultKek ? { vaultKek } : {}),
    ...(link ? { link } : {}),
    ...(stealthProxyUrl ? { stealthProxyUrl } : {}),
    ...(captchaSolver ? { captchaSolver } : {}),
  };
}

/** BROWSERD_STEALTH_PROXY_URL: scheme://[user[:password]@]host:port of an http, https or socks5 proxy. */
function stealthProxyVar(env: NodeJS.ProcessEnv, problems: string[]): string | null {
  const raw = (env.BROWSERD_STEALTH_PROXY_URL ?? '').trim();
  if (!raw) return null;
  // The value may hold a password: it never goes into a message.
  const bad = () => {
    problems.push('BROWSERD_STEALTH_PROXY_URL must be http://, https:// or socks5:// with a host and a port (credentials allowed, no path, query or fragment)');
    return null;
  };
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return bad();
  }
  // The port must be written out, even when it is the scheme's default (which URL drops).
  const port = /^[a-z0-9]+:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/@]*):(\d{1,5})\/?$/i.exec(raw)?.[1];
  if (!['http:', 'https:', 'socks5:'].includes(u.protocol) || !u.hostname || !port || (u.pathname !== '' && u.pathname !== '/') || u.search || u.hash) return bad();
  return `${u.protocol}//${u.username ? `${u.username}${u.password ? `:${u.password}` : ''}@` : ''}${u.hostname}:${Number(port)}`;
}

/** BROWSERD_VAULT_KEK: standard or URL-safe base64 of exactly 32 random bytes. */
function vaultKekVar(env: NodeJS.ProcessEnv, problems: string[]): Buffer | null {
  const raw = (env.BROWSERD_VAULT_KEK ?? '').trim();
  if (!raw) return null;
  // The value itself never goes into a message: it is the key.
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw)) {
    problems.push('BROWSERD_VAULT_KEK must be base64 of 32 bytes (for example: openssl rand -base64 32)');
    return null;
  }
  const key = Buffer.from(raw.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (key.length !== 32) {
    problems.push(`BROWSERD_VAULT_KEK must be base64 of exactly 32 bytes, got ${key.length} bytes (for example: openssl rand -base64 32)`);
    return null;
  }
  return key;
}

/** BROWSERD_LINK_URL with BROWSERD_LINK_CLIENT_ID and BROWSERD_LINK_CLIENT_SECRET: all three or none. */
function linkVars(env: NodeJS.ProcessEnv, problems: string[]): LinkProviderConfig | null {
  const url = (env.BROWSERD_LINK_URL ?? '').trim();
  const clientId = (env.BROWSERD_LINK_CLIENT_ID ?? '').trim();
  const clientSecret = (env.BROWSERD_LINK_CLIENT_SECRET ?? '').trim();
  if (!url && !clientId && !clientSecret) return null;
  let parsed: URL | null = null;
  try {
    parsed = url ? new URL(url) : null;
  } catch {
    /* reported below */
  }
  let ok = true;
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.search || parsed.hash || parsed.username) {
    problems.push('BROWSERD_LINK_URL must be an absolute http(s) URL without a query, fragment or credentials');
    ok = false;
  }
  if (!clientId || !/^[\x21-\x7e]{1,255}$/.test(clientId)) {
    problems.push('BROWSERD_LINK_CLIENT_ID must be set (1 to 255 printable characters) when BROWSERD_LINK_URL is');
    ok = false;
  }
  if (!clientSecret || !/^[\x21-\x7e]{1,1024}$/.test(clientSecret)) {
    problems.push('BROWSERD_LINK_CLIENT_SECRET must be set (printable characters, no spaces) when BROWSERD_LINK_URL is');
    ok = false;
  }
  return ok ? { url: parsed!.toString().replace(/\/+$/, ''), clientId, clientSecret } : null;
}
