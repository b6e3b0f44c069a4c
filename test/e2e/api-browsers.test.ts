import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { eventually, ROOT, startServer, type TestServer } from '../helpers/server.js';

/**
 * The browsers API over HTTP and through the Kernel SDK: the Browser body, lookups,
 * listing and pagination, updates and deletion. Tests that count sessions work in a
 * project of their own (made with the CLI), so they do not depend on each other.
 */

type Json = Record<string, unknown>;

let server: TestServer;
let kernel: Kernel;

before(async () => {
  server = await startServer();
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
});
after(async () => {
  await server?.stop();
});

let projects = 0;
/** A fresh, empty project of the default organization; returns its name. */
async function freshProject(): Promise<string> {
  const name = `proj-${++projects}`;
  const code = await new Promise<number | null>((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(ROOT, 'bin/browserd.js'), 'projects', 'create', 'default', name], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, BROWSERD_DATA_DIR: server.dataDir },
      stdio: 'ignore',
    });
    p.on('error', reject);
    p.on('close', resolve);
  });
  assert.equal(code, 0, `projects create ${name}`);
  return name;
}

async function call(method: string, p: string, opts: { body?: unknown; project?: string } = {}): Promise<{ status: number; headers: Headers; body: unknown; text: string }> {
  const h: Record<string, string> = server.headers();
  if (opts.body !== undefined) h['content-type'] = 'application/json';
  if (opts.project) h['x-kernel-project-id'] = opts.project;
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: text ? (JSON.parse(text) as unknown) : undefined, text };
}

async function create(body: Json = {}, project?: string): Promise<Json> {
  const r = await call('POST', '/browsers', { body: { headless: true, ...body }, project });
  assert.equal(r.status, 200, r.text);
  return r.body as Json;
}

async function del(id: string, project?: string): Promise<void> {
  const r = await call('DELETE', `/browsers/${id}`, { project });
  assert.equal(r.status, 204, r.text);
}

function assertErrorBody(body: unknown, code?: string): void {
  const b = body as Json;
  assert.equal(typeof b?.code, 'string', JSON.stringify(body));
  assert.equal(typeof b?.message, 'string', JSON.stringify(body));
  if (code) assert.equal(b.code, code);
}

function assertIsoDate(v: unknown, what: string): number {
  assert.equal(typeof v, 'string', `${what} is not a string`);
  const t = Date.parse(v as string);
  assert.ok(Number.isFinite(t), `${what} is not a date-time: ${String(v)}`);
  assert.match(v as string, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/, `${what}: ${String(v)}`);
  return t;
}

/** A connection URL on this server, at `pathname`, carrying a JWT in `jwt`. */
function assertConnectionUrl(v: unknown, protocol: string, pathname: string | null, what: string): void {
  assert.equal(typeof v, 'string', `${what} missing`);
  const u = new URL(v as string);
  assert.equal(u.protocol, protocol, `${what}: ${String(v)}`);
  assert.equal(u.host, new URL(server.url).host, `${what} points at the server: ${String(v)}`);
  if (pathname) assert.equal(u.pathname, pathname, `${what}: ${String(v)}`);
  const jwt = u.searchParams.get('jwt');
  assert.ok(jwt, `${what} carries a jwt`);
  assert.match(jwt, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, `${what}: jwt is a JWS`);
}

const REQUIRED = ['created_at', 'cdp_ws_url', 'webdriver_ws_url', 'session_id', 'region', 'stealth', 'headless', 'memory', 'timeout_seconds'];

