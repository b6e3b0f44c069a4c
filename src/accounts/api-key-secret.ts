import crypto from 'node:crypto';

/** A new API key: 32 random bytes, base64url, with a recognisable prefix. Shown once, stored only as a hash. */
export function generateApiKey(): string {
  return `bd_${crypto.randomBytes(32).toString('base64url')}`;
}

/**
 * Keys are long random strings, so a fast one-way hash is enough (no password-style
 * stretching needed) and lets every request find its key by an indexed lookup.
 */
export function hashApiKey(key: string): string {
  return crypto.createHash('sha256').update(key, 'utf8').digest('hex');
}

/** What may be shown of a key after creation: enough to recognise it, never enough to use it. */
export function keyPrefix(key: string): string {
  return key.slice(0, 8);
}
