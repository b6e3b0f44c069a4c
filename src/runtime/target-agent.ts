import type { Logger } from 'pino';
import { CdpClient } from './cdp-client.js';

/** A target (page, iframe, worker...) browserd's own CDP connection is attached to, as a flat session. */
export interface AttachedTarget {
  readonly sessionId: string;
  readonly targetId: string;
  /** Chromium's target type: page, iframe, worker, shared_worker, service_worker, other... */
  readonly type: string;
  /** The URL when attached (a paused target often still says about:blank). */
  readonly url: string;
  /** The target whose session auto-attached this one (an iframe's page); null for top-level targets. */
  readonly parent: AttachedTarget | null;
  /** Sends a command to this target's session. */
  send<T = unknown>(method: string, params?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
}

/**
 * What a feature (stealth, telemetry capture, CAPTCHA detection) does with every target of a
 * session. `attached` runs before a new target runs any script (the target waits for the
 * debugger until every hook has finished), or at once with `late` true for a target that was
 * already running (the first tab, or any target when the hook is added later).
 * Measured (test/integration/target-agent.test.ts): a script meant to run before a page's own
 * needs `Page.enable` and `Page.addScriptToEvaluateOnNewDocument {runImmediately: true}`
 * (without the first a new tab misses it, without the second a popup does).
 */
export interface TargetHook {
  readonly name: string;
  attached?(t: AttachedTarget, late: boolean): Promise<void> | void;
  /** Every CDP event of an attached target (t) or of the browser session (t null). */
  event?(t: AttachedTarget | null, method: string, params: Record<string, unknown>): void;
  detached?(t: AttachedTarget): void;
  /** The hook was removed or the connection closed. */
  closed?(): void;
}

/** Target types that can have auto-attached children (frames, workers), so get auto-attach themselves. */
const PARENT_TYPES = new Set(['page', 'iframe', 'background_page', 'webview']);
/** A hook that takes longer than this no longer holds the target back (it goes on running). */
const HOOK_TIMEOUT_MS = 5_000;

/**
 * browserd's own CDP connection to one session's browser, auto-attached (flat sessions)
 * to every target with `waitForDebuggerOnStart`, so features can prepare each page, frame
 * and worker before it runs, whatever client opened it. The agent's CDP traffic goes over
 * its own websocket, never through the relay a client uses.
 */
export class TargetAgent {
  private readonly hooks = new Map<string, TargetHook>();
  private readonly targets = new Map<string, AttachedTarget>();
  /** Attachments whose hooks are still running. */
  private readonly preparing = new Set<Promise<void>>();
  private closed = false;

  private constructor(
    private readonly cdp: CdpClient,
    private readonly log: Logger,
  ) {
    cdp.onEvent((method, params, sessionId) => this.onEvent(method, (params ?? {}) as Record<string, unknown>, sessionId));
    cdp.onClose(() => this.shutdown());
  }

  /** Connects to a browser and starts auto-attaching with the given hooks already in place. */
  static async connect(endpoint: { port: number; wsPath: string }, hooks: TargetHook[], log: Logger): Promise<TargetAgent> {
    const cdp = await CdpClient.connect(`ws://127.0.0.1:${endpoint.port}${endpoint.wsPath}`);
    const agent = new TargetAgent(cdp, log);
    for (const h of hooks) agent.hooks.set(h.name, h);
    try {
      // Top-level targets: existing ones are attached at once (not paused), new ones paused until the hooks ran.
      await cdp.send('Target.setAutoAttach', {
        autoAttach: true,
        waitForDebuggerOnStart: true,
        flatten: true,
        filter: [{ type: 'browser', exclude: true }, { type: 'tab', exclude: true }, { type: 'browser_ui', exclude: true }, {}],
      });
    } catch (err) {
      cdp.close();
      throw err;
    }
    // The targets that existed (the first tab) are prepared before the agent counts as started.
    await Promise.all([...agent.preparing]);
    return agent;
  }

