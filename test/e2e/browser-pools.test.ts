import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * Browser pools through the unchanged Kernel SDK: create, get, list, update, delete (409
 * while leased, then force), acquire (long poll, 204), release with reuse (the next lease
 * sees no tab, cookie or storage of the previous one) and without, flush, the reaper's
 * rules for idle and leased pool browsers, validation and 404s. Pools of one or two
 * headless browsers with a fast fill rate keep this affordable on two cores.
 */

type Json = Record<string, unknown>;

// A node of three sessions: enough for every pool here, and a pool of four finds it full.
const ENV = { BROWSERD_REAPER_INTERVAL_MS: '500', BROWSERD_MAX_SESSIONS: '3' };
let server: TestServer;
let kernel: Kernel;
let site: { origin: string; close(): Promise<void> };

before(async () => {
  // The data directory is kept across the kill -9 of the restart test and removed in after().
  server = await startServer({ keepDataDir: true, env: ENV });
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  // A page that leaves a cookie and localStorage behind, and one that reads them back.
  const srv = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (req.url === '/set') {
      res.setHeader('set-cookie', 'lease=first; Path=/; Max-Age=3600');
      res.end('<title>set</title><script>localStorage.setItem("lease", "first"); sessionStorage.setItem("lease", "first")</script>');
    } else res.end('<title>read</title>');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  site = { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => srv.close(() => r())) };
});

after(async () => {
  await server?.stop();
  if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
  await site?.close();
});

async function call(method: string, p: string, body?: unknown): Promise<{ status: number; body: Json; text: string }> {
  const h: Record<string, string> = { authorization: `Bearer ${server.apiKey}` };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: (text ? JSON.parse(text) : {}) as Json, text };
}

async function waitFor<T>(what: string, fn: () => Promise<T | null | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const available = (pool: string, n: number) => waitFor(`${n} available browser(s) in ${pool}`, async () => (await kernel.browserPools.retrieve(pool)).available_count === n);

/** The status a websocket upgrade to `url` gets (101 when it opens). */
function upgradeStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

async function listBrowsers(): Promise<Json[]> {
  const r = await call('GET', '/browsers');
  assert.equal(r.status, 200, r.text);
  return r.body as unknown as Json[];
}

async function isDeleted(sessionId: string): Promise<boolean> {
  const r = await call('GET', `/browsers/${sessionId}?include_deleted=true`);
  assert.equal(r.status, 200, r.text);
  return typeof r.body.deleted_at === 'string';
}

test('validation: every broken rule of a pool configuration is named, telemetry export is refused for pools', async () => {
  const r = await call('POST', '/browser_pools', {
    size: 0,
    fill_rate_per_minute: 0,
    timeout_seconds: 5,
    start_url: 'ftp://example.test/',
    telemetry: { enabled: true, export: { otlp: { destination: { name: 'collector' } } } },
    refresh_on_profile_update: true,
    bogus: 1,
  });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.code, 'bad_request');
  const details = (r.body.details as { code: string; message: string }[]).map((d) => d.message);
  for (const field of ['size', 'fill_rate_per_minute', 'timeout_seconds', 'start_url', 'telemetry.export', 'refresh_on_profile_update', 'bogus']) {
    assert.ok(details.some((m) => m.startsWith(`${field}:`)), `${field} named in ${JSON.stringify(details)}`);
  }
  // The SDK sees the same 400.
  await assert.rejects(
    kernel.browserPools.create({ size: 1, headless: true, telemetry: { enabled: true, export: { otlp: { destination: { name: 'collector' } } } } } as never),
    (e: unknown) => e instanceof Kernel.BadRequestError && /telemetry\.export/.test(e.message),
  );
  // Missing size: named, and nothing was created.
  const missing = await call('POST', '/browser_pools', { headless: true });
  assert.equal(missing.status, 400);
  assert.match(JSON.stringify(missing.body.details), /size: is required/);
  assert.equal((await kernel.browserPools.list()).getPaginatedItems().length, 0);
});

