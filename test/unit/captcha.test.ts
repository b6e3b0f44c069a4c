import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { captchaSolverVars, DEFAULT_POLL_INTERVAL_MS, DEFAULT_SOLVE_TIMEOUT_MS } from '../../src/captcha/captcha-config.js';
import { detectedEvent, solveResultEvent, type DetectedChallenge } from '../../src/captcha/captcha-events.js';
import { parseReport } from '../../src/captcha/page-scripts.js';
import { readCreateReply, readResultReply, SolverClient, taskFor, taskResultBody, type SolverTask } from '../../src/captcha/solver-client.js';
import { ConfigError, loadConfig } from '../../src/config.js';

const base: DetectedChallenge = { type: 'recaptcha_v2', sitekey: 'site-key', url: 'https://shop.example/login?next=%2Fa#top', signal: 'element', top: true };

describe('solver task of a detected challenge', () => {
  test('reCAPTCHA v2: type, page URL without fragment, key; invisible and enterprise variants', () => {
    assert.deepEqual(taskFor(base), { type: 'RecaptchaV2TaskProxyless', websiteURL: 'https://shop.example/login?next=%2Fa', websiteKey: 'site-key' });
    assert.deepEqual(taskFor({ ...base, invisible: true }), { type: 'RecaptchaV2TaskProxyless', websiteURL: 'https://shop.example/login?next=%2Fa', websiteKey: 'site-key', isInvisible: true });
    assert.equal(taskFor({ ...base, enterprise: true }).type, 'RecaptchaV2EnterpriseTaskProxyless');
  });
  test('reCAPTCHA v3: minScore, pageAction when known, isEnterprise', () => {
    assert.deepEqual(taskFor({ ...base, type: 'recaptcha_v3', action: 'login', enterprise: true }), {
      type: 'RecaptchaV3TaskProxyless',
      websiteURL: 'https://shop.example/login?next=%2Fa',
      websiteKey: 'site-key',
      minScore: 0.7,
      pageAction: 'login',
      isEnterprise: true,
    });
    assert.equal('pageAction' in taskFor({ ...base, type: 'recaptcha_v3' }), false);
  });
  test('hCaptcha and Turnstile (action, cData)', () => {
    assert.equal(taskFor({ ...base, type: 'hcaptcha' }).type, 'HCaptchaTaskProxyless');
    assert.deepEqual(taskFor({ ...base, type: 'turnstile', action: 'signup', cdata: 'c-1' }), {
      type: 'TurnstileTaskProxyless',
      websiteURL: 'https://shop.example/login?next=%2Fa',
      websiteKey: 'site-key',
      action: 'signup',
      cData: 'c-1',
    });
  });
  test('getTaskResult body: numeric task ids go back as numbers, others as strings', () => {
    assert.deepEqual(taskResultBody('k', '7654321'), { clientKey: 'k', taskId: 7654321 });
    assert.deepEqual(taskResultBody('k', '61138bb6-19fb-11ec'), { clientKey: 'k', taskId: '61138bb6-19fb-11ec' });
  });
});

