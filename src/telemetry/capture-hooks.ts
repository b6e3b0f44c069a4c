import type { Logger } from 'pino';
import type { AttachedTarget, TargetHook } from '../runtime/target-agent.js';
import {
  bodyKind,
  consoleEvent,
  exceptionEvent,
  interactionEvent,
  loadingFailedEvent,
  requestEvent,
  responseBody,
  responseEvent,
  sdkTargetType,
  timelineEvent,
  type MappedEvent,
  type ResponseInfo,
} from './capture-rules.js';
import { INTERACTION_BINDING, INTERACTION_SCRIPT, INTERACTION_WORLD } from './interaction-script.js';

/** The categories captured from browserd's own CDP connection to the session (session agent hooks). */
export const CDP_CAPTURE_CATEGORIES = ['console', 'network', 'page', 'interaction', 'screenshot'] as const;
export type CdpCaptureCategory = (typeof CDP_CAPTURE_CATEGORIES)[number];

export const HOOK_PREFIX = 'telemetry:';

/** What a capture hook needs from the telemetry service. */
export interface CaptureContext {
  emit(category: CdpCaptureCategory, event: MappedEvent, sourceEvent: string): void;
  log: Logger;
  screenshotIntervalMs: number;
}

/** Targets with a JavaScript runtime (console, network of their own). */
const RUNTIME_TYPES = new Set(['page', 'iframe', 'worker', 'shared_worker', 'service_worker', 'background_page', 'webview']);
/** Targets with frames (page lifecycle, layout, interaction). */
const FRAME_TYPES = new Set(['page', 'iframe', 'background_page', 'webview']);
/** Requests remembered per target until they finish (a target that never finishes them cannot grow without end). */
const MAX_PENDING_REQUESTS = 2000;
/** Network.enable's buffer for request bodies given inline in requestWillBeSent (larger ones are fetched). */
const MAX_INLINE_POST_DATA = 65536;

/** The SDK's event context for a target: target, CDP session, type (and url when known). */
function context(t: AttachedTarget, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { target_id: t.targetId, session_id: t.sessionId, target_type: sdkTargetType(t.type), ...extra };
}

function withContext(t: AttachedTarget, e: MappedEvent, extra: Record<string, unknown> = {}): MappedEvent {
  return { ...e, data: { ...context(t, extra), ...e.data } };
}

/** Tracks the targets a hook prepared (to undo on removal). */
class Targets {
  readonly all = new Map<string, AttachedTarget>();
  add(t: AttachedTarget): void {
    this.all.set(t.sessionId, t);
  }
  delete(t: AttachedTarget): void {
    this.all.delete(t.sessionId);
  }
}

/** console: console API calls and uncaught exceptions (Runtime.enable on browserd's own session of each target). */
function consoleHook(ctx: CaptureContext): TargetHook {
  return {
    name: `${HOOK_PREFIX}console`,
    async attached(t) {
      if (RUNTIME_TYPES.has(t.type)) await t.send('Runtime.enable');
    },
    event(t, method, params) {
      if (!t) return;
      if (method === 'Runtime.consoleAPICalled') ctx.emit('console', withContext(t, consoleEvent(params)), method);
      else if (method === 'Runtime.exceptionThrown') ctx.emit('console', withContext(t, exceptionEvent(params)), method);
    },
    // Runtime stays enabled on removal: other hooks of the same session may rely on it (bindings).
  };
}

interface PendingRequest {
  requestId: string;
  url?: string;
  method?: string;
  startedS?: number;
  frameId?: string;
  res?: ResponseInfo;
}

