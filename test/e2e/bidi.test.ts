import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';
import { eventually, sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';

// WebdriverIO's protocol package logs every command (and a refused connect) itself; the assertions say what failed.
process.env.WDIO_LOG_LEVEL ??= 'silent';
const { BidiHandler } = await import('webdriver');
type Bidi = InstanceType<typeof BidiHandler>;
type Browser = Awaited<ReturnType<Kernel['browsers']['create']>>;

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let kernel: Kernel;

before(async () => {
  server = await startServer();
  site = await startSite('<title>browserd test page</title><h1 id="h">hello</h1><script>console.log("page says hi")</script>');
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
});
after(async () => {
  await server?.stop();
  await site?.close();
});

// ---- helpers ----------------------------------------------------------------------

/** A WebdriverIO BiDi client connected straight to webdriver_ws_url (no WebDriver classic session). */
async function connectBidi(url: string): Promise<Bidi> {
  const bidi = new BidiHandler(url);
  assert.equal(await bidi.connect(), true, `no BiDi connection to ${url}`);
  return bidi;
}

/** Everything the server sends on a BiDi socket, parsed; events and replies alike. */
function recordMessages(bidi: Bidi): Record<string, unknown>[] {
  const seen: Record<string, unknown>[] = [];
  bidi.socket!.on('message', (d: Buffer) => seen.push(JSON.parse(d.toString()) as Record<string, unknown>));
  return seen;
}

function closeOf(bidi: Bidi): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => bidi.socket!.once('close', (code: number, reason: Buffer) => resolve({ code, reason: reason.toString() })));
}

function jwtOf(url: string): string {
  const t = new URL(url).searchParams.get('jwt');
  assert.ok(t, `no jwt in ${url}`);
  return t;
}

/** Attempts a websocket upgrade: the HTTP status of a refusal, or opened=true. */
function tryUpgrade(url: string): Promise<{ opened: boolean; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no answer to the upgrade of ${url}`));
    }, 15_000);
    ws.once('open', () => {
      clearTimeout(timer);
      ws.close();
      resolve({ opened: true });
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => {
        clearTimeout(timer);
        ws.terminate();
        resolve({ opened: false, status: res.statusCode, body });
      });
    });
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

async function evaluate(bidi: Bidi, context: string, expression: string): Promise<unknown> {
  const r = await bidi.scriptEvaluate({ expression, target: { context }, awaitPromise: true });
  assert.equal(r.type, 'success', JSON.stringify(r));
  return (r as { result: { value?: unknown } }).result.value;
}

async function topContexts(bidi: Bidi): Promise<{ context: string; url: string }[]> {
  return (await bidi.browsingContextGetTree({})).contexts.map((c) => ({ context: c.context, url: c.url }));
}

function retrieve(id: string): Promise<Browser & { deleted_at?: string }> {
  return kernel.browsers.retrieve(id, { include_deleted: true });
}

// ---- the endpoint -------------------------------------------------------------------

test('webdriver_ws_url is ws://<public url>/browser/bidi?jwt=<token>; a plain GET answers 426 upgrade_required', async () => {
  const b = await kernel.browsers.create({ headless: true });
  try {
    const u = new URL(b.webdriver_ws_url);
    assert.equal(u.protocol, 'ws:');
    assert.equal(`http://${u.host}`, server.url);
    assert.equal(u.pathname, '/browser/bidi');
    assert.ok(jwtOf(b.webdriver_ws_url).split('.').length === 3);
    const r = await fetch(b.webdriver_ws_url.replace(/^ws/, 'http'));
    assert.equal(r.status, 426);
    assert.equal(r.headers.get('upgrade'), 'websocket');
    assert.equal(((await r.json()) as { code: string }).code, 'upgrade_required');
  } finally {
    await kernel.browsers.deleteByID(b.session_id);
  }
});

