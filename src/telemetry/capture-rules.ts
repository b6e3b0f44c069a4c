/**
 * Pure rules of the CDP-sourced telemetry categories (console, network, page, interaction):
 * which response bodies are kept and how far, and how CDP events map to the Kernel SDK's
 * event data. No I/O here; the hooks in capture-hooks.ts feed these.
 */

/** Bytes of UTF-8 kept of a structured text body (JSON, XML, form data): 8 KB. */
export const STRUCTURED_BODY_LIMIT = 8192;
/** Bytes of UTF-8 kept of any other text body: 4 KB. */
export const TEXT_BODY_LIMIT = 4096;

export type BodyKind = 'structured' | 'text' | 'binary';

/** The essence of a MIME type: lower case, without parameters. */
export function mimeEssence(mime: string | undefined | null): string {
  return (mime ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * How a response body of this MIME type is treated: structured text (JSON, XML, form data;
 * `+json`/`+xml` suffixes too), other text (`text/*`, JavaScript, and the few `application/`
 * text types), or binary (everything else, including an unknown or missing type).
 */
export function bodyKind(mime: string | undefined | null): BodyKind {
  const m = mimeEssence(mime);
  if (!m) return 'binary';
  if (m === 'application/json' || m.endsWith('+json') || m === 'application/ld+json' || m === 'application/x-ndjson' || m === 'text/json') return 'structured';
  if (m === 'application/xml' || m === 'text/xml' || m.endsWith('+xml')) return 'structured';
  if (m === 'application/x-www-form-urlencoded' || m === 'multipart/form-data') return 'structured';
  if (m.startsWith('text/')) return 'text';
  if (['application/javascript', 'application/x-javascript', 'application/ecmascript', 'application/graphql', 'application/x-sh', 'application/sql', 'application/csv', 'application/yaml', 'application/x-yaml', 'application/toml'].includes(m)) return 'text';
  return 'binary';
}

export function bodyLimit(kind: BodyKind): number {
  return kind === 'structured' ? STRUCTURED_BODY_LIMIT : kind === 'text' ? TEXT_BODY_LIMIT : 0;
}

/** The longest prefix of `s` whose UTF-8 encoding fits in `maxBytes` (a character is never split). */
export function truncateUtf8(s: string, maxBytes: number): { text: string; truncated: boolean; bytes: number } {
  const buf = Buffer.from(s, 'utf8');
  if (buf.length <= maxBytes) return { text: s, truncated: false, bytes: buf.length };
  let end = maxBytes;
  // Step back over continuation bytes (10xxxxxx) so the cut lands on a character boundary.
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return { text: buf.toString('utf8', 0, end), truncated: true, bytes: buf.length };
}

/** Whether bytes look binary: a NUL byte, or not valid UTF-8. */
export function looksBinary(buf: Buffer): boolean {
  if (buf.includes(0)) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(buf);
    return false;
  } catch {
    return true;
  }
}

/**
 * The body kept for a response (Network.getResponseBody's `body` / `base64Encoded`): nothing
 * for a binary type or binary content, else the text cut to its kind's limit.
 */
export function responseBody(mime: string | undefined | null, body: string, base64Encoded: boolean): { body?: string; truncated: boolean; bytes: number } {
  const kind = bodyKind(mime);
  if (kind === 'binary') return { truncated: false, bytes: base64Encoded ? Buffer.byteLength(body, 'base64') : Buffer.byteLength(body, 'utf8') };
  let text = body;
  if (base64Encoded) {
    const buf = Buffer.from(body, 'base64');
    if (looksBinary(buf)) return { truncated: false, bytes: buf.length };
    text = buf.toString('utf8');
  } else if (text.includes('\u0000')) return { truncated: false, bytes: Buffer.byteLength(text, 'utf8') };
  const cut = truncateUtf8(text, bodyLimit(kind));
  return { body: cut.text, truncated: cut.truncated, bytes: cut.bytes };
}

/** Header names whose values are replaced in events (credentials). */
const REDACTED_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key']);
export const REDACTED = '[redacted]';

/** Headers as CDP gives them, with credential values replaced. */
export function redactHeaders(h: unknown): Record<string, unknown> | undefined {
  if (!h || typeof h !== 'object') return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(h as Record<string, unknown>)) out[k] = REDACTED_HEADERS.has(k.toLowerCase()) ? REDACTED : v;
  return out;
}

/** The SDK's target_type values; anything else is `other`. */
export function sdkTargetType(type: string): 'page' | 'background_page' | 'service_worker' | 'shared_worker' | 'other' {
  return type === 'page' || type === 'background_page' || type === 'service_worker' || type === 'shared_worker' ? type : 'other';
}

