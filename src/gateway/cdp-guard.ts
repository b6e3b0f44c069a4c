import path from 'node:path';

/**
 * CDP methods the relay refuses because they reach outside the session: loading an
 * extension from any directory of the server, crashing the browser process on purpose,
 * pointing the browser at remote debugging targets, or handing a page its own CDP channel
 * to the browser (Target.exposeDevToolsProtocol), which would bypass this guard entirely.
 */
export const BLOCKED_CDP_METHODS = new Set([
  'Extensions.loadUnpacked',
  'Extensions.uninstall',
  'Browser.crash',
  'Browser.crashGpuProcess',
  'Target.setRemoteLocations',
  'Target.exposeDevToolsProtocol',
]);

type Params = Record<string, unknown>;

/** A file: URL, also behind view-source: (which would show the file's text). */
function isFileUrl(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  let s = v.trim();
  while (/^view-source:/i.test(s)) s = s.slice('view-source:'.length).trim();
  try {
    return new URL(s).protocol === 'file:';
  } catch {
    return /^file:/i.test(s);
  }
}

function inside(dir: string | undefined, p: unknown): boolean {
  if (typeof p !== 'string' || !dir) return false;
  const resolved = path.resolve(dir, p);
  return resolved === dir || resolved.startsWith(`${dir}/`);
}

/** Where a session's downloads go when a client names a directory outside the session. */
export function downloadsDir(sessionDir: string): string {
  return path.join(sessionDir, 'downloads');
}

/**
 * Downloads: clients name a directory of their own machine (Playwright sets one on every
 * connectOverCDP), which means nothing on the server and may point anywhere in its files.
 * The command is kept but its path is moved into the session's own downloads directory.
 */
function redirectDownloads(p: Params, dir: string | undefined): Params | null {
  if (p.downloadPath === undefined || (dir && inside(dir, p.downloadPath))) return null;
  return { ...p, downloadPath: dir ? downloadsDir(dir) : '/nonexistent' };
}

/** Any listed path outside the session's directory (a list that is not one of strings counts as outside). */
function filesOutside(files: unknown, dir: string | undefined): boolean {
  return Array.isArray(files) && files.some((f) => !inside(dir, f));
}

const READS_FILES = "files outside the session's own directory would read the server's files";

const REWRITES: Record<string, (p: Params, sessionDir: string | undefined) => Params | null> = {
  'Page.setDownloadBehavior': redirectDownloads,
  'Browser.setDownloadBehavior': redirectDownloads,
};

/**
 * Methods allowed in general but refused with some parameters, because those would read
 * the server's files (all sessions run as one account, so another session's files too) or
 * change the egress browserd manages. Each returns the reason, or null.
 */
const PARAM_RULES: Record<string, (p: Params, sessionDir: string | undefined) => string | null> = {
  'Page.navigate': (p) => (isFileUrl(p.url) ? "file: URLs would read the server's files" : null),
  'Target.createTarget': (p) => (isFileUrl(p.url) ? "file: URLs would read the server's files" : null),
  'DOM.setFileInputFiles': (p, dir) => (filesOutside(p.files, dir) ? READS_FILES : null),
  // A drop carries the named files into the page.
  'Input.dispatchDragEvent': (p, dir) => (p.data && typeof p.data === 'object' && filesOutside((p.data as Params).files, dir) ? READS_FILES : null),
  'PWA.launchFilesInApp': (p, dir) => (filesOutside(p.files, dir) ? READS_FILES : null),
  // Installs from a web bundle path on the server, or a file: URL.
  'PWA.install': (p) => (typeof p.installUrlOrBundleUrl === 'string' && !/^https?:/i.test(p.installUrlOrBundleUrl.trim()) ? "only http(s) install URLs are allowed; anything else would read the server's files" : null),
  // DevTools' own fetcher also loads file: URLs (source maps).
  'Network.loadNetworkResource': (p) => (isFileUrl(p.url) ? "file: URLs would read the server's files" : null),
  'Target.createBrowserContext': (p) =>
    p.proxyServer !== undefined || p.proxyBypassList !== undefined ? "the session's proxy is managed by browserd" : null,
};

const QUICK = [...BLOCKED_CDP_METHODS, ...Object.keys(PARAM_RULES), ...Object.keys(REWRITES)].map((m) => `"${m}"`);

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
  /** Why these parameters are refused (methods refused outright have none). */
  reason?: string;
}

/**
 * Returns the command to refuse, or null to relay the frame unchanged. A cheap substring
 * test comes first so ordinary frames are never parsed here.
 */
export function refusedCommand(frame: string, sessionDir?: string): CdpRefusal | null {
  const v = inspectCommand(frame, sessionDir);
  return v && 'refusal' in v ? v.refusal : null;
}

/**
 * What the relay does with a client frame: refuse it (answer with a CDP error), send a
 * rewritten frame instead, or (null) relay it unchanged.
 */
export function inspectCommand(frame: string, sessionDir?: string): { refusal: CdpRefusal } | { rewritten: string } | null {
  if (!mightBeRefused(frame)) return null;
  try {
    const msg = JSON.parse(frame) as { id?: unknown; method?: unknown; sessionId?: unknown; params?: unknown };
    if (typeof msg.method !== 'string') return null;
    const base = { id: typeof msg.id === 'number' ? msg.id : 0, method: msg.method, ...(typeof msg.sessionId === 'string' ? { sessionId: msg.sessionId } : {}) };
    if (BLOCKED_CDP_METHODS.has(msg.method)) return { refusal: base };
    const params = msg.params && typeof msg.params === 'object' ? (msg.params as Params) : {};
    const reason = PARAM_RULES[msg.method]?.(params, sessionDir);
    if (reason) return { refusal: { ...base, reason } };
    const rewritten = REWRITES[msg.method]?.(params, sessionDir);
    return rewritten ? { rewritten: JSON.stringify({ ...msg, params: rewritten }) } : null;
  } catch {
    return null;
  }
}

export function refusalReply(r: CdpRefusal): string {
  return JSON.stringify({
    id: r.id,
    ...(r.sessionId ? { sessionId: r.sessionId } : {}),
    error: { code: -32000, message: `${r.method} is not allowed through browserd${r.reason ? `: ${r.reason}` : ''}` },
  });
}
