import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BrowserCreateRequest } from '../../src/domain/browser-request.js';
import { checkCreateRules, checkPlanGates, checkStartUrl, DEFAULT_TIMEOUT_SECONDS, resolveCreate, resolveMemory, type Problem } from '../../src/domain/browser-rules.js';
import { PLANS, isPlan } from '../../src/accounts/plans.js';

const NOT_YET = /not supported by this browserd version yet/;

function problemsOf(req: BrowserCreateRequest, field: string): Problem[] {
  return checkCreateRules(req).filter((p) => p.field === field);
}

function has(req: BrowserCreateRequest, field: string, message: RegExp): void {
  const all = checkCreateRules(req);
  assert.ok(
    all.some((p) => p.field === field && message.test(p.message)),
    `expected a problem on ${field} matching ${message}; got ${JSON.stringify(all)}`,
  );
}

function hasNot(req: BrowserCreateRequest, field: string, message?: RegExp): void {
  const hit = checkCreateRules(req).filter((p) => p.field === field && (!message || message.test(p.message)));
  assert.deepEqual(hit, [], `no problem on ${field} expected`);
}

const EXACTLY_ONE = /exactly one of/;

describe('checkCreateRules: a plain request breaks no rule', () => {
  test('empty request', () => assert.deepEqual(checkCreateRules({}), []));
  test('every supported field set', () => {
    assert.deepEqual(
      checkCreateRules({
        name: 'agent-1',
        headless: true,
        stealth: false,
        gpu: false,
        kiosk_mode: true,
        memory: '16GiB',
        region: 'eu-west',
        timeout_seconds: 300,
        invocation_id: 'inv',
        start_url: 'https://example.com/',
        tags: { team: 'a' },
        viewport: { width: 1280, height: 800 },
        telemetry: null,
      }),
      [],
    );
  });
  test('telemetry omitted, null, empty, or enabled=false alone starts nothing and breaks nothing', () => {
    assert.deepEqual(checkCreateRules({ telemetry: null }), []);
    assert.deepEqual(checkCreateRules({ telemetry: {} }), []);
    assert.deepEqual(checkCreateRules({ telemetry: { enabled: false } }), []);
    assert.deepEqual(checkCreateRules({ telemetry: { enabled: false, browser: {} } }), []);
  });
});

describe('exactly one of id / name', () => {
  for (const kind of ['extensions', 'vaults'] as const) {
    test(`${kind}: both or neither is refused, per entry`, () => {
      const req: BrowserCreateRequest = { [kind]: [{ id: 'a' }, { id: 'b', name: 'b' }, {}, { name: 'c' }] };
      has(req, `${kind}[1]`, EXACTLY_ONE);
      has(req, `${kind}[2]`, EXACTLY_ONE);
      hasNot(req, `${kind}[0]`);
      hasNot(req, `${kind}[3]`);
      const msg = problemsOf(req, `${kind}[1]`)[0]!.message;
      assert.match(msg, /id, name/);
    });
  }
  test('profile: both or neither is refused; one is fine', () => {
    has({ profile: { id: 'p', name: 'p' } }, 'profile', EXACTLY_ONE);
    has({ profile: { save_changes: true } }, 'profile', EXACTLY_ONE);
    hasNot({ profile: { id: 'p' } }, 'profile', EXACTLY_ONE);
    hasNot({ profile: { name: 'p', save_changes: true } }, 'profile', EXACTLY_ONE);
  });
  test('proxy: exactly one of mode, id, name; an empty object is invalid', () => {
    has({ proxy: {} }, 'proxy', EXACTLY_ONE);
    has({ proxy: { mode: 'direct', id: 'x' } }, 'proxy', EXACTLY_ONE);
    has({ proxy: { id: 'x', name: 'y' } }, 'proxy', EXACTLY_ONE);
    has({ proxy: { mode: 'default', id: 'x', name: 'y' } }, 'proxy', EXACTLY_ONE);
    for (const one of [{ mode: 'direct' as const }, { mode: 'default' as const }, { id: 'x' }, { name: 'y' }]) {
      hasNot({ proxy: one }, 'proxy', EXACTLY_ONE);
    }
  });
});

