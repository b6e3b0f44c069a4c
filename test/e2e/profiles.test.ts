import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium, type Page } from 'playwright-core';
import * as tar from 'tar';
import { spawnSync } from 'node:child_process';
import { eventually, ROOT, startServer, type TestServer } from '../helpers/server.js';

/**
 * Profiles: the routes, and sessions that start from a profile's saved state and write
 * their own back when they end (delete or inactivity).
 */

type Json = Record<string, unknown>;

let server: TestServer;
let kernel: Kernel;
let site: { url: string; close(): Promise<void> };

/**
 * A site with a login form: POST /login sets a persistent cookie; `/` shows "logged in as
 * <user>" when the cookie is there, the form otherwise.
 */
async function startLoginSite(): Promise<{ url: string; close(): Promise<void> }> {
  const srv = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (req.method === 'POST' && req.url === '/login') {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const user = new URLSearchParams(body).get('user') ?? '';
        res.statusCode = 303;
        res.setHeader('set-cookie', `sid=${encodeURIComponent(user)}; Max-Age=86400; Path=/; HttpOnly; SameSite=Lax`);
        res.setHeader('location', '/');
        res.end();
      });
      return;
    }
    const sid = /(?:^|;\s*)sid=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
    if (sid) res.end(`<title>logged in</title><p id="who">${decodeURIComponent(sid)}</p>`);
    else res.end('<title>login</title><form method="post" action="/login"><input name="user" id="user"><button id="go">log in</button></form>');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

before(async () => {
  server = await startServer({ env: { BROWSERD_REAPER_INTERVAL_MS: '500' } });
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  site = await startLoginSite();
});
after(async () => {
  await server?.stop();
  await site?.close();
});

/** A second project of the default organization (same key, X-Kernel-Project-Id picks it). */
function otherProject(name: string): Record<string, string> {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/browserd.js'), 'projects', 'create', 'default', name], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, BROWSERD_DATA_DIR: server.dataDir },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { 'x-kernel-project-id': name };
}

async function call(method: string, p: string, body?: unknown, extra: Record<string, string> = {}): Promise<{ status: number; body: Json; text: string; headers: Headers }> {
  const h: Record<string, string> = { authorization: `Bearer ${server.apiKey}`, ...extra };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let parsed: Json = {};
  try {
    parsed = text ? (JSON.parse(text) as Json) : {};
  } catch {
    /* binary */
  }
  return { status: r.status, body: parsed, text, headers: r.headers };
}

async function create(body: Json): Promise<Json> {
  const r = await call('POST', '/browsers', body);
  assert.equal(r.status, 200, r.text);
  return r.body;
}

async function del(b: Json): Promise<void> {
  const r = await call('DELETE', `/browsers/${b.session_id as string}`);
  assert.equal(r.status, 204, r.text);
}

async function withPage<T>(b: Json, fn: (page: Page) => Promise<T>): Promise<T> {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
  try {
    const ctx = browser.contexts()[0]!;
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    return await fn(page);
  } finally {
    await browser.close();
  }
}

/** What a page sees of the state a profile keeps: the login cookie, local storage, IndexedDB. */
async function stateOf(page: Page): Promise<{ title: string; local: string | null; idb: string | null }> {
  await page.goto(site.url);
  const title = await page.title();
  const local = await page.evaluate(() => localStorage.getItem('k'));
  const idb = await page.evaluate(
    () =>
      new Promise<string | null>((resolve) => {
        const open = indexedDB.open('db', 1);
        open.onupgradeneeded = () => open.result.createObjectStore('s');
        open.onsuccess = () => {
          const get = open.result.transaction('s').objectStore('s').get('k');
          get.onsuccess = () => resolve((get.result as string | undefined) ?? null);
          get.onerror = () => resolve(null);
        };
        open.onerror = () => resolve(null);
      }),
  );
  return { title, local, idb };
}

async function logInAndStore(page: Page, user: string): Promise<void> {
  await page.goto(site.url);
  assert.equal(await page.title(), 'login');
  await page.fill('#user', user);
  await Promise.all([page.waitForURL(site.url), page.click('#go')]);
  assert.equal(await page.title(), 'logged in');
  await page.evaluate(() => localStorage.setItem('k', 'local-value'));
  await page.evaluate(
    () =>
      new Promise<void>((resolve, reject) => {
        const open = indexedDB.open('db', 1);
        open.onupgradeneeded = () => open.result.createObjectStore('s');
        open.onsuccess = () => {
          const tx = open.result.transaction('s', 'readwrite');
          tx.objectStore('s').put('idb-value', 'k');
          tx.oncomplete = () => resolve();
          tx.onerror = () => reject(new Error('idb write failed'));
        };
      }),
  );
}