/** A CDP Runtime.RemoteObject as the console would print it (primitives by value, objects by description). */
export function remoteObjectText(o: unknown): string {
  if (!o || typeof o !== 'object') return String(o);
  const r = o as { type?: string; subtype?: string; value?: unknown; unserializableValue?: string; description?: string; preview?: { properties?: { name: string; value?: string }[]; overflow?: boolean; subtype?: string } };
  if (r.type === 'undefined') return 'undefined';
  if (r.unserializableValue !== undefined) return r.unserializableValue;
  if (r.type === 'string') return String(r.value);
  if ('value' in r && r.value !== undefined && (r.type !== 'object' || r.value === null)) return r.value === null ? 'null' : String(r.value);
  if (r.type === 'object' && r.subtype !== 'error' && r.preview?.properties && r.subtype !== 'node') {
    const isArray = r.subtype === 'array';
    const parts = r.preview.properties.map((p) => (isArray ? `${p.value ?? ''}` : `${p.name}: ${p.value ?? ''}`));
    if (r.preview.overflow) parts.push('…');
    return isArray ? `[${parts.join(', ')}]` : `{${parts.join(', ')}}`;
  }
  return r.description ?? r.type ?? '';
}

/** Strings longer than this (a console argument, a clicked element's text) are cut, and the event says `truncated`. */
export const MAX_TEXT = 4096;

function cut(s: string, max = MAX_TEXT): { s: string; cut: boolean } {
  return s.length > max ? { s: s.slice(0, max), cut: true } : { s, cut: false };
}

export interface MappedEvent {
  type: string;
  data: Record<string, unknown>;
  truncated?: boolean;
}

/** Runtime.consoleAPICalled: console_error for `error` (and `assert`), console_log for every other level. */
export function consoleEvent(p: { type?: string; args?: unknown[]; stackTrace?: unknown }): MappedEvent {
  const level = p.type ?? 'log';
  let truncated = false;
  const args = (p.args ?? []).map((a) => {
    const c = cut(remoteObjectText(a));
    truncated ||= c.cut;
    return c.s;
  });
  const data: Record<string, unknown> = { level, args, text: args[0] ?? '' };
  if (p.stackTrace) data.stack_trace = p.stackTrace;
  const type = level === 'error' || level === 'assert' ? 'console_error' : 'console_log';
  return truncated ? { type, data, truncated } : { type, data };
}

/** Runtime.exceptionThrown: console_error with the text the console shows ("Uncaught Error: boom"). */
export function exceptionEvent(p: { exceptionDetails?: { text?: string; lineNumber?: number; columnNumber?: number; url?: string; stackTrace?: unknown; exception?: unknown } }): MappedEvent {
  const d = p.exceptionDetails ?? {};
  const prefix = d.text ?? 'Uncaught';
  const ex = d.exception as { description?: string } | undefined;
  const first = ex ? (ex.description ?? remoteObjectText(ex)).split('\n')[0]! : '';
  const text = cut(first && !prefix.includes(first) ? `${prefix} ${first}` : prefix);
  const data: Record<string, unknown> = { text: text.s };
  if (typeof d.lineNumber === 'number') data.line = d.lineNumber;
  if (typeof d.columnNumber === 'number') data.column = d.columnNumber;
  if (d.url) data.source_url = d.url;
  if (d.stackTrace) data.stack_trace = d.stackTrace;
  return text.cut ? { type: 'console_error', data, truncated: true } : { type: 'console_error', data };
}

/** Network.requestWillBeSent: network_request (headers with credentials redacted; post data as sent). */
export function requestEvent(p: {
  requestId?: string;
  loaderId?: string;
  documentURL?: string;
  frameId?: string;
  type?: string;
  initiator?: { type?: string };
  redirectResponse?: { url?: string };
  request?: { url?: string; method?: string; headers?: unknown; postData?: string; hasPostData?: boolean; postDataEntries?: { bytes?: string }[] };
}): MappedEvent {
  const r = p.request ?? {};
  const data: Record<string, unknown> = { request_id: p.requestId, url: r.url, method: r.method };
  if (p.frameId) data.frame_id = p.frameId;
  if (p.loaderId) data.loader_id = p.loaderId;
  if (p.documentURL) data.document_url = p.documentURL;
  if (p.type) data.resource_type = p.type;
  if (p.initiator?.type) data.initiator_type = p.initiator.type;
  const headers = redactHeaders(r.headers);
  if (headers) data.headers = headers;
  const post = postDataOf(r);
  if (post !== undefined) data.post_data = post;
  if (p.redirectResponse) {
    data.is_redirect = true;
    if (p.redirectResponse.url) data.redirect_url = p.redirectResponse.url;
  }
  return { type: 'network_request', data };
}

/** The request body as sent: `postData`, else the entries' bytes joined (CDP gives them base64). */
export function postDataOf(r: { postData?: string; postDataEntries?: { bytes?: string }[] }): string | undefined {
  if (typeof r.postData === 'string') return r.postData;
  if (r.postDataEntries?.length) return Buffer.concat(r.postDataEntries.map((e) => Buffer.from(e.bytes ?? '', 'base64'))).toString('utf8');
  return undefined;
}

/** What a request's network_response carries, gathered from Network.responseReceived. */
export interface ResponseInfo {
  url?: string;
  status?: number;
  statusText?: string;
  mimeType?: string;
  headers?: unknown;
  resourceType?: string;
  frameId?: string;
  loaderId?: string;
  protocol?: string;
  remoteIPAddress?: string;
  fromCache?: boolean;
}