test('404s: unknown pool for get, update, acquire, release, flush, delete', async () => {
  const isNotFound = (e: unknown) => e instanceof Kernel.NotFoundError;
  await assert.rejects(kernel.browserPools.retrieve('no-such-pool'), isNotFound);
  await assert.rejects(kernel.browserPools.update('no-such-pool', { size: 2 }), isNotFound);
  await assert.rejects(kernel.browserPools.acquire('no-such-pool', { acquire_timeout_seconds: 0 }), isNotFound);
  await assert.rejects(kernel.browserPools.release('no-such-pool', { session_id: 'x' }), isNotFound);
  await assert.rejects(kernel.browserPools.flush('no-such-pool'), isNotFound);
  await assert.rejects(kernel.browserPools.delete('no-such-pool'), isNotFound);
});

test('a pool: create, get, list; acquire (pool ref, CDP works), 204 when all are leased, release with reuse leaves a clean browser', async () => {
  const pool = await kernel.browserPools.create({ name: 'pool-a', size: 1, headless: true, fill_rate_per_minute: 600, timeout_seconds: 10, viewport: { width: 1024, height: 768 } });
  assert.equal(pool.name, 'pool-a');
  assert.equal(pool.browser_pool_config.size, 1);
  assert.equal(pool.browser_pool_config.fill_rate_per_minute, 600);
  assert.equal(pool.browser_pool_config.timeout_seconds, 10);
  assert.equal(pool.browser_pool_config.headless, true);
  assert.deepEqual(pool.extension_ids, []);
  await available('pool-a', 1);
  assert.equal((await kernel.browserPools.retrieve(pool.id)).id, pool.id);
  const listed = (await kernel.browserPools.list({ name: 'pool-a' })).getPaginatedItems();
  assert.deepEqual(listed.map((p) => p.id), [pool.id]);
  // An idle pool browser is the pool's, not a session of the project.
  assert.equal((await listBrowsers()).length, 0);

  const first = await kernel.browserPools.acquire('pool-a', { name: 'lease-1', tags: { run: 'one' } });
  assert.ok(first);
  assert.deepEqual(first.pool, { id: pool.id, name: 'pool-a' });
  assert.equal(first.name, 'lease-1');
  assert.deepEqual(first.tags, { run: 'one' });
  assert.equal(first.timeout_seconds, 10);
  const seen = await kernel.browsers.retrieve(first.session_id);
  assert.deepEqual(seen.pool, { id: pool.id, name: 'pool-a' });
  assert.deepEqual((await listBrowsers()).map((b) => b.session_id), [first.session_id]);
  const counts = await kernel.browserPools.retrieve('pool-a');
  assert.equal(counts.acquired_count, 1);
  assert.equal(counts.available_count, 0);

  const b1 = await chromium.connectOverCDP(first.cdp_ws_url);
  const ctx1 = b1.contexts()[0]!;
  const p1 = await ctx1.newPage();
  await p1.goto(`${site.origin}/set`);
  const p2 = await ctx1.newPage();
  await p2.goto(`${site.origin}/read`);
  assert.equal(await p2.evaluate(() => localStorage.getItem('lease')), 'first');
  assert.equal((await ctx1.cookies()).length, 1);

  // All leased: the long poll ends with 204 (the SDK's null), and the pool cannot be deleted.
  assert.equal(await kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 1 }), null);
  await assert.rejects(kernel.browserPools.delete('pool-a'), (e: unknown) => e instanceof Kernel.ConflictError);

  // Two callers wait; the released browser goes to the first, the second's wait ends with 204.
  const waitingFirst = kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 30 });
  await new Promise((r) => setTimeout(r, 500)); // the first request is queued before the second is sent
  const waitingSecond = kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 5 });
  await new Promise((r) => setTimeout(r, 500));
  const disconnected = new Promise<void>((r) => b1.once('disconnected', () => r()));
  await kernel.browserPools.release('pool-a', { session_id: first.session_id });
  await disconnected; // the lessee's connection is closed on release
  const second = await waitingFirst;
  assert.equal(await waitingSecond, null);
  assert.ok(second);
  // The first lessee's URL does not reach the browser during the next lease; the new one does.
  assert.equal(await upgradeStatus(first.cdp_ws_url), 401);
  assert.equal(await upgradeStatus(second.cdp_ws_url), 101);
  assert.equal(second.session_id, first.session_id, 'reuse hands out the same browser');
  assert.equal(second.name, undefined, 'the lease name is cleared');
  assert.equal(second.tags, undefined, 'the lease tags are cleared');
  const b2 = await chromium.connectOverCDP(second.cdp_ws_url);
  try {
    const ctx2 = b2.contexts()[0]!;
    const pages = ctx2.pages();
    assert.equal(pages.length, 1, `one tab left: ${pages.map((p) => p.url()).join(', ')}`);
    assert.equal(pages[0]!.url(), 'about:blank');
    assert.deepEqual(await ctx2.cookies(), []);
    await pages[0]!.goto(`${site.origin}/read`);
    assert.equal(await pages[0]!.evaluate(() => localStorage.getItem('lease')), null);
    assert.equal(await pages[0]!.evaluate(() => document.cookie), '');
  } finally {
    await b2.close();
  }

  // Released without reuse: that browser ends and a new one is filled.
  await kernel.browserPools.release('pool-a', { session_id: second.session_id, reuse: false });
  assert.ok(await isDeleted(second.session_id));
  await available('pool-a', 1);
  const third = await kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 30 });
  assert.ok(third);
  assert.notEqual(third.session_id, second.session_id);
  await kernel.browserPools.release('pool-a', { session_id: third.session_id });

  // An idle pool browser outlives the pool's timeout (10 s, reaper every 0.5 s)...
  await new Promise((r) => setTimeout(r, 11_000));
  const fourth = await kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 0 });
  assert.ok(fourth);
  assert.equal(fourth.session_id, third.session_id, 'the idle browser was not reaped');
  // ...a leased one without a client is ended after it, and the pool replaces it.
  await waitFor('the leased browser to time out', () => isDeleted(fourth.session_id), 30_000);
  await available('pool-a', 1);
});

