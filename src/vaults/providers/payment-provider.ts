import type { PaymentProviderName } from '../../domain/vault-item-types.js';
import type { ProviderCheckoutStatus } from '../../domain/vault-payments.js';

/** OAuth tokens of a wallet: secret, kept only inside the wallet's encrypted values. */
export interface OAuthTokens {
  access_token: string;
  refresh_token: string | null;
  /** ISO time the access token expires; null when the provider did not say. */
  expires_at: string | null;
}

/** A payment method as the provider describes it (mapped to the contract's `payment_methods` shape). */
export interface ProviderPaymentMethod {
  id: string;
  type: string;
  is_default: boolean;
  brand: string;
  label: string;
  last4: string;
  single_use_card: { eligible: boolean; reasons: string[] };
}

export interface CheckoutRequest {
  payment_method_id: string;
  amount: { value: number; currency: string };
  merchant?: { name?: string; url?: string };
}

/** A checkout (a single-use card authorized for one payment). `card` is secret. */
export interface ProviderCheckout {
  /** The authorization id. */
  id: string;
  status: ProviderCheckoutStatus;
  expires_at: string | null;
  card: { number: string; exp_month: string; exp_year: string; cvc: string; brand: string; last4: string } | null;
}

/** The provider answered and refused: nothing happened there. */
export class ProviderRefused extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** No usable answer (network, timeout, 5xx, malformed body): whether anything happened is unknown. */
export class ProviderUnavailable extends Error {}

/** The wallet's grant is gone (invalid_grant, or refresh impossible): the owner must authorize again. */
export class ProviderAuthorizationLost extends Error {}

/** The access token was refused (401); refreshing it may help. */
export class ProviderTokenRejected extends Error {}

/**
 * What browserd needs from a wallet's payment provider: an OAuth authorization (code flow
 * with PKCE, the client held by browserd) and checkouts that issue single-use cards.
 * `createCheckout` must be idempotent on `idempotencyKey`, so a checkout whose answer was
 * lost can be found again (`findCheckout`).
 */
export interface PaymentProvider {
  readonly name: PaymentProviderName;
  authorizationUrl(p: { state: string; codeChallenge: string; redirectUri: string }): string;
  exchangeCode(p: { code: string; codeVerifier: string; redirectUri: string }): Promise<OAuthTokens>;
  refresh(refreshToken: string): Promise<OAuthTokens>;
  revoke(token: string): Promise<void>;
  paymentMethods(accessToken: string): Promise<ProviderPaymentMethod[]>;
  createCheckout(accessToken: string, req: CheckoutRequest, idempotencyKey: string): Promise<ProviderCheckout>;
  findCheckout(accessToken: string, idempotencyKey: string): Promise<ProviderCheckout | null>;
  getCheckout(accessToken: string, id: string): Promise<ProviderCheckout>;
  cancelCheckout(accessToken: string, id: string): Promise<ProviderCheckout>;
}