describe('combinations', () => {
  test('proxy together with proxy_id is refused on proxy_id', () => {
    has({ proxy: { mode: 'direct' }, proxy_id: 'p1' }, 'proxy_id', /cannot be combined with proxy/);
    hasNot({ proxy_id: 'p1' }, 'proxy_id', /cannot be combined/);
    hasNot({ proxy: { mode: 'direct' } }, 'proxy_id');
  });
  test('gpu requires headless=false', () => {
    has({ gpu: true, headless: true }, 'gpu', /headless=false/);
    hasNot({ gpu: true, headless: false }, 'gpu', /headless=false/);
    hasNot({ gpu: true }, 'gpu', /headless=false/);
    hasNot({ gpu: false, headless: true }, 'gpu');
  });
  test('gpu requires region=us-east', () => {
    has({ gpu: true, region: 'eu-west' }, 'gpu', /region=us-east/);
    has({ gpu: true, region: 'ap-southeast' }, 'gpu', /region=us-east/);
    hasNot({ gpu: true, region: 'us-east' }, 'gpu', /region=us-east/);
    hasNot({ gpu: true }, 'gpu', /region=us-east/);
  });
  test('telemetry enabled=false with browser category settings is refused on telemetry.enabled', () => {
    has({ telemetry: { enabled: false, browser: { console: { enabled: true } } } }, 'telemetry.enabled', /enabled=false/);
    hasNot({ telemetry: { enabled: true, browser: { console: { enabled: true } } } }, 'telemetry.enabled');
    hasNot({ telemetry: { browser: { console: { enabled: true } } } }, 'telemetry.enabled');
  });
  test('every broken rule is reported, not only the first', () => {
    const p = checkCreateRules({
      gpu: true,
      headless: true,
      region: 'eu-west',
      start_url: 'ftp://x.example',
      proxy: {},
      proxy_id: 'p',
      extensions: [{}],
      telemetry: { enabled: false, browser: { page: { enabled: true } } },
    });
    const fieldsNamed = new Set(p.map((x) => x.field));
    // telemetry with enabled=false starts no capture, so it is not refused as unsupported: only the combination is reported.
    for (const f of ['gpu', 'start_url', 'proxy', 'proxy_id', 'extensions[0]', 'telemetry.enabled']) {
      assert.ok(fieldsNamed.has(f), `${f} missing from ${JSON.stringify(p)}`);
    }
    assert.ok(p.filter((x) => x.field === 'gpu').length >= 3, 'headless, region and availability problems on gpu');
  });
});

describe('start_url', () => {
  for (const ok of ['http://example.com', 'https://example.com/a?b=c#d', 'http://127.0.0.1:8080/x', 'https://[::1]/']) {
    test(`accepts ${ok}`, () => {
      assert.notEqual(checkStartUrl(ok), null);
      hasNot({ start_url: ok }, 'start_url');
    });
  }
  for (const bad of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'data:text/html,hi', 'chrome://settings', 'example.com', 'not a url', '//example.com']) {
    test(`refuses ${bad}`, () => {
      assert.equal(checkStartUrl(bad), null);
      has({ start_url: bad }, 'start_url', /http or https/);
    });
  }
  test('is re-serialised', () => {
    assert.equal(checkStartUrl('HTTPS://Example.COM'), 'https://example.com/');
  });
});

