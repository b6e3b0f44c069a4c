import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { chromium, type Browser } from 'playwright-core';
import { chromiumArgs } from '../../src/runtime/chromium-args.js';
import { terminateGroup } from '../../src/runtime/processes.js';
import { TargetAgent, type AttachedTarget } from '../../src/runtime/target-agent.js';
import { eventually } from '../helpers/server.js';

/** A page whose first script records what the agent prepared, with a cross-site (out-of-process) frame. */
function site(): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((req, res) => {
    const port = (server.address() as AddressInfo).port;
    res.setHeader('content-type', 'text/html');
    if (req.url === '/page') res.end(`<script>window.__seen = window.__prepared</script><iframe src="http://localhost:${port}/frame"></iframe>`);
    else if (req.url === '/frame') res.end('<script>window.__seen = window.__prepared</script>');
    else res.end('<script>window.__seen = window.__prepared</script>popup');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as AddressInfo).port })));
}

describe('TargetAgent: every target is prepared before it runs', () => {
  let dir: string;
  let child: ChildProcess;
  let agent: TargetAgent;
  let browser: Browser;
  let web: { server: http.Server; port: number };
  const seen: { type: string; late: boolean }[] = [];

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'target-agent-'));
    web = await site();
    const args = chromiumArgs({ userDataDir: path.join(dir, 'profile'), headless: true, kioskMode: false, width: 800, height: 600, startUrl: null });
    child = spawn('/usr/lib/chromium/chromium', [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), ...args], { detached: true, stdio: 'ignore' });
    const portFile = path.join(dir, 'profile', 'DevToolsActivePort');
    const [port, wsPath] = (await eventually(() => (fs.existsSync(portFile) ? fs.readFileSync(portFile, 'utf8').trim().split('\n') : null), 15_000)) ?? [];
    const endpoint = { port: Number(port), wsPath: wsPath! };
    agent = await TargetAgent.connect(
      endpoint,
      [
        {
          name: 'mark',
          async attached(t: AttachedTarget, late: boolean) {
            seen.push({ type: t.type, late });
            // Both needed: without Page.enable the script is not run in a new tab, without runImmediately not in a popup.
            if (t.type === 'page' || t.type === 'iframe') await t.send('Page.enable');
            if (t.type === 'page' || t.type === 'iframe') await t.send('Page.addScriptToEvaluateOnNewDocument', { source: `window.__prepared = ${JSON.stringify(t.type)}`, runImmediately: true });
          },
        },
      ],
      pino({ level: 'silent' }),
    );
    browser = await chromium.connectOverCDP(`http://127.0.0.1:${endpoint.port}`);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    agent?.close();
    if (child?.pid) await terminateGroup(child.pid, 2000);
    web?.server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('the tab that existed before the agent is attached late (it was already running)', () => {
    assert.deepEqual(seen[0], { type: 'page', late: true });
  });

  test("a tab the client opens, its out-of-process frame and a popup run the agent's preparation before their own first script", async () => {
    const ctx = browser.contexts()[0]!;
    const page = await ctx.newPage();
    await page.goto(`http://127.0.0.1:${web.port}/page`);
    assert.equal(await page.evaluate(() => (window as unknown as { __seen: unknown }).__seen), 'page');
    const frame = await eventually(() => page.frames().find((f) => f.url().includes('/frame')) ?? null);
    assert.ok(frame, 'the page has its frame');
    await frame.waitForLoadState();
    assert.equal(await frame.evaluate(() => (window as unknown as { __seen: unknown }).__seen), 'iframe', 'frame');
    assert.ok(seen.some((s) => s.type === 'iframe' && !s.late), 'the cross-site frame was held for the agent');
    const [popup] = await Promise.all([ctx.waitForEvent('page'), page.evaluate((u) => void window.open(u), `http://127.0.0.1:${web.port}/popup`)]);
    await popup.waitForLoadState();
    assert.equal(await popup.evaluate(() => (window as unknown as { __seen: unknown }).__seen), 'page', 'popup');
  });

  test('a hook added later sees the targets already attached, and is told when it is removed', async () => {
    const late: string[] = [];
    let closed = false;
    await agent.add({ name: 'late', attached: (t, isLate) => void late.push(`${t.type}:${isLate}`), closed: () => void (closed = true) });
    assert.ok(late.length >= 2 && late.every((l) => l.endsWith(':true')), late.join(','));
    agent.remove('late');
    assert.equal(closed, true);
  });
});