test('create returns 200 with every required field, defaults applied, connection URLs on this server and no base_url', async () => {
  const b = await create();
  for (const f of REQUIRED) assert.ok(f in b && b[f] !== null && b[f] !== undefined, `required field ${f} missing: ${JSON.stringify(b)}`);
  assert.equal(typeof b.session_id, 'string');
  assert.ok((b.session_id as string).length > 0);
  assertIsoDate(b.created_at, 'created_at');
  assert.equal(b.region, 'us-east');
  assert.equal(b.stealth, false);
  assert.equal(b.headless, true);
  // The requested memory (default 8GiB) applies to headful sessions; a headless one reports its own size.
  assert.ok(['1GiB', '2GiB', '6GiB', '8GiB', '16GiB'].includes(b.memory as string), `memory: ${String(b.memory)}`);
  assert.equal(b.timeout_seconds, 60);
  assert.ok(!('base_url' in b), 'no base_url');
  assert.ok(!('deleted_at' in b), 'no deleted_at on an active session');
  assert.ok(!('usage_status' in b), 'no usage_status on an active session');
  assert.ok(!('browser_live_view_url' in b), 'a headless session has no live view');
  assertConnectionUrl(b.cdp_ws_url, 'ws:', '/browser/cdp', 'cdp_ws_url');
  assertConnectionUrl(b.webdriver_ws_url, 'ws:', null, 'webdriver_ws_url');
  assert.ok(Number.isInteger((b.usage as Json | undefined)?.uptime_ms ?? 0));

  // The same session through the SDK, and fields given at creation are echoed.
  const s = await kernel.browsers.create({ headless: true, name: 'echo.me_1', tags: { team: 'qa', 'k:v': '' }, timeout_seconds: 120, viewport: { width: 1280, height: 800 } });
  assert.equal(s.name, 'echo.me_1');
  assert.deepEqual(s.tags, { team: 'qa', 'k:v': '' });
  assert.equal(s.timeout_seconds, 120);
  assert.equal(s.viewport?.width, 1280);
  assert.equal(s.viewport?.height, 800);
  assert.notEqual(s.session_id, b.session_id);
  assertConnectionUrl(s.cdp_ws_url, 'ws:', '/browser/cdp', 'SDK cdp_ws_url');
  await del(b.session_id as string);
  await kernel.browsers.deleteByID(s.session_id);
});

test('a headful session (the default) has browser_live_view_url; a headless one does not', async () => {
  const headful = await create({ headless: undefined });
  assert.equal(headful.headless, false);
  assert.equal(headful.memory, '8GiB', 'the default memory of a headful session');
  assertConnectionUrl(headful.browser_live_view_url, new URL(server.url).protocol, null, 'browser_live_view_url');
  const explicit = await create({ headless: false });
  assert.equal(explicit.headless, false);
  assert.ok(typeof explicit.browser_live_view_url === 'string');
  const headless = await create({ headless: true });
  assert.ok(!('browser_live_view_url' in headless));
  // The same holds when the sessions are looked up again.
  assert.ok(typeof ((await call('GET', `/browsers/${headful.session_id as string}`)).body as Json).browser_live_view_url === 'string');
  assert.ok(!('browser_live_view_url' in ((await call('GET', `/browsers/${headless.session_id as string}`)).body as Json)));
  for (const s of [headful, explicit, headless]) await del(s.session_id as string);
});

test('retrieve by id and by name, over HTTP and the SDK; include_deleted reaches deleted sessions only when asked', async () => {
  const b = await create({ name: 'findable' });
  const id = b.session_id as string;
  for (const ref of [id, 'findable']) {
    const r = await call('GET', `/browsers/${ref}`);
    assert.equal(r.status, 200, r.text);
    assert.equal((r.body as Json).session_id, id);
    assert.equal((r.body as Json).name, 'findable');
    for (const f of REQUIRED) assert.ok(f in (r.body as Json), `retrieve has ${f}`);
    assert.equal((await kernel.browsers.retrieve(ref)).session_id, id);
  }
  const missing = await call('GET', '/browsers/no-such-session');
  assert.equal(missing.status, 404);
  assertErrorBody(missing.body);
  await assert.rejects(kernel.browsers.retrieve('no-such-session'), (e: unknown) => e instanceof Kernel.NotFoundError);

  await del(id);
  for (const ref of [id, 'findable']) {
    const gone = await call('GET', `/browsers/${ref}`);
    assert.equal(gone.status, 404, gone.text);
    assertErrorBody(gone.body);
    const r = await call('GET', `/browsers/${ref}?include_deleted=true`);
    assert.equal(r.status, 200, r.text);
    assert.equal((r.body as Json).session_id, id);
    assert.ok((r.body as Json).deleted_at);
    assert.equal((await call('GET', `/browsers/${ref}?include_deleted=false`)).status, 404);
    const viaSdk = await kernel.browsers.retrieve(ref, { include_deleted: true });
    assert.equal(viaSdk.session_id, id);
    assert.ok(viaSdk.deleted_at);
  }
});

