import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { createTestDatabase } from '../helpers/postgres.js';
import { sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';

let site: Awaited<ReturnType<typeof startSite>>;
before(async () => {
  site = await startSite();
});
after(async () => {
  await site.close();
});

/** The whole path a user takes: SDK create -> Playwright through cdp_ws_url -> SDK delete. */
async function createDriveDelete(server: TestServer): Promise<void> {
  const kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
  const b = await kernel.browsers.create({ headless: true });
  assert.match(b.session_id, /^[a-z0-9]{24}$/);
  const browser = await chromium.connectOverCDP(b.cdp_ws_url);
  const page = await browser.contexts()[0]!.newPage();
  await page.goto(site.url);
  assert.equal(await page.title(), 'browserd test page');
  await browser.close();
  assert.ok(sessionProcesses(server.dataDir).some((p) => p.sessionId === b.session_id));
  await kernel.browsers.deleteByID(b.session_id);
  assert.deepEqual(sessionProcesses(server.dataDir), []);
  const gone = await kernel.browsers.retrieve(b.session_id, { include_deleted: true });
  assert.ok(gone.deleted_at);
}

describe('embedded SQLite store', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.stop();
  });
  test('Kernel SDK creates a session that Playwright drives through cdp_ws_url, and delete ends it', async () => {
    await createDriveDelete(server);
  });
});

describe('PostgreSQL store', () => {
  let server: TestServer;
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  before(async () => {
    db = await createTestDatabase();
    server = await startServer({ env: { BROWSERD_DATABASE_URL: db.url } });
  });
  after(async () => {
    await server.stop();
    await db.drop();
  });
  test('the same path works with BROWSERD_DATABASE_URL=postgres://', async () => {
    await createDriveDelete(server);
    const res = await fetch(`${server.url}/readyz`);
    assert.equal(res.status, 200);
  });
});
