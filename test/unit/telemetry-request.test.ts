import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkCreateRules } from '../../src/domain/browser-rules.js';
import {
  CATEGORIES,
  checkTelemetryRules,
  EXCLUDABLE_CDP_METHODS,
  OPERATIONAL_CATEGORIES,
  OPT_IN_CATEGORIES,
  resolveCreateTelemetry,
  type CategoryFlags,
  type TelemetryRequest,
} from '../../src/domain/telemetry-request.js';

/** The default set of the contract: the four operational categories on, the six opt-in ones off. */
const DEFAULT: CategoryFlags = {
  control: true,
  connection: true,
  system: true,
  captcha: true,
  console: false,
  network: false,
  page: false,
  interaction: false,
  screenshot: false,
  platform: false,
};

const on = (flags: CategoryFlags | null) => (flags ? CATEGORIES.filter((c) => flags[c]).sort() : null);

/** A browser section with every operational category explicitly disabled. */
const OPERATIONAL_OFF = { control: { enabled: false }, connection: { enabled: false }, system: { enabled: false }, captcha: { enabled: false } };

describe('the categories of the contract', () => {
  test('four operational (opt-out) and six opt-in categories, ten in all', () => {
    assert.deepEqual([...OPERATIONAL_CATEGORIES], ['control', 'connection', 'system', 'captcha']);
    assert.deepEqual([...OPT_IN_CATEGORIES].sort(), ['console', 'interaction', 'network', 'page', 'platform', 'screenshot']);
    assert.equal(new Set(CATEGORIES).size, 10);
  });

  test('excluded_methods allows exactly the 38 methods the contract lists', () => {
    const contract = [
      'Input.dispatchMouseEvent', 'Input.dispatchKeyEvent', 'Input.insertText', 'Input.imeSetComposition', 'Input.dispatchTouchEvent',
      'Input.dispatchDragEvent', 'Input.cancelDragging', 'Input.emulateTouchFromMouseEvent', 'Input.synthesizePinchGesture',
      'Input.synthesizeScrollGesture', 'Input.synthesizeTapGesture', 'DOM.setFileInputFiles', 'DOM.focus', 'DOM.scrollIntoViewIfNeeded',
      'Page.bringToFront', 'Page.captureScreenshot', 'Page.captureSnapshot', 'Page.handleJavaScriptDialog', 'Page.navigate',
      'Page.navigateToHistoryEntry', 'Page.reload', 'Page.printToPDF', 'Page.startScreencast', 'Page.stopScreencast', 'Page.stopLoading',
      'Page.close', 'Page.setWebLifecycleState', 'Target.activateTarget', 'Target.closeTarget', 'Target.createTarget',
      'Target.createBrowserContext', 'Target.disposeBrowserContext', 'Target.openDevTools', 'Browser.cancelDownload', 'Browser.close',
      'Browser.setWindowBounds', 'Browser.setContentsSize', 'Autofill.trigger',
    ];
    assert.equal(contract.length, 38);
    assert.deepEqual([...EXCLUDABLE_CDP_METHODS].sort(), [...contract].sort());
  });
});

describe('telemetry rule 1: when capture is not started', () => {
  const none: [string, TelemetryRequest | null | undefined][] = [
    ['telemetry omitted', undefined],
    ['telemetry null', null],
    ['telemetry {}', {}],
    ['enabled=false', { enabled: false }],
    ['enabled=false with an empty browser section', { enabled: false, browser: {} }],
    ['enabled=false with an export section', { enabled: false, export: { otlp: { enabled: false } } }],
    ['an export section alone (no capture asked for)', { export: { otlp: { enabled: true } } }],
    ['an empty browser section without enabled', { browser: {} }],
    ['all four operational categories disabled', { browser: OPERATIONAL_OFF }],
    ['all four operational categories disabled with enabled=true', { enabled: true, browser: OPERATIONAL_OFF }],
    ['all four operational categories disabled, even with opt-in ones on', { enabled: true, browser: { ...OPERATIONAL_OFF, console: { enabled: true }, page: { enabled: true } } }],
    [
      'every category disabled',
      { enabled: true, browser: Object.fromEntries(CATEGORIES.map((c) => [c, { enabled: false }])) as TelemetryRequest['browser'] },
    ],
  ];
  for (const [label, t] of none) test(`${label}: no capture`, () => assert.equal(resolveCreateTelemetry(t), null));

  test('three of the four operational categories disabled still captures the fourth', () => {
    for (const keep of OPERATIONAL_CATEGORIES) {
      const browser = { ...OPERATIONAL_OFF, [keep]: { enabled: true } };
      assert.deepEqual(on(resolveCreateTelemetry({ enabled: true, browser })), [keep], keep);
      const omitted: Record<string, unknown> = { ...OPERATIONAL_OFF };
      delete omitted[keep];
      // Omitted means "as the default": on.
      assert.deepEqual(on(resolveCreateTelemetry({ enabled: true, browser: omitted as TelemetryRequest['browser'] })), [keep], `${keep} omitted`);
    }
  });
});

