import type { LinkProviderConfig } from '../../config.js';
import { PROVIDER_CHECKOUT_STATUSES, type ProviderCheckoutStatus } from '../../domain/vault-payments.js';
import {
  ProviderAuthorizationLost,
  ProviderRefused,
  ProviderTokenRejected,
  ProviderUnavailable,
  type CheckoutRequest,
  type OAuthTokens,
  type PaymentProvider,
  type ProviderCheckout,
  type ProviderPaymentMethod,
} from './payment-provider.js';

const TIMEOUT_MS = 15_000;
export const LINK_SCOPES = 'payment_methods:read checkouts:write';

type Json = Record<string, unknown>;

const str = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/**
 * The `link` wallet provider over HTTP: the protocol in docs/vaults.md ("Link provider
 * protocol"). Answers are checked for shape; an error message never carries a response
 * body (which could echo a card), only the provider's error code and its short message.
 */
export class LinkProvider implements PaymentProvider {
  readonly name = 'link' as const;

  constructor(private readonly cfg: LinkProviderConfig) {}

  authorizationUrl(p: { state: string; codeChallenge: string; redirectUri: string }): string {
    const u = new URL(`${this.cfg.url}/oauth/authorize`);
    u.searchParams.set('response_type', 'code');
    u.searchParams.set('client_id', this.cfg.clientId);
    u.searchParams.set('redirect_uri', p.redirectUri);
    u.searchParams.set('scope', LINK_SCOPES);
    u.searchParams.set('state', p.state);
    u.searchParams.set('code_challenge', p.codeChallenge);
    u.searchParams.set('code_challenge_method', 'S256');
    return u.toString();
  }

  async exchangeCode(p: { code: string; codeVerifier: string; redirectUri: string }): Promise<OAuthTokens> {
    return this.token({ grant_type: 'authorization_code', code: p.code, redirect_uri: p.redirectUri, code_verifier: p.codeVerifier });
  }

  async refresh(refreshToken: string): Promise<OAuthTokens> {
    return this.token({ grant_type: 'refresh_token', refresh_token: refreshToken });
  }

  async revoke(token: string): Promise<void> {
    await this.request('POST', '/oauth/revoke', { form: { token }, basic: true });
  }

  async paymentMethods(accessToken: string): Promise<ProviderPaymentMethod[]> {
    const r = await this.api('GET', '/v1/payment_methods', accessToken);
    const data = (r.body as Json | null)?.data;
    if (!Array.isArray(data)) throw new ProviderUnavailable('the provider answered payment_methods without a data array');
    return data.map((m: Json) => {
      const suc = (m.single_use_card ?? {}) as Json;
      if (!str(m.id)) throw new ProviderUnavailable('the provider answered a payment method without an id');
      return {
        id: m.id,
        type: str(m.type) ? m.type : 'card',
        is_default: m.is_default === true,
        brand: typeof m.brand === 'string' ? m.brand : '',
        label: typeof m.label === 'string' ? m.label : '',
        last4: typeof m.last4 === 'string' ? m.last4 : '',
        single_use_card: { eligible: suc.eligible === true, reasons: Array.isArray(suc.reasons) ? suc.reasons.filter((x): x is string => typeof x === 'string') : [] },
      };
    });
  }

  async createCheckout(accessToken: string, req: CheckoutRequest, idempotencyKey: string): Promise<ProviderCheckout> {
    const r = await this.api('POST', '/v1/checkouts', accessToken, { json: req, headers: { 'idempotency-key': idempotencyKey } });
    return checkout(r.body);
  }

  async findCheckout(accessToken: string, idempotencyKey: string): Promise<ProviderCheckout | null> {
    const r = await this.api('GET', `/v1/checkouts?idempotency_key=${encodeURIComponent(idempotencyKey)}`, accessToken);
    const data = (r.body as Json | null)?.data;
    if (!Array.isArray(data)) throw new ProviderUnavailable('the provider answered the checkout lookup without a data array');
    return data.length ? checkout(data[0]) : null;
  }

  async getCheckout(accessToken: string, id: string): Promise<ProviderCheckout> {
    return checkout((await this.api('GET', `/v1/checkouts/${encodeURIComponent(id)}`, accessToken)).body);
  }

  async cancelCheckout(accessToken: string, id: string): Promise<ProviderCheckout> {
    return checkout((await this.api('POST', `/v1/checkouts/${encodeURIComponent(id)}/cancel`, accessToken, { json: {} })).body);
  }

  // ---- wire ---------------------------------------------------------------------------

