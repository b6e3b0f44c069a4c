import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from 'pino';
import { newId } from '../domain/ids.js';
import { chromiumBypassList } from '../domain/proxy-bypass.js';
import { warmShape, type HandOutPlan, type WarmKind } from '../domain/warm-eligibility.js';
import type { EgressBridges } from '../proxies/egress-bridge.js';
import type { BrowserRuntime, RuntimeHandle } from '../runtime/browser-runtime.js';
import { CdpClient } from '../runtime/cdp-client.js';

/** browserd's own CDP connection to a warm browser, opened at launch so the hand-out needs no round trip to set up. */
export interface WarmCdp {
  client: Pick<CdpClient, 'send' | 'close'>;
  /** Flat session of the first tab (start_url is navigated there). */
  pageSession: string;
  windowId: number;
  /** Headless: the emulated screen's id (the viewport is applied to it). */
  screenId: string | null;
  closed: boolean;
}

/** A pre-launched browser: launched under the id the session will get, so its files and process marks already carry it. */
export interface WarmBrowser {
  readonly id: string;
  readonly kind: WarmKind;
  readonly handle: RuntimeHandle;
  /** Its egress bridge (direct until the hand-out switches it); null when the server has no bridges. */
  readonly bridgePort: number | null;
  readonly launchedAt: number;
  readonly cdp: WarmCdp;
}

export interface WarmPoolDeps {
  runtime: BrowserRuntime;
  /** Every session's traffic goes through its own bridge; null: warm browsers start without one (as sessions do then). */
  bridges: EgressBridges | null;
  /** Target size per kind (0 disables it) and the least time between two launch starts on this node. */
  sizes: Record<WarmKind, number>;
  refillGapMs: number;
  maxSessions: number;
  memoryEnforced: boolean;
  /** Sessions running or starting on this node. */
  activeCount(): number;
  log: Logger;
  /** CPU busy fraction (0..1) of the machine over a short window; default: /proc/stat. */
  cpuBusy?: () => Promise<number>;
  /** Opens browserd's CDP connection to a launched warm browser; default: over its DevTools port (tests pass a fake). */
  connect?: (h: RuntimeHandle, headless: boolean) => Promise<WarmCdp>;
}

/** Above this CPU busy fraction a refill launch waits (up to MAX_LOAD_WAIT_GAPS gaps). */
const BUSY_THRESHOLD = 0.9;
/** A refill waits for a busy machine at most this many gaps, then launches anyway (the pool must not stay empty on a node that is never idle). */
const MAX_LOAD_WAIT_GAPS = 10;
/** Back-off after a failed launch, at most. */
const MAX_BACKOFF_MS = 60_000;
/** Dead warm browsers are looked for (and capacity re-checked) this often. */
const CHECK_MS = 2_000;

/**
 * Warm start: a small per-node pool of pre-launched browsers (headless and headful), handed
 * to create requests whose launch-time configuration they match (domain/warm-eligibility).
 * Warm browsers are not sessions: they are not in the store and do not take capacity slots,
 * but the pool only fills while sessions plus warm browsers stay below the node's capacity.
 * Refill is paced: one launch at a time, at least `refillGapMs` after the start of the last
 * launch on this node (a session's or the pool's), never while a session's browser is
 * launching, and (for a bounded time) not while the CPU is saturated. Every warm browser
 * is ended by PID at shutdown; after a crash the start-up sweep removes them (they are not
 * in the store). See docs/warm-start.md.
 */
export class WarmPool {
  private readonly ready: Record<WarmKind, WarmBrowser[]> = { headless: [], headful: [] };
  private launching: WarmKind | null = null;
  /** A request waiting for the launch in progress (at most one: the others launch fresh). */
  private waiter: { kind: WarmKind; resolve: (w: WarmBrowser | null) => void } | null = null;
  private sessionLaunches = 0;
  private lastLaunchStart = 0;
  private failures = 0;
  private loop: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private started = false;
  private stopped = false;
  private readonly wakers = new Set<() => void>();

  constructor(private readonly deps: WarmPoolDeps) {}

