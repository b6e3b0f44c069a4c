import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { eventually, sessionProcesses, startServer, startSite, tempDataDir, type TestServer } from '../helpers/server.js';

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let kernel: Kernel;
/** Servers and data dirs of the restart test, cleaned up even when it fails half-way. */
const extraServers: TestServer[] = [];
const extraDirs: string[] = [];

before(async () => {
  server = await startServer();
  site = await startSite();
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
});
after(async () => {
  await server?.stop();
  await site?.close();
  for (const s of extraServers) await s.stop();
  for (const d of extraDirs) {
    for (const p of sessionProcesses(d)) process.kill(p.pid, 'SIGKILL');
    fs.rmSync(d, { recursive: true, force: true });
  }
});

// ---- helpers ----------------------------------------------------------------------

function runtimeDir(dataDir: string, sessionId: string): string {
  return path.join(dataDir, 'runtime', sessionId);
}

function processesOf(dataDir: string, sessionId: string) {
  return sessionProcesses(dataDir).filter((p) => p.sessionId === sessionId);
}

function cmdline(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

function chromiumMainPid(dataDir: string, sessionId: string): number {
  const main = processesOf(dataDir, sessionId).find((p) => cmdline(p.pid).some((a) => a.startsWith('--remote-debugging-port')));
  assert.ok(main, `no chromium process for session ${sessionId}`);
  return main.pid;
}

type Retrieved = Awaited<ReturnType<Kernel['browsers']['retrieve']>> & { usage_status?: 'pending' | 'ready' };

/** The session as the API shows it, deleted ones included (usage_status is not in the SDK's type). */
function retrieve(id: string, client = kernel): Promise<Retrieved> {
  return client.browsers.retrieve(id, { include_deleted: true });
}

/** Waits until the session is soft-deleted and nothing of it is left on the machine. */
async function assertEndedAndCleaned(dataDir: string, id: string, boundMs: number): Promise<void> {
  const ended = await eventually(async () => (await retrieve(id)).deleted_at, boundMs, 500);
  assert.ok(ended, `session ${id} was not ended within ${boundMs} ms`);
  // end() removes processes and files before usage is marked ready.
  const ready = await eventually(async () => (await retrieve(id)).usage_status === 'ready', 10_000, 200);
  assert.ok(ready, 'usage_status never became ready');
  assert.deepEqual(processesOf(dataDir, id), [], 'processes of the ended session are still running');
  assert.equal(fs.existsSync(runtimeDir(dataDir, id)), false, 'the runtime directory of the ended session was not removed');
}

// ---- inactivity --------------------------------------------------------------------

describe('inactivity reaper', { concurrency: true }, () => {
  test('a session with timeout_seconds 10 and no connection is ended by the reaper', async () => {
    const b = await kernel.browsers.create({ headless: true, timeout_seconds: 10 });
    assert.equal(b.timeout_seconds, 10);
    assert.ok(processesOf(server.dataDir, b.session_id).length > 0);
    assert.ok(fs.existsSync(runtimeDir(server.dataDir, b.session_id)));
    // 10 s timeout + one 5 s reaper period + slack for a loaded machine.
    await assertEndedAndCleaned(server.dataDir, b.session_id, 30_000);
    const gone = await retrieve(b.session_id);
    assert.equal(typeof gone.usage?.uptime_ms, 'number');
    await assert.rejects(kernel.browsers.retrieve(b.session_id), (err: { status?: number }) => err.status === 404);
  });

  test('an open CDP connection keeps a session with timeout_seconds 10 alive; after disconnecting it is ended', async () => {
    const b = await kernel.browsers.create({ headless: true, timeout_seconds: 10 });
    const browser = await chromium.connectOverCDP(b.cdp_ws_url);
    let closed = false;
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(site.url);
      // Hold the connection, idle, past the timeout plus the reaper's tolerance (10 s + 5 s).
      await new Promise((r) => setTimeout(r, 16_000));
      const still = await retrieve(b.session_id);
      assert.equal(still.deleted_at, undefined, 'a session with an open CDP connection was ended for inactivity');
      assert.equal(browser.isConnected(), true);
      assert.equal(await page.title(), 'browserd test page');
      assert.ok(processesOf(server.dataDir, b.session_id).length > 0);
      await browser.close();
      closed = true;
      await assertEndedAndCleaned(server.dataDir, b.session_id, 30_000);
    } finally {
      if (!closed) await browser.close().catch(() => undefined);
      await kernel.browsers.deleteByID(b.session_id).catch(() => undefined);
    }
  });
});

// ---- delete ---------------------------------------------------------------------------

