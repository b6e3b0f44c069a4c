import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { runCli, startServer, type TestServer } from '../helpers/server.js';

/**
 * Authentication, project scoping and plan gates against the real server. Extra keys,
 * projects and organizations are made with the CLI on the running server's data dir
 * (the CLI opens the same SQLite store).
 */

type Json = Record<string, unknown>;

let server: TestServer;

/** Runs `browserd <args>` on the server's store; resolves with exit code and output. */
function cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCli(server.dataDir, args);
}

async function cliJson<T = Json>(...args: string[]): Promise<T> {
  const r = await cli(...args);
  assert.equal(r.code, 0, `browserd ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

function assertErrorBody(body: unknown, code?: string): Json {
  assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `not an Error body: ${JSON.stringify(body)}`);
  const b = body as Json;
  assert.equal(typeof b.code, 'string', JSON.stringify(b));
  assert.equal(typeof b.message, 'string', JSON.stringify(b));
  assert.ok((b.message as string).length > 0);
  if (code !== undefined) assert.equal(b.code, code, JSON.stringify(b));
  return b;
}

async function call(method: string, p: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: unknown }> {
  const h: Record<string, string> = { ...headers };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? (JSON.parse(text) as unknown) : undefined };
}

const bearer = (key: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, ...extra });

async function createSession(headers: Record<string, string>, body: Json = {}): Promise<Json> {
  const r = await call('POST', '/browsers', headers, { headless: true, ...body });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as Json;
}

async function deleteSession(headers: Record<string, string>, id: string): Promise<void> {
  const r = await call('DELETE', `/browsers/${id}`, headers);
  assert.equal(r.status, 204, JSON.stringify(r.body));
}

async function listIds(headers: Record<string, string>): Promise<string[]> {
  const r = await call('GET', '/browsers?limit=100', headers);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return (r.body as Json[]).map((b) => b.session_id as string);
}

// Set up once: a second project with a project-scoped key, and a second organization.
let p2: { id: string; name: string };
let defaultProjectId: string;
let projectKey: string;
let acmeKey: string;
let orgSession: Json; // created with the org key, default project of the default org
let projSession: Json; // created with the project key, project p2

before(async () => {
  server = await startServer();
  p2 = await cliJson<{ id: string; name: string }>('projects', 'create', 'default', 'p2');
  assert.equal(p2.name, 'p2');
  const projects = await cliJson<{ id: string; is_default: boolean }[]>('projects', 'list', 'default');
  defaultProjectId = projects.find((p) => p.is_default)!.id;
  projectKey = (await cliJson<{ key: string }>('keys', 'create', '--project', 'p2')).key;
  await cliJson('orgs', 'create', 'acme', '--plan', 'start_up');
  acmeKey = (await cliJson<{ key: string }>('keys', 'create', '--org', 'acme')).key;
  orgSession = await createSession(server.headers(), { name: 'org-session' });
  projSession = await createSession(bearer(projectKey), { name: 'proj-session' });
});

after(async () => {
  await server?.stop();
});

test('every /browsers route without Authorization is 401 with the Error body', async () => {
  const id = orgSession.session_id as string;
  const routes: [string, string, unknown][] = [
    ['POST', '/browsers', { headless: true }],
    ['GET', '/browsers', undefined],
    ['GET', `/browsers/${id}`, undefined],
    ['GET', '/browsers/does-not-exist', undefined],
    ['PATCH', `/browsers/${id}`, { name: 'hijacked' }],
    ['DELETE', `/browsers/${id}`, undefined],
  ];
  for (const [method, p, body] of routes) {
    const r = await call(method, p, {}, body);
    assert.equal(r.status, 401, `${method} ${p}: ${JSON.stringify(r.body)}`);
    assertErrorBody(r.body, 'unauthorized');
  }
  const still = await call('GET', `/browsers/${id}`, server.headers());
  assert.equal(still.status, 200);
  assert.equal((still.body as Json).name, 'org-session', 'the unauthenticated PATCH changed nothing');
  assert.deepEqual((await listIds(server.headers())).sort(), [id], 'the unauthenticated POST created nothing');
});

test('a wrong scheme, an unknown key or a malformed header is 401; the scheme name is case-insensitive', async () => {
  const key = server.apiKey;
  const bad = [
    `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
    `Token ${key}`,
    key,
    'Bearer',
    'Bearer ',
    `Bearer ${key} extra`,
    `Bearer ${key}x`,
    `Bearer ${key.slice(0, -1)}`,
    `Bearer test-${crypto.randomBytes(16).toString('hex')}`,
    `Bearer bd_${crypto.randomBytes(32).toString('base64url')}`,
  ];
  for (const authorization of bad) {
    for (const [method, p] of [
      ['GET', '/browsers'],
      ['GET', `/browsers/${orgSession.session_id as string}`],
      ['DELETE', `/browsers/${orgSession.session_id as string}`],
    ] as const) {
      const r = await call(method, p, { authorization });
      assert.equal(r.status, 401, `${authorization.slice(0, 20)}… ${method} ${p}: ${JSON.stringify(r.body)}`);
      assertErrorBody(r.body, 'unauthorized');
    }
  }
  assert.equal((await call('GET', '/browsers', { authorization: `bearer ${key}` })).status, 200);
  assert.equal((await call('GET', '/browsers', { authorization: `BEARER ${key}` })).status, 200);

  const sdk = new Kernel({ apiKey: 'not-a-key-at-all-0000', baseURL: server.url, maxRetries: 0 });
  await assert.rejects(sdk.browsers.list(), (err: unknown) => {
    assert.ok(err instanceof Kernel.AuthenticationError, String(err));
    assert.equal(err.status, 401);
    assertErrorBody(err.error, 'unauthorized');
    return true;
  });
});

