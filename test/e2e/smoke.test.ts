import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
before(async () => {
  server = await startServer();
  site = await startSite();
});
after(async () => {
  await server.stop();
  await site.close();
});

test('Kernel SDK creates a session that Playwright drives through cdp_ws_url, and delete ends it', async () => {
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
});
