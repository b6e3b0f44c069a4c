import type { SolverConfig } from './solver-client.js';

export const DEFAULT_POLL_INTERVAL_MS = 3_000;
export const DEFAULT_SOLVE_TIMEOUT_MS = 180_000;

function ms(env: NodeJS.ProcessEnv, name: string, dflt: number, min: number, max: number, problems: string[]): number {
  const raw = (env[name] ?? '').trim();
  if (!raw) return dflt;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    problems.push(`${name} must be an integer between ${min} and ${max} (milliseconds), got "${raw}"`);
    return dflt;
  }
  return Number(raw);
}

/**
 * The CAPTCHA solver service (docs/captcha.md): BROWSERD_CAPTCHA_SOLVER_URL (http/https base
 * URL of a createTask/getTaskResult service) with BROWSERD_CAPTCHA_SOLVER_KEY (both or
 * neither), BROWSERD_CAPTCHA_POLL_INTERVAL_MS and BROWSERD_CAPTCHA_TIMEOUT_MS. Null when no
 * solver is configured (challenges are then detected and reported only). The key never
 * appears in a message.
 */
export function captchaSolverVars(env: NodeJS.ProcessEnv, problems: string[]): SolverConfig | null {
  const url = (env.BROWSERD_CAPTCHA_SOLVER_URL ?? '').trim();
  const key = (env.BROWSERD_CAPTCHA_SOLVER_KEY ?? '').trim();
  const pollIntervalMs = ms(env, 'BROWSERD_CAPTCHA_POLL_INTERVAL_MS', DEFAULT_POLL_INTERVAL_MS, 100, 60_000, problems);
  const timeoutMs = ms(env, 'BROWSERD_CAPTCHA_TIMEOUT_MS', DEFAULT_SOLVE_TIMEOUT_MS, 1_000, 600_000, problems);
  if (!url && !key) return null;
  let ok = true;
  let parsed: URL | null = null;
  try {
    parsed = url ? new URL(url) : null;
  } catch {
    /* reported below */
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.search || parsed.hash || parsed.username || parsed.password) {
    problems.push(
      url
        ? 'BROWSERD_CAPTCHA_SOLVER_URL must be an absolute http(s) URL without a query, fragment or credentials'
        : 'BROWSERD_CAPTCHA_SOLVER_URL must be set when BROWSERD_CAPTCHA_SOLVER_KEY is',
    );
    ok = false;
  }
  if (!key) {
    problems.push('BROWSERD_CAPTCHA_SOLVER_KEY must be set when BROWSERD_CAPTCHA_SOLVER_URL is');
    ok = false;
  } else if (!/^[\x21-\x7e]{1,1024}$/.test(key)) {
    problems.push('BROWSERD_CAPTCHA_SOLVER_KEY must be 1 to 1024 printable characters without spaces');
    ok = false;
  }
  if (!ok) return null;
  return { url: parsed!.toString().replace(/\/+$/, ''), key, pollIntervalMs, timeoutMs };
}
