import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * /openapi.json of the real server: an OpenAPI 3.x document with a path for every route
 * the server answers, and the create request body with every field and bound of the
 * contract. No browser is started.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: TestServer;
let doc: Json;

before(async () => {
  server = await startServer();
  const r = await fetch(`${server.url}/openapi.json`); // no key
  assert.equal(r.status, 200, await r.clone().text());
  assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
  doc = (await r.json()) as Json;
});
after(async () => {
  await server?.stop();
});

/** The routes the server answers, by path and method (websocket endpoints answer GET). */
const ROUTES: [string, string[]][] = [
  ['/browsers', ['get', 'post']],
  ['/browsers/{id_or_name}', ['get', 'patch', 'delete']],
  ['/healthz', ['get']],
  ['/readyz', ['get']],
  ['/openapi.json', ['get']],
  ['/browser/cdp', ['get']],
  ['/browser/cdp/json/version', ['get']],
  ['/browser/bidi', ['get']],
  ['/browser/live', ['get']],
];

const OPEN = new Set(['/healthz', '/readyz', '/openapi.json', '/browser/cdp', '/browser/cdp/json/version', '/browser/bidi', '/browser/live']);

function createBody(): Json {
  const body = doc.paths['/browsers'].post.requestBody;
  assert.ok(body, 'POST /browsers has a request body');
  const schema = body.content?.['application/json']?.schema as Json | undefined;
  assert.ok(schema, 'the request body is JSON');
  return schema;
}

function prop(schema: Json, ...names: string[]): Json {
  let s = schema;
  for (const n of names) {
    s = s.properties?.[n];
    assert.ok(s, `no property ${names.join('.')}`);
  }
  return s;
}

/** A JSON-schema type check that accepts both `type: "x"` and `type: ["x", "null"]`. */
function hasType(s: Json, t: string): boolean {
  return Array.isArray(s.type) ? s.type.includes(t) : s.type === t;
}

describe('the document', () => {
  test('is OpenAPI 3.x with info and a bearer security scheme applied by default', () => {
    assert.match(String(doc.openapi), /^3\.\d+\.\d+$/);
    assert.equal(typeof doc.info?.title, 'string');
    assert.equal(typeof doc.info?.version, 'string');
    const schemes = doc.components?.securitySchemes as Json;
    const bearer = Object.entries(schemes ?? {}).find(([, v]) => (v as Json).type === 'http' && (v as Json).scheme === 'bearer');
    assert.ok(bearer, JSON.stringify(schemes));
    assert.deepEqual(doc.security, [{ [bearer[0]]: [] }]);
  });

  test('is the same document on every request, and needs no key', async () => {
    const again = await fetch(`${server.url}/openapi.json`, { headers: { authorization: 'Bearer wrong-key-0123456789' } });
    assert.equal(again.status, 200);
    assert.deepEqual(await again.json(), doc);
  });

  for (const [p, methods] of ROUTES) {
    test(`has ${methods.map((m) => m.toUpperCase()).join(', ')} ${p}`, () => {
      const item = doc.paths?.[p] as Json | undefined;
      assert.ok(item, `no path ${p}; paths: ${Object.keys(doc.paths ?? {}).join(', ')}`);
      for (const m of methods) {
        assert.ok(item[m], `no ${m.toUpperCase()} ${p}`);
        assert.equal(typeof item[m].summary, 'string', `${m.toUpperCase()} ${p} has a summary`);
      }
    });
  }

  test('open routes say they need no key; the /browsers routes keep the bearer requirement', () => {
    for (const [p, methods] of ROUTES) {
      for (const m of methods) {
        const op = doc.paths[p][m] as Json;
        if (OPEN.has(p)) assert.deepEqual(op.security, [], `${m.toUpperCase()} ${p} is open`);
        else assert.ok(op.security === undefined || op.security.length > 0, `${m.toUpperCase()} ${p} needs a key`);
      }
    }
  });

  test('the path parameter id_or_name is declared where the path has it', () => {
    for (const m of ['get', 'patch', 'delete']) {
      const params = (doc.paths['/browsers/{id_or_name}'][m].parameters ?? []) as Json[];
      assert.ok(params.some((x) => x.in === 'path' && x.name === 'id_or_name' && x.required === true), `${m}: ${JSON.stringify(params)}`);
    }
  });

  test('every documented operation is answered by the server (a route, not the not-found handler)', async () => {
    for (const [p, item] of Object.entries(doc.paths as Json)) {
      for (const m of Object.keys(item as Json).filter((k) => ['get', 'post', 'patch', 'put', 'delete'].includes(k))) {
        const url = `${server.url}${p.replace('{id_or_name}', 'no-such-session')}`;
        // A body that fails validation: nothing is created by this probe.
        const body = m === 'post' || m === 'patch' ? JSON.stringify({ timeout_seconds: 1, name: 'bad name' }) : undefined;
        const r = await fetch(url, { method: m.toUpperCase(), headers: server.headers(body ? { 'content-type': 'application/json' } : {}), body });
        const text = await r.text();
        const notFound = `no route for ${m.toUpperCase()} ${new URL(url).pathname}`;
        assert.notEqual(JSON.parse(text).message, notFound, `${m.toUpperCase()} ${p} has no route: ${r.status} ${text}`);
        assert.ok(r.status < 500 || p === '/readyz', `${m.toUpperCase()} ${p}: ${r.status} ${text}`);
      }
    }
    const list = await fetch(`${server.url}/browsers?status=all`, { headers: server.headers() });
    assert.deepEqual(await list.json(), [], 'the probes created nothing');
  });

  test('a path the document does not have is answered by the not-found handler', async () => {
    assert.equal(doc.paths['/browsers/{id_or_name}/nothing'], undefined);
    const r = await fetch(`${server.url}/browsers/x/nothing`, { headers: server.headers() });
    assert.equal(r.status, 404);
    assert.equal(((await r.json()) as Json).message, 'no route for GET /browsers/x/nothing', 'the not-found handler says so, which the probe above relies on');
  });
});

