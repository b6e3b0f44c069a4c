import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BrowserCreateRequest } from '../../src/domain/browser-request.js';
import { resolveCreate } from '../../src/domain/browser-rules.js';
import { handOutPlan, warmDecision, warmShape } from '../../src/domain/warm-eligibility.js';

const GiB = 1024 ** 3;
const decide = (req: BrowserCreateRequest) => warmDecision(req, resolveCreate(req));

describe('warmShape', () => {
  test('headless: default viewport, 2GiB; headful: default viewport, 8GiB', () => {
    assert.deepEqual(warmShape('headless'), { headless: true, viewport: { width: 1920, height: 1080, refresh_rate: 25 }, memoryBytes: 2 * GiB });
    assert.deepEqual(warmShape('headful'), { headless: false, viewport: { width: 1920, height: 1080, refresh_rate: 25 }, memoryBytes: 8 * GiB });
  });
});

describe('warmDecision: eligible requests', () => {
  const eligible: [string, BrowserCreateRequest, 'headless' | 'headful'][] = [
    ['an empty request (headful by default)', {}, 'headful'],
    ['headless', { headless: true }, 'headless'],
    ['headful, explicit', { headless: false }, 'headful'],
    ['name, tags, timeout, invocation id, start_url', { headless: true, name: 'n', tags: { a: 'b' }, timeout_seconds: 300, invocation_id: 'inv', start_url: 'https://example.test/' }, 'headless'],
    ['headless with any viewport (applied at hand-out)', { headless: true, viewport: { width: 1280, height: 800 } }, 'headless'],
    ['headless with another refresh rate (no live view)', { headless: true, viewport: { width: 1920, height: 1080, refresh_rate: 60 } }, 'headless'],
    ['headful with the default viewport given explicitly', { viewport: { width: 1920, height: 1080, refresh_rate: 25 } }, 'headful'],
    ['headful with the default viewport, rate derived', { viewport: { width: 1920, height: 1080 } }, 'headful'],
    ['headful 16GiB (the cgroup limit is raised)', { memory: '16GiB' }, 'headful'],
    ['headless with memory (ignored: headless is 2GiB)', { headless: true, memory: '16GiB' }, 'headless'],
    ['headless kiosk (no flag for headless)', { headless: true, kiosk_mode: true }, 'headless'],
    ['kiosk_mode false', { kiosk_mode: false }, 'headful'],
    ['stealth false', { headless: true, stealth: false }, 'headless'],
    ['gpu false', { gpu: false }, 'headful'],
    ['an empty chrome_policy', { headless: true, chrome_policy: {} }, 'headless'],
    ['an empty extensions list', { headless: true, extensions: [] }, 'headless'],
    ['a proxy (switched on the bridge)', { headless: true, proxy: { name: 'p' } }, 'headless'],
    ['a proxy mode', { headless: true, proxy: { mode: 'direct' } }, 'headless'],
    ['the deprecated proxy_id', { headless: true, proxy_id: 'px' }, 'headless'],
    ['network without private_hosts', { headless: true, network: {} }, 'headless'],
    ['vaults (links in the store)', { headless: true, vaults: [{ name: 'v' }] }, 'headless'],
    ['telemetry', { headless: true, telemetry: { enabled: true } }, 'headless'],
    ['a region', { headless: true, region: 'eu-west' }, 'headless'],
  ];
  for (const [name, req, kind] of eligible) {
    test(name, () => assert.deepEqual(decide(req), { warm: true, kind }));
  }
});

describe('warmDecision: requests that launch fresh', () => {
  const fresh: [string, BrowserCreateRequest, RegExp][] = [
    ['stealth', { headless: true, stealth: true }, /stealth/],
    ['gpu', { gpu: true }, /gpu/],
    ['a chrome_policy', { headless: true, chrome_policy: { BookmarkBarEnabled: true } }, /chrome_policy/],
    ['extensions', { headless: true, extensions: [{ name: 'e' }] }, /extensions/],
    ['a profile', { headless: true, profile: { name: 'p' } }, /profile/],
    ['a profile without saving', { headless: true, profile: { id: 'x', save_changes: false } }, /profile/],
    ['network.private_hosts', { headless: true, network: { private_hosts: ['10.0.0.0/8'] } }, /private_hosts/],
    ['network.private_hosts empty', { headless: true, network: { private_hosts: [] } }, /private_hosts/],
    ['headful kiosk', { kiosk_mode: true }, /kiosk_mode/],
    ['headful with another size', { viewport: { width: 1280, height: 800 } }, /viewport/],
    ['headful with another width only', { viewport: { width: 1440, height: 1080 } }, /viewport/],
    ['headful with the default size at another rate', { viewport: { width: 1920, height: 1080, refresh_rate: 60 } }, /viewport/],
  ];
  for (const [name, req, reason] of fresh) {
    test(name, () => {
      const d = decide(req);
      assert.equal(d.warm, false);
      assert.match((d as { reason: string }).reason, reason);
    });
  }
  test('several reasons: one is reported', () => {
    const d = decide({ kiosk_mode: true, chrome_policy: { BookmarkBarEnabled: true }, viewport: { width: 800, height: 600 } });
    assert.equal(d.warm, false);
  });
});

describe('handOutPlan', () => {
  const plan = (req: BrowserCreateRequest, enforced = true) => {
    const r = resolveCreate(req);
    return handOutPlan(r, warmShape(r.headless ? 'headless' : 'headful'), enforced);
  };
  test('defaults: nothing to do', () => {
    assert.deepEqual(plan({ headless: true }), { screen: null, memoryBytes: null, startUrl: null });
    assert.deepEqual(plan({}), { screen: null, memoryBytes: null, startUrl: null });
  });
  test('headless viewport: the screen is resized', () => {
    assert.deepEqual(plan({ headless: true, viewport: { width: 1280, height: 800 } }).screen, { width: 1280, height: 800 });
    assert.deepEqual(plan({ headless: true, viewport: { width: 1920, height: 1200 } }).screen, { width: 1920, height: 1200 });
  });
  test('headless: a different refresh rate alone changes nothing', () => {
    assert.equal(plan({ headless: true, viewport: { width: 1920, height: 1080, refresh_rate: 60 } }).screen, null);
  });
  test('headful 16GiB raises the limit, when limits are enforced', () => {
    assert.equal(plan({ memory: '16GiB' }).memoryBytes, 16 * GiB);
    assert.equal(plan({ memory: '16GiB' }, false).memoryBytes, null);
    assert.equal(plan({ memory: '8GiB' }).memoryBytes, null);
  });
  test('headless memory is fixed: nothing to change', () => {
    assert.equal(plan({ headless: true, memory: '16GiB' }).memoryBytes, null);
  });
  test('start_url is navigated (normalised as the record has it)', () => {
    assert.equal(plan({ headless: true, start_url: 'https://example.test' }).startUrl, 'https://example.test/');
  });
});
