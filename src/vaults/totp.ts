import crypto from 'node:crypto';

/** RFC 6238 parameters of one TOTP secret. */
export interface TotpSecret {
  /** The shared secret, base32 (RFC 4648), upper case, no padding. */
  secret: string;
  algorithm: 'SHA1' | 'SHA256' | 'SHA512';
  digits: number;
  period: number;
}

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 (case, spaces, dashes and padding ignored); null when it is not base32. */
export function base32Decode(text: string): Buffer | null {
  const clean = text.replace(/[\s-]/g, '').replace(/=+$/, '').toUpperCase();
  if (!clean || !/^[A-Z2-7]+$/.test(clean)) return null;
  const out: number[] = [];
  let bits = 0;
  let acc = 0;
  for (const ch of clean) {
    acc = (acc << 5) | B32.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >>> bits) & 0xff);
    }
  }
  return Buffer.from(out);
}

export function base32Encode(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let acc = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += B32[(acc >>> bits) & 31];
    }
  }
  if (bits > 0) out += B32[(acc << (5 - bits)) & 31];
  return out;
}

/** RFC 4226 HOTP: dynamic truncation of HMAC(key, counter) to `digits` decimal digits. */
export function hotp(key: Buffer, counter: number, digits = 6, algorithm: TotpSecret['algorithm'] = 'SHA1'): string {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = crypto.createHmac(algorithm.toLowerCase(), key).update(msg).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const bin = ((mac[offset]! & 0x7f) << 24) | (mac[offset + 1]! << 16) | (mac[offset + 2]! << 8) | mac[offset + 3]!;
  return String(bin % 10 ** digits).padStart(digits, '0');
}

/** RFC 6238 TOTP at `timeMs` (T0 = 0). */
export function totpAt(key: Buffer, timeMs: number, opts: { digits?: number; period?: number; algorithm?: TotpSecret['algorithm'] } = {}): string {
  const period = opts.period ?? 30;
  return hotp(key, Math.floor(timeMs / 1000 / period), opts.digits ?? 6, opts.algorithm ?? 'SHA1');
}

/** The current code of a stored TOTP secret. */
export function totpCode(s: TotpSecret, timeMs = Date.now()): string {
  const key = base32Decode(s.secret);
  if (!key) throw new Error('the stored TOTP secret is not base32');
  try {
    return totpAt(key, timeMs, s);
  } finally {
    key.fill(0);
  }
}

const ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const;

/**
 * Reads what a person pastes into a TOTP field: a base32 secret, or an `otpauth://totp/…`
 * URI (what QR codes carry) with secret and optional algorithm, digits and period.
 * Returns a reason on failure; the reason never quotes the input.
 */
export function parseTotpInput(input: string): { ok: true; value: TotpSecret } | { ok: false; reason: string } {
  const text = input.trim();
  let secret = text;
  let algorithm: TotpSecret['algorithm'] = 'SHA1';
  let digits = 6;
  let period = 30;
  if (/^otpauth:/i.test(text)) {
    let u: URL;
    try {
      u = new URL(text);
    } catch {
      return { ok: false, reason: 'is not a valid otpauth:// URI' };
    }
    if (u.host.toLowerCase() !== 'totp') return { ok: false, reason: 'must be an otpauth://totp/ URI (HOTP is not supported)' };
    secret = u.searchParams.get('secret') ?? '';
    const alg = (u.searchParams.get('algorithm') ?? 'SHA1').toUpperCase();
    if (!(ALGORITHMS as readonly string[]).includes(alg)) return { ok: false, reason: 'algorithm must be SHA1, SHA256 or SHA512' };
    algorithm = alg as TotpSecret['algorithm'];
    const d = u.searchParams.get('digits');
    if (d !== null) {
      if (!/^(6|7|8)$/.test(d)) return { ok: false, reason: 'digits must be 6, 7 or 8' };
      digits = Number(d);
    }
    const p = u.searchParams.get('period');
    if (p !== null) {
      if (!/^\d{1,3}$/.test(p) || Number(p) < 1) return { ok: false, reason: 'period must be 1 to 999 seconds' };
      period = Number(p);
    }
  }
  const key = base32Decode(secret);
  if (!key) return { ok: false, reason: 'must be a base32 secret (A-Z, 2-7) or an otpauth://totp/ URI' };
  // RFC 4226 asks for at least 128 bits; real sites hand out 80-bit secrets, so 80 is the floor.
  if (key.length < 10) return { ok: false, reason: 'the secret is too short (at least 16 base32 characters)' };
  if (key.length > 128) return { ok: false, reason: 'the secret is too long' };
  const normalized = base32Encode(key);
  key.fill(0);
  return { ok: true, value: { secret: normalized, algorithm, digits, period } };
}
