import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { eventually, sessionProcesses, startServer, startSite, tempDataDir, type TestServer } from '../helpers/server.js';

let site: Awaited<ReturnType<typeof startSite>>;
const servers: TestServer[] = [];
const dataDirs: string[] = [];
const strays: ChildProcess[] = [];

before(async () => {
  site = await startSite();
});
after(async () => {
  // Only the last server of a data dir is alive; its stop ends the sessions it runs.
  for (const s of servers) await s.stop();
  for (const c of strays) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dataDirs) {
    // Orphans of a test that failed between a kill -9 and the restart.
    for (const p of sessionProcesses(d)) process.kill(p.pid, 'SIGKILL');
    fs.rmSync(d, { recursive: true, force: true });
  }
  await site?.close();
});

// ---- helpers ----------------------------------------------------------------------

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** A node that can be killed and started again on the same data dir, API key and port (so the same URLs). */
function node() {
  const dataDir = tempDataDir();
  dataDirs.push(dataDir);
  const apiKey = `test-${crypto.randomBytes(16).toString('hex')}`;
  let port = 0;
  return {
    dataDir,
    apiKey,
    async start(): Promise<{ server: TestServer; kernel: Kernel }> {
      port ||= await freePort();
      const server = await startServer({ dataDir, apiKey, keepDataDir: true, env: { BROWSERD_PORT: String(port) } });
      servers.push(server);
      return { server, kernel: new Kernel({ apiKey, baseURL: server.url }) };
    },
  };
}

function cmdline(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

function chromiumMainPid(dataDir: string, sessionId: string): number {
  const main = sessionProcesses(dataDir).find((p) => p.sessionId === sessionId && cmdline(p.pid).some((a) => a.startsWith('--remote-debugging-port')));
  assert.ok(main, `no chromium process for session ${sessionId}`);
  return main.pid;
}

type Retrieved = Awaited<ReturnType<Kernel['browsers']['retrieve']>> & { usage_status?: 'pending' | 'ready' };

// ---- tests ----------------------------------------------------------------------------

test('after kill -9 the restarted node re-adopts a live session (same cdp_ws_url), ends a dead one and removes strays', async () => {
  const n = node();
  const { server: first, kernel: k1 } = await n.start();
  const [keep, dead] = await Promise.all([
    k1.browsers.create({ headless: true, timeout_seconds: 300 }),
    k1.browsers.create({ headless: true, timeout_seconds: 300 }),
  ]);
  const marker = `${site.url}?before-restart=1`;
  {
    const b = await chromium.connectOverCDP(keep.cdp_ws_url);
    const page = await b.contexts()[0]!.newPage();
    await page.goto(marker);
    assert.equal(await page.title(), 'browserd test page');
    await b.close();
  }
  const keepPid = chromiumMainPid(n.dataDir, keep.session_id);

  await first.kill9();
  // The browsers outlive the server.
  assert.ok(sessionProcesses(n.dataDir).some((p) => p.sessionId === keep.session_id));
  assert.ok(sessionProcesses(n.dataDir).some((p) => p.sessionId === dead.session_id));

  // While the server is down: one browser dies, and a stray appears that the store never heard of.
  process.kill(chromiumMainPid(n.dataDir, dead.session_id), 'SIGKILL');
  const runtimeDir = path.join(n.dataDir, 'runtime');
  fs.mkdirSync(path.join(runtimeDir, 'zzzzstray'));
  const stray = spawn('sleep', ['300'], {
    detached: true,
    stdio: 'ignore',
    env: { PATH: process.env.PATH, BROWSERD_RUNTIME_DIR: runtimeDir, BROWSERD_SESSION_ID: 'zzzzstray' },
  });
  strays.push(stray);
  const strayExited = new Promise<void>((r) => stray.once('exit', () => r()));
  assert.ok(sessionProcesses(n.dataDir).some((p) => p.sessionId === 'zzzzstray'));

  const { server: second, kernel: k2 } = await n.start();
  assert.equal(second.url, first.url, 'the restarted node listens elsewhere');

  // The surviving session is active again, with its very processes, and reachable through its old URL.
  const kept = (await k2.browsers.retrieve(keep.session_id, { include_deleted: true })) as Retrieved;
  assert.equal(kept.deleted_at, undefined, 'the surviving session was ended by the restart');
  const listed = (await fetch(`${second.url}/browsers`, { headers: second.headers() }).then((r) => r.json())) as { session_id: string }[];
  assert.deepEqual(
    listed.map((s) => s.session_id),
    [keep.session_id],
  );
  const browser = await chromium.connectOverCDP(keep.cdp_ws_url);
  try {
    const before = await eventually(() => browser.contexts()[0]!.pages().find((p) => p.url() === marker), 10_000);
    assert.ok(before, 'the tab opened before the restart is gone');
    assert.equal(await before.title(), 'browserd test page');
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(site.url);
    assert.equal(await page.title(), 'browserd test page');
    await page.close();
  } finally {
    await browser.close();
  }
  assert.equal(chromiumMainPid(n.dataDir, keep.session_id), keepPid, "the surviving session's Chromium was replaced");

  // The dead one is terminated, with usage final.
  const ended = (await k2.browsers.retrieve(dead.session_id, { include_deleted: true })) as Retrieved;
  assert.ok(ended.deleted_at, 'the session whose browser died is not marked deleted');
  assert.equal(ended.usage_status, 'ready');
  await assert.rejects(k2.browsers.retrieve(dead.session_id), (err: { status?: number }) => err.status === 404);

  // Nothing runs and nothing lies around that the store does not know about.
  const left = sessionProcesses(n.dataDir);
  assert.ok(left.length > 0);
  assert.deepEqual([...new Set(left.map((p) => p.sessionId))], [keep.session_id], `unknown processes: ${JSON.stringify(left)}`);
  assert.deepEqual(fs.readdirSync(runtimeDir), [keep.session_id]);
  const gone = await Promise.race([strayExited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000).unref())]);
  assert.ok(gone, 'the stray process survived the restart');
});

