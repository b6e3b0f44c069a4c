import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { startHttpProxy } from '../helpers/proxies.js';
import { eventually, sessionProcesses, startServer, startSite, tempDataDir, type TestServer } from '../helpers/server.js';

/**
 * Warm start (docs/warm-start.md) on a real server: eligible requests get a browser that
 * was launched before they arrived, with their settings applied; others launch fresh; the
 * pool refills, never shows up as sessions, and leaves nothing behind at shutdown or after
 * a kill -9 and restart.
 */

let site: Awaited<ReturnType<typeof startSite>>;
const servers: TestServer[] = [];
const dataDirs: string[] = [];

before(async () => {
  site = await startSite('<title>warm start page</title><h1>warm</h1>');
});
after(async () => {
  for (const s of servers) await s.stop();
  for (const d of dataDirs) {
    for (const p of sessionProcesses(d)) process.kill(p.pid, 'SIGKILL');
    fs.rmSync(d, { recursive: true, force: true });
  }
  await site?.close();
});

async function start(env: Record<string, string>, dataDir = tempDataDir()): Promise<{ server: TestServer; kernel: Kernel }> {
  if (!dataDirs.includes(dataDir)) dataDirs.push(dataDir);
  const server = await startServer({ dataDir, keepDataDir: true, env: { BROWSERD_WARM_REFILL_GAP_MS: '300', ...env } });
  servers.push(server);
  return { server, kernel: new Kernel({ apiKey: server.apiKey, baseURL: server.url }) };
}

async function warmCounts(server: TestServer): Promise<{ headless: number; headful: number }> {
  const r = await fetch(`${server.url}/readyz`);
  assert.equal(r.status, 200);
  const body = (await r.json()) as { warm?: { headless: number; headful: number } };
  assert.ok(body.warm, 'readyz shows the warm counts');
  return body.warm;
}

async function waitForWarm(server: TestServer, want: { headless: number; headful: number }): Promise<void> {
  const got = await eventually(async () => {
    const c = await warmCounts(server);
    return c.headless === want.headless && c.headful === want.headful ? c : null;
  }, 60_000, 200);
  assert.deepEqual(got, want, `the pool reached ${JSON.stringify(want)}`);
}

/** GET /browsers: the ids of the active sessions. */
async function listed(server: TestServer): Promise<string[]> {
  const r = await fetch(`${server.url}/browsers?limit=100`, { headers: server.headers() });
  assert.equal(r.status, 200);
  return ((await r.json()) as { session_id: string }[]).map((b) => b.session_id);
}

/** Session ids marked on this server's browser processes that the API does not list: the warm browsers. */
async function warmIds(server: TestServer): Promise<Set<string>> {
  const listedIds = new Set(await listed(server));
  return new Set(sessionProcesses(server.dataDir).map((p) => p.sessionId).filter((id) => id && !listedIds.has(id)));
}

function chromiumPid(dataDir: string, sessionId: string): number {
  const main = sessionProcesses(dataDir).find((p) => p.sessionId === sessionId && p.cmd.includes('--remote-debugging-port'));
  assert.ok(main, `no chromium process for ${sessionId}`);
  return main.pid;
}

/** The memory limit of the cgroup a process runs in (cgroup v1 or v2), or null where there is none. */
function memoryLimitOf(pid: number): number | null {
  const lines = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => /^\d+:memory:/.test(l));
  const file = v1 ? `/sys/fs/cgroup/memory${v1.split(':')[2]}/memory.limit_in_bytes` : `/sys/fs/cgroup${lines.find((l) => l.startsWith('0::'))?.slice(3) ?? '/'}/memory.max`;
  try {
    return Number(fs.readFileSync(file, 'utf8').trim());
  } catch {
    return null;
  }
}

const GiB = 1024 ** 3;

