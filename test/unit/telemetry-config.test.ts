import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  checkUpdateTelemetryRules,
  NO_TELEMETRY,
  resolveCreateState,
  resolveUpdateState,
  telemetryView,
  type TelemetryState,
} from '../../src/domain/telemetry-config.js';
import { CATEGORIES, EXCLUDABLE_CDP_METHODS, type CategoryFlags, type TelemetryRequest } from '../../src/domain/telemetry-request.js';

const on = (s: TelemetryState) => (s.categories ? CATEGORIES.filter((c) => s.categories![c]).sort() : null);
const DEFAULT_ON = ['captcha', 'connection', 'control', 'system'];
const flags = (...enabled: string[]): CategoryFlags => Object.fromEntries(CATEGORIES.map((c) => [c, enabled.includes(c)])) as CategoryFlags;
const state = (categories: CategoryFlags | null, excludedMethods: string[] = [], exportDestinationId: string | null = null): TelemetryState => ({ categories, excludedMethods, exportDestinationId });
const OPS_OFF = { control: { enabled: false }, connection: { enabled: false }, system: { enabled: false }, captcha: { enabled: false } };

describe('telemetry on create (rules 1, 2, 4)', () => {
  const cases: [string, TelemetryRequest | null | undefined, string[] | null][] = [
    ['omitted', undefined, null],
    ['null', null, null],
    ['empty object', {}, null],
    ['enabled=false', { enabled: false }, null],
    ['enabled=false with an empty browser', { enabled: false, browser: {} }, null],
    ['only an export section', { export: {} }, null],
    ['all four operational categories disabled', { browser: OPS_OFF }, null],
    ['all four operational categories disabled with enabled=true', { enabled: true, browser: OPS_OFF }, null],
    ['all four operational disabled even with an opt-in on', { enabled: true, browser: { ...OPS_OFF, console: { enabled: true } } }, null],
    ['enabled=true', { enabled: true }, DEFAULT_ON],
    ['enabled=true, empty browser', { enabled: true, browser: {} }, DEFAULT_ON],
    ['opt-in layered on the default', { enabled: true, browser: { network: { enabled: true } } }, [...DEFAULT_ON, 'network'].sort()],
    ['an operational category switched off', { enabled: true, browser: { control: { enabled: false } } }, ['captcha', 'connection', 'system']],
    ['categories without enabled start capture', { browser: { page: { enabled: true } } }, [...DEFAULT_ON, 'page'].sort()],
    ['excluded_methods alone is a category setting', { browser: { control: { cdp: { excluded_methods: ['Page.navigate'] } } } }, DEFAULT_ON],
    ['three operational off: the fourth stays', { enabled: true, browser: { control: { enabled: false }, connection: { enabled: false }, system: { enabled: false } } }, ['captcha']],
  ];
  for (const [label, t, expected] of cases) {
    test(`${label} -> ${expected ? expected.join(',') : 'no capture'}`, () => assert.deepEqual(on(resolveCreateState(t)), expected));
  }

  test('excluded_methods is kept from the request', () => {
    const s = resolveCreateState({ enabled: true, browser: { control: { cdp: { excluded_methods: ['Input.insertText', 'Page.navigate'] } } } });
    assert.deepEqual(s.excludedMethods, ['Input.insertText', 'Page.navigate']);
    assert.deepEqual(resolveCreateState({ enabled: true }).excludedMethods, []);
  });

  test('export binds the resolved destination only when capture starts and otlp is not disabled', () => {
    assert.equal(resolveCreateState({ enabled: true, export: { otlp: { destination: { name: 'd' } } } }, 'dst_1').exportDestinationId, 'dst_1');
    assert.equal(resolveCreateState({ enabled: true, export: { otlp: { enabled: true, destination: { id: 'dst_1' } } } }, 'dst_1').exportDestinationId, 'dst_1');
    assert.equal(resolveCreateState({ enabled: false }, 'dst_1').exportDestinationId, null);
    assert.equal(resolveCreateState({ enabled: true, export: { otlp: { enabled: false } } }, 'dst_1').exportDestinationId, null);
    assert.equal(resolveCreateState({ enabled: true }).exportDestinationId, null);
  });
});