test('bad tokens are refused with 401, a deleted session with 404, before any websocket opens', async () => {
  const b = await kernel.browsers.create({ headless: true });
  try {
    const u = new URL(b.webdriver_ws_url);
    const base = `${u.protocol}//${u.host}/browser/bidi`;
    const [h, p, sig] = jwtOf(b.webdriver_ws_url).split('.') as [string, string, string];
    const i = Math.floor(sig.length / 2);
    const tampered = `${h}.${p}.${sig.slice(0, i)}${sig[i] === 'A' ? 'B' : 'A'}${sig.slice(i + 1)}`;
    const cases: [string, string][] = [
      ['missing jwt', base],
      ['empty jwt', `${base}?jwt=`],
      ['tampered signature', `${base}?jwt=${tampered}`],
      ['token of the cdp channel', `${base}?jwt=${jwtOf(b.cdp_ws_url)}`],
    ];
    for (const [what, url] of cases) {
      const r = await tryUpgrade(url);
      assert.equal(r.opened, false, `${what}: the websocket opened`);
      assert.equal(r.status, 401, `${what}: answered ${r.status} ${r.body}`);
      assert.equal((JSON.parse(r.body!) as { code: string }).code, 'unauthorized', what);
    }
    // The BiDi token is for BiDi only.
    const onCdp = await tryUpgrade(`${u.protocol}//${u.host}/browser/cdp?jwt=${jwtOf(b.webdriver_ws_url)}`);
    assert.equal(onCdp.status, 401);
    // The client library reports the refusal as no connection.
    const refused = new BidiHandler(`${base}?jwt=${tampered}`);
    assert.equal(await refused.connect(), false);

    assert.deepEqual(await tryUpgrade(b.webdriver_ws_url), { opened: true });
    await kernel.browsers.deleteByID(b.session_id);
    const gone = await tryUpgrade(b.webdriver_ws_url);
    assert.equal(gone.opened, false);
    assert.equal(gone.status, 404);
    assert.equal((JSON.parse(gone.body!) as { code: string }).code, 'session_not_found');
  } finally {
    await kernel.browsers.deleteByID(b.session_id).catch(() => undefined);
  }
});

// ---- a BiDi session, with Playwright on the same browser ------------------------------