test('eligible requests get warm browsers with their settings applied; ineligible ones launch fresh; the pool refills; nothing is left at shutdown', async () => {
  const { server, kernel } = await start({ BROWSERD_WARM_HEADLESS: '1', BROWSERD_WARM_HEADFUL: '1' });
  await waitForWarm(server, { headless: 1, headful: 1 });
  // Warm browsers are not sessions.
  assert.deepEqual(await listed(server), []);
  const before = await warmIds(server);
  assert.equal(before.size, 2, `two warm browsers run: ${[...before].join(', ')}`);
  const pidsBefore = new Map([...before].map((id) => [id, chromiumPid(server.dataDir, id)]));

  // Headless: name, tags, timeout, viewport and start_url applied to the warm browser.
  const a = await kernel.browsers.create({ headless: true, name: 'warm-a', tags: { team: 'warm' }, timeout_seconds: 120, start_url: site.url, viewport: { width: 1280, height: 800 } });
  assert.ok(before.has(a.session_id), `the session is one of the warm browsers (${a.session_id})`);
  assert.equal(chromiumPid(server.dataDir, a.session_id), pidsBefore.get(a.session_id), 'its Chromium was running before the request');
  assert.equal(a.headless, true);
  assert.equal(a.name, 'warm-a');
  assert.deepEqual(a.tags, { team: 'warm' });
  assert.equal(a.timeout_seconds, 120);
  assert.deepEqual(a.viewport, { width: 1280, height: 800, refresh_rate: 60 });
  assert.equal((a as { start_url?: string }).start_url, site.url);
  assert.equal((a as { browser_live_view_url?: string }).browser_live_view_url, undefined);
  assert.deepEqual(await listed(server), [a.session_id], 'only the session is listed, never a warm browser');
  {
    const browser = await chromium.connectOverCDP(a.cdp_ws_url);
    try {
      const ctx = browser.contexts()[0]!;
      const page = await eventually(() => ctx.pages().find((p) => p.url() === site.url), 20_000);
      assert.ok(page, `a tab shows start_url (tabs: ${ctx.pages().map((p) => p.url()).join(', ')})`);
      const dims = await page.evaluate(() => [screen.width, screen.height, innerWidth, outerWidth, outerHeight]);
      assert.deepEqual(dims, [1280, 800, 1280, 1280, 800], 'screen and window have the requested viewport');
      assert.equal(await page.title(), 'warm start page');
    } finally {
      await browser.close();
    }
  }

  // Headful, 16GiB: the live view is there, the cgroup limit is raised, start_url opened.
  const b = (await kernel.browsers.create({ memory: '16GiB', start_url: site.url } as Kernel.BrowserCreateParams)) as Kernel.BrowserCreateResponse & { memory?: string };
  assert.ok(before.has(b.session_id), `the headful session is the warm headful browser (${b.session_id})`);
  assert.equal(b.headless, false);
  assert.equal(b.memory, '16GiB');
  assert.match(String((b as { browser_live_view_url?: string }).browser_live_view_url), /\/browser\/live\?jwt=/);
  const limit = memoryLimitOf(chromiumPid(server.dataDir, b.session_id));
  if (limit !== null && limit < 2 ** 60) assert.equal(limit, 16 * GiB, 'the memory limit follows the request');
  {
    const browser = await chromium.connectOverCDP(b.cdp_ws_url);
    try {
      const ctx = browser.contexts()[0]!;
      const page = await eventually(() => ctx.pages().find((p) => p.url() === site.url), 20_000);
      assert.ok(page, 'the headful tab shows start_url');
      assert.deepEqual(await page.evaluate(() => [screen.width, screen.height]), [1920, 1080]);
    } finally {
      await browser.close();
    }
  }

  // The pool refills both kinds with new browsers.
  await waitForWarm(server, { headless: 1, headful: 1 });
  const refilled = await warmIds(server);
  assert.equal(refilled.size, 2);
  for (const id of refilled) assert.ok(!before.has(id), 'refilled browsers are new ones');

  // A proxy: the warm browser's own bridge is switched to it at hand-out.
  const proxy = await startHttpProxy('warmproxy');
  try {
    const pr = await fetch(`${server.url}/proxies`, {
      method: 'POST',
      headers: server.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify({ type: 'custom', name: 'warmproxy', protocol: 'http', config: { host: '127.0.0.1', port: proxy.port } }),
    });
    assert.equal(pr.status, 200, await pr.clone().text());
    const proxyId = ((await pr.json()) as { id: string }).id;
    const c = await kernel.browsers.create({ headless: true, proxy_id: proxyId });
    assert.ok(refilled.has(c.session_id), 'a request with a proxy takes a warm browser');
    const browser = await chromium.connectOverCDP(c.cdp_ws_url);
    try {
      const page = browser.contexts()[0]!.pages()[0] ?? (await browser.contexts()[0]!.newPage());
      await page.goto('http://example.test/');
      assert.equal(await page.title(), 'proxied by warmproxy');
      assert.ok(proxy.hosts().includes('example.test'), 'the traffic went through the selected proxy');
    } finally {
      await browser.close();
    }
    await kernel.browsers.deleteByID(c.session_id);
  } finally {
    await proxy.close();
  }
  await waitForWarm(server, { headless: 1, headful: 1 });
  const waiting = await warmIds(server);
  assert.equal(waiting.size, 2);

  // Ineligible: headful kiosk and a headless chrome_policy launch fresh; the warm browsers stay.
  const kiosk = await kernel.browsers.create({ kiosk_mode: true });
  assert.ok(!waiting.has(kiosk.session_id), 'kiosk_mode launches fresh');
  const policy = await kernel.browsers.create({ headless: true, chrome_policy: { BookmarkBarEnabled: true } });
  assert.ok(!waiting.has(policy.session_id), 'chrome_policy launches fresh');
  assert.deepEqual(await warmIds(server), waiting, 'the warm browsers are still waiting');
  assert.deepEqual(await warmCounts(server), { headless: 1, headful: 1 });
  assert.equal((await listed(server)).length, 4);

  // Shutdown ends sessions and warm browsers alike, by PID, and says so.
  await kernel.browsers.deleteByID(kiosk.session_id);
  await server.stop();
  assert.deepEqual(sessionProcesses(server.dataDir), [], 'no browser process is left');
  for (const id of waiting) {
    assert.match(server.output(), new RegExp(`"warm_id":"${id}"[^\\n]*"reason":"server_shutdown"[^\\n]*warm browser ended`), `warm browser ${id} was ended at shutdown`);
    assert.ok(!fs.existsSync(`${server.dataDir}/runtime/${id}`), 'its files are removed');
  }
});

