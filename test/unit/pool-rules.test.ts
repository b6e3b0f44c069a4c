import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  applyPoolUpdate,
  checkAcquire,
  checkPoolSettings,
  checkPoolUpdate,
  DEFAULT_FILL_RATE_PERCENT,
  DEFAULT_POOL_TIMEOUT_SECONDS,
  defaultAcquireSeconds,
  fillIntervalMs,
  launchesPerMinute,
  MAX_DEFAULT_ACQUIRE_SECONDS,
  poolConfigView,
  resolvePoolCreate,
  sessionRequestOf,
  type PoolSettings,
} from '../../src/domain/pool-request.js';
import { cookieOrigins, webOrigin } from '../../src/pools/browser-reset.js';

const fields = (s: PoolSettings) => checkPoolSettings(s).map((p) => p.field);

describe('pool creation', () => {
  test('defaults: fill rate 25 %, timeout 600 s, headless false, no name', () => {
    const s = resolvePoolCreate({ size: 3 });
    assert.equal(s.fillRatePerMinute, DEFAULT_FILL_RATE_PERCENT);
    assert.equal(s.timeoutSeconds, DEFAULT_POOL_TIMEOUT_SECONDS);
    assert.equal(s.name, null);
    assert.deepEqual(poolConfigView(s), { headless: false, kiosk_mode: false, stealth: false, size: 3, fill_rate_per_minute: 25, timeout_seconds: 600 });
  });

  test('a profile turns refresh_on_profile_update on unless given; save_changes is dropped (pools load profiles read-only)', () => {
    const s = resolvePoolCreate({ size: 1, profile: { name: 'p', save_changes: true } });
    assert.deepEqual(s.browser.profile, { name: 'p' });
    assert.equal(s.browser.refresh_on_profile_update, true);
    assert.equal(resolvePoolCreate({ size: 1, profile: { id: 'x' }, refresh_on_profile_update: false }).browser.refresh_on_profile_update, false);
    assert.deepEqual(sessionRequestOf(s).profile, { name: 'p', save_changes: false });
  });

  test('the session request carries the pool configuration and its timeout; start_url only for newly warmed browsers', () => {
    const s = resolvePoolCreate({ size: 1, headless: true, timeout_seconds: 30, start_url: 'https://example.test/', viewport: { width: 800, height: 600 }, proxy_id: 'px', kiosk_mode: true });
    assert.deepEqual(sessionRequestOf(s), { timeout_seconds: 30, headless: true, kiosk_mode: true, proxy_id: 'px', start_url: 'https://example.test/', viewport: { width: 800, height: 600 } });
    assert.equal(sessionRequestOf(s, false).start_url, undefined);
    assert.equal(sessionRequestOf(resolvePoolCreate({ size: 1 })).headless, false);
  });

  test('the create request rules apply to the browser part, with the same field names', () => {
    assert.deepEqual(fields(resolvePoolCreate({ size: 1 })), []);
    assert.ok(fields(resolvePoolCreate({ size: 1, start_url: 'ftp://x/' })).includes('start_url'));
    assert.ok(fields(resolvePoolCreate({ size: 1, extensions: [{ id: 'a', name: 'b' }] })).includes('extensions[0]'));
    assert.ok(fields(resolvePoolCreate({ size: 1, profile: { id: 'a', name: 'b' } })).includes('profile'));
    assert.ok(fields(resolvePoolCreate({ size: 1, profile: {} })).includes('profile'));
    assert.ok(fields(resolvePoolCreate({ size: 1, telemetry: { enabled: false, browser: { console: { enabled: true } } } })).includes('telemetry.enabled'));
  });

  test('telemetry export is refused for pools, naming telemetry.export, even when the rest is valid', () => {
    const s = resolvePoolCreate({ size: 1, telemetry: { enabled: true, export: { otlp: { destination: { name: 'd' } } } } });
    const problems = checkPoolSettings(s);
    assert.deepEqual(problems.map((p) => p.field), ['telemetry.export']);
    assert.match(problems[0]!.message, /not available for browser pools/);
    assert.deepEqual(checkPoolUpdate({ telemetry: { export: {} } }).map((p) => p.field), ['telemetry.export']);
    assert.deepEqual(checkAcquire({ telemetry: { export: {} } }).map((p) => p.field), ['telemetry.export']);
  });

  test('refresh_on_profile_update needs a profile', () => {
    assert.ok(fields(resolvePoolCreate({ size: 1, refresh_on_profile_update: true })).includes('refresh_on_profile_update'));
    assert.ok(!fields(resolvePoolCreate({ size: 1, refresh_on_profile_update: false })).includes('refresh_on_profile_update'));
  });
});

describe('acquire rules', () => {
  test('start_url must be http(s); enabled=false cannot carry categories', () => {
    assert.deepEqual(checkAcquire({}), []);
    assert.deepEqual(checkAcquire({ start_url: 'https://example.test/' }), []);
    assert.deepEqual(checkAcquire({ start_url: 'javascript:alert(1)' }).map((p) => p.field), ['start_url']);
    assert.deepEqual(checkAcquire({ telemetry: { enabled: false, browser: { page: { enabled: true } } } }).map((p) => p.field), ['telemetry.enabled']);
  });
});

