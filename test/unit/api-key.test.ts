import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, test } from 'node:test';
import { generateApiKey, hashApiKey, keyPrefix } from '../../src/accounts/api-key-secret.js';

describe('generateApiKey', () => {
  test('is bd_ followed by 43 base64url characters (32 random bytes)', () => {
    const k = generateApiKey();
    assert.match(k, /^bd_[A-Za-z0-9_-]{43}$/);
    assert.equal(Buffer.from(k.slice(3), 'base64url').length, 32);
  });
  test('keys differ', () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey()));
    assert.equal(keys.size, 200);
  });
});

describe('hashApiKey', () => {
  test('is the hex SHA-256 of the key', () => {
    const k = generateApiKey();
    const h = hashApiKey(k);
    assert.match(h, /^[0-9a-f]{64}$/);
    assert.equal(h, crypto.createHash('sha256').update(k).digest('hex'));
    assert.equal(hashApiKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
  test('does not contain the key or its random part', () => {
    const k = generateApiKey();
    const h = hashApiKey(k);
    assert.notEqual(h, k);
    assert.ok(!h.includes(k));
    assert.ok(!h.includes(k.slice(3, 20)));
  });
  test('is deterministic and distinguishes keys', () => {
    const k = generateApiKey();
    assert.equal(hashApiKey(k), hashApiKey(k));
    assert.notEqual(hashApiKey(k), hashApiKey(`${k}x`));
    assert.notEqual(hashApiKey('a'.repeat(16)), hashApiKey('A'.repeat(16)));
  });
});

describe('keyPrefix', () => {
  test('is the first 8 characters: enough to recognise, far too little to use', () => {
    const k = generateApiKey();
    assert.equal(keyPrefix(k), k.slice(0, 8));
    assert.equal(keyPrefix(k).length, 8);
    assert.ok(keyPrefix(k).startsWith('bd_'));
    assert.equal(keyPrefix('short'), 'short');
  });
});