/** network: requests and responses with bodies as the contract says (Network.enable per target). */
function networkHook(ctx: CaptureContext): TargetHook {
  const targets = new Targets();
  const pending = new Map<string, Map<string, PendingRequest>>();
  const of = (t: AttachedTarget) => {
    let m = pending.get(t.sessionId);
    if (!m) pending.set(t.sessionId, (m = new Map()));
    return m;
  };
  const source = (e: MappedEvent, method: string) => ctx.emit('network', e, method);
  return {
    name: `${HOOK_PREFIX}network`,
    async attached(t) {
      if (!RUNTIME_TYPES.has(t.type)) return;
      targets.add(t);
      await t.send('Network.enable', { maxPostDataSize: MAX_INLINE_POST_DATA });
    },
    detached(t) {
      targets.delete(t);
      pending.delete(t.sessionId);
    },
    event(t, method, params) {
      if (!t || !method.startsWith('Network.')) return;
      const p = params as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      const reqs = of(t);
      switch (method) {
        case 'Network.requestWillBeSent': {
          const id = String(p.requestId);
          if (reqs.size >= MAX_PENDING_REQUESTS) reqs.delete(reqs.keys().next().value!);
          reqs.set(id, { requestId: id, url: p.request?.url, method: p.request?.method, startedS: p.timestamp, frameId: p.frameId });
          const e = requestEvent(p);
          const r = p.request ?? {};
          if (r.hasPostData && e.data.post_data === undefined) {
            // Too large to come inline: fetched, then reported as sent.
            void t
              .send<{ postData: string }>('Network.getRequestPostData', { requestId: id }, 5000)
              .then((x) => (e.data.post_data = x.postData))
              .catch(() => undefined)
              .finally(() => source(withContext(t, e), method));
          } else source(withContext(t, e), method);
          return;
        }
        case 'Network.responseReceived': {
          const r = reqs.get(String(p.requestId));
          if (!r) return;
          const res = p.response ?? {};
          r.res = { url: res.url, status: res.status, statusText: res.statusText, mimeType: res.mimeType, headers: res.headers, resourceType: p.type, frameId: p.frameId, loaderId: p.loaderId, protocol: res.protocol, fromCache: res.fromDiskCache || res.fromPrefetchCache };
          return;
        }
        case 'Network.loadingFinished': {
          const id = String(p.requestId);
          const r = reqs.get(id);
          reqs.delete(id);
          if (!r?.res) return;
          const res = r.res;
          if (bodyKind(res.mimeType) === 'binary') {
            source(withContext(t, responseEvent(r, res, p, { truncated: false })), method);
            return;
          }
          void t
            .send<{ body: string; base64Encoded: boolean }>('Network.getResponseBody', { requestId: id }, 5000)
            .then(
              (b) => responseEvent(r, res, p, responseBody(res.mimeType, b.body, b.base64Encoded)),
              () => responseEvent(r, res, p),
            )
            .then((e) => source(withContext(t, e), method));
          return;
        }
        case 'Network.loadingFailed': {
          const id = String(p.requestId);
          const r = reqs.get(id);
          reqs.delete(id);
          source(withContext(t, loadingFailedEvent(p, r)), method);
          return;
        }
      }
    },
    closed() {
      for (const t of targets.all.values()) void t.send('Network.disable').catch(() => undefined);
      pending.clear();
    },
  };
}

/** page: navigations, DOMContentLoaded, load, layout shifts, LCP, new tabs (Page + PerformanceTimeline per frame target). */
function pageHook(ctx: CaptureContext): TargetHook {
  const targets = new Targets();
  /** Per target: its main frame's URL and navigation count. */
  const nav = new Map<string, { url?: string; seq: number }>();
  const navOf = (t: AttachedTarget) => {
    let n = nav.get(t.sessionId);
    if (!n) nav.set(t.sessionId, (n = { url: t.url, seq: 0 }));
    return n;
  };
  return {
    name: `${HOOK_PREFIX}page`,
    async attached(t, late) {
      if (!FRAME_TYPES.has(t.type)) return;
      targets.add(t);
      navOf(t);
      if (t.type === 'page' && !late) ctx.emit('page', { type: 'page_tab_opened', data: { target_id: t.targetId, target_type: 'page', url: t.url, ...(t.parent ? { opener_id: t.parent.targetId } : {}) } }, 'Target.attachedToTarget');
      await Promise.all([t.send('Page.enable'), t.send('PerformanceTimeline.enable', { eventTypes: ['layout-shift', 'largest-contentful-paint'] })]);
    },
    detached(t) {
      targets.delete(t);
      nav.delete(t.sessionId);
    },
    event(t, method, params) {
      if (!t) return;
      const p = params as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      switch (method) {
        case 'Page.frameNavigated': {
          const f = p.frame ?? {};
          const n = navOf(t);
          if (!f.parentId) {
            n.url = f.url;
            n.seq++;
          }
          ctx.emit('page', { type: 'page_navigation', data: { ...context(t), url: f.url, frame_id: f.id, loader_id: f.loaderId, ...(f.parentId ? { parent_frame_id: f.parentId } : {}) } }, method);
          return;
        }
        case 'Page.domContentEventFired':
        case 'Page.loadEventFired': {
          const n = navOf(t);
          ctx.emit('page', { type: method === 'Page.loadEventFired' ? 'page_load' : 'page_dom_content_loaded', data: { ...context(t), url: n.url, nav_seq: n.seq, cdp_timestamp: p.timestamp } }, method);
          return;
        }
        case 'PerformanceTimeline.timelineEventAdded': {
          const e = timelineEvent(p);
          const n = navOf(t);
          if (e) ctx.emit('page', withContext(t, e, { url: n.url, nav_seq: n.seq }), method);
          return;
        }
      }
    },
    closed() {
      // Page stays enabled (Page.disable would drop other hooks' scripts); the timeline is ours alone.
      for (const t of targets.all.values()) void t.send('PerformanceTimeline.disable').catch(() => undefined);
    },
  };
}

