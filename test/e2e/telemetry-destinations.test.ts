import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import WebSocket from 'ws';
import { eventually, startServer, type TestServer } from '../helpers/server.js';

/**
 * Updating telemetry destinations (PATCH /telemetry/destinations/{id_or_name}; the Kernel
 * SDK has no destinations resource, so plain HTTP) and the per-session retention limit
 * (BROWSERD_TELEMETRY_RETAINED_EVENTS), while a session runs and when it ends.
 */

const RETAINED = 100;
let server: TestServer;
let kernel: Kernel;

before(async () => {
  server = await startServer({ env: { BROWSERD_TELEMETRY_RETAINED_EVENTS: String(RETAINED) } });
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
});
after(async () => {
  await server?.stop();
});

interface Destination {
  id: string;
  name: string | null;
  endpoint: string;
  header_names: string[];
  created_at: string;
  updated_at: string;
}
interface ErrorBody {
  code: string;
  message: string;
  /** Each detail's message starts with the field it is about (`field: rule`). */
  details?: { code: string; message: string }[];
}
const fieldsOf = (e: ErrorBody) => (e.details ?? []).map((d) => d.message.slice(0, d.message.indexOf(':')));

const json = (method: string, path: string, body?: unknown) =>
  fetch(`${server.url}${path}`, { method, headers: server.headers({ 'content-type': 'application/json' }), ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
const update = (ref: string, body: unknown) => json('PATCH', `/telemetry/destinations/${encodeURIComponent(ref)}`, body);
async function create(body: unknown): Promise<Destination> {
  const r = await json('POST', '/telemetry/destinations', body);
  const d = (await r.json()) as Destination;
  assert.equal(r.status, 200, JSON.stringify(d));
  return d;
}

/** An OTLP/HTTP logs receiver: the api-key header and the event names of every export it accepted. */
async function receiver(): Promise<{ url: string; got: { key: string; names: string[] }[]; close(): Promise<void> }> {
  const got: { key: string; names: string[] }[] = [];
  const srv = http.createServer((req, res) => {
    let data = '';
    req.on('data', (d) => (data += d));
    req.on('end', () => {
      if (req.url !== '/v1/logs' || req.method !== 'POST') return void res.writeHead(404).end();
      const body = JSON.parse(data) as { resourceLogs: { scopeLogs: { logRecords: { eventName: string }[] }[] }[] };
      got.push({ key: String(req.headers['x-api-key']), names: body.resourceLogs.flatMap((rl) => rl.scopeLogs.flatMap((sl) => sl.logRecords.map((lr) => lr.eventName))) });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, got, close: () => new Promise((r) => srv.close(() => r())) };
}

/** A raw CDP client on the session's cdp_ws_url: sends `n` commands one after another, each answered. */
async function cdpCommands(wsUrl: string, n: number): Promise<WebSocket> {
  const ws = new WebSocket(wsUrl);
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const pending = new Map<number, () => void>();
  ws.on('message', (m) => {
    const msg = JSON.parse(String(m)) as { id?: number };
    if (msg.id !== undefined) pending.get(msg.id)?.();
  });
  for (let id = 1; id <= n; id++) {
    await new Promise<void>((resolve) => {
      pending.set(id, resolve);
      ws.send(JSON.stringify({ id, method: 'Browser.getVersion' }));
    });
  }
  return ws;
}

async function closeWs(ws: WebSocket): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return;
  await new Promise((r) => (ws.once('close', r), ws.close()));
}

/** Every stored event of a session, oldest first (from seq 1 on, through the SDK). */
async function events(id: string): Promise<{ seq: number; event: { type: string } }[]> {
  const out: { seq: number; event: { type: string } }[] = [];
  for await (const e of kernel.browsers.telemetry.events(id, { limit: 100, offset: 0 })) out.push(e as unknown as { seq: number; event: { type: string } });
  return out;
}

/** The SQLite file and its write-ahead log never hold the given bytes. */
function assertNotStored(secret: string): void {
  for (const f of ['browserd.sqlite', 'browserd.sqlite-wal']) {
    const file = `${server.dataDir}/${f}`;
    if (fs.existsSync(file)) assert.ok(!fs.readFileSync(file).includes(Buffer.from(secret)), `${f} holds the header value`);
  }
}

describe('PATCH /telemetry/destinations/{id_or_name}', () => {
  test('renames, changes endpoint and headers (sealed); a session exporting to it switches to the new endpoint and headers at once', async () => {
    const a = await receiver();
    const b = await receiver();
    try {
      const d = await create({ name: 'collector-a', endpoint: a.url, headers: { 'x-api-key': 'old-secret-value-a' } });
      const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true, export: { otlp: { destination: { id: d.id } } } } as { enabled: boolean } });
      let ws: WebSocket | null = null;
      try {
        ws = await cdpCommands(s.cdp_ws_url, 3);
        // All of them arrived (none still queued or in flight to A when the PATCH comes).
        await eventually(() => (a.got.flatMap((x) => x.names).filter((n) => n === 'cdp_command').length === 3 ? true : null));
        assert.ok(a.got.every((x) => x.key === 'old-secret-value-a'));

        await new Promise((r) => setTimeout(r, 5)); // updated_at has millisecond resolution
        const r = await update('collector-a', { name: 'collector-b', endpoint: `${b.url}/`, headers: { 'x-api-key': 'new-secret-value-b', 'x-team': 'blue-team-value' } });
        const text = await r.text();
        assert.equal(r.status, 200, text);
        const u = JSON.parse(text) as Destination;
        assert.equal(u.id, d.id);
        assert.equal(u.name, 'collector-b');
        assert.equal(u.endpoint, `${b.url}/`);
        assert.deepEqual(u.header_names, ['x-api-key', 'x-team']);
        assert.equal(u.created_at, d.created_at);
        assert.ok(Date.parse(u.updated_at) > Date.parse(d.updated_at), `${u.updated_at} after ${d.updated_at}`);
        assert.ok(!text.includes('new-secret-value-b') && !text.includes('blue-team-value'), 'header values are never returned');
        assertNotStored('new-secret-value-b');
        assertNotStored('blue-team-value');

        // The new name finds it, the old one no longer does; GET and list show the change.
        assert.deepEqual(await (await json('GET', '/telemetry/destinations/collector-b')).json(), u);
        assert.equal((await json('GET', '/telemetry/destinations/collector-a')).status, 404);
        const listed = (await (await json('GET', '/telemetry/destinations')).json()) as Destination[];
        assert.deepEqual(listed.find((x) => x.id === d.id), u);

        // The running session's exporter follows: new events go to B with the new headers, none to A any more.
        const beforeA = a.got.length;
        await closeWs(ws);
        ws = await cdpCommands(s.cdp_ws_url, 2);
        await eventually(() => (b.got.some((x) => x.names.includes('cdp_command')) ? true : null));
        assert.ok(b.got.every((x) => x.key === 'new-secret-value-b'), JSON.stringify(b.got.map((x) => x.key)));
        assert.equal(a.got.length, beforeA, 'nothing more was sent to the old endpoint');
      } finally {
        if (ws) await closeWs(ws);
        await kernel.browsers.deleteByID(s.session_id);
      }

      // Only the name: the rest stays; null clears it (then only the id finds it).
      let r = await update(d.id, { name: null });
      const cleared = (await r.json()) as Destination;
      assert.equal(r.status, 200);
      assert.equal(cleared.name, null);
      assert.equal(cleared.endpoint, `${b.url}/`);
      assert.deepEqual(cleared.header_names, ['x-api-key', 'x-team']);
      // headers {} removes them all; omitted headers stay as they are.
      r = await update(d.id, { headers: {} });
      assert.deepEqual(((await r.json()) as Destination).header_names, []);
      r = await update(d.id, { name: 'collector-c' });
      assert.deepEqual(((await r.json()) as Destination).header_names, []);
      // An empty body changes nothing.
      const now = (await (await json('GET', `/telemetry/destinations/${d.id}`)).json()) as Destination;
      r = await update(d.id, {});
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), now);
      assert.equal((await json('DELETE', `/telemetry/destinations/${d.id}`)).status, 204);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('400 with one detail per broken rule (unknown fields named), 404 for an unknown destination, 409 for a taken name', async () => {
    const d = await create({ name: 'patch-rules', endpoint: 'http://127.0.0.1:9' });
    await create({ name: 'patch-taken', endpoint: 'http://127.0.0.1:9' });

    let r = await update('patch-rules', { bogus: 1 });
    let e = (await r.json()) as ErrorBody;
    assert.equal(r.status, 400);
    assert.equal(e.code, 'bad_request');
    assert.deepEqual(fieldsOf(e), ['bogus'], JSON.stringify(e));

    r = await update('patch-rules', { name: '', endpoint: 'ftp://collector', headers: { 'x-a': 5 } });
    e = (await r.json()) as ErrorBody;
    assert.equal(r.status, 400);
    // One detail per broken rule; the endpoint rule beyond the schema comes with the schema's problems.
    assert.deepEqual(fieldsOf(e).sort(), ['endpoint', 'headers.x-a', 'name'], JSON.stringify(e));

    for (const endpoint of ['not a url', '/relative/path', 'ftp://collector:21', '']) {
      r = await update('patch-rules', { endpoint });
      e = (await r.json()) as ErrorBody;
      assert.equal(r.status, 400, endpoint);
      assert.deepEqual(fieldsOf(e), ['endpoint'], `${endpoint}: ${JSON.stringify(e)}`);
    }
    r = await update('patch-rules', { name: 'x'.repeat(256) });
    assert.equal(r.status, 400);

    r = await update('no-such-destination', { name: 'whatever' });
    e = (await r.json()) as ErrorBody;
    assert.equal(r.status, 404);
    assert.equal(e.code, 'telemetry_destination_not_found');

    r = await update('patch-rules', { name: 'patch-taken' });
    e = (await r.json()) as ErrorBody;
    assert.equal(r.status, 409);
    assert.equal(e.code, 'name_conflict');

    // Nothing of the refused requests was applied.
    const now = (await (await json('GET', `/telemetry/destinations/${d.id}`)).json()) as Destination;
    assert.deepEqual(now, d);
    for (const n of ['patch-rules', 'patch-taken']) assert.equal((await json('DELETE', `/telemetry/destinations/${n}`)).status, 204);
  });
});

describe('retention (BROWSERD_TELEMETRY_RETAINED_EVENTS)', () => {
  test('a running session keeps at most the limit plus 10 %: the oldest events are dropped, the newest kept; the end prunes to the limit', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    let ws: WebSocket | null = null;
    try {
      const commands = 3 * RETAINED;
      ws = await cdpCommands(s.cdp_ws_url, commands);
      // cdp_connect + one cdp_command per command, all captured while the session runs.
      const last = 1 + commands;
      const running = await eventually(async () => {
        const list = await events(s.session_id);
        return list[list.length - 1]?.seq === last ? list : null;
      });
      assert.ok(running, 'all events were captured');
      assert.ok(running.length >= RETAINED && running.length <= RETAINED * 1.1, `${running.length} events kept while running`);
      assert.ok(running[0]!.seq > 1 + RETAINED, `the oldest are gone (first kept seq ${running[0]!.seq})`);
      assert.ok(!running.some((e) => e.event.type === 'cdp_connect'), 'the first event was pruned');
      assert.deepEqual(
        running.map((e) => e.seq),
        Array.from({ length: running.length }, (_, i) => last - running.length + 1 + i),
        'the newest, without gaps',
      );
      assert.ok(running.every((e) => e.event.type === 'cdp_command'));

      await closeWs(ws);
      ws = null;
      await kernel.browsers.deleteByID(s.session_id);
      const ended = await eventually(async () => {
        const list = await events(s.session_id);
        return list.length === RETAINED && list[list.length - 1]?.event.type === 'cdp_disconnect' ? list : null;
      });
      assert.ok(ended, 'the end pruned to the limit');
      const end = ended[ended.length - 1]!.seq;
      assert.ok(end > last, 'the disconnect came after the commands');
      assert.deepEqual(
        ended.map((e) => e.seq),
        Array.from({ length: RETAINED }, (_, i) => end - RETAINED + 1 + i),
        'exactly the newest RETAINED events are kept',
      );
    } finally {
      if (ws) await closeWs(ws);
      await kernel.browsers.deleteByID(s.session_id).catch(() => undefined);
    }
  });
});