describe('telemetry rule 2: the default set, and categories layered onto it', () => {
  test('enabled=true alone captures the default set: control, connection, system, captcha', () => {
    assert.deepEqual(resolveCreateTelemetry({ enabled: true }), DEFAULT);
    assert.deepEqual(on(resolveCreateTelemetry({ enabled: true })), ['captcha', 'connection', 'control', 'system']);
  });
  test('enabled=true with an empty browser section is the default set', () => {
    assert.deepEqual(resolveCreateTelemetry({ enabled: true, browser: {} }), DEFAULT);
  });
  test('enabled=true with an export section and no categories is the default set', () => {
    assert.deepEqual(resolveCreateTelemetry({ enabled: true, export: { otlp: { destination: { id: 'd1' } } } }), DEFAULT);
  });
  test('an opt-in category is added to the default set', () => {
    for (const c of OPT_IN_CATEGORIES) {
      assert.deepEqual(resolveCreateTelemetry({ enabled: true, browser: { [c]: { enabled: true } } }), { ...DEFAULT, [c]: true }, c);
    }
  });
  test('an operational category can be switched off, the rest of the default stays', () => {
    for (const c of OPERATIONAL_CATEGORIES) {
      assert.deepEqual(resolveCreateTelemetry({ enabled: true, browser: { [c]: { enabled: false } } }), { ...DEFAULT, [c]: false }, c);
    }
  });
  test('explicitly enabling a default category or disabling an opt-in one changes nothing', () => {
    assert.deepEqual(resolveCreateTelemetry({ enabled: true, browser: { control: { enabled: true }, console: { enabled: false } } }), DEFAULT);
  });
  test('a category object without enabled keeps the default for that category', () => {
    assert.deepEqual(resolveCreateTelemetry({ enabled: true, browser: { control: { cdp: { excluded_methods: ['Page.navigate'] } }, console: {} } }), DEFAULT);
  });
  test('several settings at once are all layered', () => {
    assert.deepEqual(
      resolveCreateTelemetry({ enabled: true, browser: { control: { enabled: false }, network: { enabled: true }, screenshot: { enabled: true } } }),
      { ...DEFAULT, control: false, network: true, screenshot: true },
    );
  });
  test('category settings without enabled start capture, layered on the default set', () => {
    assert.deepEqual(resolveCreateTelemetry({ browser: { console: { enabled: true } } }), { ...DEFAULT, console: true });
    assert.deepEqual(resolveCreateTelemetry({ browser: { captcha: { enabled: false } } }), { ...DEFAULT, captcha: false });
  });
  test('the result is a fresh object every time (the default set is never mutated)', () => {
    const a = resolveCreateTelemetry({ enabled: true, browser: { control: { enabled: false } } })!;
    a.console = true;
    assert.deepEqual(resolveCreateTelemetry({ enabled: true }), DEFAULT);
  });
});

