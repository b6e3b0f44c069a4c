import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { itemContext, openJson, openSecret, sealJson, sealSecret } from '../../src/vaults/envelope.js';
import { gcmOpen, gcmSeal, KEY_FILE_NAME, loadLocalKek, LocalKeyEncryptionKey, type KeyEncryptionKey } from '../../src/vaults/kek.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-kek-'));
  dirs.push(d);
  return d;
}

const kek = new LocalKeyEncryptionKey(crypto.randomBytes(32));
const SECRET = 'correct horse battery staple';

describe('AES-256-GCM envelope', () => {
  test('a sealed value opens with the same KEK and context, and holds no plaintext', async () => {
    const s = await sealSecret(kek, itemContext('item1'), Buffer.from(SECRET));
    assert.equal((await openSecret(kek, itemContext('item1'), s)).toString(), SECRET);
    const stored = JSON.stringify(s);
    assert.ok(!stored.includes(SECRET));
    assert.ok(!Buffer.from(s.ciphertext, 'base64').includes(Buffer.from(SECRET)));
    assert.equal(s.kekId, kek.id);
    // format byte, 12-byte IV, 32-byte key, 16-byte tag
    assert.equal(Buffer.from(s.wrappedKey, 'base64').length, 1 + 12 + 32 + 16);
  });

  test('each seal draws a fresh data key and IV', async () => {
    const a = await sealSecret(kek, itemContext('i'), Buffer.from(SECRET));
    const b = await sealSecret(kek, itemContext('i'), Buffer.from(SECRET));
    assert.notEqual(a.wrappedKey, b.wrappedKey);
    assert.notEqual(a.ciphertext, b.ciphertext);
  });

  test('a ciphertext moved to another item does not open (both layers are bound to the item)', async () => {
    const s = await sealSecret(kek, itemContext('item1'), Buffer.from(SECRET));
    await assert.rejects(openSecret(kek, itemContext('item2'), s));
  });

  test('another KEK does not open it, and says which key sealed it', async () => {
    const s = await sealSecret(kek, itemContext('item1'), Buffer.from(SECRET));
    const other = new LocalKeyEncryptionKey(crypto.randomBytes(32));
    await assert.rejects(openSecret(other, itemContext('item1'), s), new RegExp(kek.id));
    await assert.rejects(openSecret(other, itemContext('item1'), { ...s, kekId: other.id }));
  });

  test('any flipped bit of the ciphertext or the wrapped key is detected', async () => {
    const s = await sealSecret(kek, itemContext('x'), Buffer.from(SECRET));
    for (const field of ['ciphertext', 'wrappedKey'] as const) {
      const raw = Buffer.from(s[field], 'base64');
      for (const at of [1, 13, raw.length - 1]) {
        const t = Buffer.from(raw);
        t[at]! ^= 0x01;
        await assert.rejects(openSecret(kek, itemContext('x'), { ...s, [field]: t.toString('base64') }), `${field}[${at}]`);
      }
    }
  });

  test('JSON round trip', async () => {
    const v = { values: { password: SECRET, otp: { secret: 'JBSWY3DPEHPK3PXP', algorithm: 'SHA1', digits: 6, period: 30 } } };
    assert.deepEqual(await openJson(kek, itemContext('j'), await sealJson(kek, itemContext('j'), v)), v);
  });

  test('the KEK interface is all the envelope needs (an external KMS fits)', async () => {
    const calls: string[] = [];
    const kms: KeyEncryptionKey = {
      id: 'kms:test',
      async wrap(k, ctx) {
        calls.push(`wrap ${ctx}`);
        return kek.wrap(k, ctx);
      },
      async unwrap(w, ctx) {
        calls.push(`unwrap ${ctx}`);
        return kek.unwrap(w, ctx);
      },
    };
    const s = await sealJson(kms, itemContext('k'), { a: 1 });
    assert.equal(s.kekId, 'kms:test');
    assert.deepEqual(await openJson(kms, itemContext('k'), s), { a: 1 });
    assert.deepEqual(calls, ['wrap browserd/vault-item/k/data-key', 'unwrap browserd/vault-item/k/data-key']);
  });

  test('gcm: a short or unknown-format value is refused', () => {
    const key = crypto.randomBytes(32);
    assert.throws(() => gcmOpen(key, Buffer.alloc(10), Buffer.alloc(0)));
    const sealed = gcmSeal(key, Buffer.from('x'), Buffer.alloc(0));
    sealed[0] = 9;
    assert.throws(() => gcmOpen(key, sealed, Buffer.alloc(0)), /format/);
  });
});

describe('the local key-encryption key', () => {
  test('first start creates <data dir>/vault.key with mode 0600; the next start reads the same key', () => {
    const dir = tempDir();
    const first = loadLocalKek({ dataDir: dir });
    assert.equal(first.source, 'file');
    assert.equal(first.created, true);
    const file = path.join(dir, KEY_FILE_NAME);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64').length, 32);
    const again = loadLocalKek({ dataDir: dir });
    assert.equal(again.created, false);
    assert.equal(again.kek.id, first.kek.id);
  });

  test('a configured key wins and no file is written', () => {
    const dir = tempDir();
    const key = crypto.randomBytes(32);
    const r = loadLocalKek({ dataDir: dir, configured: key });
    assert.equal(r.source, 'env');
    assert.equal(r.kek.id, new LocalKeyEncryptionKey(key).id);
    assert.equal(fs.existsSync(path.join(dir, KEY_FILE_NAME)), false);
  });

  test('a key file others can read is refused; a malformed one too', () => {
    const dir = tempDir();
    loadLocalKek({ dataDir: dir });
    fs.chmodSync(path.join(dir, KEY_FILE_NAME), 0o644);
    assert.throws(() => loadLocalKek({ dataDir: dir }), /chmod 600/);
    const dir2 = tempDir();
    fs.writeFileSync(path.join(dir2, KEY_FILE_NAME), 'c2hvcnQ=\n', { mode: 0o600 });
    assert.throws(() => loadLocalKek({ dataDir: dir2 }), /32 bytes/);
  });

  test('the key id does not reveal the key', () => {
    const key = crypto.randomBytes(32);
    const id = new LocalKeyEncryptionKey(key).id;
    assert.match(id, /^local:[0-9a-f]{16}$/);
    assert.ok(!id.includes(key.toString('hex').slice(0, 8)));
  });
});
