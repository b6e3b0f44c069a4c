import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium, type Browser, type Page } from 'playwright-core';
import { eventually, startServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let kernel: Kernel;
let site: { server: http.Server; url: string };

/** A 2x2 PNG (binary body). */
function png(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.from([0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0]);
  const raw = Buffer.from([0, 255, 0, 0, 255, 0, 0, 0, 255, 0, 0, 255, 0, 0, 255, 0]);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

const POST_BODY = '{"order": 7, "note": "sent as is, é"}';
const PAGE = `<!doctype html><title>capture</title>
<style>body{margin:0} #hero{font-size:64px} #tall{height:3000px}</style>
<div id="slot"></div>
<h1 id="hero">Largest text on the page</h1>
<img src="/img.png" width="2" height="2">
<button id="b">Press me</button> <input id="q"> <input id="pw" type="password">
<div id="tall"></div>
<script>
  console.log('hello', 2, {a: 1});
  console.warn('careful');
  console.error('bad thing');
  setTimeout(() => { throw new Error('boom'); }, 0);
  fetch('/data.json'); fetch('/text.txt');
  fetch('/submit', { method: 'POST', headers: { 'content-type': 'application/json' }, body: ${JSON.stringify(POST_BODY)} });
  // A layout shift: content inserted above the heading after the first paint.
  setTimeout(() => { document.getElementById('slot').style.height = '120px'; }, 300);
</script>`;

before(async () => {
  server = await startServer({ env: { BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS: '500' } });
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url });
  const srv = http.createServer((req, res) => {
    if (req.url === '/data.json') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ items: 'j'.repeat(20_000) }));
    } else if (req.url === '/text.txt') {
      res.setHeader('content-type', 'text/plain');
      res.end('t'.repeat(10_000));
    } else if (req.url === '/img.png') {
      res.setHeader('content-type', 'image/png');
      res.end(png());
    } else if (req.url === '/submit') {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end('{"ok":true}');
      });
    } else {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end(PAGE);
    }
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  site = { server: srv, url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/` };
});
after(async () => {
  await server?.stop();
  await new Promise((r) => site?.server.close(r));
});

interface Ev {
  seq: number;
  event: { category: string; type: string; ts: number; source: { kind: string; event?: string }; data?: Record<string, any>; truncated?: boolean }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function events(id: string, after = 0): Promise<Ev[]> {
  const out: Ev[] = [];
  for await (const e of kernel.browsers.telemetry.events(id, { limit: 200, offset: after })) out.push(e as unknown as Ev);
  return out;
}

async function patch(id: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}/browsers/${id}`, { method: 'PATCH', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify(body) });
}

const CAPTURE = { console: { enabled: true }, network: { enabled: true }, page: { enabled: true }, interaction: { enabled: true }, screenshot: { enabled: true }, platform: { enabled: true } };
const CDP_CATEGORIES = ['console', 'network', 'page', 'interaction', 'screenshot'];

/** Waits until events of the session satisfy `pred`; returns them (or fails with what was seen). */
async function until(id: string, what: string, pred: (evs: Ev[]) => boolean, after = 0): Promise<Ev[]> {
  let evs: Ev[] = [];
  const ok = await eventually(async () => pred((evs = await events(id, after))), 20_000, 250);
  assert.ok(ok, `${what}; saw: ${evs.map((e) => e.event.type).join(', ')}`);
  return evs;
}

const find = (evs: Ev[], type: string, f: (d: Record<string, any>) => boolean = () => true) => evs.find((e) => e.event.type === type && f(e.event.data ?? {})); // eslint-disable-line @typescript-eslint/no-explicit-any

async function drive(page: Page): Promise<void> {
  await page.goto(site.url, { waitUntil: 'load' });
  await page.click('#b');
  await page.click('#q');
  await page.keyboard.type('ab');
  await page.click('#pw');
  await page.keyboard.type('hunter2');
  await page.mouse.move(200, 300);
  await page.mouse.wheel(0, 600);
}

