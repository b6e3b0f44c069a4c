import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { TSchema } from '@sinclair/typebox';
import { BrowserCreateRequest, BrowserListQuery, BrowserUpdateRequest } from '../../src/domain/browser-request.js';
import { fieldPath, problemsFromAjv, validatorCompiler, validFieldsOf } from '../../src/http/validation.js';
import { invalidInput } from '../../src/http/errors.js';
import { CATEGORIES, EXCLUDABLE_CDP_METHODS } from '../../src/domain/telemetry-request.js';

type Problem = { field: string; message: string };

function compile(schema: TSchema, httpPart: string, url = '/browsers', method = 'POST'): ValidateFunction {
  return validatorCompiler({ schema, httpPart, method, url }) as unknown as ValidateFunction;
}

const createValidator = compile(BrowserCreateRequest, 'body');

/** Validates a create body exactly as the server does; [] when valid. */
function check(body: unknown): Problem[] {
  const ok = createValidator(body);
  if (ok) return [];
  const errors = (createValidator.errors ?? []) as ErrorObject[];
  assert.ok(errors.length > 0, 'an invalid body must come with errors');
  return problemsFromAjv(errors, 'body');
}

function fields(problems: Problem[]): string[] {
  return [...new Set(problems.map((p) => p.field))].sort();
}

const s = (n: number, c = 'a') => c.repeat(n);
const objOf = (n: number, f: (i: number) => [string, string]) => Object.fromEntries(Array.from({ length: n }, (_, i) => f(i)));
const arr = <T>(n: number, f: (i: number) => T) => Array.from({ length: n }, (_, i) => f(i));

/** [label, body] that the schema must accept. */
const ACCEPTED: [string, unknown][] = [
  ['empty body', {}],
  ['timeout_seconds 10 (minimum)', { timeout_seconds: 10 }],
  ['timeout_seconds 259200 (maximum)', { timeout_seconds: 259200 }],
  ['timeout_seconds 60', { timeout_seconds: 60 }],
  ['name of 1 char', { name: 'a' }],
  ['name of 255 chars', { name: s(255) }],
  ['name with every allowed character class', { name: 'My.session_01-x' }],
  ['headless / stealth / gpu / kiosk_mode booleans', { headless: true, stealth: false, gpu: false, kiosk_mode: true }],
  ['invocation_id', { invocation_id: 'inv_123' }],
  ['start_url', { start_url: 'https://example.com/' }],
  ['0 extensions', { extensions: [] }],
  ['20 extensions', { extensions: arr(20, (i) => ({ name: `ext${i}` })) }],
  ['extension by id', { extensions: [{ id: 'x1' }] }],
  ['extension name of 255 chars', { extensions: [{ name: s(255) }] }],
  ['20 vaults', { vaults: arr(20, (i) => ({ id: `v${i}` })) }],
  ['vault by name of 255 chars', { vaults: [{ name: s(255) }] }],
  ['50 tags', { tags: objOf(50, (i) => [`k${i}`, `v${i}`]) }],
  ['tag key of 128 chars', { tags: { [s(128, 'k')]: 'v' } }],
  ['tag key with every allowed punctuation', { tags: { 'a b_c.d:e/f=g+h@i-j': 'v' } }],
  ['tag value of 256 chars', { tags: { k: s(256, 'v') } }],
  ['empty tag value', { tags: { k: '' } }],
  ['tag value with every allowed punctuation', { tags: { k: 'a b_c.d:e/f=g+h@i-j' } }],
  ['viewport 1x1', { viewport: { width: 1, height: 1 } }],
  ['viewport with refresh_rate 1', { viewport: { width: 1920, height: 1080, refresh_rate: 1 } }],
  ['memory 8GiB', { memory: '8GiB' }],
  ['memory 16GiB', { memory: '16GiB' }],
  ['region us-east', { region: 'us-east' }],
  ['region eu-west', { region: 'eu-west' }],
  ['region ap-southeast', { region: 'ap-southeast' }],
  ['proxy mode direct', { proxy: { mode: 'direct' } }],
  ['proxy mode default', { proxy: { mode: 'default' } }],
  ['proxy id', { proxy: { id: 'p1' } }],
  ['proxy name', { proxy: { name: 'my proxy' } }],
  ['proxy_id', { proxy_id: 'p1' }],
  ['profile by name with save_changes', { profile: { name: 'prof', save_changes: true } }],
  ['32 private_hosts', { network: { private_hosts: arr(32, (i) => `h${i}.corp.example`) } }],
  ['private_host of 255 chars', { network: { private_hosts: [s(255, 'h')] } }],
  ['empty private_hosts', { network: { private_hosts: [] } }],
  ['telemetry null', { telemetry: null }],
  ['telemetry enabled with categories', { telemetry: { enabled: true, browser: { console: { enabled: true } } } }],
  ['chrome_policy free-form', { chrome_policy: { HomepageLocation: 'https://x.example', BookmarkBarEnabled: true } }],
];

