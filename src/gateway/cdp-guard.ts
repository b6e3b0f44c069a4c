/**
 * CDP methods the relay refuses because they reach outside the session: loading an
 * extension from any directory of the server, crashing the browser process on purpose,
 * or pointing the browser at remote debugging targets.
 */
export const BLOCKED_CDP_METHODS = new Set([
  'Extensions.loadUnpacked',
  'Extensions.uninstall',
  'Browser.crash',
  'Browser.crashGpuProcess',
  'Target.setRemoteLocations',
]);

const QUICK = [...BLOCKED_CDP_METHODS].map((m) => `"${m}"`);

/**
 * Cheap pre-check on the raw frame: false means the frame is certainly relayed unchanged.
 * A JSON `\u` escape can spell a refused name in other bytes (Chromium decodes it), so a
 * frame holding one is always parsed.
 */
export function mightBeRefused(frame: Buffer | string): boolean {
  return frame.includes('\\u') || QUICK.some((q) => frame.includes(q));
}

export interface CdpRefusal {
  id: number;
  sessionId?: string;
  method: string;
}

/**
 * Returns the command to refuse, or null to relay the frame unchanged. A cheap substring
 * test comes first so ordinary frames are never parsed here.
 */
export function refusedCommand(frame: string): CdpRefusal | null {
  if (!mightBeRefused(frame)) return null;
  try {
    const msg = JSON.parse(frame) as { id?: unknown; method?: unknown; sessionId?: unknown };
    if (typeof msg.method !== 'string' || !BLOCKED_CDP_METHODS.has(msg.method)) return null;
    return { id: typeof msg.id === 'number' ? msg.id : 0, method: msg.method, ...(typeof msg.sessionId === 'string' ? { sessionId: msg.sessionId } : {}) };
  } catch {
    return null;
  }
}

export function refusalReply(r: CdpRefusal): string {
  return JSON.stringify({
    id: r.id,
    ...(r.sessionId ? { sessionId: r.sessionId } : {}),
    error: { code: -32000, message: `${r.method} is not allowed through browserd` },
  });
}
