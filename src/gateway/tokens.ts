import crypto from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { Db } from '../store/database.js';

export type Channel = 'cdp' | 'bidi' | 'live';

export interface SessionClaims {
  sessionId: string;
  channel: Channel;
  readonly: boolean;
  /** When the token was signed, in seconds since the epoch (set by verify). */
  issuedAt?: number;
}

/**
 * How long a connection URL stays valid. A session has no fixed end (it lives while it
 * is used), so the token outlives any realistic session; deletion, not expiry, is what
 * normally ends it (the gateway checks the session on every connect). Every GET of a
 * session hands out freshly signed URLs.
 */
export const TOKEN_TTL_SECONDS = 30 * 24 * 3600;

const ISSUER = 'browserd';

/**
 * Signs and checks the JWTs in connection URLs (HS256). The key is kept in the store so
 * that every node of a cluster, and a restarted node, accepts the same URLs.
 */
export class SessionTokens {
  private constructor(private readonly key: Uint8Array) {}

  static async load(db: Db): Promise<SessionTokens> {
    const existing = await db.selectFrom('settings').select('value').where('key', '=', 'jwt_signing_key').executeTakeFirst();
    if (existing) return new SessionTokens(Buffer.from(existing.value, 'base64'));
    const fresh = crypto.randomBytes(32).toString('base64');
    // Two nodes may race here; whichever insert wins, both read back the same key.
    await db.insertInto('settings').values({ key: 'jwt_signing_key', value: fresh }).onConflict((oc) => oc.column('key').doNothing()).execute();
    const row = await db.selectFrom('settings').select('value').where('key', '=', 'jwt_signing_key').executeTakeFirstOrThrow();
    return new SessionTokens(Buffer.from(row.value, 'base64'));
  }

  async sign(claims: SessionClaims, ttlSeconds = TOKEN_TTL_SECONDS): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT({ ch: claims.channel, ...(claims.readonly ? { ro: true } : {}) })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(claims.sessionId)
      .setIssuedAt(now)
      .setExpirationTime(now + ttlSeconds);
    return jwt.sign(this.key);
  }

  /** The claims of a valid token for `channel`, or a reason why not. Never throws. */
  async verify(token: string | null | undefined, channel: Channel): Promise<{ ok: true; claims: SessionClaims } | { ok: false; reason: string }> {
    if (!token) return { ok: false, reason: 'missing jwt' };
    try {
      const { payload } = await jwtVerify(token, this.key, { issuer: ISSUER, algorithms: ['HS256'] });
      if (typeof payload.sub !== 'string' || !payload.sub) return { ok: false, reason: 'token names no session' };
      if (payload.ch !== channel) return { ok: false, reason: `token is for the ${String(payload.ch)} channel, not ${channel}` };
      return { ok: true, claims: { sessionId: payload.sub, channel, readonly: payload.ro === true, issuedAt: typeof payload.iat === 'number' ? payload.iat : 0 } };
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) return { ok: false, reason: 'token expired' };
      return { ok: false, reason: 'invalid token' };
    }
  }
}
