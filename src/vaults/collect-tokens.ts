import crypto from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { Db } from '../store/database.js';
import type { KeyEncryptionKey } from './kek.js';

/** What a collection link or an OAuth `state` is for. */
export type CollectPurpose = 'vault-collect' | 'vault-oauth';

export interface CollectClaims {
  /** The collection session (vault_items.action_id). */
  sessionId: string;
  itemId: string;
  purpose: CollectPurpose;
}

const ISSUER = 'browserd-vaults';
const SETTING = 'vault_token_key';
const CONTEXT = 'browserd/vault-token-key';

export class VaultKeyMismatch extends Error {}

/**
 * Signs the short-lived tokens of collection links (HS256, jose) and derives PKCE
 * verifiers. Its key is random, stored in the store only wrapped by the KEK: the store
 * alone cannot forge a link, and a KEK that does not match the store is found at start-up
 * (the unwrap fails) instead of at the first item.
 */
export class CollectTokens {
  private constructor(private readonly key: Buffer) {}

  static async load(db: Db, kek: KeyEncryptionKey): Promise<CollectTokens> {
    const read = () => db.selectFrom('settings').select('value').where('key', '=', SETTING).executeTakeFirst();
    let row = await read();
    if (!row) {
      const fresh = crypto.randomBytes(32);
      const wrapped = await kek.wrap(fresh, CONTEXT);
      fresh.fill(0);
      const value = JSON.stringify({ kek_id: kek.id, wrapped: wrapped.toString('base64') });
      // Two nodes may race here; whichever insert wins, both read the same key back.
      await db.insertInto('settings').values({ key: SETTING, value }).onConflict((oc) => oc.column('key').doNothing()).execute();
      row = await read();
    }
    const stored = JSON.parse(row!.value) as { kek_id: string; wrapped: string };
    try {
      return new CollectTokens(await kek.unwrap(Buffer.from(stored.wrapped, 'base64'), CONTEXT));
    } catch {
      throw new VaultKeyMismatch(
        `the vault key-encryption key (${kek.id}) is not the one this store's vaults were set up with (${stored.kek_id}): ` +
          'set BROWSERD_VAULT_KEK (or restore <data dir>/vault.key) to that key; every node of a cluster needs the same one',
      );
    }
  }

  async sign(c: CollectClaims, expiresAtMs: number): Promise<string> {
    return new SignJWT({ pur: c.purpose, item: c.itemId })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(c.sessionId)
      .setIssuedAt()
      .setExpirationTime(Math.floor(expiresAtMs / 1000))
      .sign(this.key);
  }

  /** The claims of a valid, unexpired token for `purpose`, or why not. Never throws. */
  async verify(token: string | null | undefined, purpose: CollectPurpose): Promise<{ ok: true; claims: CollectClaims } | { ok: false; reason: string }> {
    if (!token) return { ok: false, reason: 'missing token' };
    try {
      const { payload } = await jwtVerify(token, this.key, { issuer: ISSUER, algorithms: ['HS256'] });
      if (payload.pur !== purpose || typeof payload.sub !== 'string' || typeof payload.item !== 'string') return { ok: false, reason: 'invalid token' };
      return { ok: true, claims: { sessionId: payload.sub, itemId: payload.item, purpose } };
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) return { ok: false, reason: 'this link has expired' };
      return { ok: false, reason: 'invalid token' };
    }
  }

  /** RFC 7636 code verifier of one authorization session: derived, never stored. */
  pkceVerifier(sessionId: string): string {
    return crypto.createHmac('sha256', this.key).update(`pkce:${sessionId}`).digest('base64url');
  }
}

export function pkceChallenge(verifier: string): string {
  return crypto.createHash('sha256').update(verifier).digest('base64url');
}