test('flush ends idle browsers and the pool refills; update replaces the configuration; delete with force ends leased browsers', async () => {
  const lease = await kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 30 });
  assert.ok(lease);
  await kernel.browserPools.release('pool-a', { session_id: lease.session_id });
  await available('pool-a', 1);
  await kernel.browserPools.flush('pool-a');
  assert.ok(await isDeleted(lease.session_id), 'the idle browser was ended by flush');
  const refilled = await kernel.browserPools.acquire('pool-a', { acquire_timeout_seconds: 30 });
  assert.ok(refilled);
  assert.notEqual(refilled.session_id, lease.session_id);
  await kernel.browserPools.release('pool-a', { session_id: refilled.session_id });
  // Releasing it again: it is idle now. A session of no pool is unknown to the pool.
  await assert.rejects(kernel.browserPools.release('pool-a', { session_id: refilled.session_id }), (e: unknown) => e instanceof Kernel.ConflictError);
  await assert.rejects(kernel.browserPools.release('pool-a', { session_id: 'not-a-pool-browser' }), (e: unknown) => e instanceof Kernel.NotFoundError);

  const updated = await kernel.browserPools.update('pool-a', { name: 'pool-b', size: 2, timeout_seconds: 120 });
  assert.equal(updated.name, 'pool-b');
  assert.equal(updated.browser_pool_config.size, 2);
  assert.equal(updated.browser_pool_config.timeout_seconds, 120);
  assert.equal(updated.browser_pool_config.headless, true);
  await assert.rejects(kernel.browserPools.retrieve('pool-a'), (e: unknown) => e instanceof Kernel.NotFoundError);
  await available('pool-b', 2);
  // Updates are validated like creation.
  await assert.rejects(kernel.browserPools.update('pool-b', { telemetry: { export: {} } } as never), (e: unknown) => e instanceof Kernel.BadRequestError);

  // A lease's start_url and telemetry override; the telemetry goes back to the pool's (none) on release.
  const withUrl = await kernel.browserPools.acquire('pool-b', { start_url: `${site.origin}/read`, telemetry: { enabled: true } });
  assert.ok(withUrl);
  assert.equal(withUrl.telemetry?.browser?.control?.enabled, true);
  const b = await chromium.connectOverCDP(withUrl.cdp_ws_url);
  try {
    await waitFor('the first tab at start_url', async () => b.contexts()[0]!.pages().some((p) => p.url() === `${site.origin}/read`), 15_000);
  } finally {
    await b.close();
  }
  await kernel.browserPools.release('pool-b', { session_id: withUrl.session_id });
  const both = [await kernel.browserPools.acquire('pool-b', {}), await kernel.browserPools.acquire('pool-b', {})];
  const again = both.find((x) => x?.session_id === withUrl.session_id);
  assert.ok(again, 'the released browser is leased again');
  assert.equal(again.telemetry, null);
  await kernel.browserPools.release('pool-b', { session_id: both.find((x) => x !== again)!.session_id });

  const leased = again;
  await assert.rejects(kernel.browserPools.delete('pool-b'), (e: unknown) => e instanceof Kernel.ConflictError);
  await kernel.browserPools.delete('pool-b', { force: true });
  assert.ok(await isDeleted(leased.session_id), 'the leased browser was ended');
  await assert.rejects(kernel.browserPools.retrieve('pool-b'), (e: unknown) => e instanceof Kernel.NotFoundError);
  assert.equal((await listBrowsers()).length, 0);
  assert.equal((await kernel.browserPools.list()).getPaginatedItems().length, 0);
});

