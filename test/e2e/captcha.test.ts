import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium, type Browser } from 'playwright-core';
import { SITEKEYS, startLocalSolver, startWidgetSite, type LocalSolver, type WidgetSite } from '../helpers/captcha-solver.js';
import { eventually, startServer, type TestServer } from '../helpers/server.js';

interface Envelope {
  seq: number;
  event: { category: string; type: string; ts: number; source: { kind: string; event?: string }; data?: Record<string, unknown> };
}

let site: WidgetSite;
let solver: LocalSolver;

before(async () => {
  site = await startWidgetSite();
  solver = await startLocalSolver({ processingPolls: 1 });
});
after(async () => {
  await site?.close();
  await solver?.close();
});

async function captchaEvents(kernel: Kernel, id: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const e of kernel.browsers.telemetry.events(id, { category: ['captcha'], limit: 100, offset: 0 })) out.push(e as unknown as Envelope);
  return out;
}

/** A session driven over its cdp_ws_url by Playwright; ended (and its browser closed) by the caller's finally. */
async function session(kernel: Kernel, stealth: boolean): Promise<{ id: string; browser: Browser; end(): Promise<void> }> {
  const s = await kernel.browsers.create({ headless: true, stealth, timeout_seconds: 300, telemetry: { enabled: true } });
  const browser = await chromium.connectOverCDP(s.cdp_ws_url);
  return {
    id: s.session_id,
    browser,
    async end() {
      await browser.close().catch(() => undefined);
      await kernel.browsers.deleteByID(s.session_id);
    },
  };
}

const submitted = (page: string, after = 0) => eventually(() => site.submissions.slice(after).find((s) => s.page === page) ?? null, 20_000);

describe('CAPTCHA solver with a configured solver service', () => {
  let server: TestServer;
  let kernel: Kernel;

  before(async () => {
    server = await startServer({ env: { BROWSERD_CAPTCHA_SOLVER_URL: solver.url, BROWSERD_CAPTCHA_SOLVER_KEY: solver.key, BROWSERD_CAPTCHA_POLL_INTERVAL_MS: '200' } });
    kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
  });
  after(async () => {
    await server?.stop();
  });

  test("stealth session: reCAPTCHA v2, hCaptcha, Turnstile and v3 pages' forms are sent with the solver's tokens; captcha events record each task, its timing and outcome", async () => {
    const s = await session(kernel, true);
    try {
      const page = await s.browser.contexts()[0]!.newPage();
      const cases = [
        { path: '/recaptcha', type: 'recaptcha_v2', task: 'RecaptchaV2TaskProxyless', sitekey: SITEKEYS.recaptcha_v2, fields: ['g-recaptcha-response'] },
        { path: '/hcaptcha', type: 'hcaptcha', task: 'HCaptchaTaskProxyless', sitekey: SITEKEYS.hcaptcha, fields: ['h-captcha-response', 'g-recaptcha-response'] },
        { path: '/turnstile', type: 'turnstile', task: 'TurnstileTaskProxyless', sitekey: SITEKEYS.turnstile, fields: ['cf-turnstile-response'] },
      ];
      for (const c of cases) {
        await page.goto(`${site.url}${c.path}`);
        const sent = await submitted(c.path.slice(1));
        assert.ok(sent, `${c.path}: the form was sent`);
        await page.waitForURL(`**/submit?page=${c.path.slice(1)}`);
        const task = solver.tasks.find((t) => t.task.type === c.task);
        assert.ok(task, `${c.path}: the solver got a ${c.task}`);
        assert.equal(task.task.websiteKey, c.sitekey);
        assert.equal(task.task.websiteURL, `${site.url}${c.path}`);
        for (const f of c.fields) assert.equal(sent.fields[f], task.token, `${c.path}: ${f}`);
        assert.equal(sent.fields.callback_token, task.token, `${c.path}: the widget's data-callback got the token`);
      }
      assert.equal(solver.tasks.find((t) => t.task.type === 'TurnstileTaskProxyless')!.task.action, 'login');

      // v3: the page asks grecaptcha.execute when its form is sent.
      await page.goto(`${site.url}/v3`);
      await eventually(async () => (await captchaEvents(kernel, s.id)).find((e) => e.event.type === 'captcha_solve_result' && e.event.data?.captcha_type === 'recaptcha_v3') ?? null, 20_000);
      await page.click('#send');
      const v3 = solver.tasks.find((t) => t.task.type === 'RecaptchaV3TaskProxyless');
      assert.ok(v3);
      assert.equal(v3.task.websiteKey, SITEKEYS.recaptcha_v3);
      assert.equal((await submitted('v3'))!.fields['g-recaptcha-response'], v3.token);

      const events = await captchaEvents(kernel, s.id);
      for (const c of [...cases, { type: 'recaptcha_v3', sitekey: SITEKEYS.recaptcha_v3, task: 'RecaptchaV3TaskProxyless' }]) {
        const detected = events.find((e) => e.event.type === 'captcha_detected' && e.event.data?.captcha_type === c.type);
        assert.ok(detected, `${c.type} detected`);
        const chain = events.filter((e) => e.event.data?.challenge_id === detected.event.data!.challenge_id);
        assert.deepEqual(
          chain.map((e) => e.event.type),
          ['captcha_detected', 'captcha_solve_started', 'captcha_solve_result'],
          `${c.type}: events in order`,
        );
        const [d, started, result] = chain as [Envelope, Envelope, Envelope];
        assert.ok(d.seq < started.seq && started.seq < result.seq);
        assert.ok(d.event.ts <= started.event.ts && started.event.ts <= result.event.ts, `${c.type}: timestamps in order`);
        assert.equal(d.event.data!.sitekey, c.sitekey);
        assert.equal(d.event.data!.solver, 'configured');
        assert.equal(d.event.data!.website_path, c.type === 'recaptcha_v3' ? '/v3' : `/${c.type === 'recaptcha_v2' ? 'recaptcha' : c.type}`);
        const task = solver.tasks.find((t) => t.task.type === c.task)!;
        assert.equal(started.event.data!.task_id, String(task.id));
        assert.equal(started.event.data!.task_type, c.task);
        assert.equal(result.event.data!.status, 'success');
        assert.equal(result.event.data!.task_id, String(task.id));
        assert.equal(result.event.data!.token_length, task.token.length);
        assert.equal(typeof result.event.data!.duration_ms, 'number');
        // The solver answered "processing" once before "ready": at least one poll interval passed.
        assert.ok((result.event.data!.duration_ms as number) >= 200, `${c.type}: duration covers the poll`);
        assert.ok(!JSON.stringify(chain).includes(task.token), 'the token itself is never in an event');
      }
      assert.equal(solver.refusedKeys, 0);
    } finally {
      await s.end();
    }
  });

  test('a session without stealth: no detection, no solver task, no captcha event', async () => {
    const tasksBefore = solver.tasks.length;
    const sentBefore = site.submissions.length;
    const s = await session(kernel, false);
    try {
      const page = await s.browser.contexts()[0]!.newPage();
      await page.goto(`${site.url}/recaptcha`);
      // The stealth session above was solved and sent within this time (poll interval 200 ms).
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(await page.evaluate(() => document.querySelector('[name="g-recaptcha-response"]')), null, 'no token field was placed');
      assert.equal(solver.tasks.length, tasksBefore);
      assert.equal(site.submissions.length, sentBefore);
      assert.deepEqual(await captchaEvents(kernel, s.id), []);
    } finally {
      await s.end();
    }
  });
});