/** [label, body, fields that must be named (all problems, nothing else)]. */
const REJECTED: [string, unknown, string[]][] = [
  ['timeout_seconds 9', { timeout_seconds: 9 }, ['timeout_seconds']],
  ['timeout_seconds 259201', { timeout_seconds: 259201 }, ['timeout_seconds']],
  ['timeout_seconds 10.5 (not an integer)', { timeout_seconds: 10.5 }, ['timeout_seconds']],
  ['timeout_seconds as a string (no coercion of bodies)', { timeout_seconds: '60' }, ['timeout_seconds']],
  ['name of 0 chars', { name: '' }, ['name']],
  ['name of 256 chars', { name: s(256) }, ['name']],
  ['name with a space', { name: 'my session' }, ['name']],
  ['name with a slash', { name: 'a/b' }, ['name']],
  ['name with a non-ASCII letter', { name: 'café' }, ['name']],
  ['headless as the string "true"', { headless: 'true' }, ['headless']],
  ['21 extensions', { extensions: arr(21, (i) => ({ name: `ext${i}` })) }, ['extensions']],
  ['extension name with bad characters', { extensions: [{ name: 'bad name' }] }, ['extensions[0].name']],
  ['extension name of 256 chars', { extensions: [{ name: s(256) }] }, ['extensions[0].name']],
  ['extension with an unknown field', { extensions: [{ id: 'x', path: '/tmp' }] }, ['extensions[0].path']],
  ['21 vaults', { vaults: arr(21, (i) => ({ id: `v${i}` })) }, ['vaults']],
  ['vault name of 256 chars', { vaults: [{ name: s(256) }] }, ['vaults[0].name']],
  ['vault with an unknown field', { vaults: [{ id: 'v', key: 'k' }] }, ['vaults[0].key']],
  ['51 tags', { tags: objOf(51, (i) => [`k${i}`, `v${i}`]) }, ['tags']],
  ['tag key of 129 chars', { tags: { [s(129, 'k')]: 'v' } }, [`tags.${s(129, 'k')}`]],
  ['tag key with "!"', { tags: { 'bad!': 'v' } }, ['tags.bad!']],
  ['tag key with a non-ASCII letter', { tags: { 'clé': 'v' } }, ['tags.clé']],
  ['empty tag key', { tags: { '': 'v' } }, ['tags.']],
  ['tag value of 257 chars', { tags: { k: s(257, 'v') } }, ['tags.k']],
  ['tag value with "#"', { tags: { k: 'a#b' } }, ['tags.k']],
  ['tag value that is a number', { tags: { k: 1 } }, ['tags.k']],
  ['tags as an array', { tags: ['a'] }, ['tags']],
  ['viewport width 0', { viewport: { width: 0, height: 1 } }, ['viewport.width']],
  ['viewport height 0', { viewport: { width: 1, height: 0 } }, ['viewport.height']],
  ['viewport refresh_rate 0', { viewport: { width: 1, height: 1, refresh_rate: 0 } }, ['viewport.refresh_rate']],
  ['viewport without height', { viewport: { width: 1024 } }, ['viewport.height']],
  ['viewport without width', { viewport: { height: 768 } }, ['viewport.width']],
  ['viewport width 1.5', { viewport: { width: 1.5, height: 1 } }, ['viewport.width']],
  ['viewport unknown field', { viewport: { width: 1, height: 1, depth: 24 } }, ['viewport.depth']],
  ['memory 4GiB', { memory: '4GiB' }, ['memory']],
  ['memory 1GiB (response-only value)', { memory: '1GiB' }, ['memory']],
  ['region mars', { region: 'mars' }, ['region']],
  ['region in upper case', { region: 'US-EAST' }, ['region']],
  ['proxy with an additional property', { proxy: { mode: 'direct', bypass_hosts: ['x'] } }, ['proxy.bypass_hosts']],
  ['proxy mode outside the enum', { proxy: { mode: 'stealth' } }, ['proxy.mode']],
  ['proxy id empty', { proxy: { id: '' } }, ['proxy.id']],
  ['33 private_hosts', { network: { private_hosts: arr(33, (i) => `h${i}.corp.example`) } }, ['network.private_hosts']],
  ['private_host of 256 chars', { network: { private_hosts: ['ok.example', s(256, 'h')] } }, ['network.private_hosts[1]']],
  ['network unknown field', { network: { bypass: [] } }, ['network.bypass']],
  ['profile unknown field', { profile: { id: 'p', path: '/' } }, ['profile.path']],
  ['profile name with bad characters', { profile: { name: 'a b' } }, ['profile.name']],
  ['telemetry unknown field', { telemetry: { enabled: true, sink: 'x' } }, ['telemetry.sink']],
  ['unknown top-level field', { persistence: { id: 'x' } }, ['persistence']],
  ['body that is not an object', [], ['(body)']],
];