describe('solver replies', () => {
  test('createTask: a numeric or string taskId; errorId with errorCode; malformed answers', () => {
    assert.deepEqual(readCreateReply({ errorId: 0, taskId: 7654321 }), { ok: true, taskId: '7654321' });
    assert.deepEqual(readCreateReply({ errorId: 0, taskId: 'abc-1' }), { ok: true, taskId: 'abc-1' });
    assert.deepEqual(readCreateReply({ errorId: 1, errorCode: 'ERROR_KEY_DOES_NOT_EXIST', errorDescription: 'no key' }), { ok: false, errorCode: 'ERROR_KEY_DOES_NOT_EXIST', errorDescription: 'no key' });
    assert.deepEqual(readCreateReply({ errorId: 2 }), { ok: false, errorCode: 'ERROR_ID_2' });
    assert.equal(readCreateReply({ errorId: 0 }).ok, false);
    assert.deepEqual(readCreateReply('nope'), { ok: false, errorCode: 'solver_bad_response' });
  });
  test('getTaskResult: processing (and idle), ready with gRecaptchaResponse or token, errors', () => {
    assert.deepEqual(readResultReply({ errorId: 0, status: 'processing' }), { state: 'processing' });
    assert.deepEqual(readResultReply({ errorId: 0, status: 'idle' }), { state: 'processing' });
    assert.deepEqual(readResultReply({ errorId: 0, status: 'ready', solution: { gRecaptchaResponse: 'g-tok' } }), { state: 'ready', token: 'g-tok' });
    assert.deepEqual(readResultReply({ errorId: 0, status: 'ready', solution: { token: 't-tok', userAgent: 'UA' } }), { state: 'ready', token: 't-tok' });
    assert.equal(readResultReply({ errorId: 0, status: 'ready', solution: {} }).state, 'error');
    assert.deepEqual(readResultReply({ errorId: 12, errorCode: 'ERROR_CAPTCHA_UNSOLVABLE' }), { state: 'error', errorCode: 'ERROR_CAPTCHA_UNSOLVABLE' });
    assert.deepEqual(readResultReply({ errorId: 1, status: 'failed', errorCode: 'ERROR_INVALID_TASK_DATA' }), { state: 'error', errorCode: 'ERROR_INVALID_TASK_DATA' });
    assert.equal(readResultReply({ errorId: 0, status: 'weird' }).state, 'error');
  });
});

/** A fake solver endpoint: answers each call with the next reply (or throws for a network failure). */
function fakeFetch(replies: (unknown | Error | { status: number; text: string })[]) {
  const calls: { url: string; body: Record<string, unknown> }[] = [];
  const fn = (async (url: string, init: RequestInit) => {
    calls.push({ url, body: JSON.parse(String(init.body)) as Record<string, unknown> });
    const r = replies.shift();
    if (r instanceof Error) throw r;
    if (r && typeof r === 'object' && 'text' in r && 'status' in r) return new Response((r as { text: string }).text, { status: (r as { status: number }).status });
    return new Response(JSON.stringify(r), { status: 200, headers: { 'content-type': 'application/json' } });
  }) as unknown as typeof fetch;
  return { fn, calls };
}

const TASK: SolverTask = { type: 'RecaptchaV2TaskProxyless', websiteURL: 'https://a.example/', websiteKey: 'k1' };
const cfg = { url: 'https://solver.example/api/', key: 'secret-key', pollIntervalMs: 1, timeoutMs: 5_000 };