  private async token(form: Record<string, string>): Promise<OAuthTokens> {
    let r;
    try {
      r = await this.request('POST', '/oauth/token', { form, basic: true });
    } catch (err) {
      if (err instanceof ProviderRefused && (err.code === 'invalid_grant' || err.status === 400 || err.status === 401)) {
        throw new ProviderAuthorizationLost(`the provider refused the grant (${err.code})`);
      }
      throw err;
    }
    const b = (r.body ?? {}) as Json;
    if (!str(b.access_token)) throw new ProviderUnavailable('the provider answered the token request without an access_token');
    const expiresIn = typeof b.expires_in === 'number' && b.expires_in > 0 ? b.expires_in : null;
    return {
      access_token: b.access_token,
      refresh_token: str(b.refresh_token) ? b.refresh_token : null,
      expires_at: expiresIn ? new Date(Date.now() + expiresIn * 1000).toISOString() : null,
    };
  }

  private async api(method: string, path: string, accessToken: string, opts: { json?: unknown; headers?: Record<string, string> } = {}) {
    return this.request(method, path, { ...opts, bearer: accessToken });
  }

  private async request(
    method: string,
    path: string,
    opts: { json?: unknown; form?: Record<string, string>; headers?: Record<string, string>; bearer?: string; basic?: boolean },
  ): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    let body: string | undefined;
    if (opts.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(opts.form).toString();
    }
    if (opts.bearer) headers.authorization = `Bearer ${opts.bearer}`;
    if (opts.basic) headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(this.cfg.clientId)}:${encodeURIComponent(this.cfg.clientSecret)}`).toString('base64')}`;
    let res: Response;
    try {
      res = await fetch(`${this.cfg.url}${path}`, { method, headers, body, redirect: 'error', signal: AbortSignal.timeout(TIMEOUT_MS) });
    } catch (err) {
      throw new ProviderUnavailable(`the provider did not answer ${method} ${path.split('?')[0]} (${(err as Error).name === 'TimeoutError' ? 'timeout' : 'connection failed'})`);
    }
    let text: string;
    try {
      text = await res.text();
    } catch {
      throw new ProviderUnavailable(`the provider's answer to ${method} ${path.split('?')[0]} was cut off`);
    }
    let parsed: unknown = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        if (res.ok) throw new ProviderUnavailable(`the provider answered ${method} ${path.split('?')[0]} with a body that is not JSON`);
      }
    }
    if (res.ok) return { status: res.status, body: parsed };
    if (res.status === 401 && opts.bearer) throw new ProviderTokenRejected('the provider refused the access token');
    if (res.status >= 500 || res.status === 408 || res.status === 429) throw new ProviderUnavailable(`the provider answered ${method} ${path.split('?')[0]} with ${res.status}`);
    const e = (parsed ?? {}) as Json;
    const inner = (typeof e.error === 'object' && e.error !== null ? e.error : {}) as Json;
    const code = str(inner.code) ? inner.code : str(e.error) ? e.error : `http_${res.status}`;
    const msg = str(inner.message) ? inner.message : str(e.error_description) ? e.error_description : `status ${res.status}`;
    throw new ProviderRefused(code.slice(0, 64), msg.replace(/\d{6,}/g, '…').slice(0, 200), res.status);
  }
}

function checkout(raw: unknown): ProviderCheckout {
  const c = (raw ?? {}) as Json;
  if (!str(c.id) || !(PROVIDER_CHECKOUT_STATUSES as readonly unknown[]).includes(c.status)) {
    throw new ProviderUnavailable('the provider answered a checkout without an id or a known status');
  }
  const card = c.card as Json | null | undefined;
  let parsedCard: ProviderCheckout['card'] = null;
  if (card && typeof card === 'object') {
    const number = String(card.number ?? '').replace(/\s/g, '');
    if (!/^\d{12,19}$/.test(number) || !/^\d{1,2}$/.test(String(card.exp_month ?? '')) || !/^\d{2,4}$/.test(String(card.exp_year ?? '')) || !/^\d{3,4}$/.test(String(card.cvc ?? ''))) {
      throw new ProviderUnavailable('the provider answered a checkout whose card is malformed');
    }
    const year = String(card.exp_year);
    parsedCard = {
      number,
      exp_month: String(card.exp_month).padStart(2, '0'),
      exp_year: year.length === 2 ? `20${year}` : year,
      cvc: String(card.cvc),
      brand: typeof card.brand === 'string' ? card.brand : '',
      last4: number.slice(-4),
    };
  }
  return { id: c.id, status: c.status as ProviderCheckoutStatus, expires_at: str(c.expires_at) ? c.expires_at : null, card: parsedCard };
}