describe('create request schema: accepted', () => {
  for (const [label, body] of ACCEPTED) {
    test(label, () => assert.deepEqual(check(body), []));
  }
});

describe('create request schema: rejected, naming the field', () => {
  for (const [label, body, want] of REJECTED) {
    test(label, () => {
      const p = check(body);
      assert.ok(p.length > 0, 'must be rejected');
      assert.deepEqual(fields(p), [...want].sort(), JSON.stringify(p));
      for (const x of p) assert.ok(x.message.length > 0);
    });
  }
});

describe('create request schema: messages', () => {
  test('unknown fields are reported as such', () => {
    assert.deepEqual(check({ bogus: 1 }), [{ field: 'bogus', message: 'is not a known field' }]);
  });
  test('a missing required property names the property itself', () => {
    assert.deepEqual(check({ viewport: { width: 1 } }), [{ field: 'viewport.height', message: 'is required' }]);
  });
  test('enum errors list the allowed values', () => {
    assert.deepEqual(check({ memory: '4GiB' }), [{ field: 'memory', message: 'must be one of 8GiB, 16GiB' }]);
  });
  test('bad tag keys and values get the tag rule as message', () => {
    const [key] = check({ tags: { 'a!': 'v' } });
    assert.match(key!.message, /tag key must be 1 to 128 characters/);
    const [value] = check({ tags: { k: 'a!' } });
    assert.match(value!.message, /tag value must be 0 to 256 characters/);
  });
});

describe('several broken rules', () => {
  test('one problem per broken rule, each naming its field path', () => {
    const body = {
      timeout_seconds: 9,
      name: 'has space',
      memory: '32GiB',
      region: 'moon',
      viewport: { width: 0, height: 10, refresh_rate: 0 },
      tags: { ok: 'fine', bad: 'x#y', 'k!': 'v' },
      extensions: [{ name: 'bad name' }, { id: 'ok' }],
      vaults: [{ id: 'v', extra: true }],
      proxy: { mode: 'direct', extra: 1 },
      network: { private_hosts: [s(256)] },
      unknown_field: 1,
    };
    const p = check(body);
    const want = [
      'timeout_seconds',
      'name',
      'memory',
      'region',
      'viewport.width',
      'viewport.refresh_rate',
      'tags.bad',
      'tags.k!',
      'extensions[0].name',
      'vaults[0].extra',
      'proxy.extra',
      'network.private_hosts[0]',
      'unknown_field',
    ];
    assert.deepEqual(fields(p), [...want].sort(), JSON.stringify(p, null, 1));
    assert.equal(p.length, want.length, `one problem per rule: ${JSON.stringify(p, null, 1)}`);
  });

  test('the same problem is never reported twice', () => {
    const p = check({ tags: { 'a!': '#', 'b!': '#' } });
    const keys = p.map((x) => `${x.field}|${x.message}`);
    assert.equal(new Set(keys).size, keys.length);
    assert.deepEqual(fields(p), ['tags.a!', 'tags.b!']);
  });

  test('invalidInput turns problems into one invalid_input detail each', () => {
    const p = check({ timeout_seconds: 1, region: 'x' });
    const err = invalidInput(p);
    assert.equal(err.status, 400);
    const body = err.toBody();
    assert.equal(body.code, 'bad_request');
    assert.equal(body.details!.length, 2);
    for (const d of body.details!) assert.equal(d.code, 'invalid_input');
    assert.ok(body.details!.some((d) => d.message.startsWith('timeout_seconds: ')));
    assert.ok(body.details!.some((d) => d.message.startsWith('region: ')));
    assert.match(body.message, /2 fields are invalid/);
    const single = invalidInput([{ field: 'name', message: 'bad' }]).toBody();
    assert.equal(single.message, 'invalid request: name: bad');
  });
});

