import crypto from 'node:crypto';
import { gcmOpen, gcmSeal, type KeyEncryptionKey } from './kek.js';

/**
 * Envelope encryption of one item's secret values. Each write draws a fresh 256-bit data
 * key, encrypts the values with it (AES-256-GCM) and stores the data key only wrapped by
 * the KEK. Both layers are bound to the item (`context`), so a ciphertext moved to another
 * item's row does not decrypt. Deleting the row destroys the only copy of the data key.
 */
export interface SealedSecret {
  kekId: string;
  /** base64: the data key wrapped by the KEK. */
  wrappedKey: string;
  /** base64: [format][IV][AES-256-GCM ciphertext][tag] under the data key. */
  ciphertext: string;
}

/** The context both layers are bound to: the item's id. */
export function itemContext(itemId: string): string {
  return `browserd/vault-item/${itemId}`;
}

export async function sealSecret(kek: KeyEncryptionKey, context: string, plaintext: Buffer): Promise<SealedSecret> {
  const dataKey = crypto.randomBytes(32);
  try {
    const ciphertext = gcmSeal(dataKey, plaintext, Buffer.from(`${context}/values`, 'utf8'));
    const wrapped = await kek.wrap(dataKey, `${context}/data-key`);
    return { kekId: kek.id, wrappedKey: wrapped.toString('base64'), ciphertext: ciphertext.toString('base64') };
  } finally {
    dataKey.fill(0);
  }
}

export async function openSecret(kek: KeyEncryptionKey, context: string, s: SealedSecret): Promise<Buffer> {
  if (s.kekId !== kek.id) throw new Error(`the item was sealed under key ${s.kekId}, not the configured ${kek.id}`);
  const dataKey = await kek.unwrap(Buffer.from(s.wrappedKey, 'base64'), `${context}/data-key`);
  try {
    return gcmOpen(dataKey, Buffer.from(s.ciphertext, 'base64'), Buffer.from(`${context}/values`, 'utf8'));
  } finally {
    dataKey.fill(0);
  }
}

/** Seals a JSON value; the intermediate buffer is wiped. */
export async function sealJson(kek: KeyEncryptionKey, context: string, value: unknown): Promise<SealedSecret> {
  const buf = Buffer.from(JSON.stringify(value), 'utf8');
  try {
    return await sealSecret(kek, context, buf);
  } finally {
    buf.fill(0);
  }
}

export async function openJson<T>(kek: KeyEncryptionKey, context: string, s: SealedSecret): Promise<T> {
  const buf = await openSecret(kek, context, s);
  try {
    return JSON.parse(buf.toString('utf8')) as T;
  } finally {
    buf.fill(0);
  }
}
