import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { ROOT, sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';
import { selfSignedCert, startHttpProxy, startSocksProxy, type TestProxy } from '../helpers/proxies.js';

/**
 * Proxies: the routes (passwords encrypted, never returned), the check, and sessions whose
 * traffic goes where their proxy selection says, switched live by PATCH. Every proxy here
 * is a loopback test proxy that logs what reached it.
 */

type Json = Record<string, unknown>;

const PASSWORD = 'S3cret-pa55word!';
let server: TestServer;
let kernel: Kernel;
let site: Awaited<ReturnType<typeof startSite>>;
let httpProxy: TestProxy;
let socksProxy: TestProxy;
let httpsProxy: TestProxy;
let cert: ReturnType<typeof selfSignedCert>;

before(async () => {
  cert = selfSignedCert();
  // The bridge speaks TLS to the HTTPS proxy and must trust its certificate.
  server = await startServer({ env: { NODE_EXTRA_CA_CERTS: cert.certFile } });
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  site = await startSite();
  httpProxy = await startHttpProxy('http-proxy', { auth: `alice:${PASSWORD}` });
  socksProxy = await startSocksProxy('socks-proxy', { auth: 'bob:socks-pass' });
  httpsProxy = await startHttpProxy('https-proxy', { auth: 'carol:tls-pass', tls: { key: cert.key, cert: cert.cert } });
});
after(async () => {
  await server?.stop();
  await site?.close();
  await httpProxy?.close();
  await socksProxy?.close();
  await httpsProxy?.close();
  if (cert) fs.rmSync(cert.dir, { recursive: true, force: true });
});

async function call(method: string, p: string, body?: unknown, extra: Record<string, string> = {}): Promise<{ status: number; body: Json; text: string; headers: Headers }> {
  const h: Record<string, string> = { authorization: `Bearer ${server.apiKey}`, ...extra };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: (text ? JSON.parse(text) : {}) as Json, text, headers: r.headers };
}

async function createProxy(body: Json): Promise<Json> {
  const r = await call('POST', '/proxies', body);
  assert.equal(r.status, 200, r.text);
  return r.body;
}

const httpBody = (name: string) => ({ type: 'custom', name, protocol: 'http', config: { host: '127.0.0.1', port: httpProxy.port, username: 'alice', password: PASSWORD } });

async function session(body: Json): Promise<Json> {
  const r = await call('POST', '/browsers', { headless: true, ...body });
  assert.equal(r.status, 200, r.text);
  return r.body;
}

async function end(b: Json): Promise<void> {
  assert.equal((await call('DELETE', `/browsers/${b.session_id as string}`)).status, 204);
}

/** Loads `url` in the session and returns the page's title. */
async function titleOf(b: Json, url: string): Promise<string> {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
  try {
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(url);
    const t = await page.title();
    await page.close();
    return t;
  } finally {
    await browser.close();
  }
}

function mainPid(sessionId: string): number {
  const p = sessionProcesses(server.dataDir).find((q) => q.sessionId === sessionId && fs.readFileSync(`/proc/${q.pid}/cmdline`, 'utf8').includes('--remote-debugging-port'));
  assert.ok(p);
  return p.pid;
}

