import crypto from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A 24-character lowercase id like Kernel's (`htzv5orfit78e1m2biiifpbv`); the first character is a letter. */
export function newId(): string {
  const bytes = crypto.randomBytes(24);
  let out = ALPHABET[bytes[0]! % 26]!;
  for (let i = 1; i < 24; i++) out += ALPHABET[bytes[i]! % 36]!;
  return out;
}

export function nowIso(): string {
  return new Date().toISOString();
}
