import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';
import { startHttpProxy, type TestProxy } from '../helpers/proxies.js';

/**
 * network.private_hosts in real sessions: private hosts are reached directly, everything
 * else through the session's egress (here a loopback test proxy that logs what reached it).
 *
 * No test traffic may go to a private address (this machine has no network there), so live
 * bypasses use host names Chromium resolves to loopback by itself (*.localhost); IP and
 * CIDR entries are shown by Chromium's own bypass list and by requests that must reach the
 * proxy (which answers them itself). Chromium never resolves a name it sends to the proxy,
 * so a name that an intranet DNS would map into 10.0.0.0/8 reaches the proxy by name.
 */

type Json = Record<string, unknown>;

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let proxy: TestProxy;
let proxyId: string;
let sitePort: number;

before(async () => {
  server = await startServer();
  site = await startSite();
  sitePort = Number(new URL(site.url).port);
  proxy = await startHttpProxy('egress');
  const r = await call('POST', '/proxies', { type: 'custom', name: 'egress', config: { host: '127.0.0.1', port: proxy.port } });
  proxyId = r.body.id as string;
});
after(async () => {
  await server?.stop();
  await site?.close();
  await proxy?.close();
});

async function call(method: string, p: string, body?: unknown): Promise<{ status: number; body: Json; text: string }> {
  const h: Record<string, string> = { authorization: `Bearer ${server.apiKey}` };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: (text ? JSON.parse(text) : {}) as Json, text };
}

async function withSession<T>(body: Json, fn: (b: Json, visit: (url: string) => Promise<{ title: string; viaProxy: boolean }>) => Promise<T>): Promise<T> {
  const r = await call('POST', '/browsers', { headless: true, ...body });
  assert.equal(r.status, 200, r.text);
  const b = r.body;
  const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
  try {
    const page = await browser.contexts()[0]!.newPage();
    const visit = async (url: string) => {
      const before = proxy.log.length;
      await page.goto(url);
      const title = await page.title();
      const u = new URL(url);
      const viaProxy = proxy.log.slice(before).some((e) => e.host === u.hostname.replace(/^\[|\]$/g, ''));
      return { title, viaProxy };
    };
    return await fn(b, visit);
  } finally {
    await browser.close();
    assert.equal((await call('DELETE', `/browsers/${b.session_id as string}`)).status, 204);
  }
}

function bypassFlag(sessionId: string): string {
  for (const p of sessionProcesses(server.dataDir).filter((q) => q.sessionId === sessionId)) {
    const args = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0');
    const flag = args.find((a) => a.startsWith('--proxy-bypass-list='));
    if (flag && args.some((a) => a.startsWith('--remote-debugging-port'))) return flag.slice('--proxy-bypass-list='.length);
  }
  assert.fail('no --proxy-bypass-list on the session\'s Chromium');
}

const DIRECT = 'browserd test page';

