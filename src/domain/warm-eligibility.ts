import type { BrowserCreateRequest } from './browser-request.js';
import { resolveMemory, type ResolvedCreate } from './browser-rules.js';
import { DEFAULT_VIEWPORT, type ResolvedViewport } from './viewport.js';

/**
 * Warm start, as pure rules: which create requests may take a pre-launched browser, and
 * what the hand-out then changes on it. A warm browser is launched with the defaults of its
 * kind (see warmShape); a request may take one when everything it asks for that only a
 * launch can set (command-line flags, policy files, files copied in before Chromium starts)
 * is what the warm browser already has. The rest is applied to the running browser.
 * See docs/warm-start.md.
 */

export type WarmKind = 'headless' | 'headful';

/** What every warm browser of a kind is launched with. */
export interface WarmShape {
  headless: boolean;
  viewport: ResolvedViewport;
  /** The memory limit it starts with (the kind's default). */
  memoryBytes: number;
}

export function warmShape(kind: WarmKind): WarmShape {
  const headless = kind === 'headless';
  return { headless, viewport: { ...DEFAULT_VIEWPORT }, memoryBytes: resolveMemory(headless, false, undefined).bytes };
}

export type WarmDecision = { warm: true; kind: WarmKind } | { warm: false; reason: string };

/**
 * Whether a valid create request (`req`, resolved as `r`) may take a warm browser, and of
 * which kind; otherwise the first reason it launches fresh (for the debug log).
 */
export function warmDecision(req: BrowserCreateRequest, r: ResolvedCreate): WarmDecision {
  const kind: WarmKind = r.headless ? 'headless' : 'headful';
  const shape = warmShape(kind);
  if (r.stealth) return { warm: false, reason: 'stealth needs its own launch flags' };
  if (r.gpu) return { warm: false, reason: 'gpu needs its own launch flags' };
  if (r.chromePolicy && Object.keys(r.chromePolicy).length) return { warm: false, reason: 'chrome_policy is written before launch' };
  if (req.extensions?.length) return { warm: false, reason: 'extensions are loaded at launch' };
  if (req.profile) return { warm: false, reason: "a profile's state is copied in before launch" };
  if (req.network?.private_hosts !== undefined) return { warm: false, reason: 'network.private_hosts is a launch flag (the proxy bypass list)' };
  if (!r.headless && r.kioskMode) return { warm: false, reason: 'kiosk_mode is a launch flag' };
  if (!r.headless && !sameViewport(r.viewport, shape.viewport)) return { warm: false, reason: "a headful viewport is the display's size, fixed at launch" };
  return { warm: true, kind };
}

function sameViewport(a: ResolvedViewport, b: ResolvedViewport): boolean {
  return a.width === b.width && a.height === b.height && a.refresh_rate === b.refresh_rate;
}

/** What the hand-out changes on a warm browser; null: nothing to do for that setting. */
export interface HandOutPlan {
  /** Headless only: the screen and window size (Emulation.updateScreen, Browser.setWindowBounds). */
  screen: { width: number; height: number } | null;
  /** The session cgroup's new memory limit. */
  memoryBytes: number | null;
  /** Navigated to without waiting. */
  startUrl: string | null;
}

/**
 * The hand-out of a warm browser of `shape` to an eligible request. Name, tags, timeout,
 * telemetry and proxy are not here: they live in the store and the egress bridge, set the
 * same way for warm and fresh sessions.
 */
export function handOutPlan(r: ResolvedCreate, shape: WarmShape, memoryEnforced: boolean): HandOutPlan {
  const resize = shape.headless && (r.viewport.width !== shape.viewport.width || r.viewport.height !== shape.viewport.height);
  return {
    screen: resize ? { width: r.viewport.width, height: r.viewport.height } : null,
    memoryBytes: memoryEnforced && r.memoryBytes !== shape.memoryBytes ? r.memoryBytes : null,
    startUrl: r.startUrl,
  };
}