describe('a WebdriverIO BiDi client and a Playwright CDP client on one session', () => {
  let b: Browser;
  let bidi: Bidi;
  let messages: Record<string, unknown>[];
  let pw: Awaited<ReturnType<typeof chromium.connectOverCDP>>;
  let tab: string;

  before(async () => {
    b = await kernel.browsers.create({ headless: true });
    bidi = await connectBidi(b.webdriver_ws_url);
    messages = recordMessages(bidi);
    pw = await chromium.connectOverCDP(b.cdp_ws_url);
  });
  after(async () => {
    await pw?.close().catch(() => undefined);
    bidi?.close();
    if (b) await kernel.browsers.deleteByID(b.session_id);
  });

  test('session.new answers with a session id and Chromium capabilities', async () => {
    const s = await bidi.sessionNew({ capabilities: {} });
    assert.match(s.sessionId, /^[0-9a-f-]{36}$/);
    assert.match(String(s.capabilities.browserName), /chrom/i);
    assert.match(String(s.capabilities.userAgent), /Chrome/);
    // One session per connection, as the spec says.
    await assert.rejects(bidi.sessionNew({ capabilities: {} }), /session/i);
  });

  test('browsingContext.getTree lists the open tab', async () => {
    const contexts = await topContexts(bidi);
    assert.ok(contexts.length >= 1, JSON.stringify(contexts));
    tab = contexts[0]!.context;
    assert.match(tab, /^[0-9A-F]{32}$/);
  });

  test('session.subscribe: browsingContext.load and log.entryAdded arrive for a navigation', async () => {
    const sub = await bidi.sessionSubscribe({ events: ['browsingContext.load', 'log.entryAdded'] });
    assert.equal(typeof sub.subscription, 'string');
    const url = `${site.url}?events=1`;
    const nav = await bidi.browsingContextNavigate({ context: tab, url, wait: 'complete' });
    assert.equal(nav.url, url);
    const load = await eventually(() => messages.find((m) => m.method === 'browsingContext.load' && (m.params as { url: string }).url === url), 10_000);
    assert.ok(load, 'no browsingContext.load event for the navigation');
    const log = await eventually(() => messages.find((m) => m.method === 'log.entryAdded' && (m.params as { text?: string }).text === 'page says hi'), 10_000);
    assert.ok(log, 'no log.entryAdded event for the page console.log');
    assert.equal((log.params as { source: { context: string } }).source.context, tab);
  });

  test('browsingContext.navigate (wait complete) and script.evaluate on a local page; Playwright sees the page BiDi loaded', async () => {
    const url = `${site.url}?navigated-by=bidi`;
    const nav = await bidi.browsingContextNavigate({ context: tab, url, wait: 'complete' });
    assert.equal(nav.url, url);
    assert.equal(await evaluate(bidi, tab, 'document.title'), 'browserd test page');
    assert.equal(await evaluate(bidi, tab, 'document.querySelector("#h").textContent'), 'hello');
    assert.equal(await evaluate(bidi, tab, 'new Promise((r) => setTimeout(() => r(6 * 7), 10))'), 42);

    const seen = await eventually(() => pw.contexts()[0]!.pages().find((p) => p.url() === url), 10_000);
    assert.ok(seen, `Playwright does not see ${url}: ${pw.contexts()[0]!.pages().map((p) => p.url()).join(', ')}`);
    assert.equal(await seen.title(), 'browserd test page');
    // A change Playwright makes is visible to BiDi in the same document.
    await seen.evaluate(() => (document.querySelector('#h')!.textContent = 'changed by playwright'));
    assert.equal(await evaluate(bidi, tab, 'document.querySelector("#h").textContent'), 'changed by playwright');
  });

  test('a tab Playwright opens appears in the BiDi context tree and can be driven over BiDi', async () => {
    await bidi.sessionSubscribe({ events: ['browsingContext.contextCreated'] });
    const url = `${site.url}?opened-by=playwright`;
    const page = await pw.contexts()[0]!.newPage();
    try {
      await page.goto(url);
      const found = await eventually(async () => (await topContexts(bidi)).find((c) => c.url === url), 10_000);
      assert.ok(found, `BiDi does not see ${url}`);
      assert.notEqual(found.context, tab);
      assert.ok(messages.some((m) => m.method === 'browsingContext.contextCreated' && (m.params as { context: string }).context === found.context));
      assert.equal(await evaluate(bidi, found.context, 'location.search'), '?opened-by=playwright');
    } finally {
      await page.close();
    }
    const closed = await eventually(async () => !(await topContexts(bidi)).some((c) => c.url === url), 10_000);
    assert.ok(closed, 'the tab Playwright closed is still in the BiDi tree');
  });

  test('malformed JSON gets an invalid argument error and the connection stays usable', async () => {
    const before = messages.length;
    bidi.socket!.send('{"id": 1, "method": ');
    bidi.socket!.send('[1, 2]');
    bidi.socket!.send(JSON.stringify({ id: 'x', method: 'session.status', params: {} }));
    const errors = await eventually(() => {
      const e = messages.slice(before).filter((m) => m.type === 'error');
      return e.length >= 3 ? e : null;
    }, 10_000);
    assert.ok(errors, `expected three error messages, got ${JSON.stringify(messages.slice(before))}`);
    for (const e of errors) {
      assert.equal(e.id, null);
      assert.equal(e.error, 'invalid argument');
      assert.equal(typeof e.message, 'string');
    }
    // Invalid params of a real command: the error carries its id (WebdriverIO rejects the call).
    await assert.rejects(bidi.send({ method: 'browsingContext.navigate', params: { context: 5 } } as never), /invalid argument/);
    assert.equal(bidi.socket!.readyState, WebSocket.OPEN);
    assert.equal(await evaluate(bidi, tab, '1 + 1'), 2);
  });

  test('what the CDP relay refuses is refused over BiDi too; the browser stays up', async () => {
    await assert.rejects(bidi.send({ method: 'webExtension.install', params: { extensionData: { type: 'path', path: '/etc' } } } as never), /unsupported operation/);
    await assert.rejects(bidi.send({ method: 'goog:cdp.sendCommand', params: { method: 'Browser.crash', params: {} } } as never), /not allowed through browserd/);
    // BiDi commands become the same CDP commands the relay checks: no file: navigation.
    await assert.rejects(bidi.browsingContextNavigate({ context: tab, url: 'file:///etc/passwd', wait: 'complete' }), /not allowed through browserd/);
    assert.notEqual(await evaluate(bidi, tab, 'location.protocol'), 'file:');
    // An allowed CDP command through the same extension works.
    const v = (await bidi.send({ method: 'goog:cdp.sendCommand', params: { method: 'Browser.getVersion', params: {} } } as never)) as unknown as { result: { result: { product: string } } };
    assert.match(v.result.result.product, /Chrom/);
    assert.equal(await evaluate(bidi, tab, 'document.title'), 'browserd test page');
  });
});