describe('fill pacing', () => {
  test('the fill rate is a percentage of the size per minute, at least one launch a minute', () => {
    assert.equal(launchesPerMinute(1, 25), 1);
    assert.equal(launchesPerMinute(10, 25), 3);
    assert.equal(launchesPerMinute(100, 25), 25);
    assert.equal(launchesPerMinute(2, 600), 12);
    assert.equal(fillIntervalMs(2, 600), 5000);
    assert.equal(fillIntervalMs(1, 25), 60_000);
  });

  test('the default acquire wait is the time a whole fill takes, capped under the SDK request timeout', () => {
    assert.equal(defaultAcquireSeconds(2, 600), 10);
    assert.equal(defaultAcquireSeconds(1, 25), MAX_DEFAULT_ACQUIRE_SECONDS);
    assert.equal(defaultAcquireSeconds(4, 1000), 6);
  });
});

describe('pool update', () => {
  const base = resolvePoolCreate({
    name: 'p',
    size: 2,
    headless: true,
    proxy_id: 'px',
    start_url: 'https://a.test/',
    chrome_policy: { HomepageLocation: 'https://a.test/' },
    extensions: [{ name: 'e' }],
    profile: { name: 'prof' },
    telemetry: { enabled: true, browser: { console: { enabled: true } } },
  });

  test('omitted fields stay; given ones replace', () => {
    const u = applyPoolUpdate(base, { size: 3, timeout_seconds: 60, headless: false });
    assert.equal(u.size, 3);
    assert.equal(u.timeoutSeconds, 60);
    assert.equal(u.browser.headless, false);
    assert.equal(u.browser.proxy_id, 'px');
    assert.equal(u.name, 'p');
    assert.equal(u.fillRatePerMinute, base.fillRatePerMinute);
  });

  test('clearing: "" for proxy_id and start_url, {} for chrome_policy, [] for extensions, profile {id: ""} (and its refresh flag); an empty name is a no-op', () => {
    const u = applyPoolUpdate(base, { proxy_id: '', start_url: '', chrome_policy: {}, extensions: [], profile: { id: '' }, name: '' });
    assert.equal(u.browser.proxy_id, undefined);
    assert.equal(u.browser.start_url, undefined);
    assert.equal(u.browser.chrome_policy, undefined);
    assert.equal(u.browser.extensions, undefined);
    assert.equal(u.browser.profile, undefined);
    assert.equal(u.browser.refresh_on_profile_update, undefined);
    assert.equal(u.name, 'p');
    assert.deepEqual(checkPoolSettings(u), []);
  });

  test('a new profile reference turns refresh on unless given; the same one leaves it', () => {
    const off = applyPoolUpdate(base, { refresh_on_profile_update: false });
    assert.equal(off.browser.refresh_on_profile_update, false);
    assert.equal(applyPoolUpdate(off, { profile: { name: 'prof' } }).browser.refresh_on_profile_update, false);
    assert.equal(applyPoolUpdate(off, { profile: { name: 'other' } }).browser.refresh_on_profile_update, true);
  });

  test('telemetry: null and {} leave it, enabled=false clears, enabled=true replaces, categories merge', () => {
    assert.deepEqual(applyPoolUpdate(base, { telemetry: null }).browser.telemetry, base.browser.telemetry);
    assert.deepEqual(applyPoolUpdate(base, { telemetry: {} }).browser.telemetry, base.browser.telemetry);
    assert.equal(applyPoolUpdate(base, { telemetry: { enabled: false } }).browser.telemetry, undefined);
    assert.deepEqual(applyPoolUpdate(base, { telemetry: { enabled: true } }).browser.telemetry, { enabled: true });
    assert.deepEqual(applyPoolUpdate(base, { telemetry: { browser: { page: { enabled: true } } } }).browser.telemetry, {
      enabled: true,
      browser: { console: { enabled: true }, page: { enabled: true } },
    });
  });

  test('the current settings are not modified', () => {
    applyPoolUpdate(base, { proxy_id: '', headless: false });
    assert.equal(base.browser.proxy_id, 'px');
    assert.equal(base.browser.headless, true);
  });
});

describe('reset origins', () => {
  test('web origins only; cookie domains over http and https', () => {
    assert.equal(webOrigin('http://127.0.0.1:8080/a?b'), 'http://127.0.0.1:8080');
    assert.equal(webOrigin('about:blank'), null);
    assert.equal(webOrigin('chrome://version'), null);
    assert.equal(webOrigin('not a url'), null);
    assert.deepEqual(cookieOrigins([{ domain: '.example.test' }, { domain: 'example.test' }, { domain: '' }]), ['http://example.test', 'https://example.test']);
  });
});
