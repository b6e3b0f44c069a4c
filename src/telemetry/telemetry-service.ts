import type { Logger } from 'pino';
import { captures, NO_TELEMETRY, type TelemetryState } from '../domain/telemetry-config.js';
import { newId } from '../domain/ids.js';
import { NotFound } from '../http/errors.js';
import { watchBrowser } from './browser-watch.js';
import { cdpCommandData, needsParams, nowUs, peekCommand, type DisconnectReason, type TelemetryEvent } from './telemetry-events.js';
import { OtlpExporter } from './otlp-exporter.js';
import type { SessionAgents } from '../sessions/session-agents.js';
import type { TargetHook } from '../runtime/target-agent.js';
import { CDP_CAPTURE_CATEGORIES, captureHook, HOOK_PREFIX, type CaptureContext, type CdpCaptureCategory } from './capture-hooks.js';
import type { MappedEvent } from './capture-rules.js';
import type { KeyEncryptionKey } from '../vaults/kek.js';
import { DestinationRepo, type TelemetryRepo } from './telemetry-repo.js';

/** Per-session capture state of a session running on this node. */
interface Capture {
  state: TelemetryState;
  excluded: Set<string>;
  seq: number;
  /** The browser's own CDP endpoint, once launched (for the system watch). */
  browser?: { port: number; wsPath: string };
  /** Stops the system watch; set while it runs or starts. */
  unwatch?: Promise<() => void>;
  /** The CDP capture categories whose hooks are on the session's agent. */
  hooks: Set<CdpCaptureCategory>;
  /** The seq at which the session's older events are next pruned (retention while it runs). */
  pruneAt: number;
}

/** Default interval of the screenshot category (BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS). */
export const DEFAULT_SCREENSHOT_INTERVAL_MS = 5000;

export type EventListener = (sessionId: string, seq: number, event: TelemetryEvent) => void;

/**
 * The tap the CDP relay calls for one client connection. `control` is read per client
 * frame and is a plain property lookup, so the relay parses frames only while control
 * capture is on for the session (a PATCH switches it for open connections too).
 */
export interface CdpTap {
  readonly control: boolean;
  /** Counts a relayed message (either direction). */
  messages: number;
  /** A client frame while control capture is on: a cdp_command event, or counted as excluded. */
  command(frame: Buffer): void;
  closed(reason: DisconnectReason): void;
}

/** Events kept per session by default (oldest dropped first; BROWSERD_TELEMETRY_RETAINED_EVENTS); see docs/telemetry.md. */
export const RETAINED_EVENTS_PER_SESSION = 10_000;

/**
 * Retention while a session runs: its events are pruned back to `retained` whenever they
 * exceed it by 10 % (so a session holds at most 1.1 × retained events, and a prune
 * deletes about retained / 10 rows at a time, not one per event).
 */
export function pruneSlack(retained: number): number {
  return Math.max(1, Math.ceil(retained / 10));
}
const FLUSH_MS = 100;
/** Client frames up to this size are parsed whole by the CDP tap; larger ones are peeked at (telemetry-events.ts). */
const PEEK_MIN_BYTES = 512;

/**
 * Telemetry of the sessions on this node: their configuration (kept in the store), the
 * capture of events by category, their storage, and the listeners (export, streams) that
 * receive them as they are captured. Events are buffered and written in batches, so a
 * producer (the CDP relay) never waits for the store.
 */
