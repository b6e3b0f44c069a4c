import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DEFAULT_VIEWPORT, defaultRefreshRate, resolveViewport } from '../../src/domain/viewport.js';

/** The contract's known-good presets (width x height @ Hz). */
const PRESETS: [number, number, number][] = [
  [2560, 1440, 10],
  [1920, 1080, 25],
  [1920, 1200, 25],
  [1440, 900, 25],
  [1280, 800, 60],
  [1024, 768, 60],
  [1200, 800, 60],
  [768, 1024, 60],
  [390, 844, 60],
];

describe('defaultRefreshRate matches the contract presets', () => {
  for (const [w, h, hz] of PRESETS) {
    test(`${w}x${h} -> ${hz} Hz`, () => assert.equal(defaultRefreshRate(w, h), hz));
  }
});

describe('defaultRefreshRate', () => {
  test('never rises as the resolution grows', () => {
    const sizes: [number, number][] = [
      [1, 1],
      [390, 844],
      [1024, 768],
      [1280, 800],
      [1440, 900],
      [1920, 1080],
      [1920, 1200],
      [2560, 1440],
      [3840, 2160],
      [7680, 4320],
    ];
    let prev = Infinity;
    for (const [w, h] of sizes) {
      const hz = defaultRefreshRate(w, h);
      assert.ok(hz <= prev, `${w}x${h} got ${hz} Hz, more than the smaller size before it (${prev})`);
      assert.ok(Number.isInteger(hz) && hz >= 1);
      prev = hz;
    }
  });
  test('a very large viewport gets the lowest rate', () => assert.equal(defaultRefreshRate(3840, 2160), 10));
  test('a tiny viewport gets the highest rate', () => assert.equal(defaultRefreshRate(1, 1), 60));
});

describe('resolveViewport', () => {
  test('omitted -> 1920x1080 at 25 Hz', () => {
    assert.deepEqual(resolveViewport(undefined), { width: 1920, height: 1080, refresh_rate: 25 });
  });
  test('the default is a copy: changing a result does not change the next default', () => {
    const a = resolveViewport(undefined);
    a.width = 1;
    assert.deepEqual(resolveViewport(undefined), { width: 1920, height: 1080, refresh_rate: 25 });
    assert.equal(DEFAULT_VIEWPORT.width, 1920);
  });
  test('a given refresh rate is kept, whatever the size', () => {
    assert.deepEqual(resolveViewport({ width: 2560, height: 1440, refresh_rate: 60 }), { width: 2560, height: 1440, refresh_rate: 60 });
    assert.deepEqual(resolveViewport({ width: 390, height: 844, refresh_rate: 1 }), { width: 390, height: 844, refresh_rate: 1 });
  });
  for (const [w, h, hz] of PRESETS) {
    test(`${w}x${h} without a rate -> ${hz} Hz`, () => assert.deepEqual(resolveViewport({ width: w, height: h }), { width: w, height: h, refresh_rate: hz }));
  }
  test('odd sizes are accepted as given', () => {
    assert.deepEqual(resolveViewport({ width: 1, height: 1 }), { width: 1, height: 1, refresh_rate: 60 });
    assert.deepEqual(resolveViewport({ width: 1366, height: 1, refresh_rate: 7 }), { width: 1366, height: 1, refresh_rate: 7 });
  });
});