describe('private_hosts with a proxy', () => {
  test('listed private hosts go direct, everything else through the proxy; IP and CIDR entries become Chromium rules; network is echoed', async () => {
    const privateHosts = ['site.localhost', '*.corp.localhost', '10.20.0.0/16', '[fd00::1]', '192.168.7.7:8080'];
    await withSession({ proxy: { id: proxyId }, network: { private_hosts: privateHosts } }, async (b, visit) => {
      assert.deepEqual(b.network, { private_hosts: privateHosts });
      assert.equal(bypassFlag(b.session_id as string), '<-loopback>;site.localhost;*.corp.localhost;10.20.0.0/16;[fd00::1];192.168.7.7:8080');
      // Private: direct (the proxy never hears of them).
      assert.deepEqual(await visit(`http://site.localhost:${sitePort}/`), { title: DIRECT, viaProxy: false });
      assert.deepEqual(await visit(`http://app.corp.localhost:${sitePort}/`), { title: DIRECT, viaProxy: false });
      // Not private: through the proxy, also names under a listed exact name and loopback itself.
      assert.deepEqual(await visit(`http://other.localhost:${sitePort}/`), { title: DIRECT, viaProxy: true });
      assert.deepEqual(await visit(`http://x.site.localhost:${sitePort}/`), { title: DIRECT, viaProxy: true });
      assert.deepEqual(await visit(`http://127.0.0.1:${sitePort}/`), { title: DIRECT, viaProxy: true });
      // An address outside the listed range: to the proxy (which answers it itself).
      assert.deepEqual(await visit('http://10.99.1.1/'), { title: 'proxied by egress', viaProxy: true });
    });
  });

  test('a host name that would resolve into a private range is not bypassed by the range, only when listed by name', async () => {
    // Defaults (10.0.0.0/8 and the others): IP rules never match names; Chromium sends the name to the proxy unresolved.
    await withSession({ proxy: { id: proxyId } }, async (b, visit) => {
      assert.equal(b.network, undefined);
      assert.equal(bypassFlag(b.session_id as string), '<-loopback>;10.0.0.0/8;172.16.0.0/12;192.168.0.0/16;100.64.0.0/10;fc00::/7');
      assert.deepEqual(await visit('http://db.intranet.test/'), { title: 'proxied by egress', viaProxy: true });
      assert.ok(proxy.log.some((e) => e.target === 'http://db.intranet.test/'), 'the proxy got the name, not an address');
      assert.deepEqual(await visit(`http://db.corp.localhost:${sitePort}/`), { title: DIRECT, viaProxy: true });
    });
    // Listed by name: direct.
    await withSession({ proxy: { id: proxyId }, network: { private_hosts: ['db.corp.localhost'] } }, async (_b, visit) => {
      assert.deepEqual(await visit(`http://db.corp.localhost:${sitePort}/`), { title: DIRECT, viaProxy: false });
    });
  });

  test('an empty list disables the defaults: everything uses the egress', async () => {
    await withSession({ proxy: { id: proxyId }, network: { private_hosts: [] } }, async (b, visit) => {
      assert.deepEqual(b.network, { private_hosts: [] });
      assert.equal(bypassFlag(b.session_id as string), '<-loopback>');
      assert.deepEqual(await visit(`http://site.localhost:${sitePort}/`), { title: DIRECT, viaProxy: true });
    });
  });

  test('private hosts keep going direct after a PATCH changes the proxy; network itself cannot be changed', async () => {
    await withSession({ network: { private_hosts: ['site.localhost'] } }, async (b, visit) => {
      assert.deepEqual(await visit(`http://other.localhost:${sitePort}/`), { title: DIRECT, viaProxy: false });
      const patched = await call('PATCH', `/browsers/${b.session_id as string}`, { proxy: { id: proxyId } });
      assert.equal(patched.status, 200, patched.text);
      assert.deepEqual(await visit(`http://other.localhost:${sitePort}/`), { title: DIRECT, viaProxy: true });
      assert.deepEqual(await visit(`http://site.localhost:${sitePort}/`), { title: DIRECT, viaProxy: false });
      const fixed = await call('PATCH', `/browsers/${b.session_id as string}`, { network: { private_hosts: [] } });
      assert.equal(fixed.status, 400);
      assert.match(JSON.stringify(fixed.body.details), /network: cannot be changed after creation/);
      assert.deepEqual((await call('GET', `/browsers/${b.session_id as string}`)).body.network, { private_hosts: ['site.localhost'] });
    });
  });
});

describe('private_hosts validation at the edge', () => {
  test('every broken entry is a 400 detail naming network.private_hosts[i]; nothing is created', async () => {
    const r = await call('POST', '/browsers', { headless: true, network: { private_hosts: ['ok.example', '8.8.8.8', '127.0.0.0/8', '*.com', '10.0.0.1/8', 'fd00::1', '10.0.0.0/8:80'] } });
    assert.equal(r.status, 400);
    const fields = (r.body.details as Json[]).map((d) => (d.message as string).split(':')[0]);
    assert.deepEqual(fields, [1, 2, 3, 4, 5, 6].map((i) => `network.private_hosts[${i}]`));
    const tooMany = await call('POST', '/browsers', { headless: true, network: { private_hosts: Array.from({ length: 33 }, (_, i) => `h${i}.example`) } });
    assert.equal(tooMany.status, 400);
    assert.match(JSON.stringify(tooMany.body.details), /network\.private_hosts/);
  });
});