export class TelemetryService {
  private readonly captures = new Map<string, Capture>();
  private buffer: { sessionId: string; seq: number; event: TelemetryEvent }[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<EventListener>();
  private readonly endListeners = new Map<string, Set<() => void>>();
  /** One exporter per destination in use on this node. */
  private readonly exporters = new Map<string, OtlpExporter>();
  readonly destinations: DestinationRepo;
  /** Sessions whose events up to a seq are to be deleted after the next write (retention while running). */
  private pendingPrunes = new Map<string, number>();
  private readonly retained: number;

  constructor(
    private readonly deps: {
      repo: TelemetryRepo;
      log: Logger;
      exportBackoffMs?: number;
      /** The session agents the CDP capture categories (console, network, page, interaction, screenshot) hook into. */
      agents?: SessionAgents;
      screenshotIntervalMs?: number;
      /** Events kept per session (BROWSERD_TELEMETRY_RETAINED_EVENTS); default RETAINED_EVENTS_PER_SESSION. */
      retainedEvents?: number;
      /** Seals destinations' header values (the vaults' key-encryption key). */
      kek: KeyEncryptionKey;
    },
  ) {
    this.destinations = new DestinationRepo(deps.repo.db, deps.kek);
    this.retained = deps.retainedEvents ?? RETAINED_EVENTS_PER_SESSION;
    // Sessions starting with CDP capture categories get their hooks before POST /browsers answers.
    deps.agents?.provide({ hooksFor: (record) => this.hooksFor(record.id) });
  }

  // ---- configuration ------------------------------------------------------------

  async stateOf(sessionId: string): Promise<TelemetryState> {
    return this.captures.get(sessionId)?.state ?? (await this.deps.repo.state(sessionId)) ?? NO_TELEMETRY;
  }

  /** Stores a session's configuration; a running session's capture follows it at once. */
  async setState(sessionId: string, state: TelemetryState): Promise<void> {
    await this.deps.repo.putState(sessionId, state);
    const c = this.captures.get(sessionId);
    if (c) {
      c.state = state;
      c.excluded = new Set(state.excludedMethods);
      this.syncWatch(sessionId, c);
      await this.syncHooks(sessionId, c);
    }
  }

  // ---- CDP capture (hooks on the session agent) ------------------------------------

  private captureContext(sessionId: string): CaptureContext {
    return {
      emit: (category: CdpCaptureCategory, e: MappedEvent, sourceEvent: string) =>
        void this.emit(sessionId, { category, type: e.type, source: { kind: 'cdp', event: sourceEvent }, data: e.data, ...(e.truncated ? { truncated: true } : {}) }),
      log: this.deps.log.child({ session_id: sessionId }),
      screenshotIntervalMs: this.deps.screenshotIntervalMs ?? DEFAULT_SCREENSHOT_INTERVAL_MS,
    };
  }

  /** The capture hooks a starting session needs (its state was loaded by open()). */
  private hooksFor(sessionId: string): TargetHook[] {
    const c = this.captures.get(sessionId);
    if (!c) return [];
    const ctx = this.captureContext(sessionId);
    const out: TargetHook[] = [];
    for (const cat of CDP_CAPTURE_CATEGORIES) {
      if (!captures(c.state, cat)) continue;
      c.hooks.add(cat);
      out.push(captureHook(cat, ctx));
    }
    return out;
  }

  /** A running session's hooks follow its categories: added for those switched on, removed for those switched off. */
  private async syncHooks(sessionId: string, c: Capture): Promise<void> {
    const agents = this.deps.agents;
    if (!agents) return;
    const jobs: Promise<unknown>[] = [];
    for (const cat of CDP_CAPTURE_CATEGORIES) {
      const wanted = captures(c.state, cat);
      if (wanted && !c.hooks.has(cat)) {
        c.hooks.add(cat);
        const hook = captureHook(cat, this.captureContext(sessionId));
        jobs.push(
          agents.add(sessionId, hook).then((added) => {
            if (!added) c.hooks.delete(cat);
          }),
        );
      } else if (!wanted && c.hooks.has(cat)) {
        c.hooks.delete(cat);
        agents.remove(sessionId, `${HOOK_PREFIX}${cat}`);
      }
    }
    await Promise.all(jobs).catch((err) => this.deps.log.warn({ session_id: sessionId, err: String(err) }, 'telemetry: could not switch capture hooks'));
  }

  /** platform: an API call that managed the running session (PATCH /browsers...), emitted by the service layer. */
  platformCall(sessionId: string, call: { operationId: string; status: number; startedMs: number; changed: string[] }): void {
    this.emit(sessionId, {
      category: 'platform',
      type: 'api_call',
      source: { kind: 'kernel_api', event: call.operationId },
      data: { operation_id: call.operationId, request_id: newId(), status: call.status, duration_ms: Date.now() - call.startedMs, changed: call.changed },
    });
  }

  /** The session's browser is up: the system category watches it while captured. */
  watch(sessionId: string, browser: { port: number; wsPath: string }): void {
    const c = this.captures.get(sessionId);
    if (!c) return;
    c.browser = browser;
    this.syncWatch(sessionId, c);
  }

  /** Ends the system watch before browserd itself stops the browser (no crash reports for that). */
  async unwatch(sessionId: string): Promise<void> {
    const c = this.captures.get(sessionId);
    if (!c?.unwatch) return;
    const stop = c.unwatch;
    c.unwatch = undefined;
    c.browser = undefined;
    (await stop)();
  }

  private syncWatch(sessionId: string, c: Capture): void {
    const wanted = !!c.browser && captures(c.state, 'system');
    if (wanted && !c.unwatch) {
      c.unwatch = watchBrowser(c.browser!, (e) => this.emit(sessionId, e), this.deps.log.child({ session_id: sessionId })).catch((err) => {
        this.deps.log.warn({ session_id: sessionId, err: String(err) }, 'telemetry: could not watch the browser for crashes');
        return () => undefined;
      });
    } else if (!wanted && c.unwatch) {
      void c.unwatch.then((stop) => stop());
      c.unwatch = undefined;
    }
  }

  /** The id of an export destination of the project, by id or name (404 when there is none). */
  async resolveDestination(projectId: string, ref: { id?: string; name?: string }): Promise<string> {
    let q = this.deps.repo.db.selectFrom('telemetry_destinations').select('id').where('project_id', '=', projectId);
    q = ref.id !== undefined ? q.where('id', '=', ref.id) : q.where('name', '=', ref.name ?? '');
    const r = await q.executeTakeFirst();
    if (!r) throw new NotFound(`telemetry.export.otlp.destination: telemetry destination "${ref.id ?? ref.name}" not found`, 'telemetry_destination_not_found');
    return r.id;
  }

  // ---- capture lifecycle --------------------------------------------------------

  /** Starts following a session that runs on this node (created or re-adopted). */
  async open(sessionId: string): Promise<void> {
    const state = (await this.deps.repo.state(sessionId)) ?? NO_TELEMETRY;
    const seq = await this.deps.repo.lastSeq(sessionId);
    // A re-adopted session may hold more than the limit: its first prune comes within the slack.
    this.captures.set(sessionId, { state, excluded: new Set(state.excludedMethods), seq, hooks: new Set(), pruneAt: Math.max(seq, this.retained) + pruneSlack(this.retained) });
    if (state.exportDestinationId && !this.exporters.has(state.exportDestinationId)) {
      const d = await this.destinations.byId(state.exportDestinationId);
      if (!d) this.deps.log.warn({ session_id: sessionId, destination: state.exportDestinationId }, 'telemetry: the export destination no longer exists; not exporting');
      else {
        const headers = await this.destinations.headers(d.id);
        this.exporters.set(
          d.id,
          new OtlpExporter({ id: d.id, endpoint: d.endpoint, headers }, {
            log: this.deps.log,
            backoffMs: this.deps.exportBackoffMs,
            onDropped: (sessions, count) => this.exportDropped(d.id, sessions, count),
          }),
        );
      }
    }
  }

  /**
   * A destination was updated (PATCH): the exporter of sessions bound to it sends from now
   * on to its new endpoint with its new headers, including batches queued or being retried.
   */
  async destinationChanged(destinationId: string): Promise<void> {
    const exporter = this.exporters.get(destinationId);
    if (!exporter) return;
    const d = await this.destinations.byId(destinationId);
    if (!d) return;
    exporter.retarget(d.endpoint, await this.destinations.headers(d.id));
    this.deps.log.info({ destination: destinationId }, 'telemetry: export destination updated; its exporter follows');
  }

  /** Lost exports are said in a system event of each session concerned (itself not exported, so a dead endpoint cannot loop). */
  private exportDropped(destinationId: string, sessions: Set<string>, count: number): void {
    this.deps.log.warn({ destination: destinationId, dropped: count }, 'telemetry: events could not be exported and were dropped');
    for (const id of sessions) {
      this.emit(id, { category: 'system', type: 'telemetry_export_dropped', source: { kind: 'kernel_api', event: 'otlp_exporter' }, data: { destination_id: destinationId, dropped: count, dropped_total: this.exporters.get(destinationId)?.dropped ?? count } }, false);
    }
  }

  /** Stops following a session: its last events are written first. */
  async close(sessionId: string): Promise<void> {
    const c = this.captures.get(sessionId);
    if (c?.unwatch) (await c.unwatch)();
    await this.flush();
    this.captures.delete(sessionId);
    for (const l of this.endListeners.get(sessionId) ?? []) l();
    this.endListeners.delete(sessionId);
    this.pendingPrunes.delete(sessionId);
    await this.deps.repo.prune(sessionId, this.retained).catch((err) => this.deps.log.warn({ session_id: sessionId, err: String(err) }, 'telemetry: could not prune events'));
  }

  /** Records an event if its category is captured for the session; returns whether it was. */
  emit(sessionId: string, event: Omit<TelemetryEvent, 'ts'> & { ts?: number }, exported = true): boolean {
    const c = this.captures.get(sessionId);
    if (!c || event.category === 'monitor' || !captures(c.state, event.category)) return false;
    const full: TelemetryEvent = { ...event, ts: event.ts ?? nowUs() } as TelemetryEvent;
    const seq = ++c.seq;
    this.buffer.push({ sessionId, seq, event: full });
    if (seq >= c.pruneAt) {
      // Only noted here: the delete runs after the next write (flush), off the producer's path.
      this.pendingPrunes.set(sessionId, seq - this.retained);
      c.pruneAt = seq + pruneSlack(this.retained);
    }
    if (exported && c.state.exportDestinationId) this.exporters.get(c.state.exportDestinationId)?.push({ sessionId, seq, event: full });
    for (const l of this.listeners) {
      try {
        l(sessionId, seq, full);
      } catch (err) {
        this.deps.log.warn({ err: String(err) }, 'telemetry listener failed');
      }
    }
    this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_MS);
    return true;
  }

