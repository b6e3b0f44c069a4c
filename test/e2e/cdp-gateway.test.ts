import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { SignJWT } from 'jose';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';
import { eventually, sessionProcesses, signingKey, startServer, startSite, type TestServer } from '../helpers/server.js';

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let kernel: Kernel;

before(async () => {
  server = await startServer();
  site = await startSite();
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
});
after(async () => {
  // stop() ends every session the server still runs.
  await server?.stop();
  await site?.close();
});

// ---- helpers ----------------------------------------------------------------------

/** `ws://host/browser/cdp?jwt=T` -> `http://host/browser/cdp?jwt=T`. */
function httpForm(wsUrl: string): string {
  return wsUrl.replace(/^ws/, 'http');
}

/** Chromium's own DevTools port and browser path of a session, from its profile directory. */
function devtoolsOf(sessionId: string): { port: number; wsPath: string } {
  const [port, wsPath] = fs.readFileSync(path.join(server.dataDir, 'runtime', sessionId, 'profile', 'DevToolsActivePort'), 'utf8').split('\n');
  return { port: Number(port), wsPath: wsPath! };
}

function jwtOf(url: string): string {
  const t = new URL(url).searchParams.get('jwt');
  assert.ok(t, `no jwt in ${url}`);
  return t;
}

/** Chromium's own debugging port, as Chromium wrote it into the session's profile. */
function chromiumPort(sessionId: string): number {
  const file = path.join(server.dataDir, 'runtime', sessionId, 'profile', 'DevToolsActivePort');
  const port = Number(fs.readFileSync(file, 'utf8').split('\n')[0]);
  assert.ok(port > 0);
  return port;
}

function cmdline(pid: number): string[] {
  return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

function environ(pid: number): string[] {
  return fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
}

/** The session's main Chromium process (the one with the debugging flags; its children carry --type=). */
function chromiumMain(sessionId: string): { pid: number; args: string[] } {
  for (const p of sessionProcesses(server.dataDir).filter((q) => q.sessionId === sessionId)) {
    const args = cmdline(p.pid);
    if (args.some((a) => a.startsWith('--remote-debugging-port'))) return { pid: p.pid, args };
  }
  assert.fail(`no chromium process for session ${sessionId}`);
}

/** TCP sockets (IPv4) with `port` on either end, by state (0A = LISTEN, 01 = ESTABLISHED, 06 = TIME_WAIT...). */
function socketsOnPort(port: number): { local: string; remote: string; state: string }[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const out: { local: string; remote: string; state: string }[] = [];
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    const [local, remote, state] = [f[1]!, f[2]!, f[3]!];
    if (local.endsWith(`:${hexPort}`) || remote.endsWith(`:${hexPort}`)) out.push({ local, remote, state });
  }
  return out;
}

/**
 * Attempts a websocket upgrade. Resolves with the HTTP status when the server refuses the
 * upgrade, or with opened=true when a websocket was established (then closed again).
 */
function tryUpgrade(url: string): Promise<{ opened: boolean; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const ws = new WebSocket(url);
    const timer = setTimeout(() => settle(() => {
      ws.terminate();
      reject(new Error(`no answer to the upgrade of ${url}`));
    }), 15_000);
    ws.once('open', () => settle(() => {
      ws.close();
      resolve({ opened: true });
    }));
    // With this listener, ws reports a refused upgrade here instead of as an error.
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => settle(() => {
        ws.terminate();
        resolve({ opened: false, status: res.statusCode, body });
      }));
    });
    ws.on('error', (err) => settle(() => reject(err)));
  });
}

/** A raw CDP client over `ws`: send a command, get the reply with the same id. */
async function rawCdp(url: string): Promise<{ send(frame: string): Promise<Record<string, unknown>>; reply(id: number): Promise<Record<string, unknown>>; close(): void }> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const replies = new Map<number, Record<string, unknown>>();
  const waiters = new Map<number, (m: Record<string, unknown>) => void>();
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString()) as Record<string, unknown>;
    if (typeof m.id !== 'number') return;
    const w = waiters.get(m.id);
    if (w) w(m);
    else replies.set(m.id, m);
  });
  const reply = (id: number) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const got = replies.get(id);
      if (got) return resolve(got);
      const timer = setTimeout(() => reject(new Error(`no reply to id ${id}`)), 10_000);
      waiters.set(id, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      ws.once('close', () => reject(new Error(`connection closed before the reply to id ${id}`)));
    });
  return {
    send(frame) {
      const id = (JSON.parse(frame) as { id: number }).id;
      ws.send(frame);
      return reply(id);
    },
    reply,
    close: () => ws.close(),
  };
}

