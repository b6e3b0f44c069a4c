import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CaptchaService } from '../../src/captcha/captcha-service.js';
import { SolverClient } from '../../src/captcha/solver-client.js';
import { chromiumArgs } from '../../src/runtime/chromium-args.js';
import { terminateGroup } from '../../src/runtime/processes.js';
import { TargetAgent } from '../../src/runtime/target-agent.js';
import type { TelemetryEvent } from '../../src/telemetry/telemetry-events.js';
import { FRAME_SITEKEYS, SITEKEYS, startLocalSolver, startWidgetSite, type LocalSolver, type WidgetSite } from '../helpers/captcha-solver.js';
import { eventually } from '../helpers/server.js';

type Emitted = Omit<TelemetryEvent, 'ts'>;

/** The captcha hook on browserd's own CDP connection to a real Chromium, against the local solver and widget pages. */
describe('CAPTCHA hook: detection in an isolated world, solving, token placement', () => {
  let dir: string;
  let child: ChildProcess;
  let agent: TargetAgent;
  let browser: Browser;
  let site: WidgetSite;
  let solver: LocalSolver;
  const events: Emitted[] = [];
  let holding = true;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'captcha-hook-'));
    site = await startWidgetSite();
    solver = await startLocalSolver({ processingPolls: 1, failWith: (t) => (t.websiteURL.includes('unsolvable') ? 'ERROR_CAPTCHA_UNSOLVABLE' : null), hold: (t) => holding && t.websiteURL.includes('hold') });
    const args = chromiumArgs({ userDataDir: path.join(dir, 'profile'), headless: true, kioskMode: false, width: 800, height: 600, startUrl: null });
    child = spawn('/usr/lib/chromium/chromium', [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), ...args], { detached: true, stdio: 'ignore' });
    const portFile = path.join(dir, 'profile', 'DevToolsActivePort');
    const [port, wsPath] = (await eventually(() => (fs.existsSync(portFile) ? fs.readFileSync(portFile, 'utf8').trim().split('\n') : null), 15_000)) ?? [];
    const service = new CaptchaService({
      solver: new SolverClient({ url: solver.url, key: solver.key, pollIntervalMs: 100, timeoutMs: 10_000 }),
      emit: (_id, e) => void events.push(e),
      log: pino({ level: 'silent' }),
    });
    agent = await TargetAgent.connect({ port: Number(port), wsPath: wsPath! }, [service.hook('s1')], pino({ level: 'silent' }));
    browser = await chromium.connectOverCDP(`http://127.0.0.1:${port}`);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    agent?.close();
    if (child?.pid) await terminateGroup(child.pid, 2000);
    await site?.close();
    await solver?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ofChallenge = (id: unknown) => events.filter((e) => e.data?.challenge_id === id);
  const resultFor = (type: string) => eventually(() => events.find((e) => e.type === 'captcha_solve_result' && e.data?.captcha_type === type) ?? null, 15_000);

  async function newPage(): Promise<Page> {
    return browser.contexts()[0]!.newPage();
  }

  test('reCAPTCHA v2: the form is sent with the solver token in g-recaptcha-response, by the widget callback', async () => {
    const page = await newPage();
    await page.goto(`${site.url}/recaptcha`);
    const sent = await eventually(() => site.submissions.find((s) => s.page === 'recaptcha') ?? null, 15_000);
    assert.ok(sent, 'the form was submitted');
    const task = solver.tasks.find((t) => t.task.type === 'RecaptchaV2TaskProxyless');
    assert.ok(task, 'the solver got a reCAPTCHA v2 task');
    assert.equal(task.task.websiteKey, SITEKEYS.recaptcha_v2);
    assert.equal(task.task.websiteURL, `${site.url}/recaptcha`);
    assert.equal(sent.fields['g-recaptcha-response'], task.token);
    assert.equal(sent.fields.callback_token, task.token, 'the callback got the token');
    assert.equal(sent.fields.email, 'someone@example.test');
    const result = await resultFor('recaptcha_v2');
    const id = result!.data!.challenge_id;
    assert.deepEqual(
      ofChallenge(id).map((e) => e.type),
      ['captcha_detected', 'captcha_solve_started', 'captcha_solve_result'],
    );
    const [detected, started] = ofChallenge(id);
    assert.equal(detected!.data!.sitekey, SITEKEYS.recaptcha_v2);
    assert.equal(detected!.data!.callback, 'onCaptcha');
    assert.equal(detected!.data!.solver, 'configured');
    assert.equal(started!.data!.task_id, String(task.id));
    assert.equal(result!.data!.status, 'success');
    assert.equal(result!.data!.task_id, String(task.id));
    assert.equal(result!.data!.token_length, task.token.length);
    assert.deepEqual(result!.data!.placement, { fields: 1, callback: 'called' });
    assert.ok(!JSON.stringify(events).includes(task.token), 'no event carries the token');
    await page.close();
  });

  test("the page's own scripts do not see the detector", async () => {
    const page = await newPage();
    await page.goto(`${site.url}/plain`);
    const seen = await page.evaluate(() => Object.getOwnPropertyNames(window).filter((n) => /browserd|captcha/i.test(n)));
    assert.deepEqual(seen, []);
    await page.close();
  });

  test('hCaptcha: h-captcha-response and g-recaptcha-response are posted with the token', async () => {
    const page = await newPage();
    await page.goto(`${site.url}/hcaptcha`);
    const sent = await eventually(() => site.submissions.find((s) => s.page === 'hcaptcha') ?? null, 15_000);
    const task = solver.tasks.find((t) => t.task.type === 'HCaptchaTaskProxyless');
    assert.ok(sent && task);
    assert.equal(task.task.websiteKey, SITEKEYS.hcaptcha);
    assert.equal(sent.fields['h-captcha-response'], task.token);
    assert.equal(sent.fields['g-recaptcha-response'], task.token);
    assert.equal(sent.fields.callback_token, task.token);
    await page.close();
  });

  test('Turnstile in a cross-site frame: the frame is prepared too, the action is passed, cf-turnstile-response is posted', async () => {
    const page = await newPage();
    await page.goto(`${site.url}/framed`);
    const sent = await eventually(() => site.submissions.find((s) => s.page === 'turnstile-framed') ?? null, 15_000);
    const task = solver.tasks.find((t) => t.task.type === 'TurnstileTaskProxyless');
    assert.ok(sent && task);
    assert.equal(task.task.websiteKey, SITEKEYS.turnstile);
    assert.equal(task.task.websiteURL, `http://localhost:${site.port}/turnstile-framed`);
    assert.equal(task.task.action, 'login');
    assert.equal(sent.fields['cf-turnstile-response'], task.token);
    const detected = events.find((e) => e.type === 'captcha_detected' && e.data?.captcha_type === 'turnstile');
    assert.equal(detected!.data!.frame, 'child');
    assert.equal(detected!.data!.target_type, 'iframe');
    await page.close();
  });

  test('reCAPTCHA v3: found by its api.js?render= script; grecaptcha.execute then resolves with the solver token', async () => {
    const page = await newPage();
    await page.goto(`${site.url}/v3`);
    const result = await resultFor('recaptcha_v3');
    assert.equal(result!.data!.status, 'success');
    assert.equal((result!.data!.placement as { execute_patched?: boolean }).execute_patched, true);
    const task = solver.tasks.find((t) => t.task.type === 'RecaptchaV3TaskProxyless');
    assert.ok(task);
    assert.equal(task.task.websiteKey, SITEKEYS.recaptcha_v3);
    assert.equal(task.task.minScore, 0.7);
    await page.click('#send');
    const sent = await eventually(() => site.submissions.find((s) => s.page === 'v3') ?? null, 15_000);
    assert.equal(sent!.fields['g-recaptcha-response'], task.token);
    await page.close();
  });

  test('a widget added by the page later is found by the DOM watch and solved', async () => {
    const page = await newPage();
    await page.goto(`${site.url}/dynamic`);
    const sent = await eventually(() => site.submissions.find((s) => s.page === 'dynamic') ?? null, 15_000);
    const task = solver.tasks.find((t) => t.task.websiteURL === `${site.url}/dynamic`);
    assert.ok(sent && task);
    assert.equal(sent.fields['g-recaptcha-response'], task.token);
    await page.close();
  });

  test("a task the solver cannot solve ends as a failure with the solver's error code; nothing is placed", async () => {
    const page = await newPage();
    await page.goto(`${site.url}/hcaptcha?unsolvable=1`);
    const result = await eventually(() => events.find((e) => e.type === 'captcha_solve_result' && e.data?.website_path === '/hcaptcha' && e.data?.status !== 'success') ?? null, 15_000);
    assert.equal(result!.data!.status, 'failure');
    assert.equal(result!.data!.error_code, 'ERROR_CAPTCHA_UNSOLVABLE');
    assert.ok(result!.data!.task_id);
    assert.equal(await page.evaluate(() => document.querySelectorAll('[name="h-captcha-response"]').length), 0);
    await page.close();
  });

  test("widgets known only by their frames' URLs: reCAPTCHA anchor (k=), hCaptcha (sitekey= in the fragment), Turnstile (key in the path)", async () => {
    const page = await newPage();
    await page.goto(`${site.url}/frames`);
    const found = await eventually(() => {
      const d = events.filter((e) => e.type === 'captcha_detected' && e.data?.website_path === '/frames');
      return d.length >= 3 ? d : null;
    }, 15_000);
    assert.deepEqual(
      found!.map((e) => [e.data!.captcha_type, e.data!.sitekey, e.data!.signal]).sort(),
      [
        ['hcaptcha', FRAME_SITEKEYS.hcaptcha, 'iframe'],
        ['recaptcha_v2', FRAME_SITEKEYS.recaptcha_v2, 'iframe'],
        ['turnstile', FRAME_SITEKEYS.turnstile, 'iframe'],
      ],
    );
    await page.close();
  });

  test("a solve in progress holds nothing back: the widget's page has loaded, and the client's commands and navigations run meanwhile", async () => {
    const page = await newPage();
    // goto waits for the load event: the page ran while its challenge went to the solver.
    await page.goto(`${site.url}/turnstile?hold=1`);
    const started = await eventually(() => events.find((e) => e.type === 'captcha_solve_started' && String(solver.tasks.find((t) => String(t.id) === e.data?.task_id)?.task.websiteURL).includes('hold')) ?? null, 15_000);
    const id = started!.data!.challenge_id;
    const other = await newPage();
    await other.goto(`${site.url}/plain`);
    assert.equal(await other.evaluate(() => document.title), 'plain');
    assert.equal(await page.evaluate(() => document.title), 'Turnstile');
    assert.equal(events.some((e) => e.type === 'captcha_solve_result' && e.data?.challenge_id === id), false, 'the solver is still working');
    const sentBefore = site.submissions.length;
    holding = false;
    const result = await eventually(() => events.find((e) => e.type === 'captcha_solve_result' && e.data?.challenge_id === id) ?? null, 15_000);
    assert.equal(result!.data!.status, 'success');
    await eventually(() => (site.submissions.length > sentBefore ? true : null), 15_000);
    await other.close();
    await page.close();
  });
});
