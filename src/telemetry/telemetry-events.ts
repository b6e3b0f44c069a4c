import type { Category } from '../domain/telemetry-request.js';

/**
 * One telemetry event, in the Kernel SDK's shape (`BrowserTelemetryEvent`): category,
 * type, ts (Unix microseconds), source (producer) and optional data. Types the SDK does
 * not name (`cdp_command`, `bidi_connect`, `bidi_disconnect`) follow the same envelope.
 */
export interface TelemetryEvent {
  category: Category | 'monitor';
  type: string;
  ts: number;
  source: { kind: 'cdp' | 'kernel_api' | 'extension' | 'local_process'; event?: string; metadata?: Record<string, string> };
  data?: Record<string, unknown>;
  truncated?: boolean;
}

export function nowUs(): number {
  return Date.now() * 1000;
}

/** Why a proxied connection ended (the SDK's `cdp_disconnect.reason`). */
export type DisconnectReason = 'client_close' | 'upstream_changed' | 'upstream_error' | 'context_cancelled';

/**
 * Methods whose params are recorded as they are (no secrets in them). Every other
 * command is recorded by method, CDP session and params size only: typed text
 * (Input.insertText, Input.dispatchKeyEvent), evaluated scripts, cookies and headers
 * may carry credentials.
 */
const PARAMS_KEPT = new Set([
  'Input.dispatchMouseEvent', 'Input.dispatchTouchEvent', 'Input.synthesizeScrollGesture', 'Input.synthesizeTapGesture',
  'Page.reload', 'Page.bringToFront', 'Page.captureScreenshot', 'Page.stopLoading', 'Page.close',
  'Target.activateTarget', 'Target.closeTarget', 'Target.attachToTarget', 'Target.setDiscoverTargets', 'Target.setAutoAttach',
  'Browser.setWindowBounds', 'Emulation.setDeviceMetricsOverride',
]);
/** Methods whose `url` param is kept without its query and fragment (which may hold tokens). */
const URL_KEPT = new Set(['Page.navigate', 'Target.createTarget']);

function urlWithoutQuery(u: unknown): string | undefined {
  if (typeof u !== 'string') return undefined;
  try {
    const url = new URL(u);
    url.search = '';
    url.hash = '';
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return undefined;
  }
}

/** The `data` of a cdp_command event: never the params of a command that may carry secrets. */
export function cdpCommandData(msg: { id?: unknown; method: string; params?: unknown; sessionId?: unknown }, frameBytes: number): Record<string, unknown> {
  const data: Record<string, unknown> = { method: msg.method, frame_bytes: frameBytes };
  if (typeof msg.id === 'number') data.id = msg.id;
  if (typeof msg.sessionId === 'string') data.cdp_session_id = msg.sessionId;
  const params = msg.params as Record<string, unknown> | undefined;
  if (params && typeof params === 'object') {
    if (PARAMS_KEPT.has(msg.method)) data.params = params;
    else if (URL_KEPT.has(msg.method)) {
      const url = urlWithoutQuery(params.url);
      if (url) data.params = { url };
    } else if (msg.method === 'Input.insertText' && typeof params.text === 'string') data.text_length = params.text.length;
    else if (msg.method === 'Input.dispatchKeyEvent') {
      data.params = { type: params.type };
      if (typeof params.text === 'string') data.text_length = params.text.length;
    }
  }
  return data;
}

/** Methods whose cdp_command data needs the params (everything else: method, id, session and size only). */
export function needsParams(method: string): boolean {
  return PARAMS_KEPT.has(method) || URL_KEPT.has(method) || method === 'Input.insertText' || method === 'Input.dispatchKeyEvent';
}

const HEAD_FIELDS = /"(id|method|sessionId)"\s*:\s*(\d+|"(?:[^"\\]|\\.)*")/g;

/**
 * The id, method and CDP session of a command frame without parsing it whole: clients put
 * `id` and `method` first and `sessionId` last, so only the frame's head and tail are read.
 * Returns null when the frame does not look like that (the caller then parses it).
 */
export function peekCommand(frame: Buffer): { id?: number; method: string; sessionId?: string } | null {
  const head = frame.toString('latin1', 0, Math.min(frame.length, 160));
  const tail = frame.length > 160 ? frame.toString('latin1', Math.max(160, frame.length - 120)) : '';
  const out: { id?: number; method?: string; sessionId?: string } = {};
  for (const part of [head, tail]) {
    for (const m of part.matchAll(HEAD_FIELDS)) {
      const v = m[2]!;
      if (m[1] === 'id' && out.id === undefined && /^\d+$/.test(v)) out.id = Number(v);
      else if (m[1] === 'method' && out.method === undefined && v.startsWith('"') && !v.includes('\\')) out.method = v.slice(1, -1);
      else if (m[1] === 'sessionId' && v.startsWith('"') && !v.includes('\\')) out.sessionId = v.slice(1, -1);
    }
  }
  return out.method ? (out as { id?: number; method: string; sessionId?: string }) : null;
}