// ---- Playwright and Puppeteer through the gateway ---------------------------------

describe('clients through cdp_ws_url', () => {
  let b: Awaited<ReturnType<Kernel['browsers']['create']>>;
  before(async () => {
    b = await kernel.browsers.create({ headless: true });
  });
  after(async () => {
    if (b) await kernel.browsers.deleteByID(b.session_id);
  });

  test('Playwright connectOverCDP loads a page from a local site', async () => {
    const browser = await chromium.connectOverCDP(b.cdp_ws_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(site.url);
      assert.equal(await page.title(), 'browserd test page');
      assert.equal(await page.textContent('#h'), 'hello');
      await page.close();
    } finally {
      await browser.close();
    }
  });

  test('two Playwright clients at once both work; a tab opened by one is seen by the other; reconnect finds it again', async () => {
    const one = await chromium.connectOverCDP(b.cdp_ws_url);
    const two = await chromium.connectOverCDP(b.cdp_ws_url);
    let reconnected: Awaited<ReturnType<typeof chromium.connectOverCDP>> | null = null;
    try {
      const marker = `${site.url}?opened-by=one`;
      const p1 = await one.contexts()[0]!.newPage();
      await p1.goto(marker);
      assert.equal(await p1.title(), 'browserd test page');

      // The other client sees the new tab (auto-attach), and can drive it.
      const seen = await eventually(() => two.contexts()[0]!.pages().find((p) => p.url() === marker), 10_000);
      assert.ok(seen, 'the second client never saw the tab opened by the first');
      assert.equal(await seen.evaluate(() => document.querySelector('#h')!.textContent), 'hello');

      // The second client works on its own too.
      const p2 = await two.contexts()[0]!.newPage();
      await p2.goto(`${site.url}?opened-by=two`);
      assert.equal(await p2.title(), 'browserd test page');
      await p2.close();

      // Disconnect the first client; the browser and its tab stay, and a new connection finds the tab.
      await one.close();
      assert.equal(one.isConnected(), false);
      assert.equal(await seen.title(), 'browserd test page', 'the other client lost its page when the first disconnected');
      reconnected = await chromium.connectOverCDP(b.cdp_ws_url);
      const again = await eventually(() => reconnected!.contexts()[0]!.pages().find((p) => p.url() === marker), 10_000);
      assert.ok(again, 'the tab opened before the disconnect is gone after reconnecting');
      assert.equal(await again.title(), 'browserd test page');
      await again.close();
    } finally {
      await one.close().catch(() => undefined);
      await two.close().catch(() => undefined);
      await reconnected?.close().catch(() => undefined);
    }
  });

  test('Puppeteer connects with browserWSEndpoint = cdp_ws_url', async () => {
    const browser = await puppeteer.connect({ browserWSEndpoint: b.cdp_ws_url, defaultViewport: null });
    try {
      assert.match(await browser.version(), /Chrome\/\d+/);
      const page = await browser.newPage();
      await page.goto(site.url);
      assert.equal(await page.title(), 'browserd test page');
      await page.close();
    } finally {
      await browser.disconnect();
    }
  });

  test('Playwright connectOverCDP with the http:// form of the URL (discovery) works', async () => {
    // Playwright appends json/version/ to the path and keeps the query: /browser/cdp/json/version/?jwt=T
    const browser = await chromium.connectOverCDP(httpForm(b.cdp_ws_url));
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(site.url);
      assert.equal(await page.title(), 'browserd test page');
      await page.close();
    } finally {
      await browser.close();
    }
  });

  test('discovery: /browser/cdp/json/version?jwt=T and a jwt ending in /json/version/ answer with a gateway webSocketDebuggerUrl', async () => {
    // Puppeteer's browserURL cannot carry our token: puppeteer-core builds the discovery URL as
    // `new URL('/json/version', browserURL)`, an absolute path that drops both our path
    // (/browser/cdp) and the query string holding the jwt, so it would ask
    // http://host/json/version with no token. Clients that want discovery with Puppeteer
    // fetch /browser/cdp/json/version?jwt=T themselves and pass webSocketDebuggerUrl as
    // browserWSEndpoint, which is what this test does.
    const t = jwtOf(b.cdp_ws_url);
    const base = new URL(server.url);
    const port = chromiumPort(b.session_id);
    const forms = [
      `${server.url}/browser/cdp/json/version?jwt=${t}`,
      `${server.url}/browser/cdp/json/version/?jwt=${t}`,
      // what string-appending clients make of `.../browser/cdp?jwt=T`
      `${httpForm(b.cdp_ws_url)}/json/version/`,
      `${httpForm(b.cdp_ws_url)}/json/version`,
    ];
    let wsUrl = '';
    for (const f of forms) {
      const res = await fetch(f);
      assert.equal(res.status, 200, `${f} answered ${res.status}`);
      const v = (await res.json()) as { Browser: string; webSocketDebuggerUrl: string };
      assert.match(v.Browser, /Chrome\/\d+/);
      const u = new URL(v.webSocketDebuggerUrl);
      assert.equal(u.protocol, 'ws:');
      assert.equal(u.host, base.host, `webSocketDebuggerUrl ${v.webSocketDebuggerUrl} does not point at the gateway`);
      assert.equal(u.pathname, '/browser/cdp');
      assert.ok(!v.webSocketDebuggerUrl.includes(`:${port}/`), 'webSocketDebuggerUrl exposes Chromium\'s own port');
      assert.ok(!v.webSocketDebuggerUrl.includes('/devtools/browser/'), 'webSocketDebuggerUrl is Chromium\'s own');
      wsUrl = v.webSocketDebuggerUrl;
    }
    // A bad token on the discovery route is refused like on the websocket.
    const bad = await fetch(`${server.url}/browser/cdp/json/version?jwt=${t.slice(0, -8)}AAAAAAAA`);
    assert.equal(bad.status, 401);
    const none = await fetch(`${server.url}/browser/cdp/json/version`);
    assert.equal(none.status, 401);

    const browser = await puppeteer.connect({ browserWSEndpoint: wsUrl, defaultViewport: null });
    try {
      const page = await browser.newPage();
      await page.goto(site.url);
      assert.equal(await page.title(), 'browserd test page');
      await page.close();
    } finally {
      await browser.disconnect();
    }
  });

  test('refused CDP methods get a CDP error with the same id; ordinary commands work', async () => {
    const cdp = await rawCdp(b.cdp_ws_url);
    try {
      const v = await cdp.send('{"id":1,"method":"Browser.getVersion"}');
      assert.match(String((v.result as { product?: string } | undefined)?.product), /Chrome\/\d+/);

      const refused = await cdp.send(JSON.stringify({ id: 2, method: 'Extensions.loadUnpacked', params: { path: '/tmp' } }));
      assert.equal(refused.id, 2);
      assert.equal(refused.result, undefined);
      assert.match(String((refused.error as { message?: string } | undefined)?.message), /not allowed through browserd/);

      // The same method spelled with a JSON escape is the same method to Chromium's parser.
      const escaped = await cdp.send('{"id":3,"method":"Extensions.loadUnpacke\\u0064","params":{"path":"/tmp"}}');
      assert.equal(escaped.id, 3);
      assert.match(String((escaped.error as { message?: string } | undefined)?.message), /not allowed through browserd/);

      // Sent on a page session (flattened), the refusal names that session.
      const targets = await cdp.send('{"id":4,"method":"Target.getTargets"}');
      const page = ((targets.result as { targetInfos: { type: string; targetId: string }[] }).targetInfos).find((ti) => ti.type === 'page');
      assert.ok(page, 'no page target');
      const att = await cdp.send(JSON.stringify({ id: 5, method: 'Target.attachToTarget', params: { targetId: page.targetId, flatten: true } }));
      const sessionId = (att.result as { sessionId: string }).sessionId;
      const onSession = await cdp.send(JSON.stringify({ id: 6, sessionId, method: 'Extensions.loadUnpacked', params: { path: '/tmp' } }));
      assert.equal(onSession.id, 6);
      assert.equal(onSession.sessionId, sessionId);
      assert.ok(onSession.error);

      // Every method refused outright, each answered with its own name.
      let id = 100;
      for (const method of ['Extensions.uninstall', 'Browser.crash', 'Browser.crashGpuProcess', 'Target.setRemoteLocations', 'Target.exposeDevToolsProtocol']) {
        const params = method === 'Target.exposeDevToolsProtocol' ? { targetId: page.targetId } : method === 'Target.setRemoteLocations' ? { locations: [{ host: '127.0.0.1', port: 1 }] } : {};
        const r = await cdp.send(JSON.stringify({ id: ++id, method, params }));
        assert.equal(r.id, id);
        assert.equal(r.result, undefined, `${method} reached Chromium`);
        assert.match(String((r.error as { message?: string } | undefined)?.message), new RegExp(`^${method.replace('.', '\\.')} is not allowed through browserd`));
      }

      // The connection is still usable after refusals.
      const again = await cdp.send('{"id":7,"method":"Browser.getVersion"}');
      assert.ok(again.result);
    } finally {
      cdp.close();
    }
  });

  test('commands that would read or write the server\'s files or change the proxy are refused; the same methods with safe parameters work', async () => {
    const cdp = await rawCdp(b.cdp_ws_url);
    try {
      const targets = await cdp.send('{"id":1,"method":"Target.getTargets"}');
      const page = ((targets.result as { targetInfos: { type: string; targetId: string }[] }).targetInfos).find((ti) => ti.type === 'page')!;
      const att = await cdp.send(JSON.stringify({ id: 2, method: 'Target.attachToTarget', params: { targetId: page.targetId, flatten: true } }));
      const sessionId = (att.result as { sessionId: string }).sessionId;
      const refusedFrames: [number, string, Record<string, unknown>, boolean][] = [
        [10, 'Page.navigate', { url: 'file:///etc/passwd' }, true],
        [11, 'Page.navigate', { url: 'view-source:file:///etc/hostname' }, true],
        [12, 'Target.createTarget', { url: 'FILE:///etc/passwd' }, false],
        [15, 'Target.createBrowserContext', { proxyServer: 'http://127.0.0.1:1' }, false],
        [16, 'DOM.setFileInputFiles', { files: ['/etc/passwd'], backendNodeId: 1 }, true],
        [17, 'Input.dispatchDragEvent', { type: 'drop', x: 5, y: 5, data: { items: [], files: ['/etc/passwd'], dragOperationsMask: 1 } }, true],
        [18, 'Network.loadNetworkResource', { url: 'file:///etc/passwd', options: { disableCache: true, includeCredentials: false } }, true],
        [19, 'PWA.install', { manifestId: 'x', installUrlOrBundleUrl: '/etc/passwd' }, false],
        [24, 'PWA.launchFilesInApp', { manifestId: 'x', files: ['/etc/passwd'] }, false],
      ];
      for (const [id, method, params, onPage] of refusedFrames) {
        const r = await cdp.send(JSON.stringify({ id, method, params, ...(onPage ? { sessionId } : {}) }));
        assert.equal(r.id, id);
        assert.equal(r.result, undefined, `${method} ${JSON.stringify(params)} must not reach Chromium`);
        assert.match(String((r.error as { message?: string } | undefined)?.message), new RegExp(`${method.replace('.', '\\.')} is not allowed through browserd: `));
      }
      const ok = await cdp.send(JSON.stringify({ id: 20, sessionId, method: 'Page.navigate', params: { url: site.url } }));
      assert.ok(ok.result, JSON.stringify(ok));
      const ctx = await cdp.send('{"id":21,"method":"Target.createBrowserContext","params":{}}');
      assert.ok((ctx.result as { browserContextId?: string }).browserContextId);
      const dl = await cdp.send('{"id":22,"method":"Browser.setDownloadBehavior","params":{"behavior":"deny"}}');
      assert.ok(dl.result, JSON.stringify(dl));
      // A client-side download path (Playwright sends one) is accepted but lands in the session's own directory.
      const moved = await cdp.send('{"id":23,"method":"Browser.setDownloadBehavior","params":{"behavior":"allow","downloadPath":"/etc"}}');
      assert.ok(moved.result, JSON.stringify(moved));
    } finally {
      cdp.close();
    }
  });

  test("every session's own policy blocks file: URLs in the browser itself (for a person in the live view too)", async () => {
    // Straight to Chromium's own port, past the gateway's guard, to see the policy at work.
    const { port, wsPath } = devtoolsOf(b.session_id);
    const cdp = await rawCdp(`ws://127.0.0.1:${port}${wsPath}`);
    try {
      const created = await cdp.send(JSON.stringify({ id: 1, method: 'Target.createTarget', params: { url: 'about:blank' } }));
      const targetId = (created.result as { targetId: string }).targetId;
      const att = await cdp.send(JSON.stringify({ id: 2, method: 'Target.attachToTarget', params: { targetId, flatten: true } }));
      const sessionId = (att.result as { sessionId: string }).sessionId;
      const nav = await cdp.send(JSON.stringify({ id: 3, sessionId, method: 'Page.navigate', params: { url: 'file:///etc/hostname' } }));
      assert.equal((nav.result as { errorText?: string }).errorText, 'net::ERR_BLOCKED_BY_ADMINISTRATOR');
      await cdp.send(JSON.stringify({ id: 4, method: 'Target.closeTarget', params: { targetId } }));
    } finally {
      cdp.close();
    }
  });
});