test('warm browsers take no capacity slots, the pool stops filling at capacity and refills when a slot frees; a restart after kill -9 sweeps warm leftovers', async () => {
  const dataDir = tempDataDir();
  const { server, kernel } = await start({ BROWSERD_MAX_SESSIONS: '2', BROWSERD_WARM_HEADLESS: '2', BROWSERD_WARM_HEADFUL: '0' }, dataDir);
  await waitForWarm(server, { headless: 2, headful: 0 });
  const before = await warmIds(server);
  assert.equal(before.size, 2);
  // Two warm browsers on a node of capacity 2 still leave both slots to sessions.
  const s1 = await kernel.browsers.create({ headless: true });
  const s2 = await kernel.browsers.create({ headless: true });
  assert.ok(before.has(s1.session_id) && before.has(s2.session_id), 'both sessions were warm browsers');
  await assert.rejects(kernel.browsers.create({ headless: true }), (err: { status?: number }) => err.status === 529);
  // At capacity the pool holds no browser: sessions plus warm browsers never exceed the capacity.
  assert.deepEqual(await warmCounts(server), { headless: 0, headful: 0 });
  assert.equal((await warmIds(server)).size, 0);
  // One slot freed: the pool fills it (1 session + 1 warm = capacity).
  await kernel.browsers.deleteByID(s1.session_id);
  await waitForWarm(server, { headless: 1, headful: 0 });
  const leftover = await warmIds(server);
  assert.equal(leftover.size, 1);

  // kill -9: the warm browser outlives the server; the next start sweeps it (it is in no store).
  await server.kill9();
  const [leftId] = [...leftover];
  assert.ok(sessionProcesses(dataDir).some((p) => p.sessionId === leftId), 'the warm browser survived the kill');
  const { server: second, kernel: k2 } = await start({ BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' }, dataDir);
  assert.ok(!sessionProcesses(dataDir).some((p) => p.sessionId === leftId), 'the restart swept the warm leftover');
  assert.ok(!fs.existsSync(`${dataDir}/runtime/${leftId}`), 'and its files');
  // The session that was running is re-adopted, the warm browser never became one.
  assert.deepEqual(await listed(second), [s2.session_id]);
  await k2.browsers.deleteByID(s2.session_id);
  await second.stop();
  assert.deepEqual(sessionProcesses(dataDir), []);
});