/**
 * network_response at Network.loadingFinished: status, type, headers (redacted), timing
 * (`duration_ms` from the request's start to the end of its body, `encoded_data_length`),
 * and the body as kept by responseBody.
 */
export function responseEvent(
  req: { requestId: string; url?: string; method?: string; startedS?: number },
  res: ResponseInfo,
  finished: { timestamp?: number; encodedDataLength?: number },
  body?: { body?: string; truncated: boolean; bytes?: number },
): MappedEvent {
  const data: Record<string, unknown> = { request_id: req.requestId, url: res.url ?? req.url, method: req.method, status: res.status, status_text: res.statusText, mime_type: res.mimeType };
  if (res.resourceType) data.resource_type = res.resourceType;
  if (res.frameId) data.frame_id = res.frameId;
  if (res.loaderId) data.loader_id = res.loaderId;
  const headers = redactHeaders(res.headers);
  if (headers) data.headers = headers;
  if (res.protocol) data.protocol = res.protocol;
  if (res.fromCache) data.from_cache = true;
  if (typeof finished.timestamp === 'number' && typeof req.startedS === 'number') data.duration_ms = Math.max(0, Math.round((finished.timestamp - req.startedS) * 100_000) / 100);
  if (typeof finished.encodedDataLength === 'number') data.encoded_data_length = finished.encodedDataLength;
  if (body) {
    if (body.bytes !== undefined) data.body_bytes = body.bytes;
    if (body.body !== undefined) data.body = body.body;
    else data.body_excluded = bodyKind(res.mimeType) === 'binary' ? 'binary_type' : 'binary_content';
  }
  return body?.truncated ? { type: 'network_response', data, truncated: true } : { type: 'network_response', data };
}

/** Network.loadingFailed: network_loading_failed. */
export function loadingFailedEvent(p: { requestId?: string; errorText?: string; canceled?: boolean; type?: string }, req?: { url?: string; method?: string; frameId?: string }): MappedEvent {
  const data: Record<string, unknown> = { request_id: p.requestId, error_text: p.errorText };
  if (p.canceled) data.canceled = true;
  if (p.type) data.resource_type = p.type;
  if (req?.url) data.url = req.url;
  if (req?.method) data.method = req.method;
  if (req?.frameId) data.frame_id = req.frameId;
  return { type: 'network_loading_failed', data };
}

/** PerformanceTimeline.timelineEventAdded: page_layout_shift or page_lcp (null for other entry types). */
export function timelineEvent(p: { event?: { frameId?: string; type?: string; time?: number; duration?: number; lcpDetails?: Record<string, unknown>; layoutShiftDetails?: Record<string, unknown> } }): MappedEvent | null {
  const e = p.event;
  if (!e) return null;
  const ms = (s: unknown) => (typeof s === 'number' ? Math.round(s * 1_000_000) / 1000 : undefined);
  if (e.type === 'layout-shift') {
    const d = e.layoutShiftDetails ?? {};
    return {
      type: 'page_layout_shift',
      data: { source_frame_id: e.frameId, time: ms(e.time), duration: ms(e.duration) ?? 0, layout_shift_details: { value: d.value, had_recent_input: d.hadRecentInput } },
    };
  }
  if (e.type === 'largest-contentful-paint') {
    const d = e.lcpDetails ?? {};
    const details: Record<string, unknown> = { render_time: ms(d.renderTime), load_time: ms(d.loadTime), size: d.size };
    if (d.elementId) details.element_id = d.elementId;
    if (d.url) details.url = d.url;
    if (typeof d.nodeId === 'number') details.node_id = d.nodeId;
    return { type: 'page_lcp', data: { source_frame_id: e.frameId, time: ms(e.time), lcp_details: details } };
  }
  return null;
}

/**
 * A message from the interaction script (in its isolated world, through its binding): the
 * event it stands for, or null when the payload is not one (the host never trusts its shape).
 */
export function interactionEvent(payload: string): MappedEvent | null {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(payload) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (!m || typeof m !== 'object') return null;
  const str = (v: unknown, max = 512) => (typeof v === 'string' ? v.slice(0, max) : undefined);
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? Math.round(v * 100) / 100 : undefined);
  const clean = (d: Record<string, unknown>) => Object.fromEntries(Object.entries(d).filter(([, v]) => v !== undefined));
  switch (m.t) {
    case 'click':
      return { type: 'interaction_click', data: clean({ x: num(m.x), y: num(m.y), selector: str(m.selector), tag: str(m.tag, 64), text: str(m.text, 200), url: str(m.url, 2048) }) };
    case 'key':
      // The script sends no key for a password field; a key given anyway for one is dropped here too.
      return { type: 'interaction_key', data: clean({ key: m.masked === true ? undefined : str(m.key, 32), masked: m.masked === true ? true : undefined, selector: str(m.selector), tag: str(m.tag, 64), url: str(m.url, 2048) }) };
    case 'scroll':
      return { type: 'interaction_scroll_settled', data: clean({ from_x: num(m.fx), from_y: num(m.fy), to_x: num(m.tx), to_y: num(m.ty), target_selector: str(m.selector), url: str(m.url, 2048) }) };
    default:
      return null;
  }
}