test('a key revoked with the CLI while the server runs is refused from the next request on', async () => {
  const created = await cliJson<{ id: string; key: string }>('keys', 'create', '--name', 'short-lived');
  const h = bearer(created.key);
  assert.equal((await call('GET', '/browsers', h)).status, 200);
  const s = await createSession(h);

  const revoked = await cliJson<{ id: string; revoked_at: string | null }>('keys', 'revoke', created.id);
  assert.equal(revoked.id, created.id);
  assert.ok(revoked.revoked_at);

  for (const [method, p] of [
    ['GET', '/browsers'],
    ['GET', `/browsers/${s.session_id as string}`],
    ['POST', '/browsers'],
    ['DELETE', `/browsers/${s.session_id as string}`],
  ] as const) {
    const r = await call(method, p, h, method === 'POST' ? { headless: true } : undefined);
    assert.equal(r.status, 401, `${method} ${p}: ${JSON.stringify(r.body)}`);
    assertErrorBody(r.body, 'unauthorized');
  }
  // Other keys are unaffected, and the session still exists for them.
  assert.equal((await call('GET', `/browsers/${s.session_id as string}`, server.headers())).status, 200);
  await deleteSession(server.headers(), s.session_id as string);
});

test('/healthz, /readyz and /openapi.json need no key (and ignore a bad one)', async () => {
  for (const headers of [{}, { authorization: 'Bearer nope' }, { authorization: 'Basic x' }] as Record<string, string>[]) {
    const h = await fetch(`${server.url}/healthz`, { headers });
    assert.equal(h.status, 200);
    assert.deepEqual(await h.json(), { status: 'ok' });
    const r = await fetch(`${server.url}/readyz`, { headers });
    assert.equal(r.status, 200, await r.clone().text());
    // `warm`: this server runs without a warm pool (the test helper's default).
    assert.deepEqual(await r.json(), { status: 'ready', warm: { headless: 0, headful: 0 } });
    const o = await fetch(`${server.url}/openapi.json`, { headers });
    assert.equal(o.status, 200);
    const doc = (await o.json()) as { openapi: string; paths: Record<string, unknown> };
    assert.match(doc.openapi, /^3\./);
    assert.ok(doc.paths['/browsers'], 'the document describes /browsers');
  }
});