describe('update request schema', () => {
  const v = compile(BrowserUpdateRequest, 'body', '/browsers/:id_or_name', 'PATCH');
  test('name null clears, empty name allowed, bad characters rejected', () => {
    assert.equal(v({ name: null }), true);
    assert.equal(v({ name: '' }), true);
    assert.equal(v({ name: 'ok-name' }), true);
    assert.equal(v({ name: 'bad name' }), false);
    assert.deepEqual(fields(problemsFromAjv(v.errors as ErrorObject[], 'body')), ['name']);
  });
  test('tags follow the same rules as on create', () => {
    assert.equal(v({ tags: { k: '' } }), true);
    assert.equal(v({ tags: null }), true);
    assert.equal(v({ tags: objOf(51, (i) => [`k${i}`, 'v']) }), false);
    assert.equal(v({ tags: { 'k!': 'v' } }), false);
  });
  test('fields that cannot change after creation are unknown here', () => {
    assert.equal(v({ region: 'eu-west' }), false);
    assert.deepEqual(fields(problemsFromAjv(v.errors as ErrorObject[], 'body')), ['region']);
  });
});

describe('query strings', () => {
  const v = compile(BrowserListQuery, 'querystring', '/browsers', 'GET');
  test('text is coerced and defaults are applied', () => {
    const q: Record<string, unknown> = { limit: '5', offset: '10', include_deleted: 'true' };
    assert.equal(v(q), true);
    assert.deepEqual(q, { limit: 5, offset: 10, include_deleted: true });
    const empty: Record<string, unknown> = {};
    assert.equal(v(empty), true);
    assert.deepEqual(empty, { offset: 0, limit: 20 });
  });
  test('problems are prefixed with "query."', () => {
    assert.equal(v({ limit: '0', offset: '-1', status: 'gone' }), false);
    assert.deepEqual(fields(problemsFromAjv(v.errors as ErrorObject[], 'querystring')), ['query.limit', 'query.offset', 'query.status']);
    assert.equal(v({ limit: '101' }), false);
    assert.deepEqual(fields(problemsFromAjv(v.errors as ErrorObject[], 'querystring')), ['query.limit']);
  });
});

describe('fieldPath', () => {
  test('JSON pointer segments become dotted paths with [i] for indices', () => {
    assert.equal(fieldPath(['extensions', '0', 'name']), 'extensions[0].name');
    assert.equal(fieldPath(['viewport', 'width']), 'viewport.width');
    assert.equal(fieldPath(['network', 'private_hosts', '31']), 'network.private_hosts[31]');
    assert.equal(fieldPath([]), '');
  });
  test('escaped pointer characters in keys are decoded', () => {
    // `a/b` travels as `/tags/a~1b` in Ajv's instancePath
    const p = check({ tags: { 'a/b': 'x#' } });
    assert.deepEqual(fields(p), ['tags.a/b']);
  });
});