/** interaction: clicks, keydowns, settled scrolls, from a script in an isolated world of every frame. */
function interactionHook(ctx: CaptureContext): TargetHook {
  const targets = new Map<string, { t: AttachedTarget; script?: string }>();
  return {
    name: `${HOOK_PREFIX}interaction`,
    async attached(t) {
      if (!FRAME_TYPES.has(t.type)) return;
      const entry: { t: AttachedTarget; script?: string } = { t };
      targets.set(t.sessionId, entry);
      // The binding's calls arrive only while Runtime is enabled on this session (measured).
      await Promise.all([t.send('Runtime.enable'), t.send('Page.enable'), t.send('Runtime.addBinding', { name: INTERACTION_BINDING, executionContextName: INTERACTION_WORLD })]);
      const r = await t.send<{ identifier: string }>('Page.addScriptToEvaluateOnNewDocument', { source: INTERACTION_SCRIPT, worldName: INTERACTION_WORLD, runImmediately: true });
      entry.script = r.identifier;
    },
    detached(t) {
      targets.delete(t.sessionId);
    },
    event(t, method, params) {
      if (!t || method !== 'Runtime.bindingCalled' || params.name !== INTERACTION_BINDING) return;
      const e = interactionEvent(String(params.payload));
      if (e) ctx.emit('interaction', withContext(t, e), 'Runtime.bindingCalled');
    },
    closed() {
      for (const { t, script } of targets.values()) {
        void t.send('Runtime.removeBinding', { name: INTERACTION_BINDING }).catch(() => undefined);
        if (script) void t.send('Page.removeScriptToEvaluateOnNewDocument', { identifier: script }).catch(() => undefined);
      }
      targets.clear();
    },
  };
}

/**
 * screenshot: every interval, a PNG of the viewport of the page attached last (the newest
 * tab still open). A capture still running skips the next tick, so a slow page never
 * queues captures; nothing waits for it.
 */
function screenshotHook(ctx: CaptureContext): TargetHook {
  const pages: AttachedTarget[] = [];
  let busy = false;
  let timer: NodeJS.Timeout | null = null;
  const tick = () => {
    const t = pages.at(-1);
    if (!t || busy) return;
    busy = true;
    t.send<{ data: string }>('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false }, Math.max(ctx.screenshotIntervalMs, 5000))
      .then((r) => ctx.emit('screenshot', { type: 'monitor_screenshot', data: { ...context(t), png: r.data } }, 'Page.captureScreenshot'))
      .catch((err) => ctx.log.debug({ err: String(err) }, 'telemetry: screenshot failed'))
      .finally(() => (busy = false));
  };
  let closed = false;
  return {
    name: `${HOOK_PREFIX}screenshot`,
    attached(t) {
      if (t.type !== 'page' || closed) return;
      pages.push(t);
      if (!timer) {
        timer = setInterval(tick, ctx.screenshotIntervalMs);
        timer.unref();
      }
    },
    detached(t) {
      const i = pages.indexOf(t);
      if (i >= 0) pages.splice(i, 1);
    },
    closed() {
      closed = true;
      if (timer) clearInterval(timer);
      pages.length = 0;
    },
  };
}

/** A fresh hook capturing one category (each add gets its own state). */
export function captureHook(category: CdpCaptureCategory, ctx: CaptureContext): TargetHook {
  switch (category) {
    case 'console':
      return consoleHook(ctx);
    case 'network':
      return networkHook(ctx);
    case 'page':
      return pageHook(ctx);
    case 'interaction':
      return interactionHook(ctx);
    case 'screenshot':
      return screenshotHook(ctx);
  }
}