test('a pool larger than the node fills what fits and says why it is short; pool browsers count against capacity', async () => {
  await kernel.browserPools.create({ name: 'pool-full', size: 4, headless: true, fill_rate_per_minute: 1200 });
  const short = await waitFor('the pool to report why it is short', async () => {
    const r = await call('GET', '/browser_pools/pool-full');
    return r.body.available_count === 3 && typeof r.body.fill_error === 'string' ? r.body : null;
  });
  assert.match(short.fill_error as string, /capacity of 3 sessions/);
  const full = await call('POST', '/browsers', { headless: true });
  assert.equal(full.status, 529, full.text);
  await kernel.browserPools.delete('pool-full');
  assert.equal((await listBrowsers()).length, 0);
});

test('restart after kill -9: the pool and its idle browser are re-adopted, a leased one stays leased', async () => {
  const pool = await kernel.browserPools.create({ name: 'pool-r', size: 2, headless: true, fill_rate_per_minute: 1200, timeout_seconds: 60 });
  await available('pool-r', 2);
  const leased = await kernel.browserPools.acquire('pool-r', { name: 'kept' });
  assert.ok(leased);
  await server.kill9();
  server = await startServer({ dataDir: server.dataDir, apiKey: server.apiKey, env: ENV });
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  const back = await kernel.browserPools.retrieve('pool-r');
  assert.equal(back.id, pool.id);
  assert.equal(back.acquired_count, 1);
  assert.equal(back.available_count, 1);
  const seen = await kernel.browsers.retrieve(leased.session_id);
  assert.deepEqual(seen.pool, { id: pool.id, name: 'pool-r' });
  assert.equal(seen.name, 'kept');
  await kernel.browserPools.release('pool-r', { session_id: leased.session_id });
  await available('pool-r', 2);
  await kernel.browserPools.delete('pool-r');
  assert.equal((await kernel.browserPools.list()).getPaginatedItems().length, 0);
});