describe('telemetry shapes through the real validator', () => {
  const methods = EXCLUDABLE_CDP_METHODS;
  const excluded = (list: unknown) => ({ telemetry: { enabled: true, browser: { control: { cdp: { excluded_methods: list } } } } });

  test('every category of the contract is accepted, each with enabled true or false', () => {
    for (const c of CATEGORIES) {
      for (const enabled of [true, false]) assert.deepEqual(check({ telemetry: { browser: { [c]: { enabled } } } }), [], `${c} ${enabled}`);
      assert.deepEqual(check({ telemetry: { browser: { [c]: {} } } }), [], `${c} {}`);
    }
    assert.deepEqual(check({ telemetry: { enabled: true, browser: Object.fromEntries(CATEGORIES.map((c) => [c, { enabled: true }])) } }), []);
  });
  test('an unknown category is refused, naming it', () => {
    assert.deepEqual(check({ telemetry: { browser: { foo: { enabled: true } } } }), [{ field: 'telemetry.browser.foo', message: 'is not a known field' }]);
    assert.deepEqual(fields(check({ telemetry: { browser: { Console: { enabled: true } } } })), ['telemetry.browser.Console']);
    assert.deepEqual(fields(check({ telemetry: { browser: { cdp: { enabled: true } } } })), ['telemetry.browser.cdp']);
  });
  test('a category object with an unknown key is refused, naming the key', () => {
    assert.deepEqual(check({ telemetry: { browser: { console: { enabled: true, level: 'warn' } } } }), [{ field: 'telemetry.browser.console.level', message: 'is not a known field' }]);
    assert.deepEqual(fields(check({ telemetry: { browser: { control: { enabled: true, verbose: true } } } })), ['telemetry.browser.control.verbose']);
    assert.deepEqual(fields(check({ telemetry: { browser: { control: { cdp: { excluded: [] } } } } })), ['telemetry.browser.control.cdp.excluded']);
  });
  test('cdp settings exist only on control', () => {
    for (const c of CATEGORIES.filter((x) => x !== 'control')) {
      assert.deepEqual(fields(check({ telemetry: { browser: { [c]: { cdp: { excluded_methods: [] } } } } })), [`telemetry.browser.${c}.cdp`], c);
    }
  });
  test('category flags and enabled are booleans, categories are objects', () => {
    assert.deepEqual(fields(check({ telemetry: { enabled: 'true' } })), ['telemetry.enabled']);
    assert.deepEqual(fields(check({ telemetry: { browser: { console: { enabled: 'yes' } } } })), ['telemetry.browser.console.enabled']);
    assert.deepEqual(fields(check({ telemetry: { browser: { console: true } } })), ['telemetry.browser.console']);
    assert.deepEqual(fields(check({ telemetry: 'on' })), ['telemetry']);
    assert.deepEqual(fields(check({ telemetry: [] })), ['telemetry']);
  });
  test('excluded_methods accepts each of the 38 listed methods, all of them at once, and an empty list', () => {
    assert.equal(methods.length, 38);
    for (const m of methods) assert.deepEqual(check(excluded([m])), [], m);
    assert.deepEqual(check(excluded([...methods])), []);
    assert.deepEqual(check(excluded([])), []);
  });
  test('excluded_methods refuses any other method, naming the entry', () => {
    for (const m of ['Runtime.evaluate', 'Network.enable', 'Target.attachToTarget', 'page.navigate', 'Page.Navigate', 'Page.navigate ', 'Page', '', 'Extensions.loadUnpacked']) {
      const p = check(excluded(['Page.navigate', m]));
      assert.deepEqual(fields(p), ['telemetry.browser.control.cdp.excluded_methods[1]'], m);
      assert.match(p[0]!.message, /^must be one of Input\.dispatchMouseEvent, /);
    }
    assert.deepEqual(fields(check(excluded([1]))), ['telemetry.browser.control.cdp.excluded_methods[0]']);
    assert.deepEqual(fields(check(excluded('Page.navigate'))), ['telemetry.browser.control.cdp.excluded_methods']);
  });
  test('excluded_methods refuses duplicate entries', () => {
    const p = check(excluded(['Page.navigate', 'DOM.focus', 'Page.navigate']));
    assert.deepEqual(fields(p), ['telemetry.browser.control.cdp.excluded_methods']);
    assert.match(p[0]!.message, /duplicate/);
  });
  test('export: otlp only, destination by id or name (non-empty strings), nothing else', () => {
    assert.deepEqual(check({ telemetry: { enabled: true, export: { otlp: { enabled: true, destination: { id: 'dst_1' } } } } }), []);
    assert.deepEqual(check({ telemetry: { enabled: true, export: { otlp: { destination: { name: 'collector' } } } } }), []);
    assert.deepEqual(fields(check({ telemetry: { export: { http: {} } } })), ['telemetry.export.http']);
    assert.deepEqual(fields(check({ telemetry: { export: { otlp: { endpoint: 'https://x' } } } })), ['telemetry.export.otlp.endpoint']);
    assert.deepEqual(fields(check({ telemetry: { export: { otlp: { destination: { id: 'x', url: 'y' } } } } })), ['telemetry.export.otlp.destination.url']);
    assert.deepEqual(fields(check({ telemetry: { export: { otlp: { destination: { id: '' } } } } })), ['telemetry.export.otlp.destination.id']);
    assert.deepEqual(fields(check({ telemetry: { export: { otlp: { destination: { name: '' } } } } })), ['telemetry.export.otlp.destination.name']);
    assert.deepEqual(fields(check({ telemetry: { export: { otlp: { destination: 'dst_1' } } } })), ['telemetry.export.otlp.destination']);
    assert.deepEqual(fields(check({ telemetry: { export: { otlp: { enabled: 'no' } } } })), ['telemetry.export.otlp.enabled']);
  });
});