test('a session made with a project key is 404 for an org key in the default project, and vice versa', async () => {
  const org = server.headers();
  const proj = bearer(projectKey);
  const pid = projSession.session_id as string;
  const oid = orgSession.session_id as string;

  for (const ref of [pid, 'proj-session']) {
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'stolen' }], ['DELETE', undefined]] as const) {
      const r = await call(method, `/browsers/${ref}`, org, body);
      assert.equal(r.status, 404, `org key ${method} ${ref}: ${JSON.stringify(r.body)}`);
      assertErrorBody(r.body);
    }
  }
  for (const ref of [oid, 'org-session']) {
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'stolen' }], ['DELETE', undefined]] as const) {
      const r = await call(method, `/browsers/${ref}`, proj, body);
      assert.equal(r.status, 404, `project key ${method} ${ref}: ${JSON.stringify(r.body)}`);
      assertErrorBody(r.body);
    }
  }
  assert.deepEqual(await listIds(org), [oid]);
  assert.deepEqual(await listIds(proj), [pid]);
  // Nothing was changed or ended by the refused calls.
  assert.equal(((await call('GET', `/browsers/${pid}`, proj)).body as Json).name, 'proj-session');
  assert.equal(((await call('GET', `/browsers/${oid}`, org)).body as Json).name, 'org-session');
});

test('an org key with X-Kernel-Project-Id (id or name) acts in that project; the SDK option projectID does the same', async () => {
  const pid = projSession.session_id as string;
  for (const header of [p2.id, 'p2']) {
    const h = server.headers({ 'x-kernel-project-id': header });
    const r = await call('GET', `/browsers/${pid}`, h);
    assert.equal(r.status, 200, `header ${header}: ${JSON.stringify(r.body)}`);
    assert.equal((r.body as Json).session_id, pid);
    assert.equal((await call('GET', '/browsers/proj-session', h)).status, 200);
    assert.deepEqual(await listIds(h), [pid]);
    assert.equal((await call('GET', `/browsers/${orgSession.session_id as string}`, h)).status, 404);
  }
  // The default project by header is the same as no header.
  assert.deepEqual(await listIds(server.headers({ 'x-kernel-project-id': defaultProjectId })), [orgSession.session_id as string]);

  const inP2 = new Kernel({ apiKey: server.apiKey, baseURL: server.url, projectID: p2.id, maxRetries: 0 });
  assert.equal((await inP2.browsers.retrieve(pid)).session_id, pid);
  const plain = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  await assert.rejects(plain.browsers.retrieve(pid), (err: unknown) => err instanceof Kernel.NotFoundError && err.status === 404);

  // A session created through the header lands in p2: the project key sees it, the plain org key does not.
  const made = await inP2.browsers.create({ headless: true });
  assert.equal((await call('GET', `/browsers/${made.session_id}`, bearer(projectKey))).status, 200);
  assert.equal((await call('GET', `/browsers/${made.session_id}`, server.headers())).status, 404);
  await inP2.browsers.deleteByID(made.session_id);
});

test('a project-scoped key asking for another project through the header is 404', async () => {
  for (const header of [defaultProjectId, 'default']) {
    for (const [method, p, body] of [
      ['GET', '/browsers', undefined],
      ['GET', `/browsers/${orgSession.session_id as string}`, undefined],
      ['POST', '/browsers', { headless: true }],
    ] as const) {
      const r = await call(method, p, bearer(projectKey, { 'x-kernel-project-id': header }), body);
      assert.equal(r.status, 404, `${method} ${p} with ${header}: ${JSON.stringify(r.body)}`);
      assertErrorBody(r.body);
    }
  }
  // Naming its own project (by id or name) is fine.
  for (const header of [p2.id, 'p2']) {
    assert.equal((await call('GET', `/browsers/${projSession.session_id as string}`, bearer(projectKey, { 'x-kernel-project-id': header }))).status, 200);
  }
  assert.deepEqual(await listIds(server.headers()), [orgSession.session_id as string], 'the refused POST created nothing');
});