test('list is a bare JSON array paged with X-Has-More / X-Next-Offset', async () => {
  const project = await freshProject();
  const made = [await create({}, project), await create({}, project), await create({}, project)].map((b) => b.session_id as string);

  const p1 = await call('GET', '/browsers?limit=2', { project });
  assert.equal(p1.status, 200, p1.text);
  assert.ok(Array.isArray(p1.body), `the body is a bare array: ${p1.text.slice(0, 100)}`);
  assert.equal((p1.body as Json[]).length, 2);
  assert.equal(p1.headers.get('x-has-more'), 'true');
  assert.equal(p1.headers.get('x-next-offset'), '2');
  for (const b of p1.body as Json[]) for (const f of REQUIRED) assert.ok(f in b, `list item has ${f}`);

  const p2 = await call('GET', '/browsers?limit=2&offset=2', { project });
  assert.equal(p2.status, 200, p2.text);
  assert.equal((p2.body as Json[]).length, 1);
  assert.equal(p2.headers.get('x-has-more'), 'false');
  assert.equal(p2.headers.get('x-next-offset'), '0');

  const seen = [...(p1.body as Json[]), ...(p2.body as Json[])].map((b) => b.session_id as string);
  assert.deepEqual([...seen].sort(), [...made].sort(), 'the two pages hold each session exactly once');

  // Exactly one full page: no more after it.
  const exact = await call('GET', '/browsers?limit=3', { project });
  assert.equal((exact.body as Json[]).length, 3);
  assert.equal(exact.headers.get('x-has-more'), 'false');
  assert.equal(exact.headers.get('x-next-offset'), '0');
  // Past the end: an empty array.
  const past = await call('GET', '/browsers?offset=10', { project });
  assert.deepEqual(past.body, []);
  assert.equal(past.headers.get('x-has-more'), 'false');
  // An empty project: an empty array.
  const empty = await call('GET', '/browsers', { project: await freshProject() });
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.body, []);
  assert.equal(empty.headers.get('x-has-more'), 'false');

  for (const id of made) await del(id, project);
});

test('list status=active|deleted|all (and include_deleted) selects by deletion', async () => {
  const project = await freshProject();
  const [a, b, c] = [await create({}, project), await create({}, project), await create({}, project)].map((s) => s.session_id as string);
  await del(b!, project);
  const ids = async (q: string) => {
    const r = await call('GET', `/browsers${q}`, { project });
    assert.equal(r.status, 200, r.text);
    return (r.body as Json[]).map((s) => s.session_id as string).sort();
  };
  assert.deepEqual(await ids(''), [a, c].sort(), 'active is the default');
  assert.deepEqual(await ids('?status=active'), [a, c].sort());
  assert.deepEqual(await ids('?status=deleted'), [b]);
  assert.deepEqual(await ids('?status=all'), [a, b, c].sort());
  assert.deepEqual(await ids('?include_deleted=true'), [a, b, c].sort());
  const deleted = (await call('GET', '/browsers?status=deleted', { project })).body as Json[];
  assert.ok(deleted[0]!.deleted_at);
  for (const s of (await call('GET', '/browsers?status=active', { project })).body as Json[]) assert.ok(!('deleted_at' in s));

  const inProject = new Kernel({ apiKey: server.apiKey, baseURL: server.url, projectID: project, maxRetries: 0 });
  const viaSdk: string[] = [];
  for await (const s of inProject.browsers.list({ status: 'deleted' })) viaSdk.push(s.session_id);
  assert.deepEqual(viaSdk, [b]);
  await del(a!, project);
  await del(c!, project);
});

