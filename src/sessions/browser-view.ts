import type { SessionRecord } from './session-record.js';

/** Connection URLs of one session, each carrying its own signed token. */
export interface SessionUrls {
  cdp: string;
  webdriver: string;
  liveView: string | null;
}

/**
 * The Browser body of the contract. `base_url` is left out on purpose: there is no
 * per-session API behind it yet and the Kernel SDK sends some calls straight to it.
 */
export function browserView(s: SessionRecord, urls: SessionUrls, nowMs = Date.now()): Record<string, unknown> {
  const body: Record<string, unknown> = {
    session_id: s.id,
    created_at: s.createdAt,
    cdp_ws_url: urls.cdp,
    webdriver_ws_url: urls.webdriver,
    region: s.region,
    stealth: s.stealth,
    headless: s.headless,
    gpu: s.gpu,
    kiosk_mode: s.kioskMode,
    memory: s.memory,
    timeout_seconds: s.timeoutSeconds,
    viewport: s.config.viewport,
    telemetry: null,
    usage: { uptime_ms: s.uptimeMs ?? Math.max(0, nowMs - Date.parse(s.createdAt)) },
  };
  if (urls.liveView && !s.headless && !s.deletedAt) body.browser_live_view_url = urls.liveView;
  if (s.name !== null) body.name = s.name;
  if (Object.keys(s.tags).length) body.tags = s.tags;
  if (s.startUrl !== null) body.start_url = s.startUrl;
  if (s.config.chromePolicy) body.chrome_policy = s.config.chromePolicy;
  // Linked vaults are named by id, as selected proxies are: the link holds whatever name the vault has now.
  if (s.config.vaults?.length) body.vaults = s.config.vaults.map((id) => ({ id }));
  if (s.invocationId !== null) body.invocation_id = s.invocationId;
  if (s.deletedAt) {
    body.deleted_at = s.deletedAt;
    body.usage_status = s.usageStatus ?? 'pending';
  }
  return body;
}
