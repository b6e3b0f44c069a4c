import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { AttachedTarget, TargetHook } from '../runtime/target-agent.js';
import type { HookProvider } from '../sessions/session-agents.js';
import type { SessionRecord } from '../sessions/session-record.js';
import type { TelemetryEvent } from '../telemetry/telemetry-events.js';
import { detectedEvent, solveResultEvent, solveStartedEvent, websiteOf, type DetectedChallenge, type SolveResult } from './captcha-events.js';
import { CAPTCHA_WORLD, DETECTOR_SOURCE, NEXT_EXPRESSION, NEXT_WAIT_MS, PLACE_TOKEN, parseReport } from './page-scripts.js';
import { taskFor, type SolverClient } from './solver-client.js';

interface FrameTree {
  frame: { id: string };
  childFrames?: FrameTree[];
}

function frameIds(tree: FrameTree): string[] {
  return [tree.frame.id, ...(tree.childFrames ?? []).flatMap(frameIds)];
}

/** Where captcha events go (TelemetryService.emit). */
export type CaptchaEmit = (sessionId: string, event: Omit<TelemetryEvent, 'ts'>) => void;

/** Solves running at once per session; detections beyond it are reported and end as `failure` / `too_many_solves`. */
export const MAX_SOLVES_IN_FLIGHT = 4;
const OBJECT_GROUP = 'browserd-captcha';

interface SessionState {
  closed: boolean;
  inFlight: number;
  /** Aborts the session's running solves when its agent closes (the session ends). */
  readonly controllers: Set<AbortController>;
  /** (execution context, sitekey) pairs already taken: one report per widget per document. */
  readonly seen: Set<string>;
  /** The current reader of each frame (target session | frame id): a newer document replaces it. */
  readonly readers: Map<string, number>;
}

/** Tries to reach a frame's detector that is not there yet (a document still being created). */
const DETECTOR_TRIES = 5;

/**
 * The CAPTCHA solver (docs/captcha.md). For stealth sessions, a hook on browserd's own CDP
 * connection (SessionAgents) puts a detector into an isolated world of every page and frame
 * and reads its findings with an awaited evaluation in that world (no Runtime.enable, no
 * binding: nothing a page can observe). Each detection is a `captcha_detected` event; with
 * a solver configured the challenge is sent to it (createTask / getTaskResult) and the
 * token placed into the page's main world. All of it runs beside the agent's CDP traffic:
 * the relay is never involved, and the hook's event handler only starts the work.
 */
export class CaptchaService implements HookProvider {
  constructor(
    private readonly deps: {
      solver: SolverClient | null;
      emit: CaptchaEmit;
      log: Logger;
    },
  ) {}

  hooksFor(record: SessionRecord): TargetHook[] {
    return record.stealth ? [this.hook(record.id)] : [];
  }

  /** The hook for one session. */
  hook(sessionId: string): TargetHook {
    const state: SessionState = { closed: false, inFlight: 0, controllers: new Set(), seen: new Set(), readers: new Map() };
    return {
      name: 'captcha',
      attached: async (t) => {
        if (t.type !== 'page' && t.type !== 'iframe') return;
        // Measured (target-agent test): without Page.enable a new tab misses the script, without runImmediately a popup does.
        await t.send('Page.enable');
        await t.send('Page.addScriptToEvaluateOnNewDocument', { source: DETECTOR_SOURCE, worldName: CAPTCHA_WORLD, runImmediately: true });
        // Documents already there (a late attach, runImmediately): read them now; new ones start with Page.frameNavigated.
        const tree = await t.send<{ frameTree: FrameTree }>('Page.getFrameTree');
        for (const id of frameIds(tree.frameTree)) this.read(sessionId, state, t, id);
      },
      event: (t, method, params) => {
        if (!t || method !== 'Page.frameNavigated') return;
        const frame = params.frame as { id?: string } | undefined;
        if (frame?.id) this.read(sessionId, state, t, frame.id);
      },
      closed: () => {
        state.closed = true;
        for (const c of state.controllers) c.abort();
        state.controllers.clear();
      },
    };
  }

  /**
   * Reads one frame's detector until its document goes away: each read waits in the
   * isolated world until the detector has findings (or NEXT_WAIT_MS passed). Not awaited by
   * the hook: the target runs on meanwhile.
   */
  private read(sessionId: string, state: SessionState, t: AttachedTarget, frameId: string): void {
    const key = `${t.sessionId}|${frameId}`;
    const gen = (state.readers.get(key) ?? 0) + 1;
    state.readers.set(key, gen);
    const current = () => !state.closed && state.readers.get(key) === gen;
    void (async () => {
      let contextId: number;
      try {
        ({ executionContextId: contextId } = await t.send<{ executionContextId: number }>('Page.createIsolatedWorld', { frameId, worldName: CAPTCHA_WORLD }));
      } catch {
        return; // the frame is gone, or lives in another process (its own target reads it)
      }
      let missing = 0;
      while (current()) {
        let r: { result: { value?: unknown } };
        try {
          r = await t.send('Runtime.evaluate', { expression: NEXT_EXPRESSION, contextId, awaitPromise: true, returnByValue: true }, NEXT_WAIT_MS + 10_000);
        } catch {
          return; // the document went away; its successor has its own reader
        }
        const found = r.result.value;
        if (!Array.isArray(found)) {
          if (++missing >= DETECTOR_TRIES) return;
          await new Promise((resolve) => setTimeout(resolve, 200));
          continue;
        }
        for (const payload of found) if (typeof payload === 'string') this.onReport(sessionId, state, t, payload, contextId);
      }
    })();
  }