describe('checkTelemetryRules: cross-field rules', () => {
  const fieldsOf = (t: TelemetryRequest | null | undefined) => checkTelemetryRules(t).map((p) => p.field);

  test('nothing to check when telemetry is omitted, null or empty', () => {
    assert.deepEqual(checkTelemetryRules(undefined), []);
    assert.deepEqual(checkTelemetryRules(null), []);
    assert.deepEqual(checkTelemetryRules({}), []);
  });

  test('enabled=false cannot be combined with browser category settings', () => {
    for (const c of CATEGORIES) {
      const p = checkTelemetryRules({ enabled: false, browser: { [c]: { enabled: true } } });
      assert.deepEqual(p.map((x) => x.field), ['telemetry.enabled'], c);
      assert.match(p[0]!.message, /enabled=false cannot be combined with browser category settings/);
    }
    // Even a setting that agrees with enabled=false is a category setting.
    assert.deepEqual(fieldsOf({ enabled: false, browser: { console: { enabled: false } } }), ['telemetry.enabled']);
    assert.deepEqual(fieldsOf({ enabled: false, browser: { control: { cdp: { excluded_methods: [] } } } }), ['telemetry.enabled']);
  });
  test('enabled=false with an empty browser section, and enabled=true with settings, are fine', () => {
    assert.deepEqual(checkTelemetryRules({ enabled: false, browser: {} }), []);
    assert.deepEqual(checkTelemetryRules({ enabled: true, browser: { console: { enabled: true } } }), []);
  });

  test('a destination names exactly one of id, name', () => {
    assert.deepEqual(checkTelemetryRules({ enabled: true, export: { otlp: { destination: { id: 'dst_1' } } } }), []);
    assert.deepEqual(checkTelemetryRules({ enabled: true, export: { otlp: { destination: { name: 'collector' } } } }), []);
    const both = checkTelemetryRules({ enabled: true, export: { otlp: { destination: { id: 'dst_1', name: 'collector' } } } });
    assert.deepEqual(both.map((p) => p.field), ['telemetry.export.otlp.destination']);
    assert.match(both[0]!.message, /exactly one of id, name must be given \(got id, name\)/);
    const neither = checkTelemetryRules({ enabled: true, export: { otlp: { destination: {} } } });
    assert.deepEqual(neither.map((p) => p.field), ['telemetry.export.otlp.destination']);
    assert.match(neither[0]!.message, /exactly one of id, name must be given \(got none\)/);
  });

  test('otlp enabled=false together with a destination is refused', () => {
    const p = checkTelemetryRules({ enabled: true, export: { otlp: { enabled: false, destination: { id: 'dst_1' } } } });
    assert.deepEqual(p.map((x) => x.field), ['telemetry.export.otlp.enabled']);
    assert.match(p[0]!.message, /enabled=false cannot be combined with a destination/);
  });
  test('otlp enabled=true with a destination, or enabled=false without one, is fine', () => {
    assert.deepEqual(checkTelemetryRules({ enabled: true, export: { otlp: { enabled: true, destination: { id: 'dst_1' } } } }), []);
    assert.deepEqual(checkTelemetryRules({ export: { otlp: { enabled: false } } }), []);
    assert.deepEqual(checkTelemetryRules({ enabled: false, export: { otlp: { enabled: false } } }), []);
  });

  test('a destination needs capture', () => {
    const noCapture: [string, TelemetryRequest][] = [
      ['export alone', { export: { otlp: { destination: { id: 'dst_1' } } } }],
      ['with enabled=false', { enabled: false, export: { otlp: { destination: { id: 'dst_1' } } } }],
      ['with every operational category off', { enabled: true, browser: OPERATIONAL_OFF, export: { otlp: { destination: { name: 'c' } } } }],
    ];
    for (const [label, t] of noCapture) {
      const p = checkTelemetryRules(t);
      assert.deepEqual(p.map((x) => x.field), ['telemetry.export.otlp.destination'], label);
      assert.match(p[0]!.message, /requires telemetry capture/, label);
    }
    // Category settings alone start capture, so they carry a destination.
    assert.deepEqual(checkTelemetryRules({ browser: { console: { enabled: true } }, export: { otlp: { destination: { id: 'dst_1' } } } }), []);
  });

  test('several broken rules give one problem each', () => {
    const p = checkTelemetryRules({ enabled: false, browser: { page: { enabled: true } }, export: { otlp: { enabled: false, destination: { id: 'a', name: 'b' } } } });
    assert.deepEqual(p.map((x) => x.field).sort(), ['telemetry.enabled', 'telemetry.export.otlp.destination', 'telemetry.export.otlp.enabled']);
  });

  test('checkCreateRules carries the telemetry problems and accepts capture', () => {
    const bad = checkCreateRules({ telemetry: { enabled: false, browser: { console: { enabled: true } } } });
    assert.ok(bad.some((p) => p.field === 'telemetry.enabled'), JSON.stringify(bad));
    for (const t of [undefined, null, {}, { enabled: false }, { enabled: true }, { enabled: true, browser: OPERATIONAL_OFF }] as (TelemetryRequest | null | undefined)[]) {
      assert.deepEqual(checkCreateRules({ telemetry: t }), [], JSON.stringify(t));
    }
  });
});