describe('CAPTCHA detection without a solver', () => {
  let server: TestServer;
  let kernel: Kernel;

  before(async () => {
    server = await startServer();
    kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
  });
  after(async () => {
    await server?.stop();
  });

  test('stealth session: challenges are detected and reported with solver "none" (in the tab that existed before the agent too); nothing is sent', async () => {
    const tasksBefore = solver.tasks.length;
    const s = await session(kernel, true);
    try {
      // The session's first tab: it was already running when the agent attached (late).
      const page = s.browser.contexts()[0]!.pages()[0]!;
      assert.ok(page, 'the session has its first tab');
      await page.goto(`${site.url}/turnstile`);
      const detected = await eventually(async () => (await captchaEvents(kernel, s.id)).find((e) => e.event.type === 'captcha_detected') ?? null, 20_000);
      assert.deepEqual(
        { type: detected!.event.data!.captcha_type, sitekey: detected!.event.data!.sitekey, action: detected!.event.data!.action, callback: detected!.event.data!.callback, solver: detected!.event.data!.solver, path: detected!.event.data!.website_path },
        { type: 'turnstile', sitekey: SITEKEYS.turnstile, action: 'login', callback: 'onCaptcha', solver: 'none', path: '/turnstile' },
      );
      await page.goto(`${site.url}/v3`);
      const v3 = await eventually(async () => (await captchaEvents(kernel, s.id)).find((e) => e.event.data?.captcha_type === 'recaptcha_v3') ?? null, 20_000);
      assert.equal(v3!.event.data!.sitekey, SITEKEYS.recaptcha_v3);
      assert.equal(v3!.event.data!.signal, 'script');
      const all = await captchaEvents(kernel, s.id);
      assert.deepEqual(all.map((e) => e.event.type), ['captcha_detected', 'captcha_detected']);
      assert.equal(solver.tasks.length, tasksBefore, 'no solver was asked');
    } finally {
      await s.end();
    }
  });
});