describe('network shapes through the real validator', () => {
  const hosts = (list: unknown) => ({ network: { private_hosts: list } });
  test('private_hosts: 0, 1 and 32 entries are accepted; 33 are refused on the list itself', () => {
    assert.deepEqual(check(hosts([])), []);
    assert.deepEqual(check(hosts(['db.corp.example'])), []);
    assert.deepEqual(check(hosts(arr(32, (i) => `10.0.${i}.0/24`))), []);
    const p = check(hosts(arr(33, (i) => `10.0.${i}.0/24`)));
    assert.deepEqual(fields(p), ['network.private_hosts']);
    assert.match(p[0]!.message, /more than 32/);
  });
  test('an entry of 255 characters passes the schema, one of 256 is refused naming its index', () => {
    const e255 = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}.x`;
    assert.equal(e255.length, 255);
    assert.deepEqual(check(hosts([e255])), []);
    const p = check(hosts(['ok.corp.example', 'fd00::/8', `${e255}x`]));
    assert.deepEqual(fields(p), ['network.private_hosts[2]']);
    assert.match(p[0]!.message, /more than 255/);
  });
  test('entries are strings and the list is an array', () => {
    assert.deepEqual(fields(check(hosts(['ok.corp.example', 1, null]))), ['network.private_hosts[1]', 'network.private_hosts[2]']);
    assert.deepEqual(fields(check(hosts('10.0.0.0/8'))), ['network.private_hosts']);
    assert.deepEqual(fields(check(hosts(null))), ['network.private_hosts']);
    assert.deepEqual(fields(check({ network: null })), ['network']);
  });
  test('network has private_hosts only (rule 10: no bypass_hosts here)', () => {
    assert.deepEqual(check({ network: {} }), []);
    assert.deepEqual(fields(check({ network: { private_hosts: [], bypass_hosts: [] } })), ['network.bypass_hosts']);
  });
  test('the schema checks shape only: rule violations are left to the network rules', () => {
    // 127.0.0.1 breaks rule 5, but that is checkPrivateHosts' verdict, not the schema's.
    assert.deepEqual(check(hosts(['127.0.0.1', '*.co.uk'])), []);
  });
});

describe('validFieldsOf: the fields that passed the schema, for the rules beyond it', () => {
  function rest(body: unknown): Record<string, unknown> | null {
    const ok = createValidator(body);
    return validFieldsOf(body, ok ? [] : ((createValidator.errors ?? []) as ErrorObject[]));
  }
  test('every top-level field with a schema problem is left out, unknown fields included; the rest is kept as is', () => {
    const body = { timeout_seconds: 5, viewport: { width: 0, height: 1 }, tags: { 'k!': 'v' }, proxy: {}, proxy_id: 'p1', name: 'ok', bogus: 1 };
    assert.deepEqual(rest(body), { proxy: {}, proxy_id: 'p1', name: 'ok' });
    assert.deepEqual(body.timeout_seconds, 5, 'the body itself is not changed');
  });
  test('what is left passes the schema', () => {
    const body = { extensions: arr(21, (i) => ({ name: `e${i}` })), network: { private_hosts: ['8.8.8.8', 1] }, telemetry: { enabled: true, browser: { nope: {} } }, headless: true };
    const r = rest(body);
    assert.deepEqual(r, { headless: true });
    assert.deepEqual(check(r), []);
  });
  test('a valid body is kept whole', () => {
    assert.deepEqual(rest({ headless: true, name: 'x' }), { headless: true, name: 'x' });
  });
  test('a body that is not an object has no valid fields', () => {
    assert.equal(rest([]), null);
    assert.equal(rest('x'), null);
    assert.equal(rest(null), null);
  });
});