describe('POST /browsers request body: every field of the contract, with its bounds', () => {
  const FIELDS = [
    'chrome_policy', 'extensions', 'gpu', 'headless', 'invocation_id', 'kiosk_mode', 'memory', 'name', 'network', 'profile', 'proxy', 'proxy_id',
    'region', 'start_url', 'stealth', 'tags', 'telemetry', 'timeout_seconds', 'vaults', 'viewport',
  ];

  test('exactly the create fields, all optional, nothing else accepted', () => {
    const s = createBody();
    assert.ok(hasType(s, 'object'));
    assert.deepEqual(Object.keys(s.properties).sort(), [...FIELDS].sort());
    assert.ok(!s.required || s.required.length === 0, `all fields are optional: ${JSON.stringify(s.required)}`);
    assert.equal(s.additionalProperties, false);
  });

  test('booleans: gpu, headless, kiosk_mode, stealth', () => {
    for (const f of ['gpu', 'headless', 'kiosk_mode', 'stealth']) assert.ok(hasType(prop(createBody(), f), 'boolean'), f);
  });

  test('timeout_seconds: integer from 10 to 259200', () => {
    const t = prop(createBody(), 'timeout_seconds');
    assert.ok(hasType(t, 'integer'));
    assert.equal(t.minimum, 10);
    assert.equal(t.maximum, 259200);
  });

  test('name: 1 to 255 of [a-zA-Z0-9._-]', () => {
    const n = prop(createBody(), 'name');
    assert.ok(hasType(n, 'string'));
    assert.equal(n.minLength ?? 1, 1);
    assert.equal(n.maxLength, 255);
    assert.equal(n.pattern, '^[a-zA-Z0-9._-]{1,255}$');
  });

  test('memory: 8GiB or 16GiB; region: us-east, eu-west, ap-southeast', () => {
    assert.deepEqual([...prop(createBody(), 'memory').enum].sort(), ['16GiB', '8GiB']);
    assert.deepEqual([...prop(createBody(), 'region').enum].sort(), ['ap-southeast', 'eu-west', 'us-east']);
  });

  test('extensions: at most 20, each by id or by name (1 to 255 of [a-zA-Z0-9._-])', () => {
    const e = prop(createBody(), 'extensions');
    assert.ok(hasType(e, 'array'));
    assert.equal(e.maxItems, 20);
    assert.deepEqual(Object.keys(e.items.properties).sort(), ['id', 'name']);
    assert.equal(e.items.additionalProperties, false);
    assert.equal(e.items.properties.name.maxLength, 255);
    assert.equal(e.items.properties.name.pattern, '^[a-zA-Z0-9._-]{1,255}$');
  });

  test('vaults: at most 20, each by id or by name (1 to 255 characters)', () => {
    const v = prop(createBody(), 'vaults');
    assert.equal(v.maxItems, 20);
    assert.deepEqual(Object.keys(v.items.properties).sort(), ['id', 'name']);
    assert.equal(v.items.additionalProperties, false);
    assert.equal(v.items.properties.name.minLength, 1);
    assert.equal(v.items.properties.name.maxLength, 255);
  });

  test('tags: at most 50, string values of 0 to 256 of the allowed characters', () => {
    const t = prop(createBody(), 'tags');
    assert.ok(hasType(t, 'object'));
    assert.equal(t.maxProperties, 50);
    // The value schema, wherever the document keeps it (additionalProperties or patternProperties).
    const value = (typeof t.additionalProperties === 'object' ? t.additionalProperties : Object.values(t.patternProperties ?? {})[0]) as Json;
    assert.ok(value, JSON.stringify(t));
    assert.ok(hasType(value, 'string'));
    assert.equal(value.maxLength, 256);
    assert.equal(value.pattern, '^[A-Za-z0-9 _.:/=+@-]*$');
  });

  test('viewport: width and height required, each of the three at least 1', () => {
    const v = prop(createBody(), 'viewport');
    assert.deepEqual([...v.required].sort(), ['height', 'width']);
    assert.deepEqual(Object.keys(v.properties).sort(), ['height', 'refresh_rate', 'width']);
    for (const f of ['width', 'height', 'refresh_rate']) {
      assert.ok(hasType(v.properties[f], 'integer'), f);
      assert.equal(v.properties[f].minimum, 1, f);
    }
  });

  test('network: private_hosts only, at most 32 strings of at most 255 characters', () => {
    const n = prop(createBody(), 'network');
    assert.deepEqual(Object.keys(n.properties), ['private_hosts']);
    assert.equal(n.additionalProperties, false);
    const h = n.properties.private_hosts;
    assert.equal(h.maxItems, 32);
    assert.ok(hasType(h.items, 'string'));
    assert.equal(h.items.maxLength, 255);
  });

  test('proxy: mode (direct, default), id or name, nothing else; proxy_id is a deprecated string', () => {
    const p = prop(createBody(), 'proxy');
    assert.deepEqual(Object.keys(p.properties).sort(), ['id', 'mode', 'name']);
    assert.equal(p.additionalProperties, false);
    assert.deepEqual([...p.properties.mode.enum].sort(), ['default', 'direct']);
    assert.equal(p.properties.id.minLength, 1);
    assert.equal(p.properties.name.minLength, 1);
    const id = prop(createBody(), 'proxy_id');
    assert.ok(hasType(id, 'string'));
    assert.equal(id.deprecated, true, 'the contract marks proxy_id deprecated');
  });

  test('profile: id or name, and save_changes (boolean, default false)', () => {
    const p = prop(createBody(), 'profile');
    assert.deepEqual(Object.keys(p.properties).sort(), ['id', 'name', 'save_changes']);
    assert.equal(p.additionalProperties, false);
    assert.ok(hasType(p.properties.save_changes, 'boolean'));
    assert.equal(p.properties.save_changes.default, false);
    assert.equal(p.properties.name.maxLength, 255);
  });

  test('start_url and invocation_id are strings; chrome_policy is a free-form object', () => {
    assert.ok(hasType(prop(createBody(), 'start_url'), 'string'));
    assert.ok(hasType(prop(createBody(), 'invocation_id'), 'string'));
    const c = prop(createBody(), 'chrome_policy');
    assert.ok(hasType(c, 'object'));
    assert.notEqual(c.additionalProperties, false);
  });

  test('telemetry: nullable; enabled, browser (the ten categories), export.otlp', () => {
    const t = prop(createBody(), 'telemetry');
    assert.ok(hasType(t, 'null') || t.nullable === true, `nullable: ${JSON.stringify(t.type)}`);
    assert.deepEqual(Object.keys(t.properties).sort(), ['browser', 'enabled', 'export']);
    assert.equal(t.additionalProperties, false);
    const browser = t.properties.browser;
    assert.deepEqual(
      Object.keys(browser.properties).sort(),
      ['captcha', 'connection', 'console', 'control', 'interaction', 'network', 'page', 'platform', 'screenshot', 'system'],
    );
    assert.equal(browser.additionalProperties, false);
    const methods = browser.properties.control.properties.cdp.properties.excluded_methods;
    assert.equal(methods.uniqueItems, true);
    assert.equal(methods.items.enum.length, 38);
    assert.ok(methods.items.enum.includes('Page.navigate') && !methods.items.enum.includes('Runtime.evaluate'));
    const otlp = t.properties.export.properties.otlp;
    assert.deepEqual(Object.keys(otlp.properties).sort(), ['destination', 'enabled']);
    assert.deepEqual(Object.keys(otlp.properties.destination.properties).sort(), ['id', 'name']);
  });
});

