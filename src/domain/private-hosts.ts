import ipaddr from 'ipaddr.js';
import { getPublicSuffix } from 'tldts';
import type { Problem } from './browser-rules.js';

/** The private ranges of the contract: the defaults when private_hosts is omitted, and the only ranges accepted. */
export const DEFAULT_PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7'] as const;
const RANGES = DEFAULT_PRIVATE_RANGES.map((r) => ipaddr.parseCIDR(r));

/** True when the range addr/prefix lies wholly inside one of the private ranges. */
function insidePrivate(addr: ipaddr.IPv4 | ipaddr.IPv6, prefix: number): boolean {
  return RANGES.some(([net, bits]) => net.kind() === addr.kind() && prefix >= bits && addr.match(net, bits));
}

function checkPort(raw: string): string | null {
  if (!/^\d{1,5}$/.test(raw)) return 'port must be a number from 1 to 65535';
  const n = Number(raw);
  return n >= 1 && n <= 65535 ? null : 'port must be a number from 1 to 65535';
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;

/** What one private_hosts entry is, once parsed. */
export type PrivateHost =
  | { kind: 'cidr'; cidr: string }
  | { kind: 'ip'; address: string; port: number | null }
  | { kind: 'host'; host: string; wildcard: boolean; port: number | null };

/**
 * Parses one entry by the contract's Network configuration rules, returning the entry or
 * the reason it is refused. Pure: hostnames are never resolved (rule 9).
 */
export function parsePrivateHost(entry: string): PrivateHost | { error: string } {
  if (entry.length === 0) return { error: 'must not be empty' };
  if (/\s/.test(entry)) return { error: 'must not contain spaces' };

  // Bracketed IPv6 address, optional port (rule 6, 8).
  if (entry.startsWith('[')) {
    const m = /^\[([^\]]+)\](?::(.*))?$/.exec(entry);
    if (!m) return { error: 'a bracketed IPv6 address must look like [fd00::1] or [fd00::1]:8080' };
    if (m[1]!.includes('/')) return { error: 'IPv6 CIDR ranges are written without brackets (fd00::/8)' };
    if (!ipaddr.IPv6.isValid(m[1]!)) return { error: `${m[1]} is not an IPv6 address` };
    const addr = ipaddr.IPv6.parse(m[1]!);
    if (!insidePrivate(addr, 128)) return { error: 'only addresses in the private ranges (fc00::/7 for IPv6) are accepted' };
    let port: number | null = null;
    if (m[2] !== undefined) {
      const bad = checkPort(m[2]);
      if (bad) return { error: bad };
      port = Number(m[2]);
    }
    return { kind: 'ip', address: addr.toString(), port };
  }

  // CIDR (rule 5, 8): canonical, private, no port.
  if (entry.includes('/')) {
    let parsed: [ipaddr.IPv4 | ipaddr.IPv6, number];
    try {
      parsed = ipaddr.parseCIDR(entry);
    } catch {
      return { error: /:\d+$/.test(entry) && entry.includes('.') ? 'CIDR ranges may not carry a port' : 'is not a valid CIDR range' };
    }
    const [addr, bits] = parsed;
    if (addr.kind() === 'ipv4' && !ipaddr.IPv4.isValidFourPartDecimal(entry.split('/')[0]!)) return { error: 'IPv4 ranges must be written in dotted decimal (10.0.0.0/8)' };
    const network = addr.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(entry) : ipaddr.IPv6.networkAddressFromCIDR(entry);
    if (network.toString() !== addr.toString()) return { error: `CIDR must be in canonical masked form (host bits zero): ${network.toString()}/${bits}` };
    if (!insidePrivate(addr, bits)) return { error: `only ranges inside ${DEFAULT_PRIVATE_RANGES.join(', ')} are accepted; public, loopback, link-local and unspecified ranges are not` };
    return { kind: 'cidr', cidr: `${addr.toString()}/${bits}` };
  }

  // Unbracketed IPv6 without a prefix (rule 6).
  if ((entry.match(/:/g) ?? []).length >= 2) {
    return { error: ipaddr.IPv6.isValid(entry) ? 'exact IPv6 addresses must be bracketed ([fd00::1])' : 'is not a valid host, address or range' };
  }

  // host or IPv4, optional port (rule 8).
  let host = entry;
  let port: number | null = null;
  const colon = entry.lastIndexOf(':');
  if (colon >= 0) {
    host = entry.slice(0, colon);
    const bad = checkPort(entry.slice(colon + 1));
    if (bad) return { error: bad };
    port = Number(entry.slice(colon + 1));
  }
  if (ipaddr.IPv4.isValidFourPartDecimal(host)) {
    const addr = ipaddr.IPv4.parse(host);
    if (!insidePrivate(addr, 32)) return { error: `only addresses in the private ranges (${DEFAULT_PRIVATE_RANGES.slice(0, 4).join(', ')}) are accepted` };
    return { kind: 'ip', address: addr.toString(), port };
  }
  if (/^[\d.]+$/.test(host)) return { error: 'is neither a full IPv4 address nor a host name' };

  // Hostname pattern (rule 3, 7).
  const wildcard = host.startsWith('*.');
  const name = (wildcard ? host.slice(2) : host).toLowerCase().replace(/\.$/, '');
  if (name.includes('*')) return { error: 'a wildcard is allowed only as a single leading "*."' };
  if (name.length === 0 || name.length > 253) return { error: 'is not a valid host name' };
  const labels = name.split('.');
  if (!labels.every((l) => LABEL.test(l))) return { error: 'is not a valid host name (labels of letters, digits and inner hyphens)' };
  // URL parsers read a host whose last label is a number (10, 0x7f) as an IPv4 address
  // (0x7f.0.0.1 is 127.0.0.1), or refuse it: never a host name.
  if (/^(\d+|0x[0-9a-f]*)$/i.test(labels[labels.length - 1]!)) return { error: 'is neither a full IPv4 address nor a host name' };
  if (wildcard) {
    if (labels.length < 2) return { error: 'a wildcard must cover a suffix of at least two labels (*.corp.example)' };
    const suffix = getPublicSuffix(name, { allowPrivateDomains: true });
    if (suffix === name) return { error: `a wildcard directly over the public suffix "${name}" is not allowed` };
  }
  return { kind: 'host', host: name, wildcard, port };
}

/** One problem per refused entry, naming it by index. */
export function checkPrivateHosts(entries: string[], field = 'network.private_hosts'): Problem[] {
  const out: Problem[] = [];
  entries.forEach((e, i) => {
    const r = parsePrivateHost(e);
    if ('error' in r) out.push({ field: `${field}[${i}]`, message: `"${e}": ${r.error}` });
  });
  return out;
}
