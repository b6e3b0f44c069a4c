import type { TelemetryEvent } from '../telemetry/telemetry-events.js';

/** The widget families browserd detects (the Kernel SDK's `captcha_type` values it can produce). */
export const CAPTCHA_TYPES = ['recaptcha_v2', 'recaptcha_v3', 'hcaptcha', 'turnstile'] as const;
export type CaptchaType = (typeof CAPTCHA_TYPES)[number];

/** What gave a widget away on the page. */
export type DetectionSignal = 'element' | 'script' | 'iframe';

/** A challenge seen on a page (reported by the detector in the page's isolated world, validated). */
export interface DetectedChallenge {
  type: CaptchaType;
  sitekey: string;
  /** The URL of the document the widget is in. */
  url: string;
  signal: DetectionSignal;
  /** True when reported from the top document of its page, false from a frame. */
  top: boolean;
  /** The widget's `data-callback` (a global function name), when it has one. */
  callback?: string;
  /** `data-action` (reCAPTCHA v3 / Turnstile action). */
  action?: string;
  /** Turnstile `data-cdata`. */
  cdata?: string;
  /** `data-size="invisible"` (reCAPTCHA v2 / hCaptcha invisible widgets). */
  invisible?: boolean;
  /** reCAPTCHA Enterprise (enterprise.js / enterprise anchor). */
  enterprise?: boolean;
}

/** Terminal outcome of a solve attempt (the SDK's `captcha_solve_result.status`). */
export type SolveStatus = 'success' | 'failure' | 'timeout' | 'abandoned';

type CaptchaEvent = Omit<TelemetryEvent, 'ts'>;

/** Host and path of a page, never its query or fragment (they may carry tokens). */
export function websiteOf(url: string): { website_host?: string; website_path?: string } {
  try {
    const u = new URL(url);
    return { website_host: u.host, website_path: u.pathname };
  } catch {
    return {};
  }
}

const DETECTOR_SOURCE = { kind: 'cdp', event: 'captcha_detector' } as const;
const SOLVER_SOURCE = { kind: 'kernel_api', event: 'captcha_solver' } as const;

/**
 * `captcha_detected`: a widget was found on a page. `solver` says whether it will be
 * solved (`configured`) or only reported (`none`: no solver configured on this node).
 */
export function detectedEvent(challengeId: string, c: DetectedChallenge, solver: 'configured' | 'none', targetType: string): CaptchaEvent {
  return {
    category: 'captcha',
    type: 'captcha_detected',
    source: { ...DETECTOR_SOURCE, metadata: { challenge_id: challengeId } },
    data: {
      challenge_id: challengeId,
      captcha_type: c.type,
      sitekey: c.sitekey,
      ...websiteOf(c.url),
      frame: c.top ? 'top' : 'child',
      target_type: targetType,
      signal: c.signal,
      ...(c.callback ? { callback: c.callback } : {}),
      ...(c.action ? { action: c.action } : {}),
      ...(c.invisible ? { invisible: true } : {}),
      ...(c.enterprise ? { enterprise: true } : {}),
      solver,
    },
  };
}

/** `captcha_solve_started`: the solver accepted the task. */
export function solveStartedEvent(challengeId: string, c: DetectedChallenge, taskType: string, taskId: string, solverHost: string): CaptchaEvent {
  return {
    category: 'captcha',
    type: 'captcha_solve_started',
    source: { ...SOLVER_SOURCE, metadata: { challenge_id: challengeId } },
    data: { challenge_id: challengeId, captcha_type: c.type, task_type: taskType, task_id: taskId, solver_host: solverHost, ...websiteOf(c.url) },
  };
}

export interface SolveResult {
  status: SolveStatus;
  durationMs: number;
  taskId?: string;
  errorCode?: string;
  /** Where the token went: fields written and whether the widget's callback was called. */
  placement?: { fields: number; callback: 'called' | 'none' | 'not_found' | 'threw'; execute_patched?: boolean };
  tokenLength?: number;
}

/**
 * `captcha_solve_result`: the Kernel SDK's event (captcha_type, duration_ms, status,
 * error_code, task_id, website_host, website_path), plus browserd's challenge_id, the
 * token's length (never the token) and where it was placed.
 */
export function solveResultEvent(challengeId: string, c: DetectedChallenge, r: SolveResult): CaptchaEvent {
  return {
    category: 'captcha',
    type: 'captcha_solve_result',
    source: { ...SOLVER_SOURCE, metadata: { challenge_id: challengeId } },
    data: {
      challenge_id: challengeId,
      captcha_type: c.type,
      status: r.status,
      duration_ms: r.durationMs,
      ...(r.errorCode ? { error_code: r.errorCode } : {}),
      ...(r.taskId ? { task_id: r.taskId } : {}),
      ...websiteOf(c.url),
      ...(r.tokenLength !== undefined ? { token_length: r.tokenLength } : {}),
      ...(r.placement ? { placement: r.placement } : {}),
    },
  };
}