describe('SolverClient', () => {
  test('creates the task, polls until ready, and returns the token', async () => {
    const f = fakeFetch([{ errorId: 0, taskId: 42 }, { errorId: 0, status: 'processing' }, { errorId: 0, status: 'ready', solution: { gRecaptchaResponse: 'tok' } }]);
    const created: string[] = [];
    const out = await new SolverClient(cfg, f.fn).solve(TASK, { onCreated: (id) => created.push(id) });
    assert.deepEqual(out, { status: 'success', taskId: '42', token: 'tok' });
    assert.deepEqual(created, ['42']);
    assert.deepEqual(
      f.calls.map((c) => c.url),
      ['https://solver.example/api/createTask', 'https://solver.example/api/getTaskResult', 'https://solver.example/api/getTaskResult'],
    );
    assert.deepEqual(f.calls[0]!.body, { clientKey: 'secret-key', task: TASK });
    assert.deepEqual(f.calls[1]!.body, { clientKey: 'secret-key', taskId: 42 });
  });
  test('an error from createTask or getTaskResult is a failure with its errorCode', async () => {
    const a = await new SolverClient(cfg, fakeFetch([{ errorId: 1, errorCode: 'ERROR_ZERO_BALANCE' }]).fn).solve(TASK);
    assert.deepEqual(a, { status: 'failure', errorCode: 'ERROR_ZERO_BALANCE' });
    const b = await new SolverClient(cfg, fakeFetch([{ errorId: 0, taskId: 'x' }, { errorId: 12, errorCode: 'ERROR_CAPTCHA_UNSOLVABLE', errorDescription: 'no' }]).fn).solve(TASK);
    assert.deepEqual(b, { status: 'failure', taskId: 'x', errorCode: 'ERROR_CAPTCHA_UNSOLVABLE', errorDescription: 'no' });
  });
  test('network failures: at creation a failure; while polling retried, then a failure', async () => {
    assert.deepEqual(await new SolverClient(cfg, fakeFetch([new TypeError('fetch failed')]).fn).solve(TASK), { status: 'failure', errorCode: 'solver_unreachable' });
    const retried = await new SolverClient(cfg, fakeFetch([{ errorId: 0, taskId: 1 }, new TypeError('x'), { errorId: 0, status: 'ready', solution: { token: 't' } }]).fn).solve(TASK);
    assert.deepEqual(retried, { status: 'success', taskId: '1', token: 't' });
    const gone = await new SolverClient(cfg, fakeFetch([{ errorId: 0, taskId: 1 }, new TypeError('x'), new TypeError('x'), new TypeError('x')]).fn).solve(TASK);
    assert.deepEqual(gone, { status: 'failure', taskId: '1', errorCode: 'solver_unreachable' });
  });
  test('a non-JSON answer is solver_http_<status> (or solver_bad_response on 200)', async () => {
    assert.deepEqual(await new SolverClient(cfg, fakeFetch([{ status: 502, text: '<html>bad gateway' }]).fn).solve(TASK), { status: 'failure', errorCode: 'solver_http_502' });
    assert.deepEqual(await new SolverClient(cfg, fakeFetch([{ status: 200, text: 'ok' }]).fn).solve(TASK), { status: 'failure', errorCode: 'solver_bad_response' });
  });
  test('a task still processing at the timeout is a timeout; an aborted solve is abandoned', async () => {
    const processing = Array.from({ length: 200 }, () => ({ errorId: 0, status: 'processing' }));
    const t = await new SolverClient({ ...cfg, pollIntervalMs: 100, timeoutMs: 1_000 }, fakeFetch([{ errorId: 0, taskId: 5 }, ...processing]).fn).solve(TASK);
    assert.deepEqual(t, { status: 'timeout', taskId: '5', errorCode: 'solver_timeout' });
    const ac = new AbortController();
    const job = new SolverClient({ ...cfg, pollIntervalMs: 10_000 }, fakeFetch([{ errorId: 0, taskId: 6 }]).fn).solve(TASK, { signal: ac.signal, onCreated: () => ac.abort() });
    assert.deepEqual(await job, { status: 'abandoned', taskId: '6', errorCode: 'abandoned' });
  });
  test('host: the service host only', () => {
    assert.equal(new SolverClient(cfg).host, 'solver.example');
  });
});

describe('solver configuration', () => {
  test('unset: no solver (detection only)', () => {
    assert.equal(captchaSolverVars({}, []), null);
    assert.equal(loadConfig({}).captchaSolver, undefined);
  });
  test('URL and key with defaults; trailing slashes dropped; intervals configurable', () => {
    assert.deepEqual(captchaSolverVars({ BROWSERD_CAPTCHA_SOLVER_URL: 'https://api.solver.example/', BROWSERD_CAPTCHA_SOLVER_KEY: 'k-123' }, []), {
      url: 'https://api.solver.example',
      key: 'k-123',
      pollIntervalMs: DEFAULT_POLL_INTERVAL_MS,
      timeoutMs: DEFAULT_SOLVE_TIMEOUT_MS,
    });
    const c = loadConfig({ BROWSERD_CAPTCHA_SOLVER_URL: 'http://127.0.0.1:9/x', BROWSERD_CAPTCHA_SOLVER_KEY: 'k', BROWSERD_CAPTCHA_POLL_INTERVAL_MS: '250', BROWSERD_CAPTCHA_TIMEOUT_MS: '60000' }).captchaSolver;
    assert.deepEqual(c, { url: 'http://127.0.0.1:9/x', key: 'k', pollIntervalMs: 250, timeoutMs: 60_000 });
  });
  test('each broken rule is named; the key never appears in a message', () => {
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig(env);
        return [];
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        return err.problems;
      }
    };
    assert.match(problems({ BROWSERD_CAPTCHA_SOLVER_URL: 'https://s.example' }).join('\n'), /BROWSERD_CAPTCHA_SOLVER_KEY must be set/);
    assert.match(problems({ BROWSERD_CAPTCHA_SOLVER_KEY: 'very-secret' }).join('\n'), /BROWSERD_CAPTCHA_SOLVER_URL must be set/);
    const bad = problems({ BROWSERD_CAPTCHA_SOLVER_URL: 'ftp://s.example', BROWSERD_CAPTCHA_SOLVER_KEY: 'very-secret', BROWSERD_CAPTCHA_POLL_INTERVAL_MS: '5', BROWSERD_CAPTCHA_TIMEOUT_MS: 'soon' });
    assert.equal(bad.length, 3);
    assert.match(bad.join('\n'), /BROWSERD_CAPTCHA_SOLVER_URL must be an absolute http\(s\) URL/);
    assert.match(bad.join('\n'), /BROWSERD_CAPTCHA_POLL_INTERVAL_MS/);
    assert.match(bad.join('\n'), /BROWSERD_CAPTCHA_TIMEOUT_MS/);
    assert.ok(!bad.join('\n').includes('very-secret'));
    assert.match(problems({ BROWSERD_CAPTCHA_SOLVER_URL: 'https://s.example', BROWSERD_CAPTCHA_SOLVER_KEY: 'has space' }).join('\n'), /printable characters/);
  });
});