describe('profile routes', () => {
  test('create, get by id and by name, list with pagination headers, delete; SDK and HTTP agree', async () => {
    const a = await kernel.profiles.create({ name: 'routes-a' });
    assert.match(a.id, /^[a-z][a-z0-9]{23}$/);
    assert.equal(a.name, 'routes-a');
    assert.ok(a.created_at);
    assert.equal(a.last_used_at, undefined);
    const anon = await kernel.profiles.create({});
    assert.equal(anon.name, null);
    assert.deepEqual(await kernel.profiles.retrieve('routes-a'), a);
    assert.deepEqual(await kernel.profiles.retrieve(a.id), a);

    const page = await call('GET', '/profiles?limit=1');
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('x-has-more'), 'true');
    assert.equal(page.headers.get('x-next-offset'), '1');
    const all: string[] = [];
    for await (const p of kernel.profiles.list({ limit: 1 })) all.push(p.id);
    assert.ok(all.includes(a.id) && all.includes(anon.id));
    assert.deepEqual(
      (await call('GET', '/profiles?name=routes-a')).body as unknown as Json[],
      [a],
    );

    await kernel.profiles.delete('routes-a');
    assert.equal((await call('GET', `/profiles/${a.id}`)).status, 404);
    assert.equal((await call('DELETE', `/profiles/${a.id}`)).status, 404);
    await kernel.profiles.delete(anon.id);
  });

  test('a taken name is 409 name_conflict; a bad name or an unknown field is 400 naming it', async () => {
    await kernel.profiles.create({ name: 'taken' });
    const dup = await call('POST', '/profiles', { name: 'taken' });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, 'name_conflict');
    const bad = await call('POST', '/profiles', { name: 'no spaces' });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.body.details), /name/);
    const unknown = await call('POST', '/profiles', { nom: 'x' });
    assert.equal(unknown.status, 400);
    assert.match(JSON.stringify(unknown.body.details), /nom: is not a known field/);
    await kernel.profiles.delete('taken');
  });

  test('a profile that was never saved downloads as an empty archive; tar.zst is refused with a reason', async () => {
    const p = await kernel.profiles.create({ name: 'empty-dl' });
    const r = await fetch(`${server.url}/profiles/${p.id}/download`, { headers: server.headers() });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'application/gzip');
    const names = await tarNames(Buffer.from(await r.arrayBuffer()));
    assert.deepEqual(names, []);
    const zst = await call('GET', `/profiles/${p.id}/download?format=tar.zst`);
    assert.equal(zst.status, 400);
    assert.match(zst.body.message as string, /tar\.zst is not available/);
    await kernel.profiles.delete(p.id);
  });
});