describe('fields this version refuses (named, not silently ignored)', () => {
  const cases: [keyof BrowserCreateRequest, BrowserCreateRequest][] = [
  ];
  for (const [field, req] of cases) {
    test(field, () => has(req, field, NOT_YET));
  }
  test('vaults are carried out now: not refused', () => hasNot({ vaults: [{ id: 'v' }, { name: 'n' }] }, 'vaults', NOT_YET));
  test('network is carried out now: not refused', () => hasNot({ network: { private_hosts: [] } }, 'network', NOT_YET));
  test('proxy and proxy_id are carried out now: not refused', () => {
    hasNot({ proxy: { mode: 'direct' } }, 'proxy', NOT_YET);
    hasNot({ proxy_id: 'p1' }, 'proxy_id', NOT_YET);
  });
  test('profile is carried out now: not refused', () => hasNot({ profile: { id: 'p', save_changes: true } }, 'profile', NOT_YET));
  test('extensions are carried out now: not refused (empty list included)', () => {
    hasNot({ extensions: [{ name: 'ext' }] }, 'extensions', NOT_YET);
    hasNot({ extensions: [] }, 'extensions', NOT_YET);
  });
  test('stealth is carried out now: not refused, true or false', () => {
    hasNot({ stealth: true }, 'stealth');
    hasNot({ stealth: false }, 'stealth');
  });
  test('gpu=true is refused on this node; gpu=false is fine', () => {
    has({ gpu: true }, 'gpu', /not available on this node/);
    hasNot({ gpu: false }, 'gpu');
  });
  test('telemetry capture (enabled, categories or export) is accepted', () => {
    hasNot({ telemetry: { enabled: true } }, 'telemetry');
    hasNot({ telemetry: { browser: { console: { enabled: true } } } }, 'telemetry');
    hasNot({ telemetry: { enabled: true, export: { otlp: { destination: { id: 'd' } } } } }, 'telemetry');
  });
  test('telemetry that starts no capture is accepted', () => {
    for (const t of [null, {}, { enabled: false }, { browser: {} }, { browser: { control: { enabled: false }, connection: { enabled: false }, system: { enabled: false }, captcha: { enabled: false } } }]) {
      hasNot({ telemetry: t }, 'telemetry');
    }
  });
  test('export needs capture, exactly one destination key, and no enabled=false with a destination', () => {
    has({ telemetry: { export: { otlp: { destination: { id: 'd' } } } } }, 'telemetry.export.otlp.destination', /requires telemetry capture/);
    has({ telemetry: { enabled: true, export: { otlp: { destination: { id: 'd', name: 'n' } } } } }, 'telemetry.export.otlp.destination', /exactly one of id, name/);
    has({ telemetry: { enabled: true, export: { otlp: { destination: {} } } } }, 'telemetry.export.otlp.destination', /exactly one of id, name/);
    has({ telemetry: { enabled: true, export: { otlp: { enabled: false, destination: { id: 'd' } } } } }, 'telemetry.export.otlp.enabled', /cannot be combined/);
    hasNot({ telemetry: { enabled: true, export: { otlp: { enabled: false } } } }, 'telemetry.export.otlp.enabled');
  });
});

describe('checkPlanGates', () => {
  test('the plan list is the four contract plans', () => {
    assert.deepEqual([...PLANS], ['free', 'hobbyist', 'start_up', 'enterprise']);
    assert.equal(isPlan('start_up'), true);
    assert.equal(isPlan('startup'), false);
  });
  for (const plan of ['free', 'hobbyist'] as const) {
    test(`${plan}: choosing a region is refused`, () => {
      for (const region of ['eu-west', 'ap-southeast', 'us-east'] as const) {
        const reason = checkPlanGates({ region }, plan);
        assert.ok(reason, `${region} on ${plan} must be refused`);
        assert.match(reason, /region/);
        assert.match(reason, /Start-Up or Enterprise/);
        assert.ok(reason.includes(plan));
      }
    });
    test(`${plan}: gpu is refused`, () => {
      const reason = checkPlanGates({ gpu: true }, plan);
      assert.ok(reason);
      assert.match(reason, /GPU/);
      assert.match(reason, /Start-Up or Enterprise/);
    });
    test(`${plan}: no region and no gpu passes`, () => {
      assert.equal(checkPlanGates({}, plan), null);
      assert.equal(checkPlanGates({ gpu: false, headless: true, name: 'x' }, plan), null);
    });
  }
  for (const plan of ['start_up', 'enterprise'] as const) {
    test(`${plan}: region and gpu are allowed`, () => {
      assert.equal(checkPlanGates({ region: 'eu-west' }, plan), null);
      assert.equal(checkPlanGates({ region: 'ap-southeast' }, plan), null);
      assert.equal(checkPlanGates({ gpu: true }, plan), null);
      assert.equal(checkPlanGates({ gpu: true, region: 'us-east' }, plan), null);
      assert.equal(checkPlanGates({}, plan), null);
    });
  }
});

