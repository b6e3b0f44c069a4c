import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env, '/srv');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

describe('BROWSERD_VAULT_KEK', () => {
  test('unset: no key in the config (the key file is used)', () => {
    assert.equal('vaultKek' in loadConfig({}, '/srv'), false);
  });
  test('base64 (standard or URL-safe) of 32 bytes is the key', () => {
    const key = crypto.randomBytes(32);
    assert.deepEqual(loadConfig({ BROWSERD_VAULT_KEK: key.toString('base64') }, '/srv').vaultKek, key);
    assert.deepEqual(loadConfig({ BROWSERD_VAULT_KEK: key.toString('base64url') }, '/srv').vaultKek, key);
  });
  for (const [what, value] of [
    ['16 bytes', crypto.randomBytes(16).toString('base64')],
    ['33 bytes', crypto.randomBytes(33).toString('base64')],
    ['not base64', 'this is not base64!'],
  ] as const) {
    test(`${what} is refused, naming the variable and never quoting the value`, () => {
      const p = problems({ BROWSERD_VAULT_KEK: value });
      assert.equal(p.length, 1);
      assert.match(p[0]!, /BROWSERD_VAULT_KEK/);
      assert.ok(!p[0]!.includes(value));
    });
  }
});

describe('BROWSERD_LINK_*', () => {
  test('unset: no provider', () => {
    assert.equal('link' in loadConfig({}, '/srv'), false);
  });
  test('all three: the provider, URL without a trailing slash', () => {
    const c = loadConfig({ BROWSERD_LINK_URL: 'http://127.0.0.1:9/base/', BROWSERD_LINK_CLIENT_ID: 'cid', BROWSERD_LINK_CLIENT_SECRET: 'sec' }, '/srv');
    assert.deepEqual(c.link, { url: 'http://127.0.0.1:9/base', clientId: 'cid', clientSecret: 'sec' });
  });
  test('a URL without its client, or a bad URL, is refused', () => {
    assert.equal(problems({ BROWSERD_LINK_URL: 'http://x' }).length, 2);
    assert.match(problems({ BROWSERD_LINK_URL: 'ftp://x', BROWSERD_LINK_CLIENT_ID: 'a', BROWSERD_LINK_CLIENT_SECRET: 'b' })[0]!, /BROWSERD_LINK_URL/);
    assert.match(problems({ BROWSERD_LINK_CLIENT_ID: 'a', BROWSERD_LINK_CLIENT_SECRET: 'b' })[0]!, /BROWSERD_LINK_URL/);
  });
});