async function tarNames(archive: Buffer): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tar-'));
  try {
    const file = path.join(dir, 'a.tar');
    fs.writeFileSync(file, archive);
    const names: string[] = [];
    await tar.t({ file, onReadEntry: (e) => names.push(e.path) });
    return names;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('sessions with a profile', () => {
  test('logged in with save_changes, ended: a second session with the profile is logged in (cookie, local storage, IndexedDB); a third without it is not', async () => {
    const prof = await kernel.profiles.create({ name: 'login' });
    const first = await create({ headless: true, profile: { name: 'login', save_changes: true } });
    assert.equal((first.profile as Json).id, prof.id);
    assert.equal((first.profile as Json).name, 'login');
    assert.equal(first.profile_save_changes, true);
    await withPage(first, (page) => logInAndStore(page, 'alice'));
    await del(first);

    const saved = await kernel.profiles.retrieve(prof.id);
    assert.ok(saved.updated_at && saved.updated_at > prof.created_at, 'updated_at did not move');
    assert.ok(saved.last_used_at && saved.last_used_at >= saved.updated_at, 'last_used_at did not move');

    const second = await create({ headless: true, profile: { id: prof.id } });
    assert.equal(second.profile_save_changes, false);
    try {
      const seen = await withPage(second, async (page) => ({ ...(await stateOf(page)), who: await page.textContent('#who') }));
      assert.deepEqual(seen, { title: 'logged in', local: 'local-value', idb: 'idb-value', who: 'alice' });
    } finally {
      await del(second);
    }
    // The second session did not save: the profile's state is unchanged.
    assert.equal((await kernel.profiles.retrieve(prof.id)).updated_at, saved.updated_at);

    const third = await create({ headless: true });
    assert.equal(third.profile, undefined);
    assert.equal(third.profile_save_changes, undefined);
    try {
      assert.deepEqual(await withPage(third, stateOf), { title: 'login', local: null, idb: null });
    } finally {
      await del(third);
    }

    // The download holds the saved user-data-dir without caches or locks.
    const r = await fetch(`${server.url}/profiles/login/download?format=tar`, { headers: server.headers() });
    assert.equal(r.headers.get('content-type'), 'application/x-tar');
    const names = await tarNames(Buffer.from(await r.arrayBuffer()));
    assert.ok(names.some((n) => /^Default\/Cookies$/.test(n)), `no cookie store in ${names.slice(0, 40).join(', ')}`);
    assert.ok(names.some((n) => n.startsWith('Default/Local Storage/')));
    assert.ok(names.some((n) => n.startsWith('Default/IndexedDB/')));
    assert.ok(!names.some((n) => /(^|\/)(Cache|Code Cache|GPUCache)\//.test(n) || /^Singleton|^DevToolsActivePort/.test(n)), 'caches or locks were saved');
  });

  test('ending by inactivity saves too', async () => {
    const prof = await kernel.profiles.create({ name: 'idle' });
    const s = await create({ headless: true, timeout_seconds: 10, profile: { id: prof.id, save_changes: true } });
    await withPage(s, (page) => logInAndStore(page, 'bob'));
    const ended = await eventually(async () => (await call('GET', `/browsers/${s.session_id as string}?include_deleted=true`)).body.usage_status === 'ready', 40_000, 250);
    assert.ok(ended, 'the idle session was not ended');
    const saved = await kernel.profiles.retrieve(prof.id);
    assert.ok(saved.updated_at! > prof.created_at);
    const next = await create({ headless: true, profile: { name: 'idle' } });
    try {
      assert.equal((await withPage(next, stateOf)).title, 'logged in');
    } finally {
      await del(next);
    }
  });

  test('one writer at a time: a second save_changes session is 409 profile_in_use, readers are fine, the profile cannot be deleted meanwhile; all free again after the writer ends', async () => {
    const prof = await kernel.profiles.create({ name: 'shared' });
    const writer = await create({ headless: true, profile: { id: prof.id, save_changes: true } });
    try {
      const second = await call('POST', '/browsers', { headless: true, profile: { name: 'shared', save_changes: true } });
      assert.equal(second.status, 409, second.text);
      assert.equal(second.body.code, 'profile_in_use');
      assert.match(second.body.message as string, new RegExp(writer.session_id as string));
      const refused = await call('DELETE', `/profiles/${prof.id}`);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.code, 'profile_in_use');
      const reader = await create({ headless: true, profile: { name: 'shared' } });
      await del(reader);
    } finally {
      await del(writer);
    }
    const again = await create({ headless: true, profile: { name: 'shared', save_changes: true } });
    await del(again);
    assert.equal((await call('DELETE', `/profiles/${prof.id}`)).status, 204);
  });

  test('the profile must exist: unknown id or name is 404 profile_not_found naming profile; another project cannot see it; nothing is created', async () => {
    const before = (await call('GET', '/browsers?status=all&limit=100')).body as unknown as Json[];
    const byId = await call('POST', '/browsers', { headless: true, profile: { id: 'nosuchprofile' } });
    assert.equal(byId.status, 404);
    assert.equal(byId.body.code, 'profile_not_found');
    assert.match(byId.body.message as string, /^profile: /);
    const byName = await call('POST', '/browsers', { headless: true, profile: { name: 'nope', save_changes: true } });
    assert.equal(byName.status, 404);
    const both = await call('POST', '/browsers', { headless: true, profile: { id: 'x', name: 'y' } });
    assert.equal(both.status, 400);
    assert.match(JSON.stringify(both.body.details), /profile: exactly one of id, name/);
    const neither = await call('POST', '/browsers', { headless: true, profile: { save_changes: true } });
    assert.equal(neither.status, 400);
    const after = (await call('GET', '/browsers?status=all&limit=100')).body as unknown as Json[];
    assert.equal(after.length, before.length);

    const mine = await kernel.profiles.create({ name: 'mine-only' });
    const other = otherProject('elsewhere');
    assert.equal((await call('GET', `/profiles/${mine.id}`, undefined, other)).status, 404);
    assert.equal((await call('GET', '/profiles/mine-only', undefined, other)).status, 404);
    assert.deepEqual((await call('GET', '/profiles', undefined, other)).body, []);
    const cross = await call('POST', '/browsers', { headless: true, profile: { id: mine.id } }, other);
    assert.equal(cross.status, 404);
    assert.equal(cross.body.code, 'profile_not_found');
    assert.equal((await call('DELETE', `/profiles/${mine.id}`, undefined, other)).status, 404);
    await kernel.profiles.delete(mine.id);
  });
});