// ---- token checks -------------------------------------------------------------------

test('bad tokens are refused with an HTTP error before any byte reaches Chromium', async () => {
  const s = await kernel.browsers.create({ headless: true });
  try {
    const port = chromiumPort(s.session_id);
    const cdp = new URL(s.cdp_ws_url);
    const t = jwtOf(s.cdp_ws_url);
    const [h, p, sig] = t.split('.') as [string, string, string];
    // Flip a character in the middle of the signature (the last one may only carry padding bits).
    const i = Math.floor(sig.length / 2);
    const tampered = `${h}.${p}.${sig.slice(0, i)}${sig[i] === 'A' ? 'B' : 'A'}${sig.slice(i + 1)}`;
    const bidiToken = jwtOf(s.webdriver_ws_url);

    // An expired token signed with the server's real key (from the store), so only the expiry is wrong.
    const key = signingKey(server.dataDir);
    const now = Math.floor(Date.now() / 1000);
    const expired = await new SignJWT({ ch: 'cdp' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer('browserd')
      .setSubject(s.session_id)
      .setIssuedAt(now - 7200)
      .setExpirationTime(now - 3600)
      .sign(key);
    // Sanity check of the minting: the same key and claims without the expiry in the past are accepted.
    const fresh = await new SignJWT({ ch: 'cdp' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer('browserd')
      .setSubject(s.session_id)
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .sign(key);

    const wsBase = `${cdp.protocol}//${cdp.host}/browser/cdp`;
    const cases: [string, string, number][] = [
      ['missing jwt', wsBase, 401],
      ['empty jwt', `${wsBase}?jwt=`, 401],
      ['tampered signature', `${wsBase}?jwt=${tampered}`, 401],
      ['token of another channel (bidi)', `${wsBase}?jwt=${bidiToken}`, 401],
      ['expired token', `${wsBase}?jwt=${expired}`, 401],
    ];
    for (const [what, url, status] of cases) {
      const r = await tryUpgrade(url);
      assert.equal(r.opened, false, `${what}: the websocket opened`);
      assert.equal(r.status, status, `${what}: answered ${r.status} ${r.body}`);
      assert.equal((JSON.parse(r.body!) as { code: string }).code, 'unauthorized', what);
    }
    // Nothing ever connected to Chromium's port: only its listening socket exists.
    const sockets = socketsOnPort(port);
    assert.deepEqual(
      sockets.filter((x) => x.state !== '0A'),
      [],
      'a refused upgrade opened a connection to Chromium',
    );
    // ... and that socket listens on 127.0.0.1 only.
    const listening = sockets.filter((x) => x.state === '0A');
    assert.ok(listening.length >= 1);
    for (const l of listening) assert.ok(l.local.startsWith('0100007F:'), `Chromium listens on ${l.local}`);

    // The self-minted token works, so the refusal above was for the expiry alone.
    assert.deepEqual(await tryUpgrade(`${wsBase}?jwt=${fresh}`), { opened: true });

    // A valid token of a deleted session: 404, no websocket.
    await kernel.browsers.deleteByID(s.session_id);
    const gone = await tryUpgrade(s.cdp_ws_url);
    assert.equal(gone.opened, false);
    assert.equal(gone.status, 404);
    const discovery = await fetch(`${httpForm(s.cdp_ws_url)}/json/version/`);
    assert.equal(discovery.status, 404);
  } finally {
    await kernel.browsers.deleteByID(s.session_id).catch(() => undefined);
  }
});

test('Chromium listens on 127.0.0.1 only and its port is in no URL the API hands out', async () => {
  const s = await kernel.browsers.create({ headless: false });
  try {
    const main = chromiumMain(s.session_id);
    assert.ok(main.args.includes('--remote-debugging-address=127.0.0.1'), main.args.join(' '));
    const port = chromiumPort(s.session_id);
    const again = await kernel.browsers.retrieve(s.session_id);
    const listed = await fetch(`${server.url}/browsers`, { headers: server.headers() }).then((r) => r.json() as Promise<Record<string, unknown>[]>);
    const discovery = await fetch(`${server.url}/browser/cdp/json/version?jwt=${jwtOf(s.cdp_ws_url)}`).then((r) => r.text());
    const texts = [JSON.stringify(s), JSON.stringify(again), JSON.stringify(listed), discovery];
    const urls = [s.cdp_ws_url, s.webdriver_ws_url, s.browser_live_view_url!];
    assert.ok(s.browser_live_view_url);
    for (const u of urls) {
      assert.equal(new URL(u).host, new URL(server.url).host, `${u} does not point at the server`);
      assert.notEqual(new URL(u).port, String(port));
    }
    for (const text of texts) {
      assert.ok(!text.includes(`:${port}/`) && !text.includes(`:${port}"`), `Chromium's port ${port} appears in ${text.slice(0, 200)}`);
      assert.ok(!text.includes('/devtools/browser/'), 'Chromium\'s browser target path was handed out');
    }
  } finally {
    await kernel.browsers.deleteByID(s.session_id);
  }
});

// ---- sandbox --------------------------------------------------------------------------

test('Chromium never runs as root nor with --no-sandbox (headless and headful)', async () => {
  const [headless, headful] = await Promise.all([kernel.browsers.create({ headless: true }), kernel.browsers.create({ headless: false })]);
  try {
    for (const s of [headless, headful]) {
      const procs = sessionProcesses(server.dataDir).filter((p) => p.sessionId === s.session_id);
      assert.ok(procs.length >= 2, `session ${s.session_id} has ${procs.length} processes`);
      for (const p of procs) {
        let status: string;
        let args: string[];
        try {
          status = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
          args = cmdline(p.pid);
        } catch {
          continue; // a short-lived child that exited meanwhile
        }
        const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
        assert.ok(uids, `no Uid line for ${p.pid}`);
        for (const u of uids.slice(1)) assert.notEqual(Number(u), 0, `process ${p.pid} (${p.cmd}) runs as root: ${uids[0]}`);
        assert.ok(!args.includes('--no-sandbox'), `process ${p.pid} runs with --no-sandbox: ${p.cmd}`);
      }
    }

    const hl = chromiumMain(headless.session_id);
    assert.ok(hl.args.includes('--headless'), 'headless session without --headless');
    assert.ok(!sessionProcesses(server.dataDir).some((p) => p.sessionId === headless.session_id && /(^|\/)Xvfb\s/.test(`${p.cmd} `)));

    const hf = chromiumMain(headful.session_id);
    assert.ok(!hf.args.some((a) => a.startsWith('--headless')), 'headful session runs headless');
    const xvfb = sessionProcesses(server.dataDir).filter((p) => p.sessionId === headful.session_id && /(^|\/)Xvfb$/.test(cmdline(p.pid)[0] ?? ''));
    assert.equal(xvfb.length, 1, 'headful session has no Xvfb of its own');
    const display = environ(hf.pid).find((kv) => kv.startsWith('DISPLAY='));
    assert.match(display ?? '', /^DISPLAY=:\d+$/);
    // The display chromium uses is the one its Xvfb serves.
    const n = display!.slice('DISPLAY=:'.length);
    assert.ok(fs.existsSync(`/tmp/.X11-unix/X${n}`), `no X socket for display :${n}`);
  } finally {
    await Promise.all([kernel.browsers.deleteByID(headless.session_id), kernel.browsers.deleteByID(headful.session_id)]);
  }
  assert.deepEqual(sessionProcesses(server.dataDir).filter((p) => p.sessionId === headless.session_id || p.sessionId === headful.session_id), []);
});