test('SDK auto-pagination iterates every session exactly once', async () => {
  const project = await freshProject();
  const made: string[] = [];
  for (let i = 0; i < 5; i++) made.push((await create({}, project)).session_id as string);
  const inProject = new Kernel({ apiKey: server.apiKey, baseURL: server.url, projectID: project, maxRetries: 0 });

  const seen: string[] = [];
  for await (const s of inProject.browsers.list({ limit: 2 })) seen.push(s.session_id);
  assert.equal(seen.length, 5, `iterated ${JSON.stringify(seen)}`);
  assert.deepEqual([...seen].sort(), [...made].sort());

  const first = await inProject.browsers.list({ limit: 2 });
  assert.equal(first.getPaginatedItems().length, 2);
  assert.ok(first.hasNextPage());
  let pages = 1;
  let page = first;
  while (page.hasNextPage()) {
    page = await page.getNextPage();
    pages++;
  }
  assert.equal(pages, 3);
  for (const id of made) await del(id, project);
});

test('list filters by tags (?tags[key]=value, pairs ANDed)', async () => {
  const project = await freshProject();
  const a = (await create({ tags: { team: 'a', env: 'x' } }, project)).session_id as string;
  const b = (await create({ tags: { team: 'b', env: 'x' } }, project)).session_id as string;
  const c = (await create({}, project)).session_id as string;
  const ids = async (q: string) => {
    const r = await call('GET', `/browsers?${q}`, { project });
    assert.equal(r.status, 200, r.text);
    return (r.body as Json[]).map((s) => s.session_id as string).sort();
  };
  assert.deepEqual(await ids('tags[team]=a'), [a]);
  assert.deepEqual(await ids('tags%5Bteam%5D=b'), [b]);
  assert.deepEqual(await ids('tags[env]=x'), [a, b].sort());
  assert.deepEqual(await ids('tags[team]=a&tags[env]=x'), [a]);
  assert.deepEqual(await ids('tags[team]=a&tags[env]=y'), []);
  assert.deepEqual(await ids('tags[team]=zzz'), []);
  assert.deepEqual(await ids('tags[nokey]=a'), []);
  assert.deepEqual(await ids(''), [a, b, c].sort());

  const inProject = new Kernel({ apiKey: server.apiKey, baseURL: server.url, projectID: project, maxRetries: 0 });
  const viaSdk: string[] = [];
  for await (const s of inProject.browsers.list({ tags: { team: 'a' } })) viaSdk.push(s.session_id);
  assert.deepEqual(viaSdk, [a]);
  for (const id of [a, b, c]) await del(id, project);
});

