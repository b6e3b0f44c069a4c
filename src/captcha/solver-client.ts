import type { CaptchaType, DetectedChallenge } from './captcha-events.js';

/** A solver service speaking the createTask / getTaskResult JSON protocol (anti-captcha, 2captcha v2, capsolver style). */
export interface SolverConfig {
  /** Base URL; `/createTask` and `/getTaskResult` are appended. */
  url: string;
  /** The account key sent as `clientKey`. Never logged, never in an event. */
  key: string;
  pollIntervalMs: number;
  timeoutMs: number;
}

/** The `task` object of createTask. */
export type SolverTask = { type: string; websiteURL: string; websiteKey: string } & Record<string, unknown>;

/** reCAPTCHA v3 score asked of the solver's workers (anti-captcha accepts 0.3, 0.7 or 0.9). */
export const V3_MIN_SCORE = 0.7;

const TASK_TYPES: Record<CaptchaType, string> = {
  recaptcha_v2: 'RecaptchaV2TaskProxyless',
  recaptcha_v3: 'RecaptchaV3TaskProxyless',
  hcaptcha: 'HCaptchaTaskProxyless',
  turnstile: 'TurnstileTaskProxyless',
};

/** The page URL a solver is given: without its fragment (never part of what the widget checks). */
function pageUrl(url: string): string {
  try {
    const u = new URL(url);
    u.hash = '';
    return u.toString();
  } catch {
    return url;
  }
}

/** The solver task for a detected challenge (proxyless: the solver's workers use their own network). */
export function taskFor(c: DetectedChallenge): SolverTask {
  const base = { websiteURL: pageUrl(c.url), websiteKey: c.sitekey };
  switch (c.type) {
    case 'recaptcha_v2':
      return {
        type: c.enterprise ? 'RecaptchaV2EnterpriseTaskProxyless' : TASK_TYPES.recaptcha_v2,
        ...base,
        ...(c.invisible ? { isInvisible: true } : {}),
      };
    case 'recaptcha_v3':
      return {
        type: TASK_TYPES.recaptcha_v3,
        ...base,
        minScore: V3_MIN_SCORE,
        ...(c.action ? { pageAction: c.action } : {}),
        ...(c.enterprise ? { isEnterprise: true } : {}),
      };
    case 'hcaptcha':
      return { type: TASK_TYPES.hcaptcha, ...base, ...(c.invisible ? { isInvisible: true } : {}) };
    case 'turnstile':
      return { type: TASK_TYPES.turnstile, ...base, ...(c.action ? { action: c.action } : {}), ...(c.cdata ? { cData: c.cdata } : {}) };
  }
}

export function createTaskBody(key: string, task: SolverTask): Record<string, unknown> {
  return { clientKey: key, task };
}

export function taskResultBody(key: string, taskId: string): Record<string, unknown> {
  // Services issue numeric (anti-captcha) or string (capsolver) ids: a numeric one goes back as a number.
  return { clientKey: key, taskId: /^\d{1,15}$/.test(taskId) ? Number(taskId) : taskId };
}

export type CreateReply = { ok: true; taskId: string } | { ok: false; errorCode: string; errorDescription?: string };
export type ResultReply = { state: 'processing' } | { state: 'ready'; token: string } | { state: 'error'; errorCode: string; errorDescription?: string };

function asObject(body: unknown): Record<string, unknown> | null {
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
}

/** errorId other than 0 (a number or numeric string) is an error with errorCode / errorDescription. */
function errorOf(o: Record<string, unknown>): { errorCode: string; errorDescription?: string } | null {
  const id = o.errorId;
  if (id === undefined || id === null || id === 0 || id === '0') return null;
  const code = typeof o.errorCode === 'string' && o.errorCode ? o.errorCode : `ERROR_ID_${String(id)}`;
  return { errorCode: code, ...(typeof o.errorDescription === 'string' && o.errorDescription ? { errorDescription: o.errorDescription } : {}) };
}

/** A createTask answer: `{errorId: 0, taskId}` or an error. */
export function readCreateReply(body: unknown): CreateReply {
  const o = asObject(body);
  if (!o) return { ok: false, errorCode: 'solver_bad_response' };
  const err = errorOf(o);
  if (err) return { ok: false, ...err };
  const id = o.taskId;
  if ((typeof id === 'number' && Number.isFinite(id)) || (typeof id === 'string' && id !== '')) return { ok: true, taskId: String(id) };
  return { ok: false, errorCode: 'solver_bad_response', errorDescription: 'createTask answered without a taskId' };
}

/**
 * A getTaskResult answer: `processing` (also capsolver's `idle`), `ready` with the token in
 * `solution.gRecaptchaResponse` (reCAPTCHA, hCaptcha) or `solution.token` (Turnstile), or
 * an error (errorId, or capsolver's `status: failed`).
 */