describe('detector findings', () => {
  const ok = { type: 'turnstile', sitekey: '0x4AAAAAAA_b-1', url: 'https://a.example/p', signal: 'element', top: false, callback: 'app.onDone', action: 'login', cdata: 'x', invisible: true };
  test('a valid finding is kept with its optional fields', () => {
    assert.deepEqual(parseReport(JSON.stringify(ok)), { type: 'turnstile', sitekey: '0x4AAAAAAA_b-1', url: 'https://a.example/p', signal: 'element', top: false, callback: 'app.onDone', action: 'login', cdata: 'x', invisible: true });
  });
  test('unknown types, odd sitekeys and signals are refused; a callback that is not a name is dropped', () => {
    assert.equal(parseReport('not json'), null);
    assert.equal(parseReport(JSON.stringify({ ...ok, type: 'geetest' })), null);
    assert.equal(parseReport(JSON.stringify({ ...ok, sitekey: 'a b' })), null);
    assert.equal(parseReport(JSON.stringify({ ...ok, sitekey: '' })), null);
    assert.equal(parseReport(JSON.stringify({ ...ok, signal: 'guess' })), null);
    assert.equal(parseReport(JSON.stringify({ ...ok, callback: 'alert(1)' }))!.callback, undefined);
  });
});

describe('captcha events', () => {
  test("captcha_solve_result carries the SDK's fields; pages are host and path without query", () => {
    const e = solveResultEvent('cap_1', base, { status: 'success', durationMs: 1234, taskId: '42', tokenLength: 500, placement: { fields: 1, callback: 'called' } });
    assert.equal(e.category, 'captcha');
    assert.equal(e.type, 'captcha_solve_result');
    assert.deepEqual(e.data, {
      challenge_id: 'cap_1',
      captcha_type: 'recaptcha_v2',
      status: 'success',
      duration_ms: 1234,
      task_id: '42',
      website_host: 'shop.example',
      website_path: '/login',
      token_length: 500,
      placement: { fields: 1, callback: 'called' },
    });
    const failed = solveResultEvent('cap_2', base, { status: 'timeout', durationMs: 9, errorCode: 'solver_timeout' });
    assert.equal(failed.data!.error_code, 'solver_timeout');
    assert.equal('task_id' in failed.data!, false);
  });
  test('captcha_detected: frame, signal, solver', () => {
    const e = detectedEvent('cap_3', { ...base, top: false, callback: 'cb' }, 'none', 'iframe');
    assert.deepEqual(e.data, { challenge_id: 'cap_3', captcha_type: 'recaptcha_v2', sitekey: 'site-key', website_host: 'shop.example', website_path: '/login', frame: 'child', target_type: 'iframe', signal: 'element', callback: 'cb', solver: 'none' });
  });
});