test('PATCH changes name and tags: tags are replaced, {} clears them, "" clears the name, omitted fields stay', async () => {
  const b = await create({ name: 'before', tags: { a: '1', b: '2' } });
  const id = b.session_id as string;

  let r = await call('PATCH', `/browsers/${id}`, { body: { tags: { c: '3' } } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual((r.body as Json).tags, { c: '3' }, 'tags are replaced, not merged');
  assert.equal((r.body as Json).name, 'before', 'name unchanged when omitted');
  for (const f of REQUIRED) assert.ok(f in (r.body as Json), `PATCH answer has ${f}`);

  r = await call('PATCH', '/browsers/before', { body: { name: 'after' } });
  assert.equal(r.status, 200, r.text);
  assert.equal((r.body as Json).name, 'after');
  assert.deepEqual((r.body as Json).tags, { c: '3' }, 'tags unchanged when omitted');
  assert.equal((await call('GET', '/browsers/after')).status, 200);
  assert.equal((await call('GET', '/browsers/before')).status, 404);

  // The change is stored, not only echoed.
  let got = (await call('GET', `/browsers/${id}`)).body as Json;
  assert.equal(got.name, 'after');
  assert.deepEqual(got.tags, { c: '3' });
  const byTag = (await call('GET', '/browsers?tags[c]=3')).body as Json[];
  assert.deepEqual(byTag.map((s) => s.session_id), [id]);
  assert.deepEqual((await call('GET', '/browsers?tags[a]=1')).body, [], 'the replaced tags no longer match');

  r = await call('PATCH', `/browsers/${id}`, { body: { tags: {} } });
  assert.equal(r.status, 200, r.text);
  assert.ok(!(r.body as Json).tags || Object.keys((r.body as Json).tags as Json).length === 0, `tags cleared: ${r.text}`);
  assert.equal((r.body as Json).name, 'after');

  r = await call('PATCH', `/browsers/${id}`, { body: { name: '' } });
  assert.equal(r.status, 200, r.text);
  assert.ok(!('name' in (r.body as Json)) || (r.body as Json).name === null || (r.body as Json).name === '', `name cleared: ${r.text}`);
  got = (await call('GET', `/browsers/${id}`)).body as Json;
  assert.ok(!got.name, 'name cleared in the store');
  assert.ok(!got.tags || Object.keys(got.tags as Json).length === 0, 'tags cleared in the store');
  assert.equal((await call('GET', '/browsers/after')).status, 404);

  // The SDK sends the same update.
  const viaSdk = await kernel.browsers.update(id, { name: 'sdk-name', tags: { via: 'sdk' } });
  assert.equal(viaSdk.name, 'sdk-name');
  assert.deepEqual(viaSdk.tags, { via: 'sdk' });
  // An empty PATCH changes nothing.
  r = await call('PATCH', `/browsers/${id}`, { body: {} });
  assert.equal(r.status, 200, r.text);
  assert.equal((r.body as Json).name, 'sdk-name');
  assert.deepEqual((r.body as Json).tags, { via: 'sdk' });

  const missing = await call('PATCH', '/browsers/no-such-session', { body: { name: 'x' } });
  assert.equal(missing.status, 404);
  assertErrorBody(missing.body);
  await del(id);
  const afterDelete = await call('PATCH', `/browsers/${id}`, { body: { name: 'zombie' } });
  assert.equal(afterDelete.status, 404, 'a deleted session cannot be updated');
});

test('DELETE is 204; then 404 without include_deleted, and with it deleted_at, integer uptime and usage_status ready; a second DELETE is 404', async () => {
  const b = await create({ name: 'to-delete' });
  const id = b.session_id as string;
  const createdAt = assertIsoDate(b.created_at, 'created_at');

  const r = await fetch(`${server.url}/browsers/${id}`, { method: 'DELETE', headers: server.headers() });
  assert.equal(r.status, 204);
  assert.equal(await r.text(), '', '204 has no body');

  const gone = await call('GET', `/browsers/${id}`);
  assert.equal(gone.status, 404);
  assertErrorBody(gone.body);

  const d = (await call('GET', `/browsers/${id}?include_deleted=true`)).body as Json;
  assert.equal(d.session_id, id);
  const deletedAt = assertIsoDate(d.deleted_at, 'deleted_at');
  assert.ok(deletedAt >= createdAt, 'deleted_at is not before created_at');
  const usage = d.usage as Json;
  assert.ok(usage && Number.isInteger(usage.uptime_ms), `usage.uptime_ms is an integer: ${JSON.stringify(d.usage)}`);
  assert.ok((usage.uptime_ms as number) >= 0);
  assert.ok(d.usage_status === 'pending' || d.usage_status === 'ready', `usage_status: ${String(d.usage_status)}`);
  const ready = await eventually(async () => ((await call('GET', `/browsers/${id}?include_deleted=true`)).body as Json).usage_status === 'ready');
  assert.ok(ready, 'usage_status becomes ready');
  for (const f of REQUIRED) assert.ok(f in d, `deleted session keeps ${f}`);

  // The uptime is final: it does not grow after deletion.
  const again = (await call('GET', `/browsers/${id}?include_deleted=true`)).body as Json;
  assert.equal((again.usage as Json).uptime_ms, usage.uptime_ms);
  assert.equal(again.deleted_at, d.deleted_at);

  const twice = await call('DELETE', `/browsers/${id}`);
  assert.equal(twice.status, 404);
  assertErrorBody(twice.body);
  assert.equal((await call('DELETE', '/browsers/to-delete')).status, 404, 'by name too');
  await assert.rejects(kernel.browsers.deleteByID(id), (e: unknown) => e instanceof Kernel.NotFoundError);

  // Deleting by name works; the SDK deletes too.
  await create({ name: 'by-name' });
  assert.equal((await call('DELETE', '/browsers/by-name')).status, 204);
  assert.equal((await call('GET', '/browsers/by-name')).status, 404);
  const s = await kernel.browsers.create({ headless: true });
  await kernel.browsers.deleteByID(s.session_id);
  assert.ok((await kernel.browsers.retrieve(s.session_id, { include_deleted: true })).deleted_at);
});
