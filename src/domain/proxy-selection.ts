import type { Problem } from './browser-rules.js';

/**
 * The contract's Proxy selection, as pure rules. What a session records is its selection
 * (`{mode}` or, names resolved, `{id}`); what it uses is the egress derived from the
 * selection and the session's stealth flag. Proxy choice never changes stealth behaviour:
 * stealth only decides what `default` means.
 */

/** What a request asked for, before names are resolved. */
export type RequestedProxy = { mode: 'direct' | 'default' } | { id: string; via: 'proxy' | 'proxy_id' } | { name: string };

/** What a session records (names resolved to ids). */
export type RecordedProxy = { mode: 'direct' | 'default' } | { id: string };

/** Where a session's traffic goes. */
export type Egress = { kind: 'direct' } | { kind: 'stealth_default' } | { kind: 'proxy'; id: string };

/**
 * A create request's selection: `proxy` (exactly one of mode, id, name), else the
 * deprecated `proxy_id`, else none (rule 1: the stealth-derived default).
 * Shape errors (empty object, both fields) are reported by checkCreateRules.
 */
export function requestedOnCreate(req: { proxy?: { mode?: 'direct' | 'default'; id?: string; name?: string }; proxy_id?: string }): RequestedProxy | null {
  if (req.proxy) return fromSelection(req.proxy);
  if (req.proxy_id !== undefined) return { id: req.proxy_id, via: 'proxy_id' };
  return null;
}

function fromSelection(p: { mode?: 'direct' | 'default'; id?: string; name?: string }): RequestedProxy {
  if (p.mode !== undefined) return { mode: p.mode };
  if (p.id !== undefined) return { id: p.id, via: 'proxy' };
  return { name: p.name! };
}

export interface UpdateProxyFields {
  proxy?: { mode?: 'direct' | 'default'; id?: string; name?: string };
  proxy_id?: string | null;
  disable_default_proxy?: boolean;
}

/** Rules of an update's proxy fields: at most one of them, and a selection with exactly one of mode, id, name. */
export function checkUpdateProxy(req: UpdateProxyFields): Problem[] {
  const out: Problem[] = [];
  const given = (['proxy', 'proxy_id', 'disable_default_proxy'] as const).filter((k) => req[k] !== undefined);
  if (given.length > 1) out.push({ field: given[1]!, message: `cannot be combined with ${given[0]}` });
  if (req.proxy) {
    const keys = (['mode', 'id', 'name'] as const).filter((k) => req.proxy![k] !== undefined);
    if (keys.length !== 1) out.push({ field: 'proxy', message: `exactly one of mode, id, name must be given (got ${keys.length ? keys.join(', ') : 'none'})` });
  }
  return out;
}

/**
 * An update's selection, or null when the update leaves the proxy unchanged (rule 2).
 * Kernel's update fields map onto the selection: `proxy_id: ""` or `null` removes the
 * proxy (back to the default), `disable_default_proxy: true` is `mode: direct` and `false`
 * is `mode: default`.
 */
export function requestedOnUpdate(req: UpdateProxyFields): RequestedProxy | null {
  if (req.proxy) return fromSelection(req.proxy);
  if (req.proxy_id !== undefined) return req.proxy_id === null || req.proxy_id === '' ? { mode: 'default' } : { id: req.proxy_id, via: 'proxy_id' };
  if (req.disable_default_proxy !== undefined) return { mode: req.disable_default_proxy ? 'direct' : 'default' };
  return null;
}

/** Rules 1 and 3: the egress a recorded selection gives a session. */
export function egressOf(sel: RecordedProxy | undefined, stealth: boolean): Egress {
  if (sel && 'id' in sel) return { kind: 'proxy', id: sel.id };
  if (sel?.mode === 'direct') return { kind: 'direct' };
  return stealth ? { kind: 'stealth_default' } : { kind: 'direct' };
}

/** The Browser body's `proxy` and deprecated `proxy_id`: selected proxies by id. */
export function proxyFields(sel: RecordedProxy | undefined): { proxy?: RecordedProxy; proxy_id?: string } {
  if (!sel) return {};
  return 'id' in sel ? { proxy: { id: sel.id }, proxy_id: sel.id } : { proxy: { mode: sel.mode } };
}