describe('telemetry capture from the session agent', () => {
  test('console, network, page, interaction, screenshot and platform events; switched off by PATCH', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { browser: CAPTURE } });
    let browser: Browser | undefined;
    try {
      browser = await chromium.connectOverCDP(s.cdp_ws_url);
      const page = browser.contexts()[0]!.pages()[0]!;
      await drive(page);

      const evs = await until(s.session_id, 'every category shows up', (evs) =>
        ['console_error', 'network_response', 'page_load', 'page_lcp', 'interaction_click', 'interaction_key', 'interaction_scroll_settled', 'monitor_screenshot'].every((t) => find(evs, t)) &&
        !!find(evs, 'interaction_key', (d) => d.masked) && !!find(evs, 'network_response', (d) => String(d.url).endsWith('/img.png')) && !!find(evs, 'console_error', (d) => String(d.text).includes('boom')),
      );
      for (const e of evs) if (CDP_CATEGORIES.includes(e.event.category)) assert.equal(e.event.source.kind, 'cdp', e.event.type);

      // console: log with its arguments, warn, error, and the uncaught exception.
      const log = find(evs, 'console_log', (d) => d.text === 'hello');
      assert.deepEqual(log?.event.data?.args, ['hello', '2', '{a: 1}']);
      assert.equal(log?.event.data?.level, 'log');
      assert.equal(log?.event.data?.target_type, 'page');
      assert.ok(find(evs, 'console_log', (d) => d.level === 'warning' && d.text === 'careful'));
      assert.ok(find(evs, 'console_error', (d) => d.level === 'error' && d.text === 'bad thing'));
      const boom = find(evs, 'console_error', (d) => d.text === 'Uncaught Error: boom')!;
      assert.equal(boom.event.source.event, 'Runtime.exceptionThrown');
      assert.equal(typeof boom.event.data?.line, 'number');

      // network: method, status, timing; bodies by type; post data as sent.
      const doc = find(evs, 'network_response', (d) => d.url === site.url)!;
      assert.equal(doc.event.data?.method, 'GET');
      assert.equal(doc.event.data?.status, 200);
      assert.equal(typeof doc.event.data?.duration_ms, 'number');
      assert.ok(find(evs, 'network_request', (d) => d.url === site.url && d.method === 'GET' && d.resource_type === 'Document'));
      const json = find(evs, 'network_response', (d) => String(d.url).endsWith('/data.json'))!;
      assert.equal(json.event.truncated, true);
      assert.equal(Buffer.byteLength(json.event.data!.body), 8192);
      assert.ok(String(json.event.data!.body).startsWith('{"items":"jjj'));
      assert.equal(json.event.data!.body_bytes, 20_000 + '{"items":""}'.length);
      const text = find(evs, 'network_response', (d) => String(d.url).endsWith('/text.txt'))!;
      assert.equal(Buffer.byteLength(text.event.data!.body), 4096);
      assert.equal(text.event.truncated, true);
      const img = find(evs, 'network_response', (d) => String(d.url).endsWith('/img.png'))!;
      assert.equal(img.event.data!.body, undefined);
      assert.equal(img.event.data!.body_excluded, 'binary_type');
      assert.equal(img.event.data!.mime_type, 'image/png');
      const post = find(evs, 'network_request', (d) => String(d.url).endsWith('/submit'))!;
      assert.equal(post.event.data!.method, 'POST');
      assert.equal(post.event.data!.post_data, POST_BODY);
      assert.equal(find(evs, 'network_response', (d) => String(d.url).endsWith('/submit'))?.event.data?.body, '{"ok":true}');

      // page: navigation, DOMContentLoaded, load, LCP (and the layout shift).
      assert.ok(find(evs, 'page_navigation', (d) => d.url === site.url && !d.parent_frame_id));
      assert.ok(find(evs, 'page_dom_content_loaded', (d) => d.url === site.url && typeof d.cdp_timestamp === 'number'));
      assert.ok(find(evs, 'page_load', (d) => d.url === site.url));
      const lcp = find(evs, 'page_lcp')!;
      assert.ok(lcp.event.data!.lcp_details.size > 0);
      assert.ok(find(await until(s.session_id, 'a layout shift', (e) => !!find(e, 'page_layout_shift')), 'page_layout_shift', (d) => d.layout_shift_details.value > 0));

      // interaction: the click with its target, keys in the text field, none of the password's.
      const click = find(evs, 'interaction_click', (d) => d.selector === '#b')!;
      assert.equal(click.event.data!.tag, 'BUTTON');
      assert.equal(click.event.data!.text, 'Press me');
      assert.equal(typeof click.event.data!.x, 'number');
      assert.ok(find(evs, 'interaction_key', (d) => d.selector === '#q' && d.key === 'a'));
      const pwKeys = evs.filter((e) => e.event.type === 'interaction_key' && e.event.data?.selector === '#pw');
      assert.ok(pwKeys.length >= 7);
      for (const k of pwKeys) {
        assert.equal(k.event.data!.key, undefined);
        assert.equal(k.event.data!.masked, true);
      }
      assert.ok(!JSON.stringify(evs).includes('hunter2'), 'the password never appears in any event');
      assert.ok(find(evs, 'interaction_scroll_settled', (d) => d.to_y > d.from_y));

      // screenshot: a decodable PNG of the viewport.
      const shot = Buffer.from(find(evs, 'monitor_screenshot')!.event.data!.png, 'base64');
      assert.deepEqual([...shot.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      assert.ok(shot.readUInt32BE(16) > 0 && shot.readUInt32BE(20) > 0, 'IHDR width and height');

      // PATCH switches the CDP categories off; platform (still on) records that call.
      const off = await patch(s.session_id, { telemetry: { browser: { console: { enabled: false }, network: { enabled: false }, page: { enabled: false }, interaction: { enabled: false }, screenshot: { enabled: false } } } });
      assert.equal(off.status, 200);
      await new Promise((r) => setTimeout(r, 500)); // events captured before the PATCH are stored (written every 100 ms)
      const mark = (await events(s.session_id)).at(-1)!.seq;
      const api = await until(s.session_id, 'a platform api_call for the PATCH', (e) => !!find(e, 'api_call'), 0);
      const call = find(api, 'api_call')!;
      assert.equal(call.event.category, 'platform');
      assert.equal(call.event.data!.operation_id, 'updateBrowser');
      assert.equal(call.event.data!.status, 200);
      assert.deepEqual(call.event.data!.changed, ['telemetry']);

      await page.reload({ waitUntil: 'load' });
      await page.evaluate(() => console.log('after off'));
      await page.click('#b');
      await new Promise((r) => setTimeout(r, 1500)); // three screenshot intervals
      const later = await events(s.session_id, mark);
      assert.deepEqual(later.filter((e) => CDP_CATEGORIES.includes(e.event.category)).map((e) => e.event.type), []);
      // Control capture (default set) goes on.
      assert.ok(later.some((e) => e.event.type === 'cdp_command'));
    } finally {
      await browser?.close().catch(() => undefined);
      await kernel.browsers.deleteByID(s.session_id);
    }
  });

  test('categories switched on by PATCH on a running session start capturing at once', async () => {
    const s = await kernel.browsers.create({ headless: true, telemetry: { enabled: true } });
    let browser: Browser | undefined;
    try {
      browser = await chromium.connectOverCDP(s.cdp_ws_url);
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.goto(site.url, { waitUntil: 'load' });
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual((await events(s.session_id)).filter((e) => CDP_CATEGORIES.includes(e.event.category) || e.event.category === 'platform'), []);

      const on = await patch(s.session_id, { telemetry: { browser: { console: { enabled: true }, network: { enabled: true }, interaction: { enabled: true }, platform: { enabled: true } } } });
      assert.equal(on.status, 200);
      const body = (await on.json()) as { telemetry: { browser: Record<string, { enabled: boolean }> } };
      assert.equal(body.telemetry.browser.console!.enabled, true);
      // The running tab (attached before the PATCH) is captured, and so is a tab opened after it.
      await page.evaluate(() => console.log('switched on'));
      await page.click('#b');
      const tab = await browser.contexts()[0]!.newPage();
      await tab.goto(site.url + '?second', { waitUntil: 'load' });
      const evs = await until(s.session_id, 'events of the switched-on categories', (e) =>
        !!find(e, 'console_log', (d) => d.text === 'switched on') && !!find(e, 'interaction_click') && !!find(e, 'network_response', (d) => String(d.url).endsWith('?second')) && !!find(e, 'api_call'),
      );
      assert.equal(find(evs, 'api_call')!.event.data!.operation_id, 'updateBrowser');
      assert.equal(evs.filter((e) => e.event.category === 'page' || e.event.category === 'screenshot').length, 0, 'categories left off stay off');
    } finally {
      await browser?.close().catch(() => undefined);
      await kernel.browsers.deleteByID(s.session_id);
    }
  });
});