describe('resolveMemory', () => {
  test('memory applies to headful non-GPU sessions; headless and GPU sessions have fixed sizes', () => {
    assert.deepEqual(resolveMemory(false, false, undefined), { memory: '8GiB', bytes: 8 * 1024 ** 3 });
    assert.deepEqual(resolveMemory(false, false, '8GiB'), { memory: '8GiB', bytes: 8 * 1024 ** 3 });
    assert.deepEqual(resolveMemory(false, false, '16GiB'), { memory: '16GiB', bytes: 16 * 1024 ** 3 });
    assert.deepEqual(resolveMemory(true, false, '16GiB'), { memory: '2GiB', bytes: 2 * 1024 ** 3 });
    assert.deepEqual(resolveMemory(true, false, undefined), { memory: '2GiB', bytes: 2 * 1024 ** 3 });
    assert.deepEqual(resolveMemory(false, true, '8GiB'), { memory: '16GiB', bytes: 16 * 1024 ** 3 });
  });
  test('resolveCreate reports the headless size and keeps chrome_policy', () => {
    const r = resolveCreate({ headless: true, memory: '16GiB', chrome_policy: { BookmarkBarEnabled: true } });
    assert.equal(r.memory, '2GiB');
    assert.deepEqual(r.chromePolicy, { BookmarkBarEnabled: true });
  });
});

describe('resolveCreate', () => {
  test('defaults for an empty request', () => {
    assert.deepEqual(resolveCreate({}), {
      name: null,
      headless: false,
      stealth: false,
      gpu: false,
      kioskMode: false,
      memory: '8GiB',
      region: 'us-east',
      timeoutSeconds: 60,
      invocationId: null,
      startUrl: null,
      tags: {},
      viewport: { width: 1920, height: 1080, refresh_rate: 25 },
      chromePolicy: null,
      memoryBytes: 8 * 1024 ** 3,
    });
    assert.equal(DEFAULT_TIMEOUT_SECONDS, 60);
  });
  test('given values are kept', () => {
    const r = resolveCreate({
      name: 'n',
      headless: false,
      kiosk_mode: true,
      memory: '16GiB',
      region: 'ap-southeast',
      timeout_seconds: 10,
      invocation_id: 'inv',
      start_url: 'https://example.com',
      tags: { a: 'b' },
      viewport: { width: 1280, height: 800 },
    });
    assert.equal(r.name, 'n');
    assert.equal(r.headless, false);
    assert.equal(r.kioskMode, true);
    assert.equal(r.memory, '16GiB');
    assert.equal(r.memoryBytes, 16 * 1024 ** 3);
    assert.equal(r.region, 'ap-southeast');
    assert.equal(r.timeoutSeconds, 10);
    assert.equal(r.invocationId, 'inv');
    assert.equal(r.startUrl, 'https://example.com/');
    assert.deepEqual(r.tags, { a: 'b' });
    assert.deepEqual(r.viewport, { width: 1280, height: 800, refresh_rate: 60 });
  });
  test('a given viewport refresh rate wins over the derived one', () => {
    assert.deepEqual(resolveCreate({ viewport: { width: 2560, height: 1440, refresh_rate: 30 } }).viewport, { width: 2560, height: 1440, refresh_rate: 30 });
    assert.deepEqual(resolveCreate({ viewport: { width: 2560, height: 1440 } }).viewport, { width: 2560, height: 1440, refresh_rate: 10 });
  });
});
