import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * Error handling of the HTTP API against the real server: every bad request gets a 4xx
 * with the contract's Error body (never a 500), and no bad request creates a session.
 */

let server: TestServer;
let keep: string; // one valid session, so "nothing changed" is checked against a non-empty list

before(async () => {
  server = await startServer();
  const r = await fetch(`${server.url}/browsers`, { method: 'POST', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify({ headless: true }) });
  assert.equal(r.status, 200, await r.clone().text());
  keep = ((await r.json()) as { session_id: string }).session_id;
});
after(async () => {
  await server?.stop();
});

type Json = Record<string, unknown>;
const ERROR_KEYS = new Set(['code', 'message', 'details', 'inner_error']);

/** The contract's Error body: code and message strings, optional details / inner_error, nothing else. */
function assertErrorBody(body: unknown, what: string, code?: string): Json {
  assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `${what}: body is not a JSON object: ${JSON.stringify(body)}`);
  const b = body as Json;
  assert.equal(typeof b.code, 'string', `${what}: code is not a string: ${JSON.stringify(b)}`);
  assert.ok((b.code as string).length > 0, `${what}: empty code`);
  assert.equal(typeof b.message, 'string', `${what}: message is not a string: ${JSON.stringify(b)}`);
  assert.ok((b.message as string).length > 0, `${what}: empty message`);
  for (const k of Object.keys(b)) assert.ok(ERROR_KEYS.has(k), `${what}: unexpected field "${k}" in Error body ${JSON.stringify(b)}`);
  if (b.details !== undefined) {
    assert.ok(Array.isArray(b.details), `${what}: details is not an array`);
    for (const d of b.details as Json[]) {
      assert.equal(typeof d.code, 'string', `${what}: detail code`);
      assert.equal(typeof d.message, 'string', `${what}: detail message`);
    }
  }
  if (code !== undefined) assert.equal(b.code, code, `${what}: code`);
  return b;
}

interface Answer {
  status: number;
  headers: Headers | Record<string, string>;
  body: unknown;
  text: string;
}

async function call(method: string, path: string, init: { headers?: Record<string, string>; body?: string | Uint8Array<ArrayBuffer>; auth?: boolean } = {}): Promise<Answer> {
  const headers = init.auth === false ? { ...init.headers } : server.headers(init.headers);
  const r = await fetch(`${server.url}${path}`, { method, headers, body: init.body });
  const text = await r.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: r.status, headers: r.headers, body, text };
}

