import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { startServer, type TestServer } from '../helpers/server.js';
import { assertNoSecret, fillCollectionPage, launchPersonBrowser, VaultClient, type Json } from '../helpers/vault-e2e.js';
import { startFakeLink, type FakeLink } from '../helpers/vault-link-provider.js';
import { totpCode } from '../../src/vaults/totp.js';

/**
 * Fill: a session created with `vaults` has a credential typed into a local login page
 * (username, password and the current TOTP code) and a wallet's single-use card into a
 * checkout page, without the values ever reaching an API answer, the logs or the store in
 * clear. Sessions not linked to the vault, and pages outside the item's origins, get nothing.
 */

const USER = 'grace@example.com';
const PASSWORD = 'Fill-Me-Secret-9f83kd';
const SEED = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

interface Site {
  url: string;
  posts: Record<string, string>[];
  close(): Promise<void>;
}

/** A login page and a checkout page; every form post is recorded. */
async function startSite(): Promise<Site> {
  const posts: Record<string, string>[] = [];
  const srv = http.createServer(async (req, res) => {
    if (req.method === 'POST') {
      let body = '';
      for await (const c of req) body += c;
      posts.push(Object.fromEntries(new URLSearchParams(body)));
      res.setHeader('content-type', 'text/html');
      return res.end('<title>welcome</title><p id="done">signed in</p>');
    }
    res.setHeader('content-type', 'text/html');
    if (req.url?.startsWith('/checkout')) {
      const months = Array.from({ length: 12 }, (_, i) => `<option value="${i + 1}">${String(i + 1).padStart(2, '0')}</option>`).join('');
      const years = Array.from({ length: 10 }, (_, i) => `<option>${new Date().getUTCFullYear() + i}</option>`).join('');
      return res.end(`<title>checkout</title><form method="post" action="/pay">
        <input id="cc" name="cc" autocomplete="off"><select id="mm" name="mm"><option value="">MM</option>${months}</select>
        <select id="yy" name="yy"><option value="">YYYY</option>${years}</select><input id="cvc" name="cvc" type="password">
        <input id="exp" name="exp"><button id="pay">Pay</button></form>`);
    }
    return res.end(`<title>login</title><form method="post" action="/login">
      <input id="username" name="username" type="email"><input id="password" name="password" type="password">
      <input id="otp" name="otp" inputmode="numeric" value="stale"><input id="hidden" type="hidden" name="h">
      <button id="submit">Sign in</button></form>`);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    posts,
    close: () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

let server: TestServer;
let site: Site;
let link: FakeLink;
let person: Browser;
let api: VaultClient;
let linked: Json;
let unlinked: Json;

before(async () => {
  link = await startFakeLink();
  server = await startServer({ env: link.env });
  site = await startSite();
  api = new VaultClient(server);
  person = await launchPersonBrowser();
});
after(async () => {
  await person?.close();
  for (const b of [linked, unlinked]) if (b) await api.call('DELETE', `/browsers/${b.session_id}`);
  await server?.stop();
  await site?.close();
  await link?.close();
});

/** The agent's side: clicks a button in the session's page over its own CDP connection. */
async function agentClicks(b: Json, selector: string): Promise<void> {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
  try {
    const page = browser.contexts()[0]!.pages().find((p) => p.url().startsWith(site.url))!;
    await Promise.all([page.waitForNavigation(), page.click(selector)]);
  } finally {
    await browser.close();
  }
}

async function agentOpens(b: Json, url: string): Promise<void> {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
  try {
    const page = browser.contexts()[0]!.pages()[0] ?? (await browser.contexts()[0]!.newPage());
    await page.goto(url);
  } finally {
    await browser.close();
  }
}

describe('linking vaults to a session at creation', () => {
  test('unknown vaults are a 404 naming each entry; repeats a 400; more than 20 a 400', async () => {
    const v = await api.ok('POST', '/vaults', { name: 'logins' }, 201);
    const e = await api.err('POST', '/browsers', { headless: true, vaults: [{ name: 'logins' }, { name: 'missing' }, { id: 'nope' }] }, 404, 'vault_not_found');
    assert.deepEqual(e.details.map((d: Json) => d.message), ['vaults[1]: no vault named "missing" in this project', 'vaults[2]: no vault with id "nope" in this project']);
    const dup = await api.err('POST', '/browsers', { headless: true, vaults: [{ name: 'logins' }, { id: v.id }] }, 400, 'bad_request');
    assert.match(dup.details[0].message, /^vaults\[1\]: names vault "logins" again/);
    await api.err('POST', '/browsers', { headless: true, vaults: Array.from({ length: 21 }, () => ({ name: 'logins' })) }, 400, 'bad_request');
    await api.err('POST', '/browsers', { headless: true, vaults: [{ id: v.id, name: 'logins' }] }, 400, 'bad_request');
    assert.deepEqual(await api.ok('GET', '/browsers'), [], 'no session was left behind');
  });

  test('a session created with vaults by name echoes them by id, on create, get and list', async () => {
    const v = await api.ok('GET', '/vaults/logins');
    await api.ok('POST', '/vaults', { name: 'other' }, 201);
    linked = await api.ok('POST', '/browsers', { headless: true, vaults: [{ name: 'logins' }], start_url: `${site.url}/login`, telemetry: { enabled: true } });
    assert.deepEqual(linked.vaults, [{ id: v.id }]);
    assert.deepEqual((await api.ok('GET', `/browsers/${linked.session_id}`)).vaults, [{ id: v.id }]);
    assert.deepEqual((await api.ok('GET', '/browsers')).find((b: Json) => b.session_id === linked.session_id).vaults, [{ id: v.id }]);
    unlinked = await api.ok('POST', '/browsers', { headless: true, vaults: [{ name: 'other' }], start_url: `${site.url}/login` });
    const plain = await api.ok('POST', '/browsers', { headless: true });
    assert.equal(plain.vaults, undefined, 'no vaults, no field');
    assert.equal((await api.call('DELETE', `/browsers/${plain.session_id}`)).status, 204);
  });
});

describe('fill', () => {
  test('username, password and the current TOTP code reach the login page; the answer reports each field, never a value', async () => {
    await api.ok('PUT', '/vaults/logins/items/site', {
      type: 'credential',
      spec: { fields: [{ name: 'username', kind: 'email' }, { name: 'password', kind: 'password' }, { name: 'otp', kind: 'totp' }], origins: [site.url] },
    }, 201);
    const item = await api.ok('GET', '/vaults/logins/items/site');
    assert.match(await fillCollectionPage(person, item.action.url, { username: USER, password: PASSWORD, otp: SEED }), /^Saved/);

    const r = await api.ok('POST', '/vaults/logins/items/site/operations', {
      type: 'fill',
      browser_id: linked.session_id,
      fields: [
        { field: 'username', selector: '#username' },
        { field: 'password', selector: '#password' },
        { field: 'otp', selector: '#otp' },
        { field: 'password', selector: '#hidden' },
        { field: 'password', selector: '#absent' },
        { field: 'password', selector: '##' },
      ],
    });
    assert.equal(r.type, 'fill');
    assert.equal(r.browser_id, linked.session_id);
    assert.equal(r.origin, site.url);
    assert.equal(typeof r.target_id, 'string');
    assert.deepEqual(r.fields.map((f: Json) => [f.field, f.selector, f.status]), [
      ['username', '#username', 'filled'],
      ['password', '#password', 'filled'],
      ['otp', '#otp', 'filled'],
      ['password', '#hidden', 'not_fillable'],
      ['password', '#absent', 'not_found'],
      ['password', '##', 'invalid_selector'],
    ]);

    await agentClicks(linked, '#submit');
    const posted = site.posts.at(-1)!;
    assert.equal(posted.username, USER);
    assert.equal(posted.password, PASSWORD);
    const now = Date.now();
    const codes = [-30_000, 0, 30_000].map((d) => totpCode({ secret: SEED, algorithm: 'SHA1', digits: 6, period: 30 }, now + d));
    assert.ok(codes.includes(posted.otp!), 'the current TOTP code replaced what the field held');

    const listed = await api.ok('GET', '/vaults/logins/items');
    assert.equal(listed[0].state.status, 'ready');
    // The session's telemetry saw the agent (its CDP commands) but not the fill's private connection.
    const events = await api.call('GET', `/browsers/${linked.session_id}/telemetry/events?limit=1000`);
    assert.equal(events.status, 200, events.text);
    assert.ok(events.body.some((e: Json) => e.event.type === 'cdp_command'), 'the agent is captured');
    for (const secret of [PASSWORD, SEED, USER, ...codes]) assert.ok(!events.text.includes(secret), 'telemetry holds no filled value');
    assertNoSecret(server, api.answers, [PASSWORD, SEED], 'after fill');
    const answersAndLogs = `${api.answers.join('\n')}\n${server.output()}`;
    for (const c of codes) assert.ok(!answersAndLogs.includes(c), 'no TOTP code in an answer or the logs');
    assert.match(server.output(), /vault item filled into a page/, 'the fill is logged, without values');
  });

  test('a session not created with the vault gets nothing: 403 vault_not_linked', async () => {
    const e = await api.err('POST', '/vaults/logins/items/site/operations', { type: 'fill', browser_id: unlinked.session_id, fields: [{ field: 'password', selector: '#password' }] }, 403, 'vault_not_linked');
    assert.match(e.message, /was not created with vault "logins"/);
  });

  test('a page outside the item origins gets nothing: 403 origin_not_allowed, the field stays empty', async () => {
    const cur = await api.ok('GET', '/vaults/logins/items/site');
    await api.ok('PATCH', '/vaults/logins/items/site', { version: cur.version, spec: { ...cur.spec, origins: ['https://elsewhere.example'] } });
    await agentOpens(linked, `${site.url}/login`);
    const e = await api.err('POST', '/vaults/logins/items/site/operations', { type: 'fill', browser_id: linked.session_id, fields: [{ field: 'password', selector: '#password' }] }, 403, 'origin_not_allowed');
    assert.match(e.message, /nothing was typed/);
    await agentClicks(linked, '#submit');
    assert.equal(site.posts.at(-1)!.password, '');
  });

  test('sessions of another project and unknown sessions are 404', async () => {
    await api.err('POST', '/vaults/logins/items/site/operations', { type: 'fill', browser_id: 'nosuchsession000000000000', fields: [{ field: 'password', selector: '#p' }] }, 404);
  });

  test("a wallet's single-use card is typed into a checkout page: number, expiry by select, CVC, MM/YY", async () => {
    await api.ok('PUT', '/vaults/logins/items/wallet', { type: 'wallet', spec: { provider: 'link' } }, 201);
    const op = await api.ok('POST', '/vaults/logins/items/wallet/operations', { type: 'authorize' });
    const start = await api.raw(op.action.url, { redirect: 'manual' });
    const consent = await api.raw(start.headers.get('location')!, { redirect: 'manual' });
    assert.equal((await api.raw(consent.headers.get('location')!, { redirect: 'manual' })).status, 200);
    const card = await api.ok('POST', '/vaults/logins/items/wallet/operations', { type: 'prepare_checkout', payment_method_id: 'pm_visa', amount: { value: 1999, currency: 'usd' }, card_key: 'cart' });
    const issued = link.checkouts.get(card.state.authorization_id)!.card;
    await agentOpens(linked, `${site.url}/checkout`);
    const r = await api.ok('POST', '/vaults/logins/items/cart/operations', {
      type: 'fill',
      browser_id: linked.session_id,
      fields: [
        { field: 'number', selector: '#cc' },
        { field: 'exp_month', selector: '#mm' },
        { field: 'exp_year', selector: '#yy' },
        { field: 'cvc', selector: '#cvc' },
        { field: 'expiry', selector: '#exp' },
      ],
    });
    assert.deepEqual(r.fields.map((f: Json) => f.status), ['filled', 'filled', 'filled', 'filled', 'filled']);
    await agentClicks(linked, '#pay');
    const posted = site.posts.at(-1)!;
    assert.equal(posted.cc, issued.number);
    assert.equal(posted.mm, String(Number(issued.exp_month)));
    assert.equal(posted.yy, issued.exp_year);
    assert.equal(posted.cvc, issued.cvc);
    assert.equal(posted.exp, `${issued.exp_month}/${issued.exp_year.slice(-2)}`);
    assert.ok(!api.answers.join('\n').includes(`"${issued.cvc}"`), 'no CVC in an answer');
    assertNoSecret(server, api.answers, link.secrets(), 'after the card fill');
    const done = await api.ok('POST', '/vaults/logins/items/cart/operations', { type: 'cancel' });
    assert.equal(done.state.status, 'cancelled');
    await api.err('POST', '/vaults/logins/items/cart/operations', { type: 'fill', browser_id: linked.session_id, fields: [{ field: 'number', selector: '#cc' }] }, 409, 'operation_not_available');
  });

  test('a deleted item cannot be filled any more', async () => {
    assert.equal((await api.call('DELETE', '/vaults/logins/items/site')).status, 204);
    await api.err('POST', '/vaults/logins/items/site/operations', { type: 'fill', browser_id: linked.session_id, fields: [{ field: 'password', selector: '#password' }] }, 404, 'item_not_found');
    assertNoSecret(server, api.answers, [PASSWORD, SEED], 'after deletion');
  });
});