  /** The targets attached now. */
  list(): AttachedTarget[] {
    return [...this.targets.values()];
  }

  /** Sends a command to the browser session. */
  send<T = unknown>(method: string, params: Record<string, unknown> = {}, timeoutMs?: number): Promise<T> {
    return this.cdp.send<T>(method, params, undefined, timeoutMs);
  }

  /** Adds a hook; it sees the targets already attached at once (late). */
  async add(hook: TargetHook): Promise<void> {
    if (this.closed || this.hooks.has(hook.name)) return;
    this.hooks.set(hook.name, hook);
    await Promise.all(this.list().map((t) => this.runHook(hook, t, true)));
  }

  remove(name: string): void {
    const h = this.hooks.get(name);
    if (!h) return;
    this.hooks.delete(name);
    this.safe(h, () => h.closed?.());
  }

  close(): void {
    this.cdp.close();
    this.shutdown();
  }

  private shutdown(): void {
    if (this.closed) return;
    this.closed = true;
    for (const h of this.hooks.values()) this.safe(h, () => h.closed?.());
    this.hooks.clear();
    this.targets.clear();
  }

  private onEvent(method: string, params: Record<string, unknown>, sessionId: string | undefined): void {
    if (method === 'Target.attachedToTarget') {
      const job = this.onAttached(params as unknown as AttachedEvent, sessionId);
      this.preparing.add(job);
      void job.finally(() => this.preparing.delete(job));
      return;
    }
    if (method === 'Target.detachedFromTarget') {
      const t = this.targets.get(String(params.sessionId));
      if (t) {
        this.targets.delete(t.sessionId);
        for (const h of this.hooks.values()) this.safe(h, () => h.detached?.(t));
      }
      return;
    }
    const t = sessionId ? (this.targets.get(sessionId) ?? null) : null;
    if (sessionId && !t) return;
    for (const h of this.hooks.values()) if (h.event) this.safe(h, () => h.event!(t, method, params));
  }

  private async onAttached(e: AttachedEvent, parentSessionId: string | undefined): Promise<void> {
    const info = e.targetInfo;
    const cdp = this.cdp;
    const t: AttachedTarget = {
      sessionId: e.sessionId,
      targetId: info.targetId,
      type: info.type,
      url: info.url,
      parent: parentSessionId ? (this.targets.get(parentSessionId) ?? null) : null,
      send: (method, params = {}, timeoutMs) => cdp.send(method, params, e.sessionId, timeoutMs),
    };
    this.targets.set(t.sessionId, t);
    try {
      const work: Promise<unknown>[] = [...this.hooks.values()].map((h) => this.runHook(h, t, !e.waitingForDebugger));
      // Frames and workers of this target are attached to (and held) the same way.
      if (PARENT_TYPES.has(info.type)) work.push(t.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: true, flatten: true }).catch(() => undefined));
      await Promise.all(work);
    } finally {
      if (e.waitingForDebugger) await t.send('Runtime.runIfWaitingForDebugger').catch(() => undefined);
    }
  }

  private async runHook(h: TargetHook, t: AttachedTarget, late: boolean): Promise<void> {
    if (!h.attached) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.resolve().then(() => h.attached!(t, late)),
        new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            this.log.warn({ hook: h.name, target_type: t.type }, 'a target hook took too long; the target runs on');
            resolve();
          }, HOOK_TIMEOUT_MS);
        }),
      ]);
    } catch (err) {
      // A target that went away while being prepared is normal; anything else is worth a line.
      if (this.targets.has(t.sessionId)) this.log.debug({ hook: h.name, target_type: t.type, err: String(err) }, 'a target hook failed');
    } finally {
      clearTimeout(timer);
    }
  }

  private safe(h: TargetHook, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.warn({ hook: h.name, err: String(err) }, 'a target hook threw');
    }
  }
}

interface AttachedEvent {
  sessionId: string;
  targetInfo: { targetId: string; type: string; url: string };
  waitingForDebugger: boolean;
}
