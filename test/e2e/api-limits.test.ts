import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { cliJson as cliJsonOn, startServer, type TestServer } from '../helpers/server.js';

/** Limits: session names unique per project, node capacity (529) and the per-key rate limit (429). */

type Json = Record<string, unknown>;

/** Runs `browserd <args>` on a server's store and parses its JSON output. */
function cliJson<T = Json>(server: TestServer, ...args: string[]): Promise<T> {
  return cliJsonOn<T>(server.dataDir, ...args);
}

async function call(server: TestServer, method: string, p: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; headers: Headers; body: unknown; text: string }> {
  const h: Record<string, string> = { ...server.headers(), ...opts.headers };
  if (opts.body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: text ? (JSON.parse(text) as unknown) : undefined, text };
}

function assertErrorBody(body: unknown, code: string): Json {
  const b = body as Json;
  assert.equal(typeof b?.message, 'string', JSON.stringify(body));
  assert.ok((b.message as string).length > 0);
  assert.equal(b.code, code, JSON.stringify(body));
  return b;
}

async function activeIds(server: TestServer, headers: Record<string, string> = {}): Promise<string[]> {
  const r = await call(server, 'GET', '/browsers?limit=100', { headers });
  assert.equal(r.status, 200, r.text);
  return (r.body as Json[]).map((b) => b.session_id as string).sort();
}

describe('session names', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.stop();
  });

  const create = async (body: Json, headers: Record<string, string> = {}) => call(server, 'POST', '/browsers', { body: { headless: true, ...body }, headers });

  test('a name is unique among the active sessions of a project: 409 name_conflict, nothing created', async () => {
    const first = await create({ name: 'dup' });
    assert.equal(first.status, 200, first.text);
    const id = (first.body as Json).session_id as string;

    const second = await create({ name: 'dup' });
    assert.equal(second.status, 409, second.text);
    const b = assertErrorBody(second.body, 'name_conflict');
    assert.match(b.message as string, /dup/);
    assert.deepEqual(await activeIds(server), [id]);

    const sdk = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
    await assert.rejects(sdk.browsers.create({ headless: true, name: 'dup' }), (e: unknown) => {
      assert.ok(e instanceof Kernel.ConflictError, String(e));
      assert.equal((e.error as Json).code, 'name_conflict');
      return true;
    });

    // Renaming another session onto a taken name is the same conflict; its own name is untouched.
    const other = await create({ name: 'other' });
    const otherId = (other.body as Json).session_id as string;
    const rename = await call(server, 'PATCH', `/browsers/${otherId}`, { body: { name: 'dup' } });
    assert.equal(rename.status, 409, rename.text);
    assertErrorBody(rename.body, 'name_conflict');
    assert.equal(((await call(server, 'GET', `/browsers/${otherId}`)).body as Json).name, 'other');
    assert.equal(((await call(server, 'GET', '/browsers/dup')).body as Json).session_id, id);
    // Re-setting a session's own name is not a conflict.
    assert.equal((await call(server, 'PATCH', `/browsers/${id}`, { body: { name: 'dup' } })).status, 200);

    assert.deepEqual(await activeIds(server), [id, otherId].sort());
    for (const s of [id, otherId]) assert.equal((await call(server, 'DELETE', `/browsers/${s}`)).status, 204);
  });

  test('after the session is deleted its name can be used again; the deleted one stays reachable by id', async () => {
    const first = await create({ name: 'reuse' });
    const id = (first.body as Json).session_id as string;
    assert.equal((await call(server, 'DELETE', '/browsers/reuse')).status, 204);

    const again = await create({ name: 'reuse' });
    assert.equal(again.status, 200, again.text);
    const id2 = (again.body as Json).session_id as string;
    assert.notEqual(id2, id);
    assert.equal(((await call(server, 'GET', '/browsers/reuse')).body as Json).session_id, id2, 'the name now means the active session');
    const old = await call(server, 'GET', `/browsers/${id}?include_deleted=true`);
    assert.equal((old.body as Json).name, 'reuse');
    assert.ok((old.body as Json).deleted_at);

    // A session renamed away frees its name too.
    assert.equal((await call(server, 'PATCH', `/browsers/${id2}`, { body: { name: 'renamed' } })).status, 200);
    const third = await create({ name: 'reuse' });
    assert.equal(third.status, 200, third.text);
    for (const s of [id2, (third.body as Json).session_id as string]) assert.equal((await call(server, 'DELETE', `/browsers/${s}`)).status, 204);
  });

  test('the same name in another project is fine', async () => {
    await cliJson(server, 'projects', 'create', 'default', 'elsewhere');
    const here = await create({ name: 'shared' });
    assert.equal(here.status, 200, here.text);
    const there = await create({ name: 'shared' }, { 'x-kernel-project-id': 'elsewhere' });
    assert.equal(there.status, 200, there.text);
    assert.notEqual((here.body as Json).session_id, (there.body as Json).session_id);
    // Each project resolves the name to its own session.
    assert.equal(((await call(server, 'GET', '/browsers/shared')).body as Json).session_id, (here.body as Json).session_id);
    assert.equal(((await call(server, 'GET', '/browsers/shared', { headers: { 'x-kernel-project-id': 'elsewhere' } })).body as Json).session_id, (there.body as Json).session_id);
    // Still unique within the other project.
    const clash = await create({ name: 'shared' }, { 'x-kernel-project-id': 'elsewhere' });
    assert.equal(clash.status, 409, clash.text);
    assertErrorBody(clash.body, 'name_conflict');
    assert.equal((await call(server, 'DELETE', '/browsers/shared')).status, 204);
    assert.equal((await call(server, 'DELETE', '/browsers/shared', { headers: { 'x-kernel-project-id': 'elsewhere' } })).status, 204);
  });

  test('concurrent creates with one name: exactly one wins, the others are 409', async () => {
    const results = await Promise.all([1, 2, 3].map(() => create({ name: 'race' })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 409, 409], results.map((r) => r.text).join('\n'));
    for (const r of results.filter((x) => x.status === 409)) assertErrorBody(r.body, 'name_conflict');
    const winner = results.find((r) => r.status === 200)!.body as Json;
    assert.deepEqual(await activeIds(server), [winner.session_id as string]);
    assert.equal((await call(server, 'DELETE', '/browsers/race')).status, 204);
  });
});

