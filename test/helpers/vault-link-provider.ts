import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local server that speaks the `link` provider protocol of docs/vaults.md ("Link provider
 * protocol"): OAuth 2.0 authorization code with PKCE (client authenticated with HTTP Basic),
 * payment methods, and idempotent checkouts that issue single-use cards. Knobs make it
 * misbehave the ways the service must survive: a lost answer, a refusal, a 5xx, expired or
 * revoked tokens, a declined consent.
 */
export interface FakeCheckout {
  id: string;
  status: 'authorized' | 'captured' | 'cancelled' | 'expired';
  idempotency_key: string;
  payment_method_id: string;
  amount: number;
  currency: string;
  expires_at: string;
  card: { number: string; exp_month: string; exp_year: string; cvc: string; brand: string };
}

export interface FakeLink {
  url: string;
  clientId: string;
  clientSecret: string;
  config: { url: string; clientId: string; clientSecret: string };
  env: Record<string, string>;
  /** Method and path of every request, in order. */
  calls: string[];
  checkouts: Map<string, FakeCheckout>;
  /**
   * Every secret the provider handed out that is long enough to search for (tokens, card
   * numbers, the client secret): none may appear in browserd's store, logs or answers. CVCs
   * (3 digits) would match any timestamp; `cvcs()` has them for exact-field checks.
   */
  secrets(): string[];
  cvcs(): string[];
  knobs: {
    /** The consent page approves at once (redirects straight back) instead of showing Allow / Deny. */
    autoApprove: boolean;
    /** The consent is declined (redirect with error=access_denied). */
    deny: boolean;
    /** What the next checkout create does: create and answer, create and drop the connection, refuse, or 503 without creating. */
    nextCheckout: 'ok' | 'drop' | 'refuse' | 'unavailable';
    /** Access token lifetime in seconds. */
    accessTtl: number;
  };
  /** The merchant charged the card. */
  capture(id: string): void;
  /** Every access token stops working (refresh still works). */
  expireAccessTokens(): void;
  /** Every grant is revoked (access and refresh tokens). */
  revokeAll(): void;
  close(): Promise<void>;
}

function luhnComplete(prefix: string): string {
  let sum = 0;
  const digits = `${prefix}0`;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return `${prefix}${(10 - (sum % 10)) % 10}`;
}

const rnd = (n: number) => crypto.randomBytes(n).toString('base64url');
const digits = (n: number) => Array.from(crypto.randomBytes(n), (b) => String(b % 10)).join('');

export async function startFakeLink(): Promise<FakeLink> {
  const clientId = `client_${rnd(6)}`;
  const clientSecret = `secret_${rnd(18)}`;
  const codes = new Map<string, { challenge: string; redirectUri: string }>();
  const access = new Map<string, { expiresAt: number; grant: string }>();
  const refresh = new Map<string, string>(); // refresh token -> grant
  const pending = new Map<string, URL>(); // consent page id -> authorize request
  const checkouts = new Map<string, FakeCheckout>();
  const byIdem = new Map<string, string>();
  const handedOut: string[] = [];
  const cvcs: string[] = [];
  const calls: string[] = [];
  const knobs: FakeLink['knobs'] = { autoApprove: true, deny: false, nextCheckout: 'ok', accessTtl: 3600 };
  const methods = [
    { id: 'pm_visa', type: 'card', is_default: true, brand: 'visa', label: 'Personal Visa', last4: '4242', single_use_card: { eligible: true, reasons: [] as string[] } },
    { id: 'pm_bank', type: 'bank_account', is_default: false, brand: 'bank', label: 'Checking', last4: '6789', single_use_card: { eligible: false, reasons: ['bank accounts cannot issue single-use cards'] } },
  ];

  const issueTokens = (grant: string) => {
    const a = `at_${rnd(24)}`;
    const r = `rt_${rnd(24)}`;
    access.set(a, { expiresAt: Date.now() + knobs.accessTtl * 1000, grant });
    refresh.set(r, grant);
    handedOut.push(a, r);
    return { access_token: a, token_type: 'Bearer', expires_in: knobs.accessTtl, refresh_token: r, scope: 'payment_methods:read checkouts:write' };
  };

  const view = (c: FakeCheckout) => ({
    id: c.id,
    status: c.status,
    payment_method_id: c.payment_method_id,
    amount: c.amount,
    currency: c.currency,
    expires_at: c.expires_at,
    ...(c.status === 'authorized' ? { card: { ...c.card, last4: c.card.number.slice(-4) } } : {}),
  });

  const server = http.createServer(async (req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    calls.push(`${req.method} ${u.pathname}`);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString();
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const redirect = (to: string) => {
      res.writeHead(302, { location: to });
      res.end();
    };
    const bearer = () => {
      const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
      const t = m ? access.get(m[1]!) : undefined;
      if (!t || t.expiresAt < Date.now()) {
        json(401, { error: { code: 'invalid_token', message: 'the access token is invalid or expired' } });
        return false;
      }
      return true;
    };
    const clientOk = () => {
      const m = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
      const [id, secret] = m ? Buffer.from(m[1]!, 'base64').toString().split(':').map(decodeURIComponent) : [];
      if (id !== clientId || secret !== clientSecret) {
        json(401, { error: 'invalid_client', error_description: 'client authentication failed' });
        return false;
      }
      return true;
    };

    // ---- OAuth ----
    if (req.method === 'GET' && u.pathname === '/oauth/authorize') {
      const p = u.searchParams;
      if (p.get('client_id') !== clientId || p.get('response_type') !== 'code' || p.get('code_challenge_method') !== 'S256' || !p.get('code_challenge') || !p.get('redirect_uri')) {
        return json(400, { error: 'invalid_request', error_description: 'bad authorization request' });
      }
      if (knobs.autoApprove) return decide(u, !knobs.deny);
      const id = rnd(8);
      pending.set(id, u);
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end(`<!doctype html><title>Link: authorize browserd</title><h1>Allow browserd to use your Link wallet?</h1>
        <a id="allow" href="/oauth/decide?id=${id}&allow=1">Allow</a> <a id="deny" href="/oauth/decide?id=${id}&allow=0">Deny</a>`);
    }
    if (req.method === 'GET' && u.pathname === '/oauth/decide') {
      const a = pending.get(u.searchParams.get('id') ?? '');
      if (!a) return json(400, { error: 'invalid_request' });
      pending.delete(u.searchParams.get('id')!);
      return decide(a, u.searchParams.get('allow') === '1' && !knobs.deny);
    }
    function decide(a: URL, allow: boolean) {
      const to = new URL(a.searchParams.get('redirect_uri')!);
      to.searchParams.set('state', a.searchParams.get('state') ?? '');
      if (!allow) {
        to.searchParams.set('error', 'access_denied');
        return redirect(to.toString());
      }
      const code = `code_${rnd(16)}`;
      codes.set(code, { challenge: a.searchParams.get('code_challenge')!, redirectUri: a.searchParams.get('redirect_uri')! });
      to.searchParams.set('code', code);
      return redirect(to.toString());
    }
    if (req.method === 'POST' && u.pathname === '/oauth/token') {
      if (!clientOk()) return;
      const f = new URLSearchParams(raw);
      if (f.get('grant_type') === 'authorization_code') {
        const c = codes.get(f.get('code') ?? '');
        codes.delete(f.get('code') ?? '');
        const verifier = f.get('code_verifier') ?? '';
        const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
        if (!c || c.redirectUri !== f.get('redirect_uri') || c.challenge !== challenge) return json(400, { error: 'invalid_grant', error_description: 'bad code, redirect_uri or code_verifier' });
        return json(200, issueTokens(rnd(6)));
      }
      if (f.get('grant_type') === 'refresh_token') {
        const grant = refresh.get(f.get('refresh_token') ?? '');
        if (!grant) return json(400, { error: 'invalid_grant', error_description: 'refresh token revoked or unknown' });
        refresh.delete(f.get('refresh_token')!); // rotated
        return json(200, issueTokens(grant));
      }
      return json(400, { error: 'unsupported_grant_type' });
    }
    if (req.method === 'POST' && u.pathname === '/oauth/revoke') {
      if (!clientOk()) return;
      const t = new URLSearchParams(raw).get('token') ?? '';
      const grant = refresh.get(t) ?? access.get(t)?.grant;
      for (const [k, g] of refresh) if (g === grant) refresh.delete(k);
      for (const [k, v] of access) if (v.grant === grant) access.delete(k);
      return json(200, {});
    }

    // ---- API ----
    if (req.method === 'GET' && u.pathname === '/v1/payment_methods') {
      if (!bearer()) return;
      return json(200, { data: methods });
    }
    if (req.method === 'POST' && u.pathname === '/v1/checkouts') {
      if (!bearer()) return;
      const key = req.headers['idempotency-key'];
      if (typeof key !== 'string' || !key) return json(400, { error: { code: 'idempotency_key_required', message: 'Idempotency-Key is required' } });
      const again = byIdem.get(key);
      if (again) return json(200, view(checkouts.get(again)!));
      const body = JSON.parse(raw || '{}') as { payment_method_id?: string; amount?: { value: number; currency: string } };
      const pm = methods.find((m) => m.id === body.payment_method_id);
      if (!pm || !pm.single_use_card.eligible) return json(400, { error: { code: 'payment_method_ineligible', message: 'this payment method cannot issue single-use cards' } });
      const mode = knobs.nextCheckout;
      knobs.nextCheckout = 'ok';
      if (mode === 'refuse') return json(402, { error: { code: 'card_declined', message: 'the issuer declined the authorization' } });
      if (mode === 'unavailable') return json(503, { error: { code: 'unavailable', message: 'try later' } });
      const number = luhnComplete(`4000${digits(11)}`);
      const c: FakeCheckout = {
        id: `auth_${rnd(10)}`,
        status: 'authorized',
        idempotency_key: key,
        payment_method_id: pm.id,
        amount: body.amount?.value ?? 0,
        currency: body.amount?.currency ?? 'usd',
        expires_at: new Date(Date.now() + 3600_000).toISOString(),
        card: { number, exp_month: '12', exp_year: String(new Date().getUTCFullYear() + 2), cvc: digits(3), brand: 'visa' },
      };
      checkouts.set(c.id, c);
      byIdem.set(key, c.id);
      handedOut.push(number);
      cvcs.push(c.card.cvc);
      if (mode === 'drop') return req.socket.destroy(); // created, but the answer never arrives
      return json(201, view(c));
    }
    if (req.method === 'GET' && u.pathname === '/v1/checkouts') {
      if (!bearer()) return;
      const id = byIdem.get(u.searchParams.get('idempotency_key') ?? '');
      return json(200, { data: id ? [view(checkouts.get(id)!)] : [] });
    }
    const m = /^\/v1\/checkouts\/([^/]+)(\/cancel)?$/.exec(u.pathname);
    if (m) {
      if (!bearer()) return;
      const c = checkouts.get(decodeURIComponent(m[1]!));
      if (!c) return json(404, { error: { code: 'not_found', message: 'no such checkout' } });
      if (req.method === 'GET' && !m[2]) return json(200, view(c));
      if (req.method === 'POST' && m[2]) {
        if (c.status === 'captured') return json(409, { error: { code: 'already_captured', message: 'the payment was already captured' } });
        if (c.status === 'authorized') c.status = 'cancelled';
        return json(200, view(c));
      }
    }
    json(404, { error: { code: 'not_found', message: `no route ${req.method} ${u.pathname}` } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    clientId,
    clientSecret,
    config: { url, clientId, clientSecret },
    env: { BROWSERD_LINK_URL: url, BROWSERD_LINK_CLIENT_ID: clientId, BROWSERD_LINK_CLIENT_SECRET: clientSecret },
    calls,
    checkouts,
    secrets: () => [...handedOut, clientSecret],
    cvcs: () => [...cvcs],
    knobs,
    capture(id) {
      const c = checkouts.get(id);
      if (c && c.status === 'authorized') c.status = 'captured';
    },
    expireAccessTokens() {
      for (const v of access.values()) v.expiresAt = 0;
    },
    revokeAll() {
      access.clear();
      refresh.clear();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
