import { Type, type Static } from '@sinclair/typebox';
import ipaddr from 'ipaddr.js';
import type { Problem } from './browser-rules.js';
import { StringEnum } from './schema-helpers.js';

/**
 * Proxies, in the Kernel API's shape (`@onkernel/sdk` `proxies`): `type` is one of Kernel's
 * kinds, of which this server runs `custom` (a proxy the caller operates: host, port,
 * optional credentials) reached over `protocol` http, https or socks5.
 */
export const PROXY_TYPES = ['datacenter', 'isp', 'residential', 'mobile', 'custom'] as const;
export const PROXY_PROTOCOLS = ['http', 'https', 'socks5'] as const;
export type ProxyProtocol = (typeof PROXY_PROTOCOLS)[number];

const Printable = (max: number) => Type.String({ minLength: 1, maxLength: max, pattern: '^[\\x21-\\x7e]+$' });

export const ProxyCreateRequest = Type.Object(
  {
    type: StringEnum(PROXY_TYPES),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    protocol: Type.Optional(StringEnum(PROXY_PROTOCOLS, { description: 'How browserd reaches the proxy; default http.' })),
    config: Type.Optional(
      Type.Object(
        {
          host: Type.String({ minLength: 1, maxLength: 253 }),
          port: Type.Integer({ minimum: 1, maximum: 65535 }),
          username: Type.Optional(Printable(255)),
          password: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, writeOnly: true })),
        },
        { additionalProperties: false },
      ),
    ),
    bypass_hosts: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { maxItems: 100, description: 'Hosts reached directly instead of through this proxy (exact names, *.suffix, or IP addresses).' })),
  },
  { additionalProperties: false },
);
export type ProxyCreateRequest = Static<typeof ProxyCreateRequest>;

export const ProxyCheckRequest = Type.Object({ url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })) }, { additionalProperties: false });
export type ProxyCheckRequest = Static<typeof ProxyCheckRequest>;

export const ProxySchema = Type.Object({
  id: Type.String(),
  type: Type.String(),
  name: Type.Optional(Type.String()),
  protocol: StringEnum(PROXY_PROTOCOLS),
  config: Type.Object({
    host: Type.String(),
    port: Type.Integer(),
    username: Type.Optional(Type.String()),
    has_password: Type.Boolean(),
  }),
  bypass_hosts: Type.Optional(Type.Array(Type.String())),
  status: Type.Optional(StringEnum(['available', 'unavailable'] as const)),
  last_checked: Type.Optional(Type.String({ format: 'date-time' })),
  created_at: Type.String({ format: 'date-time' }),
});

export const ProxyCheckSchema = Type.Composite([
  ProxySchema,
  Type.Object({
    check: Type.Object({
      ok: Type.Boolean(),
      target: Type.String({ description: 'What the check asked the proxy to reach' }),
      status_code: Type.Optional(Type.Integer({ description: 'HTTP status of `url` fetched through the proxy' })),
      error: Type.Optional(Type.String()),
    }),
  }),
]);

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;

/** A host name or an IP address literal (IPv6 without brackets). */
export function isHostOrIp(h: string): boolean {
  if (ipaddr.isValid(h)) return ipaddr.IPv4.isValidFourPartDecimal(h) || h.includes(':');
  const name = h.replace(/\.$/, '');
  return name.length > 0 && name.length <= 253 && name.split('.').every((l) => LABEL.test(l)) && !/^\d+$/.test(name.split('.').pop()!);
}

/** A bypass_hosts entry: exact host, `*.suffix` / `.suffix`, or an IP address. */
export function isBypassHost(h: string): boolean {
  const bare = h.startsWith('*.') ? h.slice(2) : h.startsWith('.') ? h.slice(1) : h;
  return isHostOrIp(bare);
}

/** Rules of a create request beyond the schema. */
export function checkProxyCreate(req: ProxyCreateRequest): Problem[] {
  const out: Problem[] = [];
  if (req.type !== 'custom') {
    out.push({ field: 'type', message: `${req.type} proxies come from a proxy provider, and this server has none; create a custom proxy (your own host and port)` });
    return out;
  }
  if (!req.config) {
    out.push({ field: 'config', message: 'is required for a custom proxy (host and port)' });
    return out;
  }
  if (!isHostOrIp(req.config.host)) out.push({ field: 'config.host', message: 'must be a host name or an IP address (no scheme, port or path)' });
  if (req.config.password !== undefined && req.config.username === undefined) out.push({ field: 'config.password', message: 'needs a username' });
  req.bypass_hosts?.forEach((h, i) => {
    if (!isBypassHost(h)) out.push({ field: `bypass_hosts[${i}]`, message: `"${h}" is not a host name, *.suffix or IP address` });
  });
  return out;
}