  /** Whether the session is followed on this node (running here). */
  following(sessionId: string): boolean {
    return this.captures.has(sessionId);
  }

  /** Calls `l` once when the session stops being followed (it ended). */
  onSessionEnd(sessionId: string, l: () => void): () => void {
    const set = this.endListeners.get(sessionId) ?? new Set();
    set.add(l);
    this.endListeners.set(sessionId, set);
    return () => set.delete(l);
  }

  subscribe(l: EventListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const rows = this.buffer;
    this.buffer = [];
    const prunes = this.pendingPrunes;
    if (prunes.size) this.pendingPrunes = new Map();
    this.flushing = this.flushing
      .then(() =>
        rows.length ? this.deps.repo.insertEvents(rows).catch((err) => this.deps.log.error({ err: String(err), lost: rows.length }, 'telemetry: could not store events')) : undefined,
      )
      .then(async () => {
        // After the rows up to each prune point are written, so none of them survives it.
        for (const [sessionId, through] of prunes) {
          await this.deps.repo.pruneThrough(sessionId, through).catch((err) => this.deps.log.warn({ session_id: sessionId, err: String(err) }, 'telemetry: could not prune events'));
        }
      });
    return this.flushing;
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.exporters.values()].map((e) => e.stop()));
    await this.flush();
    await this.deps.repo.close();
  }

  // ---- producers ----------------------------------------------------------------

  /** A client connection (cdp, bidi) attached: emits its connect event and returns its tap. */
  connection(sessionId: string, protocol: 'cdp' | 'bidi'): CdpTap {
    const svc = this;
    const connectionId = newId();
    const startedMs = Date.now();
    const source = { kind: 'kernel_api' as const, event: `${protocol}_proxy`, metadata: { connection_id: connectionId } };
    let excluded = 0;
    let done = false;
    svc.emit(sessionId, { category: 'connection', type: `${protocol}_connect`, source, data: { connection_id: connectionId } });
    return {
      messages: 0,
      get control() {
        return protocol === 'cdp' && !!svc.captures.get(sessionId)?.state.categories?.control;
      },
      command(frame: Buffer) {
        // Most commands need only their method, id and session: a large frame's are read from its ends, not parsed
        // whole; a small frame is parsed (JSON.parse of a short frame is cheaper than the peek: measured ~1.1 vs ~1.5 µs).
        let msg: { id?: unknown; method?: unknown; params?: unknown; sessionId?: unknown } | null = null;
        if (frame.length > PEEK_MIN_BYTES) {
          const peeked = peekCommand(frame);
          if (peeked && !needsParams(peeked.method)) msg = peeked;
        }
        if (!msg) {
          try {
            msg = JSON.parse(frame.toString()) as { id?: unknown; method?: unknown; params?: unknown; sessionId?: unknown };
          } catch {
            return;
          }
        }
        if (typeof msg.method !== 'string') return;
        if (svc.captures.get(sessionId)?.excluded.has(msg.method)) {
          excluded++;
          return;
        }
        svc.emit(sessionId, { category: 'control', type: 'cdp_command', source, data: cdpCommandData(msg as { method: string }, frame.length) });
      },
      closed(reason: DisconnectReason) {
        if (done) return;
        done = true;
        svc.emit(sessionId, {
          category: 'connection',
          type: `${protocol}_disconnect`,
          source,
          data: { connection_id: connectionId, duration_ms: Date.now() - startedMs, message_count: this.messages, reason, ...(protocol === 'cdp' ? { telemetry_excluded: excluded } : {}) },
        });
      },
    };
  }

  /** A live view client attached; returns the function to call when it detaches. */
  liveView(sessionId: string): () => void {
    const viewId = newId();
    const startedMs = Date.now();
    const source = { kind: 'kernel_api' as const, event: 'live_view' };
    this.emit(sessionId, { category: 'connection', type: 'live_view_connect', source, data: { session_id: viewId } });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.emit(sessionId, { category: 'connection', type: 'live_view_disconnect', source, data: { session_id: viewId, duration_ms: Date.now() - startedMs } });
    };
  }
}