describe('telemetry on update (rules 3, 4)', () => {
  const CURRENT = state(flags('control', 'connection', 'system', 'captcha', 'console'), ['Page.navigate'], 'dst_1');
  const cases: [string, TelemetryState, TelemetryRequest | null | undefined, string[] | null][] = [
    ['omitted keeps the configuration', CURRENT, undefined, [...DEFAULT_ON, 'console'].sort()],
    ['null keeps the configuration', CURRENT, null, [...DEFAULT_ON, 'console'].sort()],
    ['{} keeps the configuration', CURRENT, {}, [...DEFAULT_ON, 'console'].sort()],
    ['enabled=false stops capture', CURRENT, { enabled: false }, null],
    ['categories merge onto the current selection', CURRENT, { browser: { network: { enabled: true } } }, [...DEFAULT_ON, 'console', 'network'].sort()],
    ['a merge can switch a current category off', CURRENT, { browser: { console: { enabled: false }, control: { enabled: false } } }, ['captcha', 'connection', 'system']],
    ['enabled=true resolves afresh from the default set', CURRENT, { enabled: true, browser: { network: { enabled: true } } }, [...DEFAULT_ON, 'network'].sort()],
    ['enabled=true alone is the default set again', CURRENT, { enabled: true }, DEFAULT_ON],
    ['disabling every category stops capture', CURRENT, { browser: { ...OPS_OFF, console: { enabled: false } } }, null],
    ['disabling the operational ones keeps an opt-in one', CURRENT, { browser: OPS_OFF }, ['console']],
    ['enabled=true disabling every default category stops capture', CURRENT, { enabled: true, browser: OPS_OFF }, null],
    ['no capture: categories layer on the default set', NO_TELEMETRY, { browser: { page: { enabled: true } } }, [...DEFAULT_ON, 'page'].sort()],
    ['no capture: enabled=true starts the default set', NO_TELEMETRY, { enabled: true }, DEFAULT_ON],
    ['no capture: enabled=false stays off', NO_TELEMETRY, { enabled: false }, null],
    ['no capture: {} stays off', NO_TELEMETRY, {}, null],
    ['no capture: only excluded_methods stays off', NO_TELEMETRY, { browser: { control: { cdp: { excluded_methods: ['Page.reload'] } } } }, null],
    ['capture on: only excluded_methods leaves the categories', CURRENT, { browser: { control: { cdp: { excluded_methods: [] } } } }, [...DEFAULT_ON, 'console'].sort()],
  ];
  for (const [label, current, t, expected] of cases) {
    test(`${label} -> ${expected ? expected.join(',') : 'no capture'}`, () => assert.deepEqual(on(resolveUpdateState(current, t)), expected));
  }

  const lists: [string, TelemetryRequest | null | undefined, string[]][] = [
    ['omitted keeps the list', { browser: { network: { enabled: true } } }, ['Page.navigate']],
    ['enabled=false keeps the list', { enabled: false }, ['Page.navigate']],
    ['enabled=true without a list keeps it', { enabled: true }, ['Page.navigate']],
    ['an empty list reports every method again', { browser: { control: { cdp: { excluded_methods: [] } } } }, []],
    ['a new list replaces the old one', { browser: { control: { enabled: true, cdp: { excluded_methods: ['Input.insertText', 'Input.dispatchKeyEvent'] } } } }, ['Input.insertText', 'Input.dispatchKeyEvent']],
    ['a list with enabled=true replaces it too', { enabled: true, browser: { control: { cdp: { excluded_methods: ['Page.reload'] } } } }, ['Page.reload']],
  ];
  for (const [label, t, expected] of lists) {
    test(`excluded_methods: ${label}`, () => assert.deepEqual(resolveUpdateState(CURRENT, t).excludedMethods, expected));
  }

  test('the list survives while capture is off and comes back with it', () => {
    const off = resolveUpdateState(CURRENT, { enabled: false });
    const back = resolveUpdateState(off, { enabled: true });
    assert.deepEqual(back.excludedMethods, ['Page.navigate']);
    assert.deepEqual(on(back), DEFAULT_ON);
  });

  test('export is ignored on update: the creation-time destination stays', () => {
    const t = { enabled: true, export: { otlp: { enabled: false } } } as TelemetryRequest;
    assert.equal(resolveUpdateState(CURRENT, t).exportDestinationId, 'dst_1');
    assert.equal(resolveUpdateState(NO_TELEMETRY, { enabled: true, export: { otlp: { destination: { id: 'x' } } } }).exportDestinationId, null);
  });

  test('the current state is never mutated', () => {
    const before = JSON.stringify(CURRENT);
    resolveUpdateState(CURRENT, { enabled: true, browser: { control: { enabled: false, cdp: { excluded_methods: [] } } } });
    assert.equal(JSON.stringify(CURRENT), before);
  });

  test('enabled=false with category settings is refused on update; export is not checked', () => {
    assert.deepEqual(checkUpdateTelemetryRules({ enabled: false, browser: { console: { enabled: true } } }).map((p) => p.field), ['telemetry.enabled']);
    for (const t of [undefined, null, {}, { enabled: false }, { enabled: false, browser: {} }, { enabled: true, browser: { console: { enabled: true } } }, { export: { otlp: { enabled: false, destination: { id: 'x' } } } }] as (TelemetryRequest | null | undefined)[]) {
      assert.deepEqual(checkUpdateTelemetryRules(t), [], JSON.stringify(t));
    }
  });
});

describe('the Browser body telemetry', () => {
  test('null while nothing is captured', () => {
    assert.equal(telemetryView(NO_TELEMETRY), null);
    assert.equal(telemetryView(state(null, ['Page.navigate'], 'dst_1')), null);
  });

  test('every category flag, and otlp disabled when not exporting (no destination)', () => {
    assert.deepEqual(telemetryView(state(flags('control', 'connection', 'system', 'captcha'))), {
      browser: {
        control: { enabled: true }, connection: { enabled: true }, system: { enabled: true }, captcha: { enabled: true },
        console: { enabled: false }, network: { enabled: false }, page: { enabled: false }, interaction: { enabled: false },
        screenshot: { enabled: false }, platform: { enabled: false },
      },
      export: { otlp: { enabled: false } },
    });
  });

  test('excluded methods under control.cdp, the destination id when exporting', () => {
    const v = telemetryView(state(flags('system'), ['Input.insertText'], 'dst_9')) as { browser: Record<string, unknown>; export: unknown };
    assert.deepEqual(v.browser.control, { enabled: false, cdp: { excluded_methods: ['Input.insertText'] } });
    assert.deepEqual(v.export, { otlp: { enabled: true, destination: 'dst_9' } });
  });

  test('the 38 excludable methods are the contract list', () => assert.equal(EXCLUDABLE_CDP_METHODS.length, 38));
});