test('two BiDi clients at once: each has its own session, each sees the other\'s tab; closing one leaves the other working', async () => {
  const b = await kernel.browsers.create({ headless: true });
  let one: Bidi | null = null;
  let two: Bidi | null = null;
  try {
    [one, two] = await Promise.all([connectBidi(b.webdriver_ws_url), connectBidi(b.webdriver_ws_url)]);
    const [s1, s2] = await Promise.all([one.sessionNew({ capabilities: {} }), two.sessionNew({ capabilities: {} })]);
    assert.notEqual(s1.sessionId, s2.sessionId);

    const [c1, c2] = await Promise.all([one.browsingContextCreate({ type: 'tab' }), two.browsingContextCreate({ type: 'tab' })]);
    await Promise.all([
      one.browsingContextNavigate({ context: c1.context, url: `${site.url}?client=one`, wait: 'complete' }),
      two.browsingContextNavigate({ context: c2.context, url: `${site.url}?client=two`, wait: 'complete' }),
    ]);
    assert.equal(await evaluate(one, c1.context, 'location.search'), '?client=one');
    assert.equal(await evaluate(two, c2.context, 'location.search'), '?client=two');
    const seenByOne = await eventually(async () => (await topContexts(one!)).some((c) => c.context === c2.context), 10_000);
    const seenByTwo = await eventually(async () => (await topContexts(two!)).some((c) => c.context === c1.context), 10_000);
    assert.ok(seenByOne && seenByTwo, 'a client does not see the tab of the other');

    const oneClosed = closeOf(one);
    one.close();
    await oneClosed;
    one = null;
    assert.equal(await evaluate(two, c1.context, 'location.search'), '?client=one', 'the tab of the closed client is gone');
    await two.browsingContextClose({ context: c1.context });
    assert.equal(await evaluate(two, c2.context, 'document.title'), 'browserd test page');
  } finally {
    one?.close();
    two?.close();
    await kernel.browsers.deleteByID(b.session_id);
  }
});

// ---- lifecycle ----------------------------------------------------------------------

test('an open BiDi connection keeps a session with timeout_seconds 10 alive; after it closes the session times out', async () => {
  const b = await kernel.browsers.create({ headless: true, timeout_seconds: 10 });
  const bidi = await connectBidi(b.webdriver_ws_url);
  let open = true;
  try {
    await bidi.sessionNew({ capabilities: {} });
    const [ctx] = await topContexts(bidi);
    // Idle past the timeout plus the reaper's tolerance (10 s + 5 s).
    await new Promise((r) => setTimeout(r, 16_000));
    assert.equal((await retrieve(b.session_id)).deleted_at, undefined, 'a session with an open BiDi connection was ended for inactivity');
    assert.equal(await evaluate(bidi, ctx!.context, '2 + 2'), 4);
    bidi.close();
    open = false;
    // 10 s timeout + a 5 s reaper period + slack for a loaded machine.
    const ended = await eventually(async () => (await retrieve(b.session_id)).deleted_at, 35_000, 500);
    assert.ok(ended, 'the session outlived its timeout after the BiDi connection closed');
  } finally {
    if (open) bidi.close();
    await kernel.browsers.deleteByID(b.session_id).catch(() => undefined);
  }
});

test('deleting the session closes its BiDi websockets with 1000 "session ended (deleted)"; no helper process is left', async () => {
  const b = await kernel.browsers.create({ headless: true });
  const bidi = await connectBidi(b.webdriver_ws_url);
  const early = await connectBidi(b.webdriver_ws_url); // never starts a BiDi session
  try {
    await bidi.sessionNew({ capabilities: {} });
    // The mapper runs inside the server: no chromedriver or other helper for the session.
    assert.deepEqual(sessionProcesses(server.dataDir).filter((p) => p.sessionId === b.session_id && /chromedriver/.test(p.cmd)), []);
    const closes = [closeOf(bidi), closeOf(early)];
    await kernel.browsers.deleteByID(b.session_id);
    for (const c of await Promise.all(closes)) {
      assert.equal(c.code, 1000);
      assert.match(c.reason, /session ended/);
      assert.equal(c.reason, 'session ended (deleted)');
    }
  } finally {
    bidi.close();
    early.close();
  }
});

test('a browser that dies under a BiDi client closes the websocket with 1011; the server keeps serving', async () => {
  const b = await kernel.browsers.create({ headless: true, timeout_seconds: 600 });
  const bidi = await connectBidi(b.webdriver_ws_url);
  try {
    await bidi.sessionNew({ capabilities: {} });
    const closed = closeOf(bidi);
    const main = sessionProcesses(server.dataDir).find((p) => p.sessionId === b.session_id && p.cmd.includes('--remote-debugging-port'));
    assert.ok(main, 'no chromium process for the session');
    process.kill(main.pid, 'SIGKILL');
    const c = await closed;
    assert.equal(c.code, 1011);
    assert.match(c.reason, /browser connection/);
    const health = await fetch(`${server.url}/browsers`, { headers: server.headers() });
    assert.equal(health.status, 200);
  } finally {
    bidi.close();
    await kernel.browsers.deleteByID(b.session_id).catch(() => undefined);
  }
});