function otherProject(name: string): Record<string, string> {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/browserd.js'), 'projects', 'create', 'default', name], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, BROWSERD_DATA_DIR: server.dataDir },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { 'x-kernel-project-id': name };
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('proxy routes', () => {
  test('create (SDK), get, list, delete; the password is never returned and is stored encrypted', async () => {
    const created = await kernel.proxies.create({ type: 'custom', name: 'routes', protocol: 'http', config: { host: '127.0.0.1', port: httpProxy.port, username: 'alice', password: PASSWORD } });
    assert.match(created.id!, /^[a-z][a-z0-9]{23}$/);
    assert.equal(created.type, 'custom');
    assert.equal(created.protocol, 'http');
    assert.deepEqual(created.config, { host: '127.0.0.1', port: httpProxy.port, username: 'alice', has_password: true });
    const got = await call('GET', `/proxies/${created.id}`);
    assert.equal(got.status, 200);
    assert.ok(!got.text.includes(PASSWORD) && !JSON.stringify(created).includes(PASSWORD));
    const listed = await call('GET', '/proxies?limit=100');
    assert.ok(!listed.text.includes(PASSWORD));
    assert.ok((listed.body as unknown as Json[]).some((p) => p.id === created.id));
    assert.equal(listed.headers.get('x-has-more'), 'false');
    // Nowhere in the store file in clear.
    const db = fs.readFileSync(path.join(server.dataDir, 'browserd.sqlite'));
    const wal = fs.existsSync(path.join(server.dataDir, 'browserd.sqlite-wal')) ? fs.readFileSync(path.join(server.dataDir, 'browserd.sqlite-wal')) : Buffer.alloc(0);
    assert.ok(!db.includes(PASSWORD) && !wal.includes(PASSWORD), 'the password is stored in clear');
    assert.ok(db.includes(Buffer.from('alice')) || wal.includes(Buffer.from('alice')), 'the row is not where the test looks');

    await kernel.proxies.delete(created.id!);
    assert.equal((await call('GET', `/proxies/${created.id}`)).status, 404);
    assert.ok(!((await call('GET', '/proxies?limit=100')).body as unknown as Json[]).some((p) => p.id === created.id));
    assert.equal((await call('DELETE', `/proxies/${created.id}`)).status, 404);
  });

  test('types and protocols: custom over http, https and socks5; provider types, bad hosts and a password without user are 400 naming the field', async () => {
    for (const protocol of ['http', 'https', 'socks5']) {
      const p = await createProxy({ type: 'custom', protocol, config: { host: 'proxy.example', port: 3128 } });
      assert.equal(p.protocol, protocol);
      assert.deepEqual(p.config, { host: 'proxy.example', port: 3128, has_password: false });
      await call('DELETE', `/proxies/${p.id as string}`);
    }
    const cases: [Json, RegExp][] = [
      [{ type: 'residential' }, /type: residential proxies come from a proxy provider/],
      [{ type: 'custom' }, /config: is required/],
      [{ type: 'custom', config: { host: 'http://x', port: 1 } }, /config\.host: must be a host name or an IP/],
      [{ type: 'custom', config: { host: 'x', port: 70000 } }, /config\.port/],
      [{ type: 'custom', config: { host: 'x', port: 1, password: 'p' } }, /config\.password: needs a username/],
      [{ type: 'custom', protocol: 'socks4', config: { host: 'x', port: 1 } }, /protocol: must be one of http, https, socks5/],
      [{ type: 'custom', config: { host: 'x', port: 1 }, bypass_hosts: ['not a host'] }, /bypass_hosts\[0\]/],
    ];
    for (const [body, re] of cases) {
      const r = await call('POST', '/proxies', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(JSON.stringify(r.body.details), re);
    }
  });

  test('check: through the proxy with its credentials (http, https, socks5), a URL fetched through it, wrong credentials and a dead proxy reported as unavailable', async () => {
    const good = await createProxy(httpBody('check-good'));
    const r1 = await call('POST', `/proxies/${good.id as string}/check`);
    assert.equal(r1.status, 200, r1.text);
    assert.deepEqual(r1.body.check, { ok: true, target: 'example.com:443' });
    assert.equal(r1.body.status, 'available');
    assert.ok(r1.body.last_checked);
    const seen = httpProxy.log.filter((e) => e.method === 'CONNECT' && e.target === 'example.com:443');
    assert.ok(seen.length > 0 && seen.every((e) => e.auth === `alice:${PASSWORD}`));

    const withUrl = await kernel.proxies.check(good.id as string, { url: `${site.url}checked` });
    assert.deepEqual((withUrl as unknown as Json).check, { ok: true, target: `${site.url}checked`, status_code: 200 });
    assert.ok(httpProxy.log.some((e) => e.target === `${site.url}checked`));

    const tlsProxy = await createProxy({ type: 'custom', protocol: 'https', config: { host: '127.0.0.1', port: httpsProxy.port, username: 'carol', password: 'tls-pass' } });
    const tlsCheck = await call('POST', `/proxies/${tlsProxy.id as string}/check`);
    assert.equal((tlsCheck.body.check as Json).ok, true, tlsCheck.text);
    assert.ok(httpsProxy.log.some((e) => e.auth === 'carol:tls-pass'));
    const socks = await createProxy({ type: 'custom', protocol: 'socks5', config: { host: '127.0.0.1', port: socksProxy.port, username: 'bob', password: 'socks-pass' } });
    assert.equal(((await call('POST', `/proxies/${socks.id as string}/check`)).body.check as Json).ok, true);
    assert.ok(socksProxy.log.some((e) => e.target === 'example.com:443' && e.auth === 'bob:socks-pass'));

    const wrong = await createProxy({ ...httpBody('check-wrong'), config: { host: '127.0.0.1', port: httpProxy.port, username: 'alice', password: 'nope' } });
    const r2 = await call('POST', `/proxies/${wrong.id as string}/check`);
    assert.equal((r2.body.check as Json).ok, false);
    assert.match((r2.body.check as Json).error as string, /credentials/);
    assert.equal(r2.body.status, 'unavailable');

    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const deadPort = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const dead = await createProxy({ type: 'custom', config: { host: '127.0.0.1', port: deadPort } });
    const r3 = await call('POST', `/proxies/${dead.id as string}/check`);
    assert.equal((r3.body.check as Json).ok, false);
    assert.equal(r3.body.status, 'unavailable');
    const badUrl = await call('POST', `/proxies/${dead.id as string}/check`, { url: 'ftp://x' });
    assert.equal(badUrl.status, 400);
  });
});

describe('sessions with a proxy', () => {
  test('proxy by id: the page loads through the authenticated proxy; the response names the proxy by id (and proxy_id)', async () => {
    const p = await createProxy(httpBody('by-id'));
    const b = await session({ proxy: { id: p.id } });
    try {
      assert.deepEqual(b.proxy, { id: p.id });
      assert.equal(b.proxy_id, p.id);
      const url = `${site.url}?via=by-id`;
      assert.equal(await titleOf(b, url), 'browserd test page');
      const hit = httpProxy.log.find((e) => e.target === url);
      assert.ok(hit, 'the request did not reach the proxy');
      assert.equal(hit.auth, `alice:${PASSWORD}`);
      // Chromium never sees the credentials: its proxy is the local bridge.
      const args = fs.readFileSync(`/proc/${mainPid(b.session_id as string)}/cmdline`, 'utf8').split('\0');
      const proxyArg = args.find((a) => a.startsWith('--proxy-server='));
      assert.match(proxyArg ?? '', /^--proxy-server=http:\/\/127\.0\.0\.1:\d+$/);
      assert.ok(!args.join(' ').includes(PASSWORD));
      // The egress is locked by policy as well.
      const policy = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'runtime', b.session_id as string, 'policies', 'managed', 'browserd.json'), 'utf8')) as Json;
      assert.equal((policy.ProxySettings as Json).ProxyServer, proxyArg!.slice('--proxy-server='.length));
    } finally {
      await end(b);
    }
  });

  test('proxy by name (exactly one active proxy), the deprecated proxy_id, socks5 and https upstreams', async () => {
    const socks = await createProxy({ type: 'custom', name: 'socks-by-name', protocol: 'socks5', config: { host: '127.0.0.1', port: socksProxy.port, username: 'bob', password: 'socks-pass' } });
    const a = await session({ proxy: { name: 'socks-by-name' } });
    try {
      assert.deepEqual(a.proxy, { id: socks.id });
      assert.equal(await titleOf(a, `${site.url}?via=socks`), 'browserd test page');
      assert.ok(socksProxy.log.some((e) => e.auth === 'bob:socks-pass' && e.host === '127.0.0.1'));
    } finally {
      await end(a);
    }
    const tls = await createProxy({ type: 'custom', protocol: 'https', config: { host: '127.0.0.1', port: httpsProxy.port, username: 'carol', password: 'tls-pass' } });
    const b = await session({ proxy_id: tls.id });
    try {
      assert.deepEqual(b.proxy, { id: tls.id });
      assert.equal(b.proxy_id, tls.id);
      const url = `${site.url}?via=https-proxy`;
      assert.equal(await titleOf(b, url), 'browserd test page');
      assert.ok(httpsProxy.log.some((e) => e.target === url && e.auth === 'carol:tls-pass'));
    } finally {
      await end(b);
    }
  });

  test('mode direct and (non-stealth) default go direct, whatever proxies exist; an omitted proxy is omitted from the response', async () => {
    await createProxy(httpBody('unused'));
    for (const body of [{ proxy: { mode: 'direct' } }, { proxy: { mode: 'default' } }, {}]) {
      const before = httpProxy.log.length;
      const b = await session(body);
      try {
        assert.deepEqual(b.proxy, (body as Json).proxy);
        assert.equal(b.proxy_id, undefined);
        assert.equal(await titleOf(b, `${site.url}?direct=1`), 'browserd test page');
        assert.equal(httpProxy.log.length, before, `${JSON.stringify(body)} went through the proxy`);
      } finally {
        await end(b);
      }
    }
  });

  test('selection rules: {} and proxy with proxy_id are 400; unknown id, unknown name, a deleted proxy, another project\'s proxy are 404 naming the field; a name matching two proxies is 400', async () => {
    const cases: [Json, number, RegExp][] = [
      [{ proxy: {} }, 400, /proxy: exactly one of mode, id, name/],
      [{ proxy: { mode: 'direct', id: 'x' } }, 400, /proxy: exactly one of mode, id, name/],
      [{ proxy: { mode: 'direct' }, proxy_id: 'x' }, 400, /proxy_id: cannot be combined with proxy/],
      [{ proxy: { id: 'nosuchproxy' } }, 404, /proxy\.id: no proxy with id .{1,2}nosuchproxy/],
      [{ proxy_id: 'nosuchproxy' }, 404, /proxy_id: no proxy with id/],
      [{ proxy: { name: 'nosuchname' } }, 404, /proxy\.name: no proxy named .{1,2}nosuchname/],
      [{ proxy: { mode: 'sometimes' } }, 400, /proxy\.mode: must be one of direct, default/],
    ];
    for (const [body, status, re] of cases) {
      const r = await call('POST', '/browsers', { headless: true, ...body });
      assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
      assert.match(JSON.stringify(r.body), re);
    }
    await createProxy(httpBody('twice'));
    await createProxy(httpBody('twice'));
    const amb = await call('POST', '/browsers', { headless: true, proxy: { name: 'twice' } });
    assert.equal(amb.status, 400);
    assert.match(JSON.stringify(amb.body.details), /proxy\.name: .{1,2}twice.{1,2} matches 2 proxies/);
    const gone = await createProxy(httpBody('gone'));
    await call('DELETE', `/proxies/${gone.id as string}`);
    assert.equal((await call('POST', '/browsers', { headless: true, proxy: { id: gone.id } })).status, 404);
    assert.equal((await call('POST', '/browsers', { headless: true, proxy: { name: 'gone' } })).status, 404);
    const mine = await createProxy(httpBody('mine'));
    const other = otherProject('proxy-elsewhere');
    const cross = await call('POST', '/browsers', { headless: true, proxy: { id: mine.id } }, other);
    assert.equal(cross.status, 404);
    assert.equal(cross.body.code, 'proxy_not_found');
    assert.equal((await call('GET', `/proxies/${mine.id as string}`, undefined, other)).status, 404);
  });

  test('PATCH switches the running session\'s egress without restarting it: direct -> http proxy -> socks5 proxy -> default; the bridge closes with the session', async () => {
    const hp = await createProxy(httpBody('patch-http'));
    const sp = await createProxy({ type: 'custom', protocol: 'socks5', config: { host: '127.0.0.1', port: socksProxy.port, username: 'bob', password: 'socks-pass' } });
    const b = await session({});
    const pid = mainPid(b.session_id as string);
    const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
    try {
      const page = await browser.contexts()[0]!.newPage();
      const visit = async (tag: string) => {
        const url = `${site.url}?step=${tag}`;
        await page.goto(url);
        assert.equal(await page.title(), 'browserd test page');
        return { http: httpProxy.log.some((e) => e.target === url), socks: socksProxy.log.length };
      };
      const socksBefore = socksProxy.log.length;
      assert.deepEqual(await visit('direct'), { http: false, socks: socksBefore });

      let r = await call('PATCH', `/browsers/${b.session_id as string}`, { proxy: { id: hp.id } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.proxy, { id: hp.id });
      assert.equal((await visit('http')).http, true);

      r = await call('PATCH', `/browsers/${b.session_id as string}`, { proxy_id: sp.id });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.proxy, { id: sp.id });
      const viaSocks = await visit('socks');
      assert.equal(viaSocks.http, false);
      assert.ok(viaSocks.socks > socksBefore);

      r = await call('PATCH', `/browsers/${b.session_id as string}`, { proxy_id: '' });
      assert.deepEqual(r.body.proxy, { mode: 'default' });
      const socksNow = socksProxy.log.length;
      assert.deepEqual(await visit('default'), { http: false, socks: socksNow });

      r = await call('PATCH', `/browsers/${b.session_id as string}`, { disable_default_proxy: true });
      assert.deepEqual(r.body.proxy, { mode: 'direct' });
      // Omitted: unchanged.
      r = await call('PATCH', `/browsers/${b.session_id as string}`, { name: 'patched' });
      assert.deepEqual(r.body.proxy, { mode: 'direct' });
      assert.deepEqual((await call('GET', `/browsers/${b.session_id as string}`)).body.proxy, { mode: 'direct' });
      assert.equal(mainPid(b.session_id as string), pid, 'the browser was restarted');
    } finally {
      await browser.close();
    }
    const bad = [
      [{ proxy: {} }, 400],
      [{ proxy: { mode: 'direct' }, proxy_id: 'x' }, 400],
      [{ proxy: { id: 'nosuch' } }, 404],
      [{ profile: { id: 'x' } }, 400],
    ] as const;
    for (const [body, status] of bad) assert.equal((await call('PATCH', `/browsers/${b.session_id as string}`, body)).status, status, JSON.stringify(body));
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const bridgePort = Number(/--proxy-server=http:\/\/127\.0\.0\.1:(\d+)/.exec(cmd)![1]);
    assert.equal(await portOpen(bridgePort), true);
    await end(b);
    assert.equal(await portOpen(bridgePort), false, 'the bridge outlived its session');
  });

  test('a proxy deleted while a session uses it keeps serving that session', async () => {
    const p = await createProxy(httpBody('deleted-in-use'));
    const b = await session({ proxy: { id: p.id } });
    try {
      await call('DELETE', `/proxies/${p.id as string}`);
      const url = `${site.url}?after-delete=1`;
      assert.equal(await titleOf(b, url), 'browserd test page');
      assert.ok(httpProxy.log.some((e) => e.target === url));
      assert.deepEqual((await call('GET', `/browsers/${b.session_id as string}`)).body.proxy, { id: p.id });
    } finally {
      await end(b);
    }
  });
});

describe('restart', () => {
  test('after kill -9 a re-adopted session keeps its proxy: its bridge is reopened on the port its Chromium uses', async () => {
    const p = await createProxy(httpBody('restart'));
    const b = await session({ proxy: { id: p.id }, timeout_seconds: 300 });
    const pid = mainPid(b.session_id as string);
    await server.kill9();
    // The same data dir and key; the old server's stop() is never called, the new one cleans up.
    server = await startServer({ dataDir: server.dataDir, apiKey: server.apiKey, env: { NODE_EXTRA_CA_CERTS: cert.certFile } });
    const again = (await call('GET', `/browsers/${b.session_id as string}`)).body;
    assert.deepEqual(again.proxy, { id: p.id });
    assert.equal(mainPid(b.session_id as string), pid, 'the session was not re-adopted');
    const url = `${site.url}?after-restart=1`;
    assert.equal(await titleOf(again, url), 'browserd test page');
    assert.ok(httpProxy.log.some((e) => e.target === url && e.auth === `alice:${PASSWORD}`), 'the re-adopted session no longer uses its proxy');
    await end(again);
  });
});