  private onReport(sessionId: string, state: SessionState, t: AttachedTarget, payload: string, contextId: number): void {
    const c = parseReport(payload);
    if (!c) return;
    const key = `${t.sessionId}|${contextId}|${c.sitekey}`;
    if (state.seen.has(key)) return;
    state.seen.add(key);
    const id = `cap_${crypto.randomBytes(8).toString('hex')}`;
    const solver = this.deps.solver;
    this.deps.emit(sessionId, detectedEvent(id, c, solver ? 'configured' : 'none', t.type));
    this.deps.log.info({ session_id: sessionId, challenge_id: id, captcha_type: c.type, sitekey: c.sitekey, ...websiteOf(c.url) }, 'captcha detected');
    if (!solver) return;
    if (state.inFlight >= MAX_SOLVES_IN_FLIGHT) {
      this.deps.emit(sessionId, solveResultEvent(id, c, { status: 'failure', durationMs: 0, errorCode: 'too_many_solves' }));
      return;
    }
    void this.solve(sessionId, state, solver, t, contextId, id, c);
  }

  private async solve(sessionId: string, state: SessionState, solver: SolverClient, t: AttachedTarget, contextId: number, id: string, c: DetectedChallenge): Promise<void> {
    const started = Date.now();
    const ac = new AbortController();
    state.controllers.add(ac);
    state.inFlight++;
    const task = taskFor(c);
    let result: SolveResult;
    try {
      const outcome = await solver.solve(task, {
        signal: ac.signal,
        onCreated: (taskId) => this.deps.emit(sessionId, solveStartedEvent(id, c, task.type, taskId, solver.host)),
      });
      if (outcome.status !== 'success') {
        result = { status: outcome.status, durationMs: Date.now() - started, errorCode: outcome.errorCode, ...(outcome.taskId ? { taskId: outcome.taskId } : {}) };
      } else {
        const tokenLength = outcome.token.length;
        try {
          const placement = await placeToken(t, contextId, c, outcome.token);
          result = { status: 'success', durationMs: Date.now() - started, taskId: outcome.taskId, tokenLength, placement };
        } catch {
          // The document went away (navigation, closed tab) while the solver worked.
          result = { status: 'abandoned', durationMs: Date.now() - started, taskId: outcome.taskId, errorCode: 'page_gone', tokenLength };
        }
      }
    } catch (err) {
      result = { status: 'failure', durationMs: Date.now() - started, errorCode: 'internal_error' };
      this.deps.log.warn({ session_id: sessionId, challenge_id: id, err: String(err) }, 'captcha solve failed unexpectedly');
    } finally {
      state.inFlight--;
      state.controllers.delete(ac);
    }
    this.deps.emit(sessionId, solveResultEvent(id, c, result));
    this.deps.log.info(
      { session_id: sessionId, challenge_id: id, captcha_type: c.type, status: result.status, duration_ms: result.durationMs, task_id: result.taskId, error_code: result.errorCode },
      'captcha solve finished',
    );
  }
}

/**
 * Puts the token into the widget's document: the detector's isolated world names the
 * document, DOM.resolveNode gives the same document in the page's main world, and
 * PLACE_TOKEN runs there (fields, callback, v3 execute).
 */
async function placeToken(t: AttachedTarget, contextId: number, c: DetectedChallenge, token: string): Promise<NonNullable<SolveResult['placement']>> {
  try {
    const doc = await t.send<{ result: { objectId?: string } }>('Runtime.evaluate', { expression: 'document', contextId, objectGroup: OBJECT_GROUP });
    if (!doc.result.objectId) throw new Error('no document');
    const { node } = await t.send<{ node: { backendNodeId: number } }>('DOM.describeNode', { objectId: doc.result.objectId });
    const main = await t.send<{ object: { objectId?: string } }>('DOM.resolveNode', { backendNodeId: node.backendNodeId, objectGroup: OBJECT_GROUP });
    if (!main.object.objectId) throw new Error('no main-world document');
    const r = await t.send<{ result: { value?: { fields: number; callback: 'called' | 'none' | 'not_found' | 'threw'; executePatched: boolean } }; exceptionDetails?: unknown }>('Runtime.callFunctionOn', {
      objectId: main.object.objectId,
      functionDeclaration: PLACE_TOKEN,
      arguments: [{ value: { type: c.type, sitekey: c.sitekey, token, callback: c.callback ?? null, enterprise: c.enterprise === true } }],
      returnByValue: true,
      objectGroup: OBJECT_GROUP,
    });
    const v = r.result.value;
    if (r.exceptionDetails || !v) throw new Error('token placement threw');
    return { fields: v.fields, callback: v.callback, ...(v.executePatched ? { execute_patched: true } : {}) };
  } finally {
    void t.send('Runtime.releaseObjectGroup', { objectGroup: OBJECT_GROUP }).catch(() => undefined);
  }
}
