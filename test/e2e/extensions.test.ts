import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel, { toFile } from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';
import { MARKER_EXTENSION, makeZip, zipWithRawName } from '../helpers/zips.js';

/** Uploaded extensions: the routes, and sessions that load them (headless and headful). */

type Json = Record<string, unknown>;

let server: TestServer;
let kernel: Kernel;
let site: Awaited<ReturnType<typeof startSite>>;
let marker: Buffer;

before(async () => {
  server = await startServer();
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  site = await startSite();
  marker = await makeZip(MARKER_EXTENSION);
});
after(async () => {
  await server?.stop();
  await site?.close();
});

async function call(method: string, p: string, body?: unknown): Promise<{ status: number; body: Json; text: string }> {
  const h: Record<string, string> = { authorization: `Bearer ${server.apiKey}` };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let parsed: Json = {};
  try {
    parsed = text ? (JSON.parse(text) as Json) : {};
  } catch {
    /* not JSON */
  }
  return { status: r.status, body: parsed, text };
}

/** A raw multipart upload (what the SDK sends), for the refusals. */
async function upload(file: Buffer | null, name?: string, extra: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const form = new FormData();
  if (file) form.append('file', new Blob([new Uint8Array(file)], { type: 'application/zip' }), 'ext.zip');
  if (name !== undefined) form.append('name', name);
  for (const [k, v] of Object.entries(extra)) form.append(k, v);
  const r = await fetch(`${server.url}/extensions`, { method: 'POST', headers: server.headers(), body: form });
  return { status: r.status, body: (await r.json()) as Json };
}

describe('extension routes', () => {
  test('upload (SDK), get metadata, list, download the exact bytes, delete', async () => {
    const up = await kernel.extensions.upload({ file: await toFile(marker, 'marker.zip'), name: 'routes-marker' });
    assert.match(up.id, /^[a-z][a-z0-9]{23}$/);
    assert.equal(up.name, 'routes-marker');
    assert.equal(up.size_bytes, marker.length);
    assert.equal(up.checksum, crypto.createHash('sha256').update(marker).digest('hex'));
    assert.equal(up.last_used_at, null);
    assert.deepEqual(await kernel.extensions.get('routes-marker'), up);
    assert.deepEqual(await kernel.extensions.get(up.id), up);
    const listed: string[] = [];
    for await (const e of kernel.extensions.list()) listed.push(e.id);
    assert.ok(listed.includes(up.id));
    const dl = await kernel.extensions.download('routes-marker');
    assert.equal(dl.headers.get('content-type'), 'application/zip');
    assert.deepEqual(Buffer.from(await dl.arrayBuffer()), marker);
    // Unnamed uploads are fine, and a name is unique per project.
    const anon = await kernel.extensions.upload({ file: await toFile(marker, 'marker.zip') });
    assert.equal(anon.name, null);
    const dup = await upload(marker, 'routes-marker');
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, 'name_conflict');
    await kernel.extensions.delete('routes-marker');
    await kernel.extensions.delete(anon.id);
    assert.equal((await call('GET', `/extensions/${up.id}/metadata`)).status, 404);
    assert.equal((await call('GET', `/extensions/${up.id}`)).status, 404);
    assert.equal((await call('DELETE', `/extensions/${up.id}`)).status, 404);
    // Nothing of it is left on disk.
    assert.equal(fs.existsSync(path.join(server.dataDir, 'extensions', up.id)), false);
  });

  test('a bad archive or manifest is 400 naming `file` with the reason; nothing is stored', async () => {
    const cases: [string, Buffer, RegExp][] = [
      ['not a zip', Buffer.from('hello'), /not a readable zip archive/],
      ['no manifest', await makeZip({ 'a.js': 'x' }), /no manifest\.json/],
      ['manifest_version 1', await makeZip({ 'manifest.json': JSON.stringify({ manifest_version: 1, name: 'x', version: '1' }) }), /manifest_version must be 2 or 3/],
      ['path traversal', await zipWithRawName({ ...MARKER_EXTENSION, 'zz/evil.js': 'x' }, 'zz/evil.js', '../evil.js'), /climbs out/],
      ['debugger permission', await makeZip({ 'manifest.json': JSON.stringify({ manifest_version: 3, name: 'x', version: '1', permissions: ['debugger'] }) }), /debugger permission/],
    ];
    const before = fs.readdirSync(path.join(server.dataDir, 'extensions')).length;
    for (const [what, buf, re] of cases) {
      const r = await upload(buf, 'bad');
      assert.equal(r.status, 400, what);
      assert.equal(r.body.code, 'bad_request');
      const details = JSON.stringify(r.body.details);
      assert.match(details, /"file: /, what);
      assert.match(details, re, what);
    }
    assert.equal(fs.readdirSync(path.join(server.dataDir, 'extensions')).length, before);
    assert.equal(fs.existsSync(path.join(server.dataDir, 'evil.js')), false);
    assert.equal(fs.existsSync(path.join(server.dataDir, 'extensions', 'evil.js')), false);
    const noFile = await upload(null, 'x');
    assert.equal(noFile.status, 400);
    assert.match(JSON.stringify(noFile.body.details), /file: is required/);
    const badName = await upload(marker, 'no spaces');
    assert.equal(badName.status, 400);
    assert.match(JSON.stringify(badName.body.details), /name: /);
    const json = await call('POST', '/extensions', { file: 'x' });
    assert.equal(json.status, 415);
  });
});