  /** Starts filling (after start-up reconciliation, so the sweep never sees a warm browser). */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    if (!this.deps.sizes.headless && !this.deps.sizes.headful) return;
    this.timer = setInterval(() => this.check(), CHECK_MS);
    this.timer.unref();
    this.kick();
  }

  /** Ready warm browsers per kind. */
  counts(): Record<WarmKind, number> {
    return { headless: this.ready.headless.length, headful: this.ready.headful.length };
  }

  /**
   * Takes a ready warm browser of `kind` (the oldest), or null when none is ready. Dead ones
   * are dropped on the way. Synchronous: the hand-out costs no wait here. Starts a refill.
   */
  take(kind: WarmKind): WarmBrowser | null {
    const list = this.ready[kind];
    let found: WarmBrowser | null = null;
    while (!found && list.length) {
      const w = list.shift()!;
      if (!w.cdp.closed && this.deps.runtime.isRunning(w.handle)) found = w;
      else void this.discard(w, { closeBridge: true, reason: 'exited while warm' });
    }
    this.kick();
    return found;
  }

  /**
   * take(), or, when none is ready but one of the kind is being launched, that one as soon
   * as it is up (null if its launch fails): a request that would launch fresh never starts a
   * second launch next to a refill that is already ahead of it. One request at a time waits.
   */
  async takeOrAwait(kind: WarmKind): Promise<WarmBrowser | null> {
    const ready = this.take(kind);
    if (ready || this.launching !== kind || this.waiter || this.stopped) return ready;
    return new Promise((resolve) => (this.waiter = { kind, resolve }));
  }

  /** Hands a browser just launched (or null: the launch failed) to the request waiting for it; false when none waits. */
  private handToWaiter(kind: WarmKind, w: WarmBrowser | null): boolean {
    const waiting = this.waiter;
    if (!waiting || waiting.kind !== kind) return false;
    this.waiter = null;
    waiting.resolve(w);
    return true;
  }

  /** A taken browser that was not used (the request failed before anything changed it): ready again. */
  giveBack(w: WarmBrowser): void {
    if (this.stopped) {
      void this.discard(w, { closeBridge: true, reason: 'returned during shutdown' });
      return;
    }
    this.ready[w.kind].unshift(w);
  }

  /**
   * Applies what the plan changes to a taken browser and returns its handle. Awaits only
   * the viewport (the client must find it in place); start_url is sent before this returns
   * (so it precedes anything a client sends) but not waited for, and its errors are dropped.
   * Throws when the browser does not take the changes: the caller launches fresh instead.
   */
  async handOut(w: WarmBrowser, plan: HandOutPlan): Promise<RuntimeHandle> {
    const { client, screenId, windowId, pageSession } = w.cdp;
    try {
      if (plan.screen) {
        if (!screenId) throw new Error('no screen to resize');
        const { width, height } = plan.screen;
        await Promise.all([
          client.send('Emulation.updateScreen', { screenId, left: 0, top: 0, width, height }, undefined, 5000),
          client.send('Browser.setWindowBounds', { windowId, bounds: { left: 0, top: 0, width, height } }, undefined, 5000),
        ]);
      }
      if (plan.memoryBytes !== null) this.deps.runtime.setMemoryLimit(w.id, plan.memoryBytes);
    } catch (err) {
      client.close();
      throw err;
    }
    if (plan.startUrl) {
      client
        .send('Page.navigate', { url: plan.startUrl }, pageSession, 30_000)
        .catch((err) => this.deps.log.debug({ session_id: w.id, err: String(err) }, 'start_url navigation of a warm browser failed'))
        .finally(() => client.close());
    } else client.close();
    return w.handle;
  }

  /** Ends a warm browser (by PID, files removed); `closeBridge` false when the bridge already belongs to a session. */
  async discard(w: WarmBrowser, o: { closeBridge: boolean; reason: string }): Promise<void> {
    w.cdp.client.close();
    try {
      await this.deps.runtime.stop(w.id, w.handle);
    } catch (err) {
      this.deps.log.error({ warm_id: w.id, err: String(err) }, 'could not stop a warm browser');
    }
    if (o.closeBridge) await this.deps.bridges?.close(w.id);
    this.deps.log.info({ warm_id: w.id, kind: w.kind, reason: o.reason }, 'warm browser ended');
    this.kick();
  }

  /** Wraps a session's fresh launch: refills wait while it runs and keep their gap after it started. */
  async trackLaunch<T>(launch: () => Promise<T>): Promise<T> {
    this.sessionLaunches++;
    this.lastLaunchStart = Date.now();
    try {
      return await launch();
    } finally {
      this.sessionLaunches--;
    }
  }

  /** Stops refilling, waits for a launch in progress, and ends every warm browser. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const wake of [...this.wakers]) wake();
    await this.loop;
    const all = [...this.ready.headless, ...this.ready.headful];
    this.ready.headless = [];
    this.ready.headful = [];
    await Promise.allSettled(all.map((w) => this.discard(w, { closeBridge: true, reason: 'server_shutdown' })));
  }

  // ---- refill -----------------------------------------------------------------------

  /** Periodic: drops warm browsers that died, and refills (capacity may have been freed). */
  private check(): void {
    for (const kind of ['headless', 'headful'] as const) {
      const dead = this.ready[kind].filter((w) => w.cdp.closed || !this.deps.runtime.isRunning(w.handle));
      if (!dead.length) continue;
      this.ready[kind] = this.ready[kind].filter((w) => !dead.includes(w));
      for (const w of dead) void this.discard(w, { closeBridge: true, reason: 'exited while warm' });
    }
    this.kick();
  }

  private kick(): void {
    if (!this.started || this.stopped || this.loop) return;
    if (!this.nextKind()) return;
    this.loop = this.refill()
      .catch((err) => this.deps.log.error({ err: String(err) }, 'warm pool refill stopped'))
      .finally(() => {
        this.loop = null;
      });
  }

  /** The kind to launch next (the one furthest below its size), or null when full or at capacity. */
  private nextKind(): WarmKind | null {
    const { sizes, maxSessions } = this.deps;
    const warm = this.ready.headless.length + this.ready.headful.length + (this.launching ? 1 : 0);
    if (this.deps.activeCount() + warm >= maxSessions) return null;
    const missing = (k: WarmKind) => sizes[k] - this.ready[k].length - (this.launching === k ? 1 : 0);
    const best = (['headless', 'headful'] as const).filter((k) => missing(k) > 0).sort((a, b) => missing(b) / sizes[b] - missing(a) / sizes[a])[0];
    return best ?? null;
  }

  private async refill(): Promise<void> {
    while (!this.stopped) {
      if (!this.nextKind()) return;
      await this.waitForTurn();
      const kind = this.nextKind();
      if (this.stopped || !kind) return;
      await this.launchOne(kind);
    }
  }

  /**
   * Paces refills: the gap since the last launch start on this node (plus back-off after
   * failures), no session launch in progress, and a CPU that is not saturated (waited for
   * at most MAX_LOAD_WAIT_GAPS gaps).
   */
  private async waitForTurn(): Promise<void> {
    const gap = this.deps.refillGapMs;
    const loadDeadline = Date.now() + MAX_LOAD_WAIT_GAPS * Math.max(gap, 1000);
    while (!this.stopped) {
      const backoff = this.failures ? Math.min(MAX_BACKOFF_MS, gap * 2 ** this.failures) : 0;
      const wait = this.lastLaunchStart + Math.max(gap, backoff) - Date.now();
      if (wait > 0) {
        await this.sleep(wait);
        continue;
      }
      if (this.sessionLaunches > 0) {
        await this.sleep(100);
        continue;
      }
      if (Date.now() < loadDeadline && (await (this.deps.cpuBusy ?? cpuBusy)()) > BUSY_THRESHOLD) {
        await this.sleep(Math.max(gap, 250));
        continue;
      }
      // A session launch may have started while the CPU was sampled.
      if (this.sessionLaunches > 0 || Date.now() - this.lastLaunchStart < gap) continue;
      return;
    }
  }

  private async launchOne(kind: WarmKind): Promise<void> {
    const id = newId();
    const shape = warmShape(kind);
    this.launching = kind;
    this.lastLaunchStart = Date.now();
    let handle: RuntimeHandle | null = null;
    let bridgePort: number | null = null;
    try {
      bridgePort = this.deps.bridges ? await this.deps.bridges.open(id, null) : null;
      handle = await this.deps.runtime.launch({
        sessionId: id,
        headless: shape.headless,
        kioskMode: false,
        width: shape.viewport.width,
        height: shape.viewport.height,
        refreshRate: shape.viewport.refresh_rate,
        startUrl: null,
        chromePolicy: null,
        memoryBytes: this.deps.memoryEnforced ? shape.memoryBytes : null,
        proxy: bridgePort === null ? null : { server: `http://127.0.0.1:${bridgePort}`, bypassList: chromiumBypassList(undefined) },
      });
      const cdp = await (this.deps.connect ?? connectCdp)(handle, shape.headless);
      const w: WarmBrowser = { id, kind, handle, bridgePort, launchedAt: Date.now(), cdp };
      this.failures = 0;
      if (this.stopped) {
        this.handToWaiter(kind, null);
        await this.discard(w, { closeBridge: true, reason: 'server_shutdown' });
        return;
      }
      if (this.handToWaiter(kind, w)) {
        this.deps.log.info({ warm_id: id, kind, pid: handle.chromium.pid }, 'warm browser handed out as soon as it was up');
        return;
      }
      this.ready[kind].push(w);
      this.deps.log.info({ warm_id: id, kind, pid: handle.chromium.pid, ready: this.counts() }, 'warm browser ready');
    } catch (err) {
      this.failures++;
      this.deps.log.warn({ warm_id: id, kind, err: String(err), failures: this.failures }, 'warm browser launch failed');
      this.handToWaiter(kind, null);
      if (handle) await this.deps.runtime.stop(id, handle).catch(() => undefined);
      await this.deps.bridges?.close(id);
    } finally {
      this.launching = null;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wakers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      t.unref();
      this.wakers.add(done);
    });
  }
}

