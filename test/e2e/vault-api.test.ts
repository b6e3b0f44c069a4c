import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { startServer, type TestServer } from '../helpers/server.js';
import { assertNoSecret, cliJson, fillCollectionPage, launchPersonBrowser, VaultClient, type Json } from '../helpers/vault-e2e.js';
import { startFakeLink, type FakeLink } from '../helpers/vault-link-provider.js';

/**
 * The vault API of the real server over HTTP: every route and its statuses, the
 * collection page filled by a person in a real browser, the wallet authorized on the
 * provider's consent page, payments and the deletion rules, project isolation; after
 * each secret-related test the database file, the server's output and every answer are
 * searched for the secrets.
 */

let server: TestServer;
let link: FakeLink;
let person: Browser;
let api: VaultClient;

before(async () => {
  link = await startFakeLink();
  link.knobs.autoApprove = false;
  server = await startServer({ env: link.env });
  api = new VaultClient(server);
  person = await launchPersonBrowser();
});
after(async () => {
  await person?.close();
  await server?.stop();
  await link?.close();
});

describe('/openapi.json', () => {
  test('documents every vault route; API routes need the key, the pages do not', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as Json;
    const want: [string, string[]][] = [
      ['/vaults', ['get', 'post']],
      ['/vaults/{id_or_name}', ['get', 'delete']],
      ['/vaults/{id_or_name}/items', ['get']],
      ['/vaults/{id_or_name}/items/{key}', ['get', 'put', 'patch', 'delete']],
      ['/vaults/{id_or_name}/items/{key}/operations', ['post']],
      ['/vault-collect', ['get']],
      ['/vault-collect/form', ['get']],
      ['/vault-collect/submit', ['post']],
      ['/vault-oauth/start', ['get']],
      ['/vault-oauth/callback', ['get']],
    ];
    for (const [p, methods] of want) {
      for (const m of methods) {
        const op = doc.paths?.[p]?.[m];
        assert.ok(op, `${m} ${p}`);
        assert.equal(typeof op.summary, 'string');
        if (p.startsWith('/vaults')) assert.ok(op.security === undefined || op.security.length > 0, `${m} ${p} needs a key`);
        else assert.deepEqual(op.security, [], `${m} ${p} is open`);
      }
    }
    const put = doc.paths['/vaults/{id_or_name}/items/{key}'].put.requestBody.content['application/json'].schema;
    assert.ok(Array.isArray(put.allOf) && put.allOf.length === 6, 'one spec branch per creatable type');
  });
});

describe('vaults', () => {
  test('401 without a key', async () => {
    const r = await fetch(`${server.url}/vaults`);
    assert.equal(r.status, 401);
    assert.equal(((await r.json()) as Json).code, 'unauthorized');
  });

  test('POST /vaults: 201 created, 200 the same vault again; 400 for a bad name or an unknown field', async () => {
    const a = await api.ok('POST', '/vaults', { name: 'team' }, 201);
    assert.deepEqual(Object.keys(a).sort(), ['created_at', 'id', 'name', 'updated_at']);
    const b = await api.ok('POST', '/vaults', { name: 'team' }, 200);
    assert.deepEqual(b, a);
    const bad = await api.err('POST', '/vaults', { name: 'bad name', color: 'red' }, 400, 'bad_request');
    assert.deepEqual(bad.details.map((d: Json) => d.message).sort(), ['color: is not a known field', 'name: must match pattern "^[a-zA-Z0-9._-]{1,255}$"']);
    await api.err('POST', '/vaults', {}, 400, 'bad_request');
    assert.deepEqual(await api.ok('GET', `/vaults/${a.id}`), a);
    assert.deepEqual(await api.ok('GET', '/vaults/team'), a);
    await api.err('GET', '/vaults/nope', undefined, 404, 'vault_not_found');
  });

  test('GET /vaults: bare array, newest first, X-Has-More and X-Next-Offset; 400 for a bad limit', async () => {
    const key = (await cliJson<{ key: string }>(server.dataDir, 'keys', 'create', '--project', (await cliJson<Json>(server.dataDir, 'projects', 'create', 'default', 'paging')).name)).key;
    const c = api.withKey(key);
    for (const n of ['v1', 'v2', 'v3']) await c.ok('POST', '/vaults', { name: n }, 201);
    const p1 = await c.call('GET', '/vaults?limit=2');
    assert.deepEqual(p1.body.map((v: Json) => v.name), ['v3', 'v2']);
    assert.equal(p1.headers.get('x-has-more'), 'true');
    assert.equal(p1.headers.get('x-next-offset'), '2');
    const p2 = await c.call('GET', '/vaults?limit=2&offset=2');
    assert.deepEqual(p2.body.map((v: Json) => v.name), ['v1']);
    assert.equal(p2.headers.get('x-has-more'), 'false');
    assert.equal(p2.headers.get('x-next-offset'), '0');
    const bad = await c.err('GET', '/vaults?limit=0', undefined, 400, 'bad_request');
    assert.match(bad.details[0].message, /^query\.limit/);
  });
});