describe('sessions with extensions', () => {
  for (const headless of [true, false]) {
    test(`an uploaded extension's content script runs in a ${headless ? 'headless' : 'headful'} session (by ${headless ? 'name' : 'id'})`, async () => {
      const ext = await kernel.extensions.upload({ file: await toFile(marker, 'marker.zip'), name: `marker-${headless ? 'hl' : 'hf'}` });
      const b = (await call('POST', '/browsers', { headless, extensions: [headless ? { name: ext.name } : { id: ext.id }] })).body;
      assert.ok(b.session_id, JSON.stringify(b));
      try {
        // Loaded from the session's own copy, readable by the session user; nothing else may load.
        const main = sessionProcesses(server.dataDir).find((p) => p.sessionId === b.session_id && /--remote-debugging-port/.test(fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8')));
        assert.ok(main);
        const args = fs.readFileSync(`/proc/${main.pid}/cmdline`, 'utf8').split('\0');
        const own = path.join(server.dataDir, 'runtime', b.session_id as string, 'extensions', ext.id);
        assert.ok(args.includes(`--load-extension=${own}`), args.join(' '));
        assert.ok(args.includes(`--disable-extensions-except=${own}`));
        const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
        try {
          const page = await browser.contexts()[0]!.newPage();
          await page.goto(site.url);
          await page.waitForFunction(() => document.documentElement.getAttribute('data-browserd-ext') === 'ran', undefined, { timeout: 15_000 });
        } finally {
          await browser.close();
        }
        assert.ok((await kernel.extensions.get(ext.id)).last_used_at);
      } finally {
        assert.equal((await call('DELETE', `/browsers/${b.session_id as string}`)).status, 204);
      }
    });
  }

  test('without extensions nothing runs the content script', async () => {
    const b = (await call('POST', '/browsers', { headless: true })).body;
    try {
      const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
      try {
        const page = await browser.contexts()[0]!.newPage();
        await page.goto(site.url);
        assert.equal(await page.evaluate(() => document.documentElement.getAttribute('data-browserd-ext')), null);
      } finally {
        await browser.close();
      }
    } finally {
      await call('DELETE', `/browsers/${b.session_id as string}`);
    }
  });

  test('unknown extensions are 404 extension_not_found naming each extensions[i]; one named twice is 400; more than 20 is 400; nothing is created', async () => {
    const ext = await kernel.extensions.upload({ file: await toFile(marker, 'marker.zip'), name: 'known' });
    const before = ((await call('GET', '/browsers?status=all&limit=100')).body as unknown as Json[]).length;
    const r = await call('POST', '/browsers', { headless: true, extensions: [{ name: 'known' }, { id: 'nosuchid' }, { name: 'nosuchname' }] });
    assert.equal(r.status, 404);
    assert.equal(r.body.code, 'extension_not_found');
    const details = (r.body.details as Json[]).map((d) => d.message as string);
    assert.deepEqual(details, ['extensions[1]: no extension with id "nosuchid" in this project', 'extensions[2]: no extension named "nosuchname" in this project']);
    const twice = await call('POST', '/browsers', { headless: true, extensions: [{ name: 'known' }, { id: ext.id }] });
    assert.equal(twice.status, 400);
    assert.match(JSON.stringify(twice.body.details), /extensions\[1\]: names extension/);
    const many = await call('POST', '/browsers', { headless: true, extensions: Array.from({ length: 21 }, () => ({ id: ext.id })) });
    assert.equal(many.status, 400);
    assert.match(JSON.stringify(many.body.details), /extensions/);
    assert.equal(((await call('GET', '/browsers?status=all&limit=100')).body as unknown as Json[]).length, before);
    await kernel.extensions.delete(ext.id);
  });
});
