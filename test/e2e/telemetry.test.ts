import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { eventually, sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let kernel: Kernel;

before(async () => {
  // A fast reaper so a killed browser is noticed within the test's bounds.
  server = await startServer({ env: { BROWSERD_REAPER_INTERVAL_MS: '300' } });
  site = await startSite();
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
});
after(async () => {
  await server?.stop();
  await site?.close();
});

interface Envelope {
  seq: number;
  event: { category: string; type: string; ts: number; source: { kind: string }; data?: Record<string, unknown> };
}

/** Every event of a session, oldest first, through the SDK's paginated list. */
async function events(id: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const e of kernel.browsers.telemetry.events(id, { limit: 50, offset: 0 })) out.push(e as unknown as Envelope);
  return out;
}

function fullCmd(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** Every process below the given ones (by parent pid). */
function descendants(roots: number[]): number[] {
  const parent = new Map<number, number>();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'latin1');
      parent.set(Number(e), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* gone */
    }
  }
  const out = new Set(roots);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, ppid] of parent) if (out.has(ppid) && !out.has(pid)) (out.add(pid), (grew = true));
  }
  return [...out];
}

async function patch(id: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}/browsers/${id}`, { method: 'PATCH', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify(body) });
}

const DEFAULT_BROWSER = {
  control: { enabled: true }, connection: { enabled: true }, system: { enabled: true }, captcha: { enabled: true },
  console: { enabled: false }, network: { enabled: false }, page: { enabled: false }, interaction: { enabled: false },
  screenshot: { enabled: false }, platform: { enabled: false },
};

describe('telemetry configuration', () => {
  test('create, get and PATCH show the active configuration; null while nothing is captured', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    try {
      assert.deepEqual(s.telemetry, { browser: DEFAULT_BROWSER, export: { otlp: { enabled: false } } });
      assert.deepEqual((await kernel.browsers.retrieve(s.session_id)).telemetry, s.telemetry);

      let r = await patch(s.session_id, { telemetry: { browser: { console: { enabled: true }, control: { cdp: { excluded_methods: ['Page.navigate'] } } } } });
      assert.equal(r.status, 200);
      let body = (await r.json()) as { telemetry: { browser: Record<string, unknown> } };
      assert.deepEqual(body.telemetry.browser.console, { enabled: true });
      assert.deepEqual(body.telemetry.browser.control, { enabled: true, cdp: { excluded_methods: ['Page.navigate'] } });

      // {} changes nothing; enabled=true resolves afresh from the default set (the list stays).
      r = await patch(s.session_id, { telemetry: {} });
      assert.deepEqual(((await r.json()) as typeof body).telemetry, body.telemetry);
      r = await patch(s.session_id, { telemetry: { enabled: true } });
      body = (await r.json()) as typeof body;
      assert.deepEqual(body.telemetry.browser.console, { enabled: false });
      assert.deepEqual(body.telemetry.browser.control, { enabled: true, cdp: { excluded_methods: ['Page.navigate'] } });

      r = await patch(s.session_id, { telemetry: { enabled: false, browser: { console: { enabled: true } } } });
      assert.equal(r.status, 400);
      assert.match(JSON.stringify(await r.json()), /telemetry\.enabled/);

      r = await patch(s.session_id, { telemetry: { enabled: false } });
      assert.equal(((await r.json()) as { telemetry: unknown }).telemetry, null);
      assert.equal((await kernel.browsers.retrieve(s.session_id)).telemetry, null);
    } finally {
      await kernel.browsers.deleteByID(s.session_id);
    }
  });

  test('no capture: omitted, {}, enabled=false or all operational categories off give telemetry null', async () => {
    const off = { control: { enabled: false }, connection: { enabled: false }, system: { enabled: false }, captcha: { enabled: false } };
    for (const telemetry of [undefined, {}, { enabled: false }, { enabled: true, browser: off }]) {
      const r = await fetch(`${server.url}/browsers`, { method: 'POST', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify({ headless: true, telemetry }) });
      const body = (await r.json()) as { session_id: string; telemetry: unknown };
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(body.telemetry, null, JSON.stringify(telemetry));
      await kernel.browsers.deleteByID(body.session_id);
    }
  });

  test('an export destination that does not exist is 404 and creates nothing', async () => {
    const r = await fetch(`${server.url}/browsers`, {
      method: 'POST',
      headers: server.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify({ headless: true, telemetry: { enabled: true, export: { otlp: { destination: { name: 'nowhere' } } } } }),
    });
    assert.equal(r.status, 404);
    assert.match(((await r.json()) as { message: string }).message, /^telemetry\.export\.otlp\.destination/);
  });
});

describe('telemetry capture', () => {
  test('Playwright through cdp_ws_url: cdp_command events, exclusions counted in cdp_disconnect, no typed text, PATCH takes effect', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true, browser: { control: { cdp: { excluded_methods: ['Page.reload'] } } as { enabled?: boolean } } } });
    try {
      const browser = await chromium.connectOverCDP(s.cdp_ws_url);
      const page = browser.contexts()[0]!.pages()[0] ?? (await browser.contexts()[0]!.newPage());
      await page.goto(`${site.url}/?token=very-secret-query`);
      await page.reload();
      await page.setContent('<input id="i">');
      await page.focus('#i');
      await page.keyboard.insertText('hunter2-typed-secret');
      await page.keyboard.type('xy');
      await browser.close();

      const evs = await eventually(async () => {
        const e = await events(s.session_id);
        return e.some((x) => x.event.type === 'cdp_disconnect') ? e : null;
      });
      assert.ok(evs, 'a cdp_disconnect event arrives');
      const seqs = evs.map((e) => e.seq);
      assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
      const commands = evs.filter((e) => e.event.type === 'cdp_command');
      const methods = commands.map((e) => e.event.data!.method as string);
      assert.ok(methods.includes('Page.navigate'), methods.join(' '));
      assert.ok(methods.includes('Input.insertText'), methods.join(' '));
      assert.ok(methods.includes('Input.dispatchKeyEvent'), methods.join(' '));
      assert.ok(!methods.includes('Page.reload'), 'the excluded method produces no cdp_command');
      for (const c of commands) {
        assert.equal(c.event.category, 'control');
        assert.equal(typeof c.event.ts, 'number');
      }
      const navigate = commands.find((e) => e.event.data!.method === 'Page.navigate')!;
      assert.deepEqual(navigate.event.data!.params, { url: `${site.url}/` });
      const all = JSON.stringify(evs);
      assert.ok(!all.includes('hunter2'), 'typed text never appears in events');
      assert.ok(!all.includes('very-secret-query'), 'query strings never appear in events');
      assert.ok(!all.includes('jwt'), 'tokens never appear in events');

      const connect = evs.find((e) => e.event.type === 'cdp_connect')!;
      const disconnect = evs.find((e) => e.event.type === 'cdp_disconnect')!;
      assert.equal(connect.event.category, 'connection');
      assert.ok(connect.seq < commands[0]!.seq && disconnect.seq > commands[commands.length - 1]!.seq);
      assert.equal(disconnect.event.data!.telemetry_excluded, 1);
      assert.equal(disconnect.event.data!.reason, 'client_close');
      assert.ok((disconnect.event.data!.message_count as number) > commands.length);
      assert.equal(typeof disconnect.event.data!.duration_ms, 'number');

      // PATCH control off: a new connection's commands are not captured, connection events still are.
      assert.equal((await patch(s.session_id, { telemetry: { browser: { control: { enabled: false } } } })).status, 200);
      const before = (await events(s.session_id)).length;
      const b2 = await chromium.connectOverCDP(s.cdp_ws_url);
      const p2 = b2.contexts()[0]!.pages()[0]!;
      await p2.goto(`${site.url}/second`);
      // Control back on while connected: this open connection's next commands are captured.
      assert.equal((await patch(s.session_id, { telemetry: { browser: { control: { enabled: true } } } })).status, 200);
      await p2.goto(`${site.url}/third`);
      await b2.close();
      const later = await eventually(async () => {
        const e = (await events(s.session_id)).slice(before);
        return e.some((x) => x.event.type === 'cdp_disconnect') ? e : null;
      });
      assert.ok(later);
      const urls = later.filter((e) => e.event.data?.method === 'Page.navigate').map((e) => (e.event.data!.params as { url: string }).url);
      assert.deepEqual(urls, [`${site.url}/third`]);
      assert.deepEqual(later.map((e) => e.event.type).filter((t) => t !== 'cdp_command'), ['cdp_connect', 'cdp_disconnect']);
    } finally {
      await kernel.browsers.deleteByID(s.session_id);
    }
  });

  test('category filter and desc order of the events route', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    try {
      const b = await chromium.connectOverCDP(s.cdp_ws_url);
      await b.close();
      await eventually(async () => (await events(s.session_id)).some((e) => e.event.type === 'cdp_disconnect'));
      const conn: Envelope[] = [];
      for await (const e of kernel.browsers.telemetry.events(s.session_id, { category: ['connection'], limit: 2, offset: 0 })) conn.push(e as unknown as Envelope);
      assert.deepEqual(conn.map((e) => e.event.type), ['cdp_connect', 'cdp_disconnect']);
      const r = await fetch(`${server.url}/browsers/${s.session_id}/telemetry/events?order=desc&limit=1`, { headers: server.headers() });
      const page = (await r.json()) as Envelope[];
      assert.equal(page.length, 1);
      assert.equal(r.headers.get('x-has-more'), 'true');
      const all = await events(s.session_id);
      assert.equal(page[0]!.seq, all[all.length - 1]!.seq);
      const bad = await fetch(`${server.url}/browsers/${s.session_id}/telemetry/events?order=desc&since=5m`, { headers: server.headers() });
      assert.equal(bad.status, 400);
      const none = await fetch(`${server.url}/browsers/nope/telemetry/events`, { headers: server.headers() });
      assert.equal(none.status, 404);
    } finally {
      await kernel.browsers.deleteByID(s.session_id);
    }
  });

  test('system: a renderer killed by signal gives a service_crashed event; the session lives on', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    try {
      const b = await chromium.connectOverCDP(s.cdp_ws_url);
      const page = b.contexts()[0]!.pages()[0]!;
      await page.goto(site.url);
      // Renderers run with a cleared environment: found as descendants of the session's processes.
      const renderers = descendants(sessionProcesses(server.dataDir).filter((p) => p.sessionId === s.session_id).map((p) => p.pid)).filter((pid) => fullCmd(pid).includes('--type=renderer'));
      assert.ok(renderers.length > 0, 'the session has renderer processes');
      for (const pid of renderers) process.kill(pid, 'SIGKILL');
      const crashed = await eventually(async () => (await events(s.session_id)).find((e) => e.event.type === 'service_crashed'), 30_000);
      assert.ok(crashed, 'service_crashed arrives');
      assert.equal(crashed.event.category, 'system');
      assert.equal(crashed.event.source.kind, 'cdp');
      assert.equal(crashed.event.data!.service_name, 'chromium_renderer');
      assert.equal(crashed.event.data!.phase, 'running');
      assert.equal(typeof crashed.event.data!.termination_status, 'string');
      assert.ok(crashed.event.data!.target_id);
      await b.close();
      assert.equal((await kernel.browsers.retrieve(s.session_id)).session_id, s.session_id);
    } finally {
      const crashes = async () => (await events(s.session_id)).filter((e) => e.event.type === 'service_crashed');
      // One event per target whose renderer was killed; ending the session (browserd stops the browser) reports none.
      const before = await crashes();
      assert.ok(before.every((e) => e.event.data!.termination_status === 'killed'), JSON.stringify(before));
      await kernel.browsers.deleteByID(s.session_id);
      assert.equal((await crashes()).length, before.length);
    }
  });

  test('system: the browser killed by signal gives a service_crashed event, readable after the session ended', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    const procs = sessionProcesses(server.dataDir).filter((p) => p.sessionId === s.session_id && !fullCmd(p.pid).includes('--type='));
    assert.ok(procs.length > 0);
    for (const p of procs) process.kill(p.pid, 'SIGKILL');
    const crashed = await eventually(async () => (await events(s.session_id)).find((e) => e.event.type === 'service_crashed'), 30_000);
    assert.ok(crashed, 'service_crashed arrives');
    assert.equal(crashed.event.category, 'system');
    assert.equal(crashed.event.data!.service_name, 'chromium');
    assert.equal(crashed.event.data!.phase, 'running');
    assert.ok(procs.some((p) => p.pid === crashed.event.data!.pid));
    await eventually(async () => (await kernel.browsers.retrieve(s.session_id).catch(() => null)) === null);
  });
});

describe('telemetry stream (server-sent events)', () => {
  test('live events through the SDK stream; replay=all and Last-Event-ID on an ended session replay and end', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    const live: Envelope[] = [];
    const stream = await kernel.browsers.telemetry.stream(s.session_id);
    const reading = (async () => {
      for await (const e of stream) {
        live.push(e as unknown as Envelope);
        if ((e as unknown as Envelope).event.type === 'cdp_disconnect') break;
      }
    })();
    const b = await chromium.connectOverCDP(s.cdp_ws_url);
    await b.contexts()[0]!.pages()[0]!.goto(site.url);
    await b.close();
    await reading;
    assert.equal(live[0]!.event.type, 'cdp_connect');
    assert.ok(live.some((e) => e.event.type === 'cdp_command'));
    const seqs = live.map((e) => e.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => seqs[0]! + i), 'consecutive seq, no gaps');
    await kernel.browsers.deleteByID(s.session_id);

    const all: Envelope[] = [];
    for await (const e of await kernel.browsers.telemetry.stream(s.session_id, { replay: 'all' })) all.push(e as unknown as Envelope);
    assert.deepEqual(all.map((e) => e.seq), (await events(s.session_id)).map((e) => e.seq), 'replay=all gives every stored event, then the stream of an ended session ends');
    const resumed: Envelope[] = [];
    for await (const e of await kernel.browsers.telemetry.stream(s.session_id, { 'Last-Event-ID': String(all[2]!.seq), replay: 'all' })) resumed.push(e as unknown as Envelope);
    assert.deepEqual(resumed.map((e) => e.seq), all.slice(3).map((e) => e.seq), 'Last-Event-ID resumes after that event and wins over replay');
    const none = await fetch(`${server.url}/browsers/nope/telemetry/stream`, { headers: server.headers({ accept: 'text/event-stream' }) });
    assert.equal(none.status, 404);
  });
});

describe('OTLP export', () => {
  test('events of a session bound to a destination arrive at an OTLP/HTTP receiver as logs, in order, with their attributes; a 503 is retried', async () => {
    const http = await import('node:http');
    const bodies: { resourceLogs: { resource: { attributes: Attr[] }; scopeLogs: { logRecords: LogRecord[] }[] }[] }[] = [];
    const seenHeaders: string[] = [];
    let refused = 0;
    const receiver = http.createServer((req, res) => {
      let data = '';
      req.on('data', (d) => (data += d));
      req.on('end', () => {
        if (req.url !== '/v1/logs' || req.method !== 'POST') return void res.writeHead(404).end();
        // The first export is refused as overloaded: the exporter must retry it.
        if (refused++ === 0) return void res.writeHead(503).end();
        seenHeaders.push(String(req.headers['x-api-key']));
        bodies.push(JSON.parse(data));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as { port: number }).port;
    try {
      let r = await fetch(`${server.url}/telemetry/destinations`, {
        method: 'POST',
        headers: server.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify({ name: 'local-collector', endpoint: `http://127.0.0.1:${port}`, headers: { 'x-api-key': 'collector-secret-value' } }),
      });
      const dest = (await r.json()) as { id: string; name: string; header_names: string[] };
      assert.equal(r.status, 200, JSON.stringify(dest));
      assert.deepEqual(dest.header_names, ['x-api-key']);
      assert.ok(!JSON.stringify(dest).includes('collector-secret-value'));
      r = await fetch(`${server.url}/telemetry/destinations/local-collector`, { headers: server.headers() });
      assert.equal(((await r.json()) as { id: string }).id, dest.id);
      r = await fetch(`${server.url}/telemetry/destinations`, { headers: server.headers() });
      assert.ok(!(await r.text()).includes('collector-secret-value'));
      // Sealed in the store: neither the database file nor its write-ahead log holds the value.
      for (const f of ['browserd.sqlite', 'browserd.sqlite-wal']) {
        const file = `${server.dataDir}/${f}`;
        if (fs.existsSync(file)) assert.ok(!fs.readFileSync(file).includes(Buffer.from('collector-secret-value')), f);
      }

      const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true, export: { otlp: { destination: { name: 'local-collector' } } } } as { enabled: boolean } });
      assert.deepEqual((s.telemetry as { export: unknown }).export, { otlp: { enabled: true, destination: dest.id } });
      // Export is ignored on update: the binding stays.
      r = await patch(s.session_id, { telemetry: { export: { otlp: { enabled: false } } } });
      assert.deepEqual(((await r.json()) as { telemetry: { export: unknown } }).telemetry.export, { otlp: { enabled: true, destination: dest.id } });
      const b = await chromium.connectOverCDP(s.cdp_ws_url);
      await b.contexts()[0]!.pages()[0]!.goto(site.url);
      await b.close();
      await kernel.browsers.deleteByID(s.session_id);
      const stored = await events(s.session_id);

      const records = await eventually(() => {
        const recs = bodies.flatMap((body) => body.resourceLogs.flatMap((rl) => rl.scopeLogs.flatMap((sl) => sl.logRecords.map((lr) => ({ rl, lr })))));
        return recs.some(({ lr }) => attr(lr.attributes, 'event.name') === 'cdp_disconnect') ? recs : null;
      });
      assert.ok(records, `the receiver got the events (${refused} requests)`);
      assert.ok(refused >= 2, 'the refused export was retried');
      assert.ok(seenHeaders.every((h) => h === 'collector-secret-value'), 'the destination headers are sent');
      for (const { rl, lr } of records) {
        assert.equal(attr(rl.resource.attributes, 'service.name'), 'browserd');
        assert.equal(attr(rl.resource.attributes, 'browser.session_id'), s.session_id);
        const ev = JSON.parse(lr.body.stringValue) as { type: string; category: string; ts: number };
        assert.equal(attr(lr.attributes, 'event.name'), ev.type);
        assert.equal(attr(lr.attributes, 'telemetry.category'), ev.category);
        assert.equal(lr.timeUnixNano, String(BigInt(ev.ts) * 1000n));
      }
      const seqs = records.map(({ lr }) => Number(lr.attributes.find((a) => a.key === 'telemetry.seq')!.value.intValue));
      assert.deepEqual(seqs, stored.map((e) => e.seq).slice(0, seqs.length), 'exported in capture order, the same events as stored');
      const types = records.map(({ lr }) => attr(lr.attributes, 'event.name'));
      assert.equal(types[0], 'cdp_connect');
      assert.ok(types.includes('cdp_command'));
    } finally {
      await new Promise((r) => receiver.close(r));
    }
  });

  test('destinations: 404 for unknown ones, a bad endpoint is 400, names are unique (409), delete is 204', async () => {
    const post = (body: unknown) => fetch(`${server.url}/telemetry/destinations`, { method: 'POST', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify(body) });
    assert.equal((await post({ endpoint: 'ftp://x' })).status, 400);
    assert.equal((await post({ name: 'dup', endpoint: 'http://127.0.0.1:9' })).status, 200);
    assert.equal((await post({ name: 'dup', endpoint: 'http://127.0.0.1:9' })).status, 409);
    assert.equal((await fetch(`${server.url}/telemetry/destinations/missing`, { headers: server.headers() })).status, 404);
    assert.equal((await fetch(`${server.url}/telemetry/destinations/dup`, { method: 'DELETE', headers: server.headers() })).status, 204);
    assert.equal((await fetch(`${server.url}/telemetry/destinations/dup`, { headers: server.headers() })).status, 404);
  });
});

interface Attr {
  key: string;
  value: { stringValue?: string; intValue?: string };
}
interface LogRecord {
  timeUnixNano: string;
  body: { stringValue: string };
  attributes: Attr[];
}
function attr(list: Attr[], key: string): string | undefined {
  return list.find((a) => a.key === key)?.value.stringValue;
}
