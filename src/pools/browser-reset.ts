import { CdpClient } from '../runtime/cdp-client.js';

/** Where browserd reaches a session's browser directly (not through the gateway). */
export interface BrowserEndpoint {
  port: number;
  wsPath: string;
}

function wsUrl(e: BrowserEndpoint): string {
  return `ws://127.0.0.1:${e.port}${e.wsPath}`;
}

/** The web origin of a URL, or null for about:, chrome:, data: and the like. */
export function webOrigin(url: string): string | null {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : null;
  } catch {
    return null;
  }
}

/**
 * The origins a cookie jar names: each cookie's domain over http and https (ports are not
 * part of a cookie's scope, so origins with ports are found through the lease's targets).
 */
export function cookieOrigins(cookies: { domain: string }[]): string[] {
  const out = new Set<string>();
  for (const c of cookies) {
    const host = c.domain.replace(/^\./, '');
    if (!host) continue;
    out.add(`http://${host}`);
    out.add(`https://${host}`);
  }
  return [...out];
}

/**
 * Records every web origin the browser's targets (tabs, out-of-process frames, workers)
 * visit during a lease, over browserd's own CDP connection: at release these origins'
 * storage is cleared. Chromium has no "clear all origins" call, so the lease is watched.
 */
export class OriginWatch {
  readonly origins = new Set<string>();

  private constructor(private readonly cdp: CdpClient) {}

  static async start(e: BrowserEndpoint): Promise<OriginWatch> {
    const cdp = await CdpClient.connect(wsUrl(e));
    const w = new OriginWatch(cdp);
    cdp.onEvent((method, params) => {
      if (method !== 'Target.targetCreated' && method !== 'Target.targetInfoChanged') return;
      const o = webOrigin((params as { targetInfo?: { url?: string } }).targetInfo?.url ?? '');
      if (o) w.origins.add(o);
    });
    try {
      await cdp.send('Target.setDiscoverTargets', { discover: true });
    } catch (err) {
      cdp.close();
      throw err;
    }
    return w;
  }

  close(): void {
    this.cdp.close();
  }
}

interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
}

/**
 * Resets a browser for its next lease: one fresh about:blank tab (every other tab closed),
 * no cookies, no HTTP cache, no storage (local/session storage, IndexedDB, cache storage,
 * service workers...) of any origin the lease visited or a cookie names, and no granted
 * permissions. Throws when the browser cannot be reset (the caller then discards it).
 */
export async function resetBrowser(e: BrowserEndpoint, visited: Iterable<string>): Promise<{ closedTabs: number; clearedOrigins: number }> {
  const cdp = await CdpClient.connect(wsUrl(e));
  try {
    const { targetInfos } = await cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
    const origins = new Set(visited);
    for (const t of targetInfos) {
      const o = webOrigin(t.url);
      if (o) origins.add(o);
    }
    const { cookies } = await cdp.send<{ cookies: { domain: string }[] }>('Storage.getCookies');
    for (const o of cookieOrigins(cookies)) origins.add(o);

    const { targetId: fresh } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
    const stale = targetInfos.filter((t) => t.type === 'page' && t.targetId !== fresh);
    for (const t of stale) await cdp.send('Target.closeTarget', { targetId: t.targetId }).catch(() => undefined);

    await cdp.send('Storage.clearCookies');
    // Storage.clearDataForOrigin needs a page's storage partition (on the browser target it is an "Internal error").
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId: fresh, flatten: true });
    for (const origin of origins) await cdp.send('Storage.clearDataForOrigin', { origin, storageTypes: 'all' }, sessionId);
    await cdp.send('Network.clearBrowserCache', {}, sessionId);
    await cdp.send('Network.clearBrowserCookies', {}, sessionId);
    await cdp.send('Browser.resetPermissions').catch(() => undefined);
    await cdp.send('Target.detachFromTarget', { sessionId }).catch(() => undefined);
    return { closedTabs: stale.length, clearedOrigins: origins.size };
  } finally {
    cdp.close();
  }
}

/** Sends the browser's first tab to `url` without waiting for it to load (best effort, like start_url). */
export async function navigateFirstTab(e: BrowserEndpoint, url: string): Promise<void> {
  const cdp = await CdpClient.connect(wsUrl(e));
  try {
    const { targetInfos } = await cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
    let target = targetInfos.find((t) => t.type === 'page')?.targetId;
    if (!target) target = (await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' })).targetId;
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId: target, flatten: true });
    await cdp.send('Page.navigate', { url }, sessionId);
  } finally {
    cdp.close();
  }
}