test('delete ends Chromium and Xvfb of a headful session and removes its files; the row stays', async () => {
  const b = await kernel.browsers.create({ headless: false, name: `lifecycle-${crypto.randomBytes(3).toString('hex')}` });
  const procs = processesOf(server.dataDir, b.session_id);
  const xvfb = procs.filter((p) => /(^|\/)Xvfb$/.test(cmdline(p.pid)[0] ?? ''));
  assert.equal(xvfb.length, 1, 'headful session without its Xvfb');
  const chromiumPid = chromiumMainPid(server.dataDir, b.session_id);
  assert.ok(fs.existsSync(runtimeDir(server.dataDir, b.session_id)));

  await kernel.browsers.deleteByID(b.session_id);

  // Delete returns once the processes are gone and the directory removed.
  assert.deepEqual(processesOf(server.dataDir, b.session_id), []);
  for (const pid of [chromiumPid, xvfb[0]!.pid]) assert.equal(fs.existsSync(`/proc/${pid}/cmdline`) && cmdline(pid).length > 0, false, `process ${pid} survived`);
  assert.equal(fs.existsSync(runtimeDir(server.dataDir, b.session_id)), false);

  const row = await retrieve(b.session_id);
  assert.equal(row.session_id, b.session_id);
  assert.ok(row.deleted_at && !Number.isNaN(Date.parse(row.deleted_at)));
  assert.ok(Number.isInteger(row.usage?.uptime_ms) && row.usage!.uptime_ms >= 0);
  assert.ok(row.usage_status === 'pending' || row.usage_status === 'ready', `usage_status ${row.usage_status}`);
  assert.equal(row.name, b.name);
  assert.equal(row.browser_live_view_url, undefined, 'a deleted session still offers a live view URL');
  // Gone from the active list and from plain GET; present when deleted ones are asked for.
  await assert.rejects(kernel.browsers.retrieve(b.session_id), (err: { status?: number }) => err.status === 404);
  const active = (await fetch(`${server.url}/browsers`, { headers: server.headers() }).then((r) => r.json())) as { session_id: string }[];
  assert.ok(!active.some((s) => s.session_id === b.session_id));
  const all = (await fetch(`${server.url}/browsers?include_deleted=true&limit=100`, { headers: server.headers() }).then((r) => r.json())) as {
    session_id: string;
    deleted_at?: string;
  }[];
  assert.ok(all.find((s) => s.session_id === b.session_id)?.deleted_at);
  // Deleting again: the session is no longer active.
  await assert.rejects(kernel.browsers.deleteByID(b.session_id), (err: { status?: number }) => err.status === 404);
});

test('a connected Playwright client is disconnected when its session is deleted', async () => {
  const b = await kernel.browsers.create({ headless: true });
  const browser = await chromium.connectOverCDP(b.cdp_ws_url);
  try {
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(site.url);
    const disconnected = new Promise<void>((r) => browser.once('disconnected', () => r()));
    await kernel.browsers.deleteByID(b.session_id);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      disconnected.then(() => 'disconnected'),
      new Promise((r) => (timer = setTimeout(() => r('still connected'), 15_000))),
    ]);
    clearTimeout(timer);
    assert.equal(outcome, 'disconnected');
    assert.equal(browser.isConnected(), false);
    assert.deepEqual(processesOf(server.dataDir, b.session_id), []);
  } finally {
    await browser.close().catch(() => undefined);
  }
});

// ---- browser crash ---------------------------------------------------------------------

test('a Chromium killed from outside gets its session ended by the reaper, and nothing is left', async () => {
  const b = await kernel.browsers.create({ headless: true, timeout_seconds: 600 });
  const pid = chromiumMainPid(server.dataDir, b.session_id);
  process.kill(pid, 'SIGKILL');
  // Not inactivity (600 s): the reaper notices the dead browser on its next pass.
  await assertEndedAndCleaned(server.dataDir, b.session_id, 20_000);
  // A connection attempt now is refused: the session is gone.
  const res = await fetch(`${b.cdp_ws_url.replace(/^ws/, 'http')}/json/version/`);
  assert.equal(res.status, 404);
});

// ---- graceful stop ----------------------------------------------------------------------

test('a graceful stop (SIGTERM) ends every session; after a restart they are listed as deleted', async () => {
  const dataDir = tempDataDir();
  extraDirs.push(dataDir);
  const apiKey = `test-${crypto.randomBytes(16).toString('hex')}`;
  const first = await startServer({ dataDir, apiKey, keepDataDir: true });
  extraServers.push(first);
  const k1 = new Kernel({ apiKey, baseURL: first.url });
  const [a, b] = await Promise.all([k1.browsers.create({ headless: true, timeout_seconds: 600 }), k1.browsers.create({ headless: false, timeout_seconds: 600 })]);
  const ids = [a.session_id, b.session_id];
  assert.equal(new Set(sessionProcesses(dataDir).map((p) => p.sessionId)).size, 2);

  await first.stop();
  assert.deepEqual(sessionProcesses(dataDir), [], 'session processes outlived the graceful stop');
  assert.deepEqual(fs.readdirSync(path.join(dataDir, 'runtime')), [], 'session directories outlived the graceful stop');

  const second = await startServer({ dataDir, apiKey, keepDataDir: true });
  extraServers.push(second);
  const k2 = new Kernel({ apiKey, baseURL: second.url });
  for (const id of ids) {
    const s = await retrieve(id, k2);
    assert.ok(s.deleted_at, `session ${id} is not deleted after the graceful stop`);
    assert.equal(s.usage_status, 'ready');
  }
  const active = (await fetch(`${second.url}/browsers`, { headers: second.headers() }).then((r) => r.json())) as unknown[];
  assert.deepEqual(active, []);
  const deleted = (await fetch(`${second.url}/browsers?status=deleted`, { headers: second.headers() }).then((r) => r.json())) as { session_id: string }[];
  assert.deepEqual(deleted.map((s) => s.session_id).sort(), [...ids].sort());
  // The restart found nothing to adopt and started nothing.
  assert.deepEqual(sessionProcesses(dataDir), []);
  await second.stop();
});