describe('capacity (BROWSERD_MAX_SESSIONS=1)', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ env: { BROWSERD_MAX_SESSIONS: '1' } });
  });
  after(async () => {
    await server?.stop();
  });

  test('the second create is 529 capacity_exhausted; after deleting the first, a create works again', async () => {
    const first = await call(server, 'POST', '/browsers', { body: { headless: true } });
    assert.equal(first.status, 200, first.text);
    const id = (first.body as Json).session_id as string;

    const second = await call(server, 'POST', '/browsers', { body: { headless: true, name: 'second' } });
    assert.equal(second.status, 529, second.text);
    assertErrorBody(second.body, 'capacity_exhausted');
    assert.deepEqual(await activeIds(server), [id], 'the refused create left nothing behind');
    assert.equal((await call(server, 'GET', '/browsers/second?include_deleted=true')).status, 404);

    const sdk = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
    await assert.rejects(sdk.browsers.create({ headless: true }), (e: unknown) => {
      assert.ok(e instanceof Kernel.APIError, String(e));
      assert.equal(e.status, 529);
      assert.equal((e.error as Json).code, 'capacity_exhausted');
      return true;
    });

    assert.equal((await call(server, 'DELETE', `/browsers/${id}`)).status, 204);
    const third = await call(server, 'POST', '/browsers', { body: { headless: true, name: 'second' } });
    assert.equal(third.status, 200, third.text);
    assert.equal((await call(server, 'DELETE', '/browsers/second')).status, 204);
  });

  test('concurrent creates at capacity 1: exactly one is admitted', async () => {
    const results = await Promise.all([1, 2, 3].map(() => call(server, 'POST', '/browsers', { body: { headless: true } })));
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 529, 529], results.map((r) => r.text).join('\n'));
    for (const r of results.filter((x) => x.status === 529)) assertErrorBody(r.body, 'capacity_exhausted');
    const winner = results.find((r) => r.status === 200)!.body as Json;
    assert.deepEqual(await activeIds(server), [winner.session_id as string]);
    assert.equal((await call(server, 'DELETE', `/browsers/${winner.session_id as string}`)).status, 204);
    assert.equal((await call(server, 'POST', '/browsers', { body: { headless: true, name: 'after' } })).status, 200);
    assert.equal((await call(server, 'DELETE', '/browsers/after')).status, 204);
  });
});

describe('rate limit (BROWSERD_RATE_LIMIT=5)', () => {
  let server: TestServer;
  let otherKey: string;
  before(async () => {
    server = await startServer({ env: { BROWSERD_RATE_LIMIT: '5' } });
    otherKey = (await cliJson<{ key: string }>(server, 'keys', 'create', '--name', 'second')).key;
  });
  after(async () => {
    await server?.stop();
  });

  test('the 6th request of a key within a minute is 429 rate_limited with an integer Retry-After; another key and /healthz are not limited', async () => {
    for (let i = 1; i <= 5; i++) {
      const r = await call(server, 'GET', '/browsers');
      assert.equal(r.status, 200, `request ${i}: ${r.text}`);
    }
    const limited = await call(server, 'GET', '/browsers');
    assert.equal(limited.status, 429, limited.text);
    assertErrorBody(limited.body, 'rate_limited');
    const retryAfter = limited.headers.get('retry-after');
    assert.ok(retryAfter !== null, 'Retry-After header present');
    assert.match(retryAfter, /^\d+$/, `Retry-After is an integer number of seconds: ${retryAfter}`);
    assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, `Retry-After within the window: ${retryAfter}`);

    // Every route counts against the same key: a create is refused too, and creates nothing.
    const create = await call(server, 'POST', '/browsers', { body: { headless: true } });
    assert.equal(create.status, 429, create.text);
    assertErrorBody(create.body, 'rate_limited');
    const sdk = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
    await assert.rejects(sdk.browsers.list(), (e: unknown) => e instanceof Kernel.RateLimitError && e.status === 429);

    // A different key has its own budget.
    const other = { authorization: `Bearer ${otherKey}` };
    for (let i = 1; i <= 5; i++) {
      const r = await call(server, 'GET', '/browsers', { headers: other });
      assert.equal(r.status, 200, `other key, request ${i}: ${r.text}`);
      assert.deepEqual(r.body, [], 'the limited create made nothing');
    }
    assert.equal((await call(server, 'GET', '/browsers', { headers: other })).status, 429);

    // Health checks are never limited, with or without a key.
    for (let i = 0; i < 20; i++) {
      for (const headers of [{}, server.headers()] as Record<string, string>[]) {
        const h = await fetch(`${server.url}/healthz`, { headers });
        assert.equal(h.status, 200, `healthz #${i}`);
        await h.arrayBuffer();
      }
    }
    const ready = await fetch(`${server.url}/readyz`);
    assert.notEqual(ready.status, 429);
    await ready.arrayBuffer();
    // The first key is still limited afterwards.
    assert.equal((await call(server, 'GET', '/browsers')).status, 429);
  });
});
