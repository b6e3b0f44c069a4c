import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chromiumArgs } from '../../src/runtime/chromium-args.js';
import { acceptLanguageOf, chromeBrands, parseChromiumVersion, secChUa, stealthFingerprint } from '../../src/stealth/fingerprint.js';

describe('chromeBrands: Chrome\'s GREASE brands and order for a major version', () => {
  // Sec-CH-UA values of real Google Chrome releases.
  test('Chrome 120: "Not_A Brand";v="8", "Chromium";v="120", "Google Chrome";v="120"', () => {
    assert.equal(secChUa(chromeBrands(120)), '"Not_A Brand";v="8", "Chromium";v="120", "Google Chrome";v="120"');
  });
  test('Chrome 131: "Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"', () => {
    assert.equal(secChUa(chromeBrands(131)), '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"');
  });
  test('Chrome 124: "Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"', () => {
    assert.equal(secChUa(chromeBrands(124)), '"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"');
  });
  test('156 (the Chromium measured here shows "Not:A-Brand";v="8" first, then Chromium): Google Chrome added last', () => {
    assert.deepEqual(chromeBrands(156), [
      { brand: 'Not:A-Brand', version: '8' },
      { brand: 'Chromium', version: '156' },
      { brand: 'Google Chrome', version: '156' },
    ]);
  });
  test('the full version list: the GREASE brand gets .0.0.0, the others the full version', () => {
    assert.deepEqual(chromeBrands(156, '156.0.8078.79'), [
      { brand: 'Not:A-Brand', version: '8.0.0.0' },
      { brand: 'Chromium', version: '156.0.8078.79' },
      { brand: 'Google Chrome', version: '156.0.8078.79' },
    ]);
  });
});

describe('stealthFingerprint', () => {
  const fp = stealthFingerprint('156.0.8078.79');
  test('the reduced user agent of Chrome on Linux: minor versions zeroed, no HeadlessChrome', () => {
    assert.equal(fp.userAgent, 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36');
  });
  test('client-hint metadata of desktop Linux x86-64', () => {
    assert.equal(fp.metadata.platform, 'Linux');
    assert.equal(fp.metadata.mobile, false);
    assert.equal(fp.metadata.architecture, 'x86');
    assert.equal(fp.metadata.bitness, '64');
    assert.equal(fp.metadata.model, '');
    assert.equal(fp.metadata.fullVersion, '156.0.8078.79');
    assert.deepEqual(fp.metadata.brands, chromeBrands(156));
  });
  test('languages and the Accept-Language Chrome sends for them', () => {
    assert.deepEqual(fp.languages, ['en-US', 'en']);
    assert.equal(fp.locale, 'en-US');
    assert.equal(fp.acceptLanguage, 'en-US,en;q=0.9');
    assert.equal(acceptLanguageOf(['de-DE', 'de', 'en-US', 'en']), 'de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7');
  });
});

describe('parseChromiumVersion', () => {
  test('from chromium --version and from /json/version', () => {
    assert.equal(parseChromiumVersion('Chromium 156.0.8078.79 \n'), '156.0.8078.79');
    assert.equal(parseChromiumVersion('HeadlessChrome/156.0.8078.79'), '156.0.8078.79');
  });
  test('no version: an error', () => assert.throws(() => parseChromiumVersion('Chromium'), /no Chromium version/));
});

describe('chromiumArgs with stealth', () => {
  const base = { userDataDir: '/d', headless: true, kioskMode: false, width: 1280, height: 800, startUrl: null };
  const stealth = { userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0', locale: 'en-US', acceptLanguages: ['en-US', 'en'] };
  test('no automation flag, the user agent, languages and SwiftShader WebGL; before the "--" that ends switches', () => {
    const args = chromiumArgs({ ...base, stealth });
    for (const flag of ['--disable-blink-features=AutomationControlled', `--user-agent=${stealth.userAgent}`, '--lang=en-US', '--accept-lang=en-US,en', '--enable-unsafe-swiftshader', '--use-angle=swiftshader']) {
      assert.ok(args.includes(flag), flag);
      assert.ok(args.indexOf(flag) < args.indexOf('--'), `${flag} is a switch`);
    }
  });
  test('headful stealth gets the same flags', () => {
    const args = chromiumArgs({ ...base, headless: false, stealth });
    assert.ok(args.includes('--use-angle=swiftshader') && args.includes('--disable-blink-features=AutomationControlled'));
  });
  test('without stealth none of them', () => {
    for (const args of [chromiumArgs(base), chromiumArgs({ ...base, stealth: null })]) {
      assert.ok(!args.some((a) => a.startsWith('--user-agent') || a.startsWith('--disable-blink-features') || a.includes('swiftshader') || a.startsWith('--lang')), args.join(' '));
    }
  });
});