describe('the Browser response', () => {
  test('POST /browsers answers the Browser body: the contract fields plus invocation_id, its required fields required', () => {
    const ok = doc.paths['/browsers'].post.responses['200'];
    const s = ok.content['application/json'].schema as Json;
    assert.deepEqual(
      Object.keys(s.properties).sort(),
      [
        'session_id', 'created_at', 'deleted_at', 'cdp_ws_url', 'webdriver_ws_url', 'browser_live_view_url', 'base_url', 'region', 'stealth',
        'headless', 'gpu', 'kiosk_mode', 'memory', 'timeout_seconds', 'name', 'tags', 'chrome_policy', 'network', 'proxy', 'proxy_id', 'profile',
        'profile_save_changes', 'pool', 'start_url', 'telemetry', 'usage', 'usage_status', 'vaults', 'viewport', 'invocation_id',
      ].sort(),
    );
    for (const r of ['created_at', 'cdp_ws_url', 'webdriver_ws_url', 'session_id', 'region', 'stealth', 'headless', 'memory', 'timeout_seconds']) {
      assert.ok(s.required.includes(r), `${r} is required`);
    }
    for (const r of ['deleted_at', 'browser_live_view_url', 'base_url', 'usage_status', 'name', 'tags']) assert.ok(!s.required.includes(r), `${r} is optional`);
    assert.deepEqual([...s.properties.memory.enum].sort(), ['16GiB', '1GiB', '2GiB', '6GiB', '8GiB']);
    assert.deepEqual([...s.properties.usage_status.enum].sort(), ['pending', 'ready']);
    assert.equal(s.properties.proxy_id.deprecated, true);
  });
  test('every /browsers operation documents the Error body for 4xx and 5xx', () => {
    for (const [p, m] of [['/browsers', 'post'], ['/browsers', 'get'], ['/browsers/{id_or_name}', 'get'], ['/browsers/{id_or_name}', 'patch'], ['/browsers/{id_or_name}', 'delete']]) {
      const responses = doc.paths[p!][m!].responses as Json;
      for (const range of ['4XX', '5XX']) {
        const err = responses[range]?.content?.['application/json']?.schema as Json | undefined;
        assert.ok(err, `${m} ${p} ${range}`);
        assert.deepEqual([...err.required].sort(), ['code', 'message']);
        assert.ok(err.properties.details && err.properties.inner_error, `${m} ${p} ${range}`);
      }
    }
  });
});
