import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import { openStore, type Store } from '../../src/store/database.js';
import { SessionTokens, TOKEN_TTL_SECONDS, type Channel } from '../../src/gateway/tokens.js';

let dir: string;
let file: string;
let store: Store;
let tokens: SessionTokens;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-tokens-'));
  file = path.join(dir, 'store.sqlite');
  store = await openStore({ kind: 'sqlite', file });
  tokens = await SessionTokens.load(store.db);
});
after(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function signingKey(): Promise<Uint8Array> {
  const row = await store.db.selectFrom('settings').select('value').where('key', '=', 'jwt_signing_key').executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'base64');
}

const CHANNELS: Channel[] = ['cdp', 'bidi', 'live'];

describe('SessionTokens sign/verify', () => {
  for (const ch of CHANNELS) {
    test(`round trip on the ${ch} channel`, async () => {
      const before = Math.floor(Date.now() / 1000);
      const t = await tokens.sign({ sessionId: 'sess1', channel: ch, readonly: false });
      const r = await tokens.verify(t, ch);
      assert.ok(r.ok);
      // issuedAt (the JWT's iat) tells a pool browser's current lease from an earlier one.
      const { issuedAt, ...claims } = r.claims;
      assert.deepEqual(claims, { sessionId: 'sess1', channel: ch, readonly: false });
      assert.ok(issuedAt !== undefined && issuedAt >= before && issuedAt <= Math.floor(Date.now() / 1000));
    });
  }
  test('readonly is carried', async () => {
    const t = await tokens.sign({ sessionId: 'sess2', channel: 'live', readonly: true });
    const r = await tokens.verify(t, 'live');
    assert.ok(r.ok);
    assert.equal(r.claims.readonly, true);
    assert.equal(r.claims.sessionId, 'sess2');
  });
  test('the token is an HS256 JWT: iss browserd, sub session id, ch channel, 30-day expiry', async () => {
    const t = await tokens.sign({ sessionId: 'sess3', channel: 'cdp', readonly: false });
    assert.equal(decodeProtectedHeader(t).alg, 'HS256');
    const claims = decodeJwt(t);
    assert.equal(claims.iss, 'browserd');
    assert.equal(claims.sub, 'sess3');
    assert.equal(claims.ch, 'cdp');
    assert.equal(claims.ro, undefined);
    assert.equal(claims.exp! - claims.iat!, TOKEN_TTL_SECONDS);
    assert.equal(TOKEN_TTL_SECONDS, 30 * 24 * 3600);
    assert.ok(Math.abs(claims.iat! - Date.now() / 1000) < 60);
  });
  for (const [signed, asked] of [
    ['cdp', 'bidi'],
    ['cdp', 'live'],
    ['bidi', 'cdp'],
    ['live', 'cdp'],
  ] as const) {
    test(`a ${signed} token is refused on the ${asked} channel`, async () => {
      const t = await tokens.sign({ sessionId: 's', channel: signed, readonly: false });
      const r = await tokens.verify(t, asked);
      assert.equal(r.ok, false);
      assert.ok(!r.ok && r.reason.includes(signed) && r.reason.includes(asked), JSON.stringify(r));
    });
  }
});