export function readResultReply(body: unknown): ResultReply {
  const o = asObject(body);
  if (!o) return { state: 'error', errorCode: 'solver_bad_response' };
  const err = errorOf(o);
  if (err) return { state: 'error', ...err };
  if (o.status === 'processing' || o.status === 'idle') return { state: 'processing' };
  if (o.status === 'failed') return { state: 'error', errorCode: 'ERROR_CAPTCHA_UNSOLVABLE' };
  if (o.status !== 'ready') return { state: 'error', errorCode: 'solver_bad_response', errorDescription: 'unknown task status' };
  const solution = asObject(o.solution);
  const token = solution?.gRecaptchaResponse ?? solution?.token;
  if (typeof token !== 'string' || token === '') return { state: 'error', errorCode: 'solver_bad_response', errorDescription: 'ready without a token' };
  return { state: 'ready', token };
}

export type SolveOutcome =
  | { status: 'success'; taskId: string; token: string }
  | { status: 'failure' | 'timeout' | 'abandoned'; taskId?: string; errorCode: string; errorDescription?: string };

/** Consecutive network failures while polling before the task counts as failed. */
const POLL_NETWORK_RETRIES = 3;
/** One HTTP exchange with the solver never takes longer than this (or the time left). */
const REQUEST_TIMEOUT_MS = 30_000;

class SolverHttpError extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/**
 * Client of one solver service: creates a task, then polls its result every
 * `pollIntervalMs` until it is ready, fails, or `timeoutMs` has passed since creation.
 * Runs on its own (never on a CDP connection); an abort signal ends it as `abandoned`.
 */
export class SolverClient {
  private readonly base: string;

  constructor(
    private readonly cfg: SolverConfig,
    private readonly fetchFn: typeof fetch = fetch,
  ) {
    this.base = cfg.url.replace(/\/+$/, '');
  }

  /** Host of the service (for events: never the key, never the whole URL). */
  get host(): string {
    try {
      return new URL(this.base).host;
    } catch {
      return '';
    }
  }

  async solve(task: SolverTask, opts: { signal?: AbortSignal; onCreated?: (taskId: string) => void } = {}): Promise<SolveOutcome> {
    const deadline = Date.now() + this.cfg.timeoutMs;
    const signal = opts.signal;
    let created: CreateReply;
    try {
      created = readCreateReply(await this.post('/createTask', createTaskBody(this.cfg.key, task), deadline, signal));
    } catch (err) {
      return this.failed(err, undefined, signal);
    }
    if (!created.ok) return { status: 'failure', errorCode: created.errorCode, ...(created.errorDescription ? { errorDescription: created.errorDescription } : {}) };
    const taskId = created.taskId;
    opts.onCreated?.(taskId);
    let networkFailures = 0;
    for (;;) {
      const wait = Math.min(this.cfg.pollIntervalMs, deadline - Date.now());
      if (wait <= 0) return { status: 'timeout', taskId, errorCode: 'solver_timeout' };
      if (!(await sleep(wait, signal))) return { status: 'abandoned', taskId, errorCode: 'abandoned' };
      let reply: ResultReply;
      try {
        reply = readResultReply(await this.post('/getTaskResult', taskResultBody(this.cfg.key, taskId), deadline, signal));
        networkFailures = 0;
      } catch (err) {
        if (signal?.aborted) return { status: 'abandoned', taskId, errorCode: 'abandoned' };
        if (err instanceof SolverHttpError && err.code === 'solver_unreachable' && ++networkFailures < POLL_NETWORK_RETRIES && Date.now() < deadline) continue;
        return this.failed(err, taskId, signal);
      }
      if (reply.state === 'ready') return { status: 'success', taskId, token: reply.token };
      if (reply.state === 'error') return { status: 'failure', taskId, errorCode: reply.errorCode, ...(reply.errorDescription ? { errorDescription: reply.errorDescription } : {}) };
    }
  }

  private failed(err: unknown, taskId: string | undefined, signal?: AbortSignal): SolveOutcome {
    const id = taskId ? { taskId } : {};
    if (signal?.aborted) return { status: 'abandoned', ...id, errorCode: 'abandoned' };
    if (err instanceof SolverHttpError && err.code === 'solver_timeout') return { status: 'timeout', ...id, errorCode: 'solver_timeout' };
    return { status: 'failure', ...id, errorCode: err instanceof SolverHttpError ? err.code : 'solver_unreachable' };
  }

  private async post(route: string, body: Record<string, unknown>, deadline: number, signal?: AbortSignal): Promise<unknown> {
    const left = deadline - Date.now();
    if (left <= 0) throw new SolverHttpError('solver_timeout');
    const timeout = AbortSignal.timeout(Math.min(REQUEST_TIMEOUT_MS, left));
    let res: Response;
    try {
      res = await this.fetchFn(`${this.base}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch {
      throw new SolverHttpError(timeout.aborted && Date.now() >= deadline ? 'solver_timeout' : 'solver_unreachable');
    }
    const text = await res.text().catch(() => '');
    // Some services answer errors with a 4xx and the usual JSON body: the body decides when it parses.
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new SolverHttpError(res.ok ? 'solver_bad_response' : `solver_http_${res.status}`);
    }
  }
}

/** Waits, or returns false at once when the signal aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (v: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(v);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
