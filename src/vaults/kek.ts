import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The key-encryption key (KEK) that wraps every vault item's data key. It lives outside
 * the database: a 32-byte key from BROWSERD_VAULT_KEK or a key file in the data dir. An
 * external KMS fits the same interface (wrap = KMS Encrypt, unwrap = KMS Decrypt, the
 * context as encryption context), so nothing else changes when one is plugged in.
 */
export interface KeyEncryptionKey {
  /** Names the key (not secret), stored next to each wrapped data key. */
  readonly id: string;
  /** Encrypts a data key; `context` is bound to the result and must be given again to unwrap. */
  wrap(dataKey: Buffer, context: string): Promise<Buffer>;
  /** Decrypts a wrapped data key; throws when the key, the context or the bytes do not match. */
  unwrap(wrapped: Buffer, context: string): Promise<Buffer>;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
const FORMAT = 1;

/** AES-256-GCM under a local 32-byte key: [format byte][12-byte IV][ciphertext][16-byte tag]. */
export class LocalKeyEncryptionKey implements KeyEncryptionKey {
  readonly id: string;
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('a key-encryption key is 32 bytes');
    this.key = Buffer.from(key);
    // A one-way name for the key: which key wrapped a data key, without revealing it.
    this.id = `local:${crypto.createHmac('sha256', this.key).update('browserd vault kek id').digest('hex').slice(0, 16)}`;
  }

  async wrap(dataKey: Buffer, context: string): Promise<Buffer> {
    return gcmSeal(this.key, dataKey, Buffer.from(context, 'utf8'));
  }

  async unwrap(wrapped: Buffer, context: string): Promise<Buffer> {
    return gcmOpen(this.key, wrapped, Buffer.from(context, 'utf8'));
  }
}

/** AES-256-GCM encryption with a fresh random IV; `aad` is authenticated, not stored. */
export function gcmSeal(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.from([FORMAT]), iv, body, cipher.getAuthTag()]);
}

export function gcmOpen(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < 1 + IV_BYTES + TAG_BYTES || sealed[0] !== FORMAT) throw new Error('not a sealed value of a known format');
  const iv = sealed.subarray(1, 1 + IV_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const body = sealed.subarray(1 + IV_BYTES, sealed.length - TAG_BYTES);
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(body), decipher.final()]);
}

export const KEY_FILE_NAME = 'vault.key';

/**
 * The local KEK: BROWSERD_VAULT_KEK when configured, else `<data dir>/vault.key`, created
 * with mode 0600 at the first start (base64 of 32 random bytes, one line: the same text
 * BROWSERD_VAULT_KEK takes). A key file readable by others is refused, not used.
 */
export function loadLocalKek(opts: { configured?: Buffer; dataDir: string }): { kek: LocalKeyEncryptionKey; source: 'env' | 'file'; created: boolean; file: string | null } {
  if (opts.configured) return { kek: new LocalKeyEncryptionKey(opts.configured), source: 'env', created: false, file: null };
  const file = path.join(opts.dataDir, KEY_FILE_NAME);
  let created = false;
  try {
    // 'wx': never overwrite a key another process created at the same moment.
    fs.writeFileSync(file, `${crypto.randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    created = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const st = fs.statSync(file);
  if ((st.mode & 0o077) !== 0) {
    throw new Error(`the vault key file ${file} is readable or writable by others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
  }
  const key = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`the vault key file ${file} does not hold base64 of 32 bytes`);
  return { kek: new LocalKeyEncryptionKey(key), source: 'file', created, file };
}