test('a write acknowledged to a client survives kill -9 of the server', async () => {
  const n = node();
  const { server: first, kernel: k1 } = await n.start();
  const name = `durable-${crypto.randomBytes(4).toString('hex')}`;
  const created = await k1.browsers.create({ headless: true, name, timeout_seconds: 300 });
  assert.equal(created.name, name);
  const tags = { team: 'qa', 'env:stage': 'restart test' };
  const patched = await fetch(`${first.url}/browsers/${created.session_id}`, {
    method: 'PATCH',
    headers: first.headers({ 'content-type': 'application/json' }),
    body: JSON.stringify({ tags }),
  });
  assert.equal(patched.status, 200);
  assert.deepEqual(((await patched.json()) as { tags?: unknown }).tags, tags);
  // No pause: the acknowledgement must mean the write is already durable.
  await first.kill9();

  const { server: second } = await n.start();
  const list = (await fetch(`${second.url}/browsers`, { headers: second.headers() }).then((r) => r.json())) as { session_id: string; name?: string; tags?: unknown }[];
  const s = list.find((x) => x.session_id === created.session_id);
  assert.ok(s, 'the session is not listed after kill -9 and restart');
  assert.equal(s.name, name);
  assert.deepEqual(s.tags, tags);
  // The tag index was written in the same transaction, and the name resolves.
  const byTag = (await fetch(`${second.url}/browsers?tags[team]=qa`, { headers: second.headers() }).then((r) => r.json())) as { session_id: string }[];
  assert.deepEqual(
    byTag.map((x) => x.session_id),
    [created.session_id],
  );
  const byName = await fetch(`${second.url}/browsers/${name}`, { headers: second.headers() });
  assert.equal(byName.status, 200);
  assert.equal(((await byName.json()) as { session_id: string }).session_id, created.session_id);
});
