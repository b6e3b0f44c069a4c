import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { base32Decode, base32Encode, hotp, parseTotpInput, totpAt, totpCode } from '../../src/vaults/totp.js';

/** RFC 6238 Appendix B: the seeds are ASCII digits of the hash's block-ish length. */
const SEED = {
  SHA1: Buffer.from('12345678901234567890', 'ascii'),
  SHA256: Buffer.from('12345678901234567890123456789012', 'ascii'),
  SHA512: Buffer.from('1234567890123456789012345678901234567890123456789012345678901234', 'ascii'),
} as const;

const RFC6238: [number, string, string, string][] = [
  [59, '94287082', '46119246', '90693936'],
  [1111111109, '07081804', '68084774', '25091201'],
  [1111111111, '14050471', '67062674', '99943326'],
  [1234567890, '89005924', '91819424', '93441116'],
  [2000000000, '69279037', '90698825', '38618901'],
  [20000000000, '65353130', '77737706', '47863826'],
];

describe('RFC 6238 TOTP test vectors (8 digits, 30 s)', () => {
  for (const [t, sha1, sha256, sha512] of RFC6238) {
    test(`T=${t}`, () => {
      assert.equal(totpAt(SEED.SHA1, t * 1000, { digits: 8, algorithm: 'SHA1' }), sha1);
      assert.equal(totpAt(SEED.SHA256, t * 1000, { digits: 8, algorithm: 'SHA256' }), sha256);
      assert.equal(totpAt(SEED.SHA512, t * 1000, { digits: 8, algorithm: 'SHA512' }), sha512);
    });
  }
  test('the same vectors through a stored secret (base32 of the seed)', () => {
    for (const [t, sha1, sha256, sha512] of RFC6238) {
      assert.equal(totpCode({ secret: base32Encode(SEED.SHA1), algorithm: 'SHA1', digits: 8, period: 30 }, t * 1000), sha1);
      assert.equal(totpCode({ secret: base32Encode(SEED.SHA256), algorithm: 'SHA256', digits: 8, period: 30 }, t * 1000), sha256);
      assert.equal(totpCode({ secret: base32Encode(SEED.SHA512), algorithm: 'SHA512', digits: 8, period: 30 }, t * 1000), sha512);
    }
  });
  test('6 digits are the last 6 of the 8-digit code; the code changes at a period boundary only', () => {
    assert.equal(totpAt(SEED.SHA1, 59_000), '287082');
    assert.equal(totpAt(SEED.SHA1, 30_000), totpAt(SEED.SHA1, 59_999));
    assert.notEqual(totpAt(SEED.SHA1, 59_999), totpAt(SEED.SHA1, 60_000));
  });
});

describe('RFC 4226 HOTP test vectors', () => {
  const expected = ['755224', '287082', '359152', '969429', '338314', '254676', '287922', '162583', '399871', '520489'];
  expected.forEach((code, counter) => test(`counter ${counter}`, () => assert.equal(hotp(SEED.SHA1, counter), code)));
});

describe('base32 (RFC 4648)', () => {
  const vectors: [string, string][] = [['f', 'MY'], ['fo', 'MZXQ'], ['foo', 'MZXW6'], ['foob', 'MZXW6YQ'], ['fooba', 'MZXW6YTB'], ['foobar', 'MZXW6YTBOI']];
  for (const [plain, enc] of vectors) {
    test(`${plain} <-> ${enc}`, () => {
      assert.equal(base32Encode(Buffer.from(plain)), enc);
      assert.equal(base32Decode(enc)!.toString(), plain);
    });
  }
  test('lower case, spaces, dashes and padding are read', () => {
    assert.equal(base32Decode('mzxw 6ytb-oi======')!.toString(), 'foobar');
  });
  test('anything else is not base32', () => {
    for (const bad of ['', '0189', 'MZXW6!', '====']) assert.equal(base32Decode(bad), null, bad);
  });
});

describe('what a person pastes into a TOTP field', () => {
  test('a base32 secret, with the RFC defaults', () => {
    const r = parseTotpInput(' jbsw y3dp ehpk 3pxp ');
    assert.deepEqual(r, { ok: true, value: { secret: 'JBSWY3DPEHPK3PXP', algorithm: 'SHA1', digits: 6, period: 30 } });
  });
  test('an otpauth URI with its parameters', () => {
    const r = parseTotpInput('otpauth://totp/Example:alice@example.com?secret=JBSWY3DPEHPK3PXP&issuer=Example&algorithm=SHA256&digits=8&period=60');
    assert.deepEqual(r, { ok: true, value: { secret: 'JBSWY3DPEHPK3PXP', algorithm: 'SHA256', digits: 8, period: 60 } });
  });
  const bad: [string, RegExp][] = [
    ['not base32 !', /base32/],
    ['JBSWY3DP', /too short/],
    ['otpauth://hotp/x?secret=JBSWY3DPEHPK3PXP&counter=1', /HOTP/],
    ['otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&algorithm=MD5', /algorithm/],
    ['otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&digits=4', /digits/],
    ['otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&period=0', /period/],
    ['otpauth://totp/x', /base32/],
  ];
  for (const [input, why] of bad) {
    test(`refused: ${input}`, () => {
      const r = parseTotpInput(input);
      assert.equal(r.ok, false);
      if (!r.ok) {
        assert.match(r.reason, why);
        assert.ok(!r.reason.includes('JBSWY3DP'), 'the reason never quotes the input');
      }
    });
  }
});
