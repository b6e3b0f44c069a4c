import ipaddr from 'ipaddr.js';
import { DEFAULT_PRIVATE_RANGES, parsePrivateHost, type PrivateHost } from './private-hosts.js';

/**
 * Network configuration -> Chromium's `--proxy-bypass-list`: the private hosts reach their
 * destination directly, everything else goes through the session's egress (its bridge).
 *
 * Chromium's semantics match the contract's rule 4 by themselves: an IP or CIDR rule
 * matches only URLs written with a literal IP, never a host name that resolves into the
 * range (no DNS lookup); `*.x` matches names under x; `host:port` only that port.
 *
 * Loopback: Chromium bypasses localhost, *.localhost and loopback IPs implicitly. browserd
 * subtracts that (`<-loopback>`): loopback is not a private host (the contract refuses it as
 * an entry), so it follows the session's egress like any other destination. With direct
 * egress that is the browserd host's own loopback, as before; with a proxy it is the proxy's
 * business, and the session cannot reach services listening on the browserd host's loopback.
 */
export const SUBTRACT_IMPLICIT_LOOPBACK = '<-loopback>';

/** One parsed entry as a Chromium bypass rule. */
export function bypassRule(h: PrivateHost): string {
  switch (h.kind) {
    case 'cidr':
      return h.cidr;
    case 'ip': {
      const v6 = h.address.includes(':');
      const addr = v6 ? `[${h.address}]` : h.address;
      return h.port === null ? addr : `${addr}:${h.port}`;
    }
    case 'host': {
      const host = h.wildcard ? `*.${h.host}` : h.host;
      return h.port === null ? host : `${host}:${h.port}`;
    }
  }
}

/**
 * The bypass list for a session's `network.private_hosts`: the contract's default ranges
 * when omitted (rule 1), exactly the given entries otherwise (rule 2; none for an empty
 * list). Entries must already be valid (checkPrivateHosts).
 */
export function chromiumBypassList(privateHosts: string[] | undefined): string {
  const entries = privateHosts ?? [...DEFAULT_PRIVATE_RANGES];
  const rules = entries.map((e) => {
    const parsed = parsePrivateHost(e);
    if ('error' in parsed) throw new Error(`private_hosts entry "${e}" is invalid: ${parsed.error}`);
    return bypassRule(parsed);
  });
  // Chromium lets later rules override earlier ones, so <-loopback> comes first: a listed
  // name such as intranet.localhost then still goes direct.
  return [SUBTRACT_IMPLICIT_LOOPBACK, ...new Set(rules)].join(';');
}

/**
 * Whether a destination host is in a proxy's own bypass_hosts (exact name, `*.suffix` or
 * `.suffix` for names under it, or an IP address). The bridge then connects directly.
 */
export function matchesBypassHost(patterns: string[], host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  for (const raw of patterns) {
    const p = raw.toLowerCase();
    if (p.startsWith('*.') || p.startsWith('.')) {
      const suffix = p.slice(p.indexOf('.'));
      if (h.endsWith(suffix) && h.length > suffix.length) return true;
    } else if (ipaddr.isValid(p) && ipaddr.isValid(h)) {
      if (ipaddr.parse(p).toNormalizedString() === ipaddr.parse(h).toNormalizedString()) return true;
    } else if (p === h) return true;
  }
  return false;
}