describe('SessionTokens refusals', () => {
  test('missing token', async () => {
    assert.deepEqual(await tokens.verify(undefined, 'cdp'), { ok: false, reason: 'missing jwt' });
    assert.deepEqual(await tokens.verify(null, 'cdp'), { ok: false, reason: 'missing jwt' });
    assert.deepEqual(await tokens.verify('', 'cdp'), { ok: false, reason: 'missing jwt' });
  });
  test('garbage', async () => {
    assert.deepEqual(await tokens.verify('not.a.jwt', 'cdp'), { ok: false, reason: 'invalid token' });
    assert.deepEqual(await tokens.verify('abc', 'cdp'), { ok: false, reason: 'invalid token' });
  });
  test('tampered signature', async () => {
    const t = await tokens.sign({ sessionId: 's', channel: 'cdp', readonly: false });
    const [h, p, sig] = t.split('.') as [string, string, string];
    const flipped = (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1);
    assert.deepEqual(await tokens.verify(`${h}.${p}.${flipped}`, 'cdp'), { ok: false, reason: 'invalid token' });
  });
  test('tampered payload (another session id, original signature)', async () => {
    const t = await tokens.sign({ sessionId: 'mine', channel: 'cdp', readonly: false });
    const [h, p, sig] = t.split('.') as [string, string, string];
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    payload.sub = 'theirs';
    const forged = `${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${sig}`;
    assert.deepEqual(await tokens.verify(forged, 'cdp'), { ok: false, reason: 'invalid token' });
  });
  test('expired token (negative ttl)', async () => {
    const t = await tokens.sign({ sessionId: 's', channel: 'cdp', readonly: false }, -120);
    assert.deepEqual(await tokens.verify(t, 'cdp'), { ok: false, reason: 'token expired' });
  });
  test('expired token minted with jose and the real key', async () => {
    const now = Math.floor(Date.now() / 1000);
    const t = await new SignJWT({ ch: 'cdp' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('browserd')
      .setSubject('s')
      .setIssuedAt(now - 7200)
      .setExpirationTime(now - 3600)
      .sign(await signingKey());
    assert.deepEqual(await tokens.verify(t, 'cdp'), { ok: false, reason: 'token expired' });
  });
  test('a token minted with the real key but another issuer is refused', async () => {
    const t = await new SignJWT({ ch: 'cdp' }).setProtectedHeader({ alg: 'HS256' }).setIssuer('someone-else').setSubject('s').setExpirationTime('1h').sign(await signingKey());
    assert.equal((await tokens.verify(t, 'cdp')).ok, false);
  });
  test('a token minted with the real key but no subject is refused', async () => {
    const t = await new SignJWT({ ch: 'cdp' }).setProtectedHeader({ alg: 'HS256' }).setIssuer('browserd').setExpirationTime('1h').sign(await signingKey());
    assert.deepEqual(await tokens.verify(t, 'cdp'), { ok: false, reason: 'token names no session' });
  });
  test('a token signed with another key is refused', async () => {
    const t = await new SignJWT({ ch: 'cdp' }).setProtectedHeader({ alg: 'HS256' }).setIssuer('browserd').setSubject('s').setExpirationTime('1h').sign(new Uint8Array(32).fill(7));
    assert.deepEqual(await tokens.verify(t, 'cdp'), { ok: false, reason: 'invalid token' });
  });
  test('an unsigned (alg none) token is refused', async () => {
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const t = `${enc({ alg: 'none', typ: 'JWT' })}.${enc({ iss: 'browserd', sub: 's', ch: 'cdp', exp: Math.floor(Date.now() / 1000) + 3600 })}.`;
    assert.deepEqual(await tokens.verify(t, 'cdp'), { ok: false, reason: 'invalid token' });
  });
});

describe('SessionTokens key', () => {
  test('is created once and kept: a second load on the same db verifies tokens of the first', async () => {
    const keyBefore = Buffer.from(await signingKey()).toString('hex');
    const second = await SessionTokens.load(store.db);
    const t1 = await tokens.sign({ sessionId: 'a', channel: 'cdp', readonly: false });
    const t2 = await second.sign({ sessionId: 'b', channel: 'bidi', readonly: false });
    assert.equal((await second.verify(t1, 'cdp')).ok, true);
    assert.equal((await tokens.verify(t2, 'bidi')).ok, true);
    assert.equal(Buffer.from(await signingKey()).toString('hex'), keyBefore);
    const rows = await store.db.selectFrom('settings').selectAll().where('key', '=', 'jwt_signing_key').execute();
    assert.equal(rows.length, 1);
    assert.equal(Buffer.from(rows[0]!.value, 'base64').length, 32);
  });
  test('survives closing and reopening the store file (a restarted node accepts old URLs)', async () => {
    const t = await tokens.sign({ sessionId: 'persist', channel: 'live', readonly: false });
    const other = await openStore({ kind: 'sqlite', file });
    try {
      const reloaded = await SessionTokens.load(other.db);
      const r = await reloaded.verify(t, 'live');
      assert.ok(r.ok);
      assert.equal(r.claims.sessionId, 'persist');
    } finally {
      await other.close();
    }
  });
  test('another store has another key', async () => {
    const otherFile = path.join(dir, 'other.sqlite');
    const other = await openStore({ kind: 'sqlite', file: otherFile });
    try {
      const foreign = await SessionTokens.load(other.db);
      const t = await foreign.sign({ sessionId: 's', channel: 'cdp', readonly: false });
      assert.deepEqual(await tokens.verify(t, 'cdp'), { ok: false, reason: 'invalid token' });
    } finally {
      await other.close();
    }
  });
});