/** Opens browserd's connection to a fresh warm browser: its first tab's session, window and (headless) screen. */
async function connectCdp(h: RuntimeHandle, headless: boolean): Promise<WarmCdp> {
  const client = await CdpClient.connect(`ws://127.0.0.1:${h.chromium.port}${h.chromium.wsPath}`, 5000);
  try {
    let page: { targetId: string } | undefined;
    for (let i = 0; i < 50 && !page; i++) {
      const { targetInfos } = await client.send<{ targetInfos: { targetId: string; type: string }[] }>('Target.getTargets');
      page = targetInfos.find((t) => t.type === 'page');
      if (!page) await new Promise((r) => setTimeout(r, 50));
    }
    if (!page) throw new Error('the warm browser has no tab');
    const [{ sessionId }, { windowId }, screens] = await Promise.all([
      client.send<{ sessionId: string }>('Target.attachToTarget', { targetId: page.targetId, flatten: true }),
      client.send<{ windowId: number }>('Browser.getWindowForTarget', { targetId: page.targetId }),
      headless ? client.send<{ screenInfos: { id: string; isPrimary: boolean }[] }>('Emulation.getScreenInfos') : Promise.resolve(null),
    ]);
    const screenId = screens ? (screens.screenInfos.find((s) => s.isPrimary) ?? screens.screenInfos[0])?.id ?? null : null;
    const cdp: WarmCdp = { client, pageSession: sessionId, windowId, screenId, closed: false };
    client.onClose(() => (cdp.closed = true));
    return cdp;
  } catch (err) {
    client.close();
    throw err;
  }
}

/** The machine's CPU busy fraction over 250 ms, from /proc/stat (0 when it cannot be read). */
async function cpuBusy(): Promise<number> {
  const sample = (): { idle: number; total: number } | null => {
    try {
      const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
      const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
      return { idle, total: cpu.reduce((a, b) => a + b, 0) };
    } catch {
      return null;
    }
  };
  const a = sample();
  await new Promise((r) => setTimeout(r, 250));
  const b = sample();
  if (!a || !b || b.total <= a.total) return os.loadavg()[0]! / Math.max(1, os.availableParallelism());
  return 1 - (b.idle - a.idle) / (b.total - a.total);
}