describe('items and the collection page', () => {
  const USER = 'ada@example.com';
  const PASSWORD = 'Sup3r-Secret-Passw0rd-for-e2e';
  const NOTE = 'Recovery code ZQ7-K2M-88P-secret';

  test('PUT: 201, 200 unchanged, 409 another spec, 400 naming each bad part; 404 unknown vault', async () => {
    const a = await api.ok('PUT', '/vaults/team/items/github', { type: 'credential', spec: { fields: [{ name: 'email', kind: 'email' }, { name: 'password', kind: 'password' }] } }, 201);
    assert.equal(a.state.status, 'pending_values');
    assert.deepEqual(a.available_operations.map((o: Json) => o.type), ['collect']);
    assert.deepEqual(a.available_expansions, []);
    assert.equal(a.action, undefined, 'PUT opens no collection session');
    const b = await api.ok('PUT', '/vaults/team/items/github', { type: 'credential', spec: { fields: [{ name: 'email', kind: 'email' }, { name: 'password', kind: 'password' }] } }, 200);
    assert.equal(b.id, a.id);
    await api.err('PUT', '/vaults/team/items/github', { type: 'credential' }, 409, 'item_exists');
    const bad = await api.err('PUT', '/vaults/team/items/x', { type: 'credential', spec: { fields: [{ name: 'p', kind: 'pin' }], origins: 'x' }, extra: 1 }, 400, 'bad_request');
    assert.deepEqual(bad.details.map((d: Json) => d.message).sort(), [
      'extra: is not a known field',
      'spec.fields[0].kind: must be one of text, email, password, totp',
      'spec.origins: must be array',
    ]);
    await api.err('PUT', '/vaults/team/items/x', { type: 'single_use_card' }, 400, 'bad_request');
    await api.err('PUT', `/vaults/team/items/${encodeURIComponent('bad key')}`, { type: 'credential' }, 400, 'bad_request');
    await api.err('PUT', '/vaults/nope/items/x', { type: 'credential' }, 404, 'vault_not_found');
    await api.err('GET', '/vaults/team/items/nope', undefined, 404, 'item_not_found');
  });

  test('a person fills the collection page in a browser; the list then shows the new state and the safe value, never the secret', async () => {
    const listed = await api.ok('GET', '/vaults/team/items');
    assert.ok(Array.isArray(listed));
    assert.equal(listed.find((i: Json) => i.key === 'github').action, undefined, 'listing opens no collection session');
    const item = await api.ok('GET', '/vaults/team/items/github');
    assert.equal(item.action.name, 'collect');
    const url = new URL(item.action.url);
    assert.equal(url.origin, server.url);
    assert.equal(url.pathname, '/vault-collect');
    assert.ok(Date.parse(item.expires_at) > Date.now());
    const again = await api.ok('GET', '/vaults/team/items');
    assert.equal(again.find((i: Json) => i.key === 'github').action.name, 'collect', 'an open session is listed');
    assert.equal(again.find((i: Json) => i.key === 'github').expires_at, item.expires_at, 'and not renewed');

    const page = await api.raw(item.action.url);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cache-control'), 'no-store');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    assert.match(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);

    assert.match(await fillCollectionPage(person, item.action.url, { email: USER, password: PASSWORD }), /^Saved/);
    const after = (await api.ok('GET', '/vaults/team/items')).find((i: Json) => i.key === 'github');
    assert.equal(after.state.status, 'ready');
    assert.equal(after.action, undefined);
    assert.deepEqual(after.state.fields.map((f: Json) => [f.name, f.has_value, f.value]), [
      ['email', true, USER],
      ['password', true, undefined],
    ]);
    assert.deepEqual(after.available_operations.map((o: Json) => o.type), ['collect', 'fill']);
    const used = await api.raw(item.action.url);
    assert.equal(used.status, 410, 'the link is used up');
    assert.equal((await api.ok('GET', '/vaults/team/items/github')).action, undefined, 'a ready item gets no new session from GET');
    assertNoSecret(server, api.answers, [PASSWORD], 'after collection');
  });

  test('the collection page refuses bad values field by field and never echoes them', async () => {
    await api.ok('PUT', '/vaults/team/items/notes', { type: 'secure_note', spec: { title: 'codes' } }, 201);
    const item = await api.ok('GET', '/vaults/team/items/notes');
    const jwt = new URL(item.action.url).searchParams.get('jwt')!;
    const bad = await api.raw(`${server.url}/vault-collect/submit?jwt=${jwt}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ values: { note: '', title: NOTE } }) });
    assert.equal(bad.status, 400);
    const body = (await bad.json()) as Json;
    assert.deepEqual(body.details.map((d: Json) => d.message), ['values.title: is not a field of this item', 'values.note: is required']);
    const noToken = await api.raw(`${server.url}/vault-collect/form`);
    assert.equal(noToken.status, 401);
    const forged = await api.raw(`${server.url}/vault-collect/form?jwt=${jwt.slice(0, -4)}AAAA`);
    assert.equal(forged.status, 401);
    assert.match(await fillCollectionPage(person, item.action.url, { note: NOTE }), /^Saved/);
    assert.equal((await api.ok('GET', '/vaults/team/items/notes')).state.status, 'ready');
    assertNoSecret(server, api.answers, [NOTE], 'after the note');
  });

  test('PATCH: needs the current version (409 otherwise); 400 for a bad spec; the change is applied', async () => {
    const cur = await api.ok('GET', '/vaults/team/items/github');
    await api.err('PATCH', '/vaults/team/items/github', { version: cur.version + 5, spec: {} }, 409, 'version_mismatch');
    await api.err('PATCH', '/vaults/team/items/github', { spec: {} }, 400, 'bad_request');
    await api.err('PATCH', '/vaults/team/items/github', { version: cur.version, spec: { origins: ['not an origin'] } }, 400, 'bad_request');
    const next = await api.ok('PATCH', '/vaults/team/items/github', { version: cur.version, spec: { fields: cur.spec.fields, origins: ['https://github.com'] } });
    assert.equal(next.version, cur.version + 1);
    assert.deepEqual(next.spec.origins, ['https://github.com']);
    assert.equal(next.state.status, 'ready', 'values of unchanged fields are kept');
  });

  test('operations: 400 for unknown or misplaced fields and for operations the type lacks; 409 when not available now', async () => {
    await api.err('POST', '/vaults/team/items/github/operations', { type: 'fly' }, 400, 'bad_request');
    const e1 = await api.err('POST', '/vaults/team/items/github/operations', { type: 'fill', browser_id: 'x' }, 400, 'bad_request');
    assert.deepEqual(e1.details.map((d: Json) => d.message), ['fields: is required']);
    const e2 = await api.err('POST', '/vaults/team/items/github/operations', { type: 'collect', browser_id: 'x' }, 400, 'bad_request');
    assert.deepEqual(e2.details.map((d: Json) => d.message), ['browser_id: is not used by the collect operation']);
    await api.err('POST', '/vaults/team/items/github/operations', { type: 'authorize' }, 400, 'bad_request');
    await api.ok('PUT', '/vaults/team/items/empty', { type: 'api_key' }, 201);
    await api.err('POST', '/vaults/team/items/empty/operations', { type: 'fill', browser_id: 'x', fields: [{ field: 'api_key', selector: '#k' }] }, 409, 'operation_not_available');
    const e3 = await api.err('POST', '/vaults/team/items/github/operations', { type: 'fill', browser_id: 'x', fields: [{ field: 'nope', selector: '#k' }] }, 400, 'bad_request');
    assert.match(e3.details[0].message, /^fields\[0\]\.field: "nope" is not a field/);
    await api.err('POST', '/vaults/team/items/github/operations', { type: 'fill', browser_id: 'no-such-browser', fields: [{ field: 'email', selector: '#k' }] }, 404);
    const op = await api.ok('POST', '/vaults/team/items/github/operations', { type: 'collect' });
    assert.equal(op.action.name, 'collect', 'collect opens a fresh session on a ready item');
  });

  test("another project's vaults and items are 404 on every route", async () => {
    const project = await cliJson<Json>(server.dataDir, 'projects', 'create', 'default', 'elsewhere');
    const other = api.withKey((await cliJson<{ key: string }>(server.dataDir, 'keys', 'create', '--project', project.name)).key);
    const team = await api.ok('GET', '/vaults/team');
    for (const ref of ['team', team.id]) {
      await other.err('GET', `/vaults/${ref}`, undefined, 404, 'vault_not_found');
      await other.err('DELETE', `/vaults/${ref}`, undefined, 404, 'vault_not_found');
      await other.err('GET', `/vaults/${ref}/items`, undefined, 404, 'vault_not_found');
      await other.err('GET', `/vaults/${ref}/items/github`, undefined, 404, 'vault_not_found');
      await other.err('PUT', `/vaults/${ref}/items/github`, { type: 'credential' }, 404, 'vault_not_found');
      await other.err('PATCH', `/vaults/${ref}/items/github`, { version: 1 }, 404, 'vault_not_found');
      await other.err('DELETE', `/vaults/${ref}/items/github`, undefined, 404, 'vault_not_found');
      await other.err('POST', `/vaults/${ref}/items/github/operations`, { type: 'collect' }, 404, 'vault_not_found');
    }
    assert.deepEqual(await other.ok('GET', '/vaults'), []);
    const own = await other.ok('POST', '/vaults', { name: 'team' }, 201);
    assert.notEqual(own.id, team.id, 'the same name is another vault in another project');
  });

  test('DELETE an item: 204, then 404 everywhere, its link dead; the secret is nowhere', async () => {
    const item = await api.ok('GET', '/vaults/team/items/github');
    const link = (await api.ok('POST', '/vaults/team/items/github/operations', { type: 'collect' })).action.url;
    const r = await api.call('DELETE', '/vaults/team/items/github');
    assert.equal(r.status, 204);
    assert.equal(r.text, '');
    await api.err('GET', '/vaults/team/items/github', undefined, 404, 'item_not_found');
    await api.err('DELETE', '/vaults/team/items/github', undefined, 404, 'item_not_found');
    await api.err('POST', '/vaults/team/items/github/operations', { type: 'collect' }, 404, 'item_not_found');
    assert.equal((await api.raw(link)).status, 404);
    assert.ok(!(await api.ok('GET', '/vaults/team/items')).some((i: Json) => i.id === item.id));
    assertNoSecret(server, api.answers, [PASSWORD, NOTE], 'after deletion');
    assert.ok(!server.output().includes(USER), 'no value is logged');
  });
});

describe('wallets, payments and the deletion rules', () => {
  test('a link wallet: pending_authorization with authorize, link_oauth and payment_methods (the contract shape)', async () => {
    await api.ok('POST', '/vaults', { name: 'pay' }, 201);
    const w = await api.ok('PUT', '/vaults/pay/items/wallet', { type: 'wallet', spec: { provider: 'link', authorization: { method: 'oauth', client: { type: 'service_managed' } } } }, 201);
    assert.deepEqual(w.spec, { provider: 'link', authorization: { method: 'oauth', client: { type: 'service_managed' } } });
    assert.equal(w.state.provider, 'link');
    assert.equal(w.state.status, 'pending_authorization');
    assert.equal(typeof w.state.status_reason, 'string');
    assert.deepEqual(w.available_operations.map((o: Json) => o.type), ['authorize']);
    assert.equal(typeof w.available_operations[0].description, 'string');
    assert.deepEqual(w.available_expansions.map((o: Json) => o.type), ['payment_methods']);
    const g = await api.ok('GET', '/vaults/pay/items/wallet');
    assert.equal(g.action.name, 'link_oauth');
    assert.equal(new URL(g.action.url).pathname, '/vault-oauth/start');
    const listed = (await api.ok('GET', '/vaults/pay/items'))[0];
    for (const k of Object.keys(listed)) {
      assert.ok(['id', 'key', 'type', 'version', 'created_at', 'updated_at', 'spec', 'state', 'available_operations', 'available_expansions', 'action', 'expires_at'].includes(k), k);
    }
    await api.err('GET', '/vaults/pay/items/wallet?expand=payment_methods', undefined, 409, 'wallet_not_authorized');
    await api.err('GET', '/vaults/pay/items/wallet?expand=nope', undefined, 400, 'bad_request');
  });

  test("the owner approves on the provider's consent page in a browser; the wallet becomes active", async () => {
    const op = await api.ok('POST', '/vaults/pay/items/wallet/operations', { type: 'authorize' });
    assert.equal(op.action.name, 'link_oauth');
    const ctx = await person.newContext();
    try {
      const page = await ctx.newPage();
      await page.goto(op.action.url);
      assert.equal(new URL(page.url()).origin, link.url, 'sent to the provider');
      await page.click('#allow');
      await page.waitForSelector('#title');
      assert.equal(await page.textContent('#title'), 'Wallet connected');
      assert.equal(new URL(page.url()).pathname, '/vault-oauth/callback');
    } finally {
      await ctx.close();
    }
    const w = await api.ok('GET', '/vaults/pay/items/wallet');
    assert.equal(w.state.status, 'active');
    assert.deepEqual(w.available_operations.map((o: Json) => o.type), ['authorize', 'prepare_checkout']);
    const x = await api.ok('GET', '/vaults/pay/items/wallet?expand=payment_methods');
    assert.deepEqual(x.expanded.payment_methods[0], {
      id: 'pm_visa',
      provider: 'link',
      type: 'card',
      is_default: true,
      display: { brand: 'visa', label: 'Personal Visa', last4: '4242' },
      capabilities: { single_use_card: { eligible: true, reasons: [] } },
    });
    assert.equal((await api.ok('GET', '/vaults/pay/items'))[0].expanded, undefined, 'listing never expands');
    assertNoSecret(server, api.answers, link.secrets(), 'after authorization');
  });

  test('prepare_checkout issues a card; unresolved, it blocks deleting itself, its wallet and its vault (409 with a code saying why)', async () => {
    const card = await api.ok('POST', '/vaults/pay/items/wallet/operations', { type: 'prepare_checkout', payment_method_id: 'pm_visa', amount: { value: 2599, currency: 'usd' }, merchant: { name: 'Shop' }, card_key: 'order-1' });
    assert.equal(card.type, 'single_use_card');
    assert.equal(card.state.status, 'active');
    assert.match(card.state.authorization_id, /^auth_/);
    assert.equal(card.state.display.last4.length, 4);
    assert.deepEqual(card.state.fields.filter((f: Json) => 'value' in f).map((f: Json) => f.name), ['exp_month', 'exp_year']);
    const d1 = await api.err('DELETE', '/vaults/pay/items/order-1', undefined, 409, 'payment_unresolved');
    assert.equal(d1.details[0].code, 'payment_unresolved');
    await api.err('DELETE', '/vaults/pay/items/wallet', undefined, 409, 'wallet_has_unresolved_payments');
    await api.err('DELETE', '/vaults/pay', undefined, 409, 'vault_has_unresolved_payments');
    const c = await api.ok('POST', '/vaults/pay/items/order-1/operations', { type: 'cancel' });
    assert.equal(c.state.status, 'cancelled');
    assert.equal((await api.call('DELETE', '/vaults/pay/items/order-1')).status, 204);
    assertNoSecret(server, api.answers, link.secrets(), 'after a checkout');
  });

  test('a lost checkout answer: recovery_required; the card may be abandoned (rule 2) while wallet and vault stay blocked (rule 3)', async () => {
    link.knobs.nextCheckout = 'drop';
    const card = await api.ok('POST', '/vaults/pay/items/wallet/operations', { type: 'prepare_checkout', payment_method_id: 'pm_visa', amount: { value: 100, currency: 'usd' }, card_key: 'lost' });
    assert.equal(card.state.status, 'recovery_required');
    assert.equal(card.state.authorization_id, undefined);
    assert.match(card.state.status_reason, /does not prove that no payment occurred/);
    await api.err('DELETE', '/vaults/pay/items/wallet', undefined, 409, 'wallet_has_payments_in_recovery');
    await api.err('DELETE', '/vaults/pay', undefined, 409, 'vault_has_payments_in_recovery');
    assert.equal((await api.call('DELETE', '/vaults/pay/items/lost')).status, 204);
    assert.equal((await api.call('DELETE', '/vaults/pay/items/wallet')).status, 204);
    assert.equal((await api.call('DELETE', '/vaults/pay')).status, 204);
    await api.err('GET', '/vaults/pay', undefined, 404, 'vault_not_found');
    assertNoSecret(server, api.answers, link.secrets(), 'after the wallet went');
  });

  test('a refused checkout is a 409 and leaves no card', async () => {
    await api.ok('POST', '/vaults', { name: 'pay2' }, 201);
    await api.ok('PUT', '/vaults/pay2/items/w', { type: 'wallet', spec: { provider: 'link' } }, 201);
    link.knobs.autoApprove = true;
    try {
      const op = await api.ok('POST', '/vaults/pay2/items/w/operations', { type: 'authorize' });
      const start = await api.raw(op.action.url, { redirect: 'manual' });
      const consent = await api.raw(start.headers.get('location')!, { redirect: 'manual' });
      const done = await api.raw(consent.headers.get('location')!, { redirect: 'manual' });
      assert.equal(done.status, 200);
    } finally {
      link.knobs.autoApprove = false;
    }
    link.knobs.nextCheckout = 'refuse';
    const e = await api.err('POST', '/vaults/pay2/items/w/operations', { type: 'prepare_checkout', payment_method_id: 'pm_visa', amount: { value: 100, currency: 'usd' } }, 409, 'checkout_refused');
    assert.equal(e.details[0].code, 'card_declined');
    assert.deepEqual((await api.ok('GET', '/vaults/pay2/items?type=single_use_card')), []);
    assert.equal((await api.call('DELETE', '/vaults/pay2')).status, 204);
    assertNoSecret(server, api.answers, link.secrets(), 'after the refused checkout');
  });
});