/** Writes raw bytes to the server and reads the response until the server closes the connection. */
function rawRequest(bytes: string | Buffer): Promise<{ status: number; body: unknown; text: string }> {
  const u = new URL(server.url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no answer to raw request ${JSON.stringify(String(bytes).slice(0, 80))}`));
    }, 15_000);
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', () => undefined); // the server may reset after answering a broken request
    sock.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(all);
      if (!m) return reject(new Error(`no HTTP response to raw request: ${JSON.stringify(all.slice(0, 200))}`));
      const sep = all.indexOf('\r\n\r\n');
      const text = sep >= 0 ? all.slice(sep + 4) : '';
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      resolve({ status: Number(m[1]), body, text });
    });
    sock.write(bytes);
  });
}

async function sessionIds(): Promise<string[]> {
  const r = await call('GET', '/browsers?status=all&limit=100');
  assert.equal(r.status, 200, r.text);
  return (r.body as { session_id: string }[]).map((b) => b.session_id).sort();
}

/** Runs one bad request and checks: 4xx (or the given status), Error body, no session created or ended. */
async function expectRejected(what: string, run: () => Promise<Answer | { status: number; body: unknown; text: string }>, status?: number, code?: string): Promise<Json> {
  const before = await sessionIds();
  const r = await run();
  assert.ok(r.status < 500, `${what}: got ${r.status} ${r.text}`);
  if (status !== undefined) assert.equal(r.status, status, `${what}: ${r.text}`);
  else assert.ok(r.status >= 400 && r.status < 500, `${what}: expected a 4xx, got ${r.status} ${r.text}`);
  const body = assertErrorBody(r.body, `${what} (${r.status} ${r.text.slice(0, 200)})`, code);
  assert.deepEqual(await sessionIds(), before, `${what}: the list of sessions changed`);
  return body;
}

const json = { 'content-type': 'application/json' };

test('an unknown route is 404 with the Error body, with or without a key', async () => {
  await expectRejected('GET /nope', () => call('GET', '/nope'), 404, 'not_found');
  await expectRejected('POST /v1/browsers', () => call('POST', '/v1/browsers', { headers: json, body: '{}' }), 404, 'not_found');
  await expectRejected('GET /nope without key', () => call('GET', '/nope', { auth: false }), 404);
  await expectRejected('PUT /browsers', () => call('PUT', '/browsers', { headers: json, body: '{}' }), 404);
});

test('malformed JSON is 400 with the Error body', async () => {
  for (const body of ['{', '{"headless": tru}', '{"a":1,}', "{'headless': true}", '\u0000\u0001']) {
    await expectRejected(`POST /browsers ${JSON.stringify(body)}`, () => call('POST', '/browsers', { headers: json, body }), 400, 'bad_request');
  }
  await expectRejected('PATCH malformed', () => call('PATCH', `/browsers/${keep}`, { headers: json, body: '{"name":' }), 400, 'bad_request');
});

test('a body that is not JSON (text/plain, no content type) is 415 with the Error body', async () => {
  await expectRejected('text/plain', () => call('POST', '/browsers', { headers: { 'content-type': 'text/plain' }, body: '{"headless":true}' }), 415);
  await expectRejected('octet-stream', () => call('POST', '/browsers', { headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array([1, 2, 3]) }), 415);
  await expectRejected('form', () => call('POST', '/browsers', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'headless=true' }), 415);
});

test('a body over 1 MiB is 413 with the Error body', async () => {
  const big = JSON.stringify({ headless: true, name: 'x'.repeat(1024 * 1024) });
  const b = await expectRejected('POST 1 MiB', () => call('POST', '/browsers', { headers: json, body: big }), 413);
  assert.equal(b.code, 'payload_too_large');
  await expectRejected('PATCH 1 MiB', () => call('PATCH', `/browsers/${keep}`, { headers: json, body: big }), 413);
});

test('a path parameter of 256 characters or more is a 4xx with the Error body', async () => {
  for (const n of [256, 300, 600, 2000]) {
    const id = 'a'.repeat(n);
    await expectRejected(`GET id of ${n}`, () => call('GET', `/browsers/${id}`));
    await expectRejected(`PATCH id of ${n}`, () => call('PATCH', `/browsers/${id}`, { headers: json, body: '{"name":"x"}' }));
    await expectRejected(`DELETE id of ${n}`, () => call('DELETE', `/browsers/${id}`));
  }
  // 255 is still a valid id-or-name: simply not found.
  await expectRejected('GET id of 255', () => call('GET', `/browsers/${'a'.repeat(255)}`), 404);
});

test('a validation failure is 400 bad_request with one invalid_input detail per broken rule, naming the field', async () => {
  const one = await expectRejected('timeout_seconds below minimum', () => call('POST', '/browsers', { headers: json, body: JSON.stringify({ headless: true, timeout_seconds: 5 }) }), 400, 'bad_request');
  assert.equal((one.details as Json[]).length, 1, JSON.stringify(one));
  assert.equal((one.details as Json[])[0]!.code, 'invalid_input');
  assert.match((one.details as Json[])[0]!.message as string, /timeout_seconds/);

  const broken = { timeout_seconds: 5, memory: '4GiB', name: 'bad name!', headless: 'yes', surprise: 1 };
  const many = await expectRejected('five broken rules', () => call('POST', '/browsers', { headers: json, body: JSON.stringify(broken) }), 400, 'bad_request');
  const details = many.details as Json[];
  assert.equal(details.length, 5, JSON.stringify(many));
  for (const d of details) assert.equal(d.code, 'invalid_input');
  for (const field of Object.keys(broken)) {
    assert.equal(details.filter((d) => (d.message as string).includes(field)).length, 1, `exactly one detail names ${field}: ${JSON.stringify(details)}`);
  }

  const nested = await expectRejected('nested fields', () => call('POST', '/browsers', { headers: json, body: JSON.stringify({ viewport: { width: 0, height: 600 }, tags: { 'bad key!': 'v' } }) }), 400, 'bad_request');
  assert.equal((nested.details as Json[]).length, 2, JSON.stringify(nested));
  assert.ok((nested.details as Json[]).some((d) => (d.message as string).includes('viewport.width')), JSON.stringify(nested));
  assert.ok((nested.details as Json[]).some((d) => (d.message as string).includes('tags')), JSON.stringify(nested));

  // Rules beyond the schema (semantic checks) are reported the same way.
  const semantic = await expectRejected('start_url not http', () => call('POST', '/browsers', { headers: json, body: JSON.stringify({ headless: true, start_url: 'ftp://example.com/' }) }), 400, 'bad_request');
  assert.equal((semantic.details as Json[]).length, 1, JSON.stringify(semantic));
  assert.equal((semantic.details as Json[])[0]!.code, 'invalid_input');
  assert.match((semantic.details as Json[])[0]!.message as string, /start_url/);

  const query = await expectRejected('bad list query', () => call('GET', '/browsers?limit=-1&offset=abc&status=x'), 400, 'bad_request');
  const qd = query.details as Json[];
  assert.equal(qd.length, 3, JSON.stringify(query));
  for (const f of ['limit', 'offset', 'status']) assert.ok(qd.some((d) => d.code === 'invalid_input' && (d.message as string).includes(f)), `${f}: ${JSON.stringify(qd)}`);

  const patch = await expectRejected('bad PATCH', () => call('PATCH', `/browsers/${keep}`, { headers: json, body: JSON.stringify({ name: 'no spaces allowed', tags: 'x' }) }), 400, 'bad_request');
  assert.equal((patch.details as Json[]).length, 2, JSON.stringify(patch));
  const still = await call('GET', `/browsers/${keep}`);
  assert.equal(still.status, 200);
  assert.equal((still.body as Json).name, undefined, 'a rejected PATCH changed nothing');
});

/** A small deterministic PRNG, so a failing garbage case can be reproduced. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('garbage: ~60 malformed requests each get a 4xx with an Error body, nothing is created, /healthz still answers', async () => {
  const rnd = prng(20240611);
  const bytes = (n: number) => Uint8Array.from({ length: n }, () => Math.floor(rnd() * 256));
  const cases: { what: string; run: () => Promise<Answer | { status: number; body: unknown; text: string }> }[] = [];

  // Random bytes as JSON bodies (POST and PATCH).
  for (let i = 0; i < 10; i++) {
    const body = bytes(1 + Math.floor(rnd() * 2000));
    if (body[0] === 0x7b || body[0] === 0x20) body[0] = 0x21; // never accidentally valid JSON
    const [method, path] = i % 2 ? ['PATCH', `/browsers/${keep}`] : ['POST', '/browsers'];
    cases.push({ what: `${method} random bytes #${i}`, run: () => call(method!, path!, { headers: json, body }) });
  }
  // Random bytes under other content types.
  for (const ct of ['text/plain', 'application/octet-stream', 'multipart/form-data; boundary=x', 'application/xml', 'image/png', ';;;']) {
    cases.push({ what: `POST ${ct}`, run: () => call('POST', '/browsers', { headers: { 'content-type': ct }, body: bytes(64) }) });
  }
  // Well-formed JSON of the wrong shape.
  const nestedArrays = '['.repeat(50_000) + ']'.repeat(50_000);
  for (const body of ['[]', '"text"', '42', 'true', nestedArrays, '{"timeout_seconds":1e999}', '{"timeout_seconds":1.5}', '{"viewport":{"width":1e400,"height":1}}', '{"tags":{"a":1}}', '{"name":""}', '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{}}}']) {
    cases.push({ what: `POST ${body.slice(0, 40)}`, run: () => call('POST', '/browsers', { headers: json, body }) });
  }
  // Odd methods.
  for (const [method, path] of [
    ['PUT', '/browsers'],
    ['OPTIONS', '/browsers'],
    ['PROPFIND', '/browsers'],
    ['PURGE', `/browsers/${keep}`],
    ['POST', `/browsers/${keep}`],
    ['PUT', `/browsers/${keep}`],
    ['DELETE', '/browsers'],
    ['PATCH', '/browsers'],
  ] as const) {
    cases.push({ what: `${method} ${path}`, run: () => call(method, path, { headers: json, body: method === 'OPTIONS' ? undefined : '{}' }) });
  }
  // Weird query strings.
  for (const q of [
    'limit=-1&offset=abc&status=x',
    'limit=0',
    'limit=101',
    'limit=1.5',
    'limit=abc',
    'limit=1&limit=2',
    'offset=-5',
    'offset=1e20',
    'offset=99999999999999999999',
    'status=ACTIVE',
    'include_deleted=maybe',
    `query=${'q'.repeat(300)}`,
    'limit=%00',
  ]) {
    cases.push({ what: `GET /browsers?${q.slice(0, 60)}`, run: () => call('GET', `/browsers?${q}`) });
  }
  cases.push({ what: 'GET one ?include_deleted=nah', run: () => call('GET', `/browsers/${keep}?include_deleted=nah`) });
  // Weird paths.
  for (const p of ['/browsers/%zz', '/browsers/%', '/%ff%fe', `/browsers/${'%41'.repeat(700)}`]) {
    cases.push({ what: `GET ${p.slice(0, 40)}`, run: () => call('GET', p) });
  }
  // Huge headers and a huge URL.
  cases.push({ what: '20 KB header', run: () => call('GET', '/browsers', { headers: { 'x-junk': 'a'.repeat(20_000) } }) });
  cases.push({ what: '100 KB authorization', run: () => call('GET', '/browsers', { auth: false, headers: { authorization: `Bearer ${'k'.repeat(100_000)}` } }) });
  cases.push({ what: '70 KB URL', run: () => call('GET', `/browsers?x=${'a'.repeat(70_000)}`) });
  // Requests too broken for an HTTP client library.
  for (const raw of [
    'GARBAGE\r\n\r\n',
    'GET /browsers HTTP/9.9\r\nHost: x\r\n\r\n',
    'FOO /browsers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    'GET /browsers HTTP/1.1\r\nHost: x\r\nX-Bad\u0001: y\r\n\r\n',
    'POST /browsers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}',
    'POST /browsers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  ]) {
    cases.push({ what: `raw ${JSON.stringify(raw.slice(0, 40))}`, run: () => rawRequest(raw) });
  }

  assert.ok(cases.length >= 50, `only ${cases.length} cases`);
  const failures: string[] = [];
  for (const c of cases) {
    try {
      const r = await c.run();
      if (r.status >= 500) failures.push(`${c.what}: ${r.status} ${r.text.slice(0, 200)}`);
      else if (r.status < 400) failures.push(`${c.what}: expected a 4xx, got ${r.status} ${r.text.slice(0, 200)}`);
      else assertErrorBody(r.body, c.what);
    } catch (err) {
      failures.push(`${c.what}: ${(err as Error).message}`);
    }
  }
  assert.deepEqual(failures, [], `${failures.length} of ${cases.length} garbage requests were mishandled`);
  assert.deepEqual(await sessionIds(), [keep], 'garbage created or ended a session');
  const h = await fetch(`${server.url}/healthz`);
  assert.equal(h.status, 200);
  assert.deepEqual(await h.json(), { status: 'ok' });
});