test('an unknown project id in the header is 404', async () => {
  for (const header of ['nope', crypto.randomBytes(12).toString('hex'), 'P2']) {
    for (const [method, p, body] of [
      ['GET', '/browsers', undefined],
      ['POST', '/browsers', { headless: true }],
      ['GET', `/browsers/${orgSession.session_id as string}`, undefined],
    ] as const) {
      const r = await call(method, p, server.headers({ 'x-kernel-project-id': header }), body);
      assert.equal(r.status, 404, `${method} ${p} with ${header}: ${JSON.stringify(r.body)}`);
      assertErrorBody(r.body);
    }
  }
  assert.deepEqual(await listIds(server.headers()), [orgSession.session_id as string]);
});

test("another organization's key never sees the first organization's sessions", async () => {
  const acme = bearer(acmeKey);
  assert.deepEqual(await listIds(acme), []);
  for (const ref of [orgSession.session_id as string, 'org-session', projSession.session_id as string, 'proj-session']) {
    for (const [method, body] of [['GET', undefined], ['PATCH', { tags: { owner: 'acme' } }], ['DELETE', undefined]] as const) {
      const r = await call(method, `/browsers/${ref}`, acme, body);
      assert.equal(r.status, 404, `acme ${method} ${ref}: ${JSON.stringify(r.body)}`);
      assertErrorBody(r.body);
    }
    assert.equal((await call('GET', `/browsers/${ref}?include_deleted=true`, acme)).status, 404);
  }
  // Naming the first organization's projects does not help.
  for (const header of [defaultProjectId, p2.id, 'p2']) {
    const r = await call('GET', '/browsers', bearer(acmeKey, { 'x-kernel-project-id': header }));
    assert.equal(r.status, 404, `acme with ${header}: ${JSON.stringify(r.body)}`);
    assertErrorBody(r.body);
    assert.equal((await call('GET', `/browsers/${orgSession.session_id as string}`, bearer(acmeKey, { 'x-kernel-project-id': header }))).status, 404);
  }
  // A session of acme's is likewise invisible to the first organization.
  const mine = await createSession(acme, { name: 'org-session' }); // same name, other org: no conflict
  assert.equal((await call('GET', `/browsers/${mine.session_id as string}`, server.headers())).status, 404);
  assert.equal(((await call('GET', '/browsers/org-session', server.headers())).body as Json).session_id, orgSession.session_id);
  assert.equal(((await call('GET', '/browsers/org-session', acme)).body as Json).session_id, mine.session_id);
  await deleteSession(acme, mine.session_id as string);
  assert.equal(((await call('GET', `/browsers/${orgSession.session_id as string}`, server.headers())).body as Json).tags, undefined, 'acme tagged nothing');
});

test('choosing a region needs the Start-Up plan: 403 on a free organization, 200 on start_up', async () => {
  const before = await listIds(server.headers());
  const denied = await call('POST', '/browsers', server.headers(), { headless: true, region: 'us-east' });
  assert.equal(denied.status, 403, JSON.stringify(denied.body));
  const b = assertErrorBody(denied.body);
  assert.match(b.message as string, /plan/i);
  assert.deepEqual(await listIds(server.headers()), before, 'nothing was created');

  const sdk = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  // This SDK version has no `region` parameter; the request body is passed through as is.
  const withRegion = { headless: true, region: 'us-east' } as unknown as Kernel.BrowserCreateParams;
  await assert.rejects(sdk.browsers.create(withRegion), (err: unknown) => err instanceof Kernel.PermissionDeniedError && err.status === 403);

  const ok = await createSession(bearer(acmeKey), { region: 'us-east' });
  assert.equal(ok.region, 'us-east');
  await deleteSession(bearer(acmeKey), ok.session_id as string);

  // The plan is read per request: upgrading the organization with the CLI lifts the gate at once.
  await cliJson('orgs', 'set-plan', 'default', 'start_up');
  try {
    const now = await createSession(server.headers(), { region: 'us-east' });
    assert.equal(now.region, 'us-east');
    await deleteSession(server.headers(), now.session_id as string);
  } finally {
    await cliJson('orgs', 'set-plan', 'default', 'free');
  }
  assert.equal((await call('POST', '/browsers', server.headers(), { headless: true, region: 'us-east' })).status, 403);
});
