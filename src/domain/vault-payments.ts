/**
 * Payment operations as a state machine on `single_use_card` items (the cards a wallet
 * issues through `prepare_checkout`), and the deletion rules of the contract that follow
 * from it. Pure: no I/O, exhaustively unit-tested.
 *
 *   prepare_checkout ──> creating ──provider answered──> active ──sync: captured──> completed
 *                           │                             │  └──cancel / sync──> cancelled | expired
 *                           │                             └─(fill)
 *                           ├──provider refused──> (card removed, nothing was created)
 *                           └──answer lost / unknown──> recovery_required ──recover──> active | completed
 *                                                                          │            | cancelled | expired
 *                                                                          └──recover: provider has none──> failed
 *
 * Unresolved: creating, active, recovery_required (money may be reserved or moving).
 * Resolved: completed, cancelled, expired, failed.
 */
export const CARD_STATUSES = ['creating', 'active', 'recovery_required', 'completed', 'cancelled', 'expired', 'failed'] as const;
export type CardStatus = (typeof CARD_STATUSES)[number];

const UNRESOLVED: ReadonlySet<CardStatus> = new Set(['creating', 'active', 'recovery_required']);

export function isResolved(status: CardStatus): boolean {
  return !UNRESOLVED.has(status);
}

/** Checkout statuses of the provider protocol (docs/vaults.md, "Link provider protocol"). */
export const PROVIDER_CHECKOUT_STATUSES = ['authorized', 'captured', 'cancelled', 'expired'] as const;
export type ProviderCheckoutStatus = (typeof PROVIDER_CHECKOUT_STATUSES)[number];

export function cardStatusFromProvider(s: ProviderCheckoutStatus): CardStatus {
  switch (s) {
    case 'authorized':
      return 'active';
    case 'captured':
      return 'completed';
    case 'cancelled':
      return 'cancelled';
    case 'expired':
      return 'expired';
  }
}

/** A wallet's card, as the deletion rules see it. */
export interface PaymentCard {
  key: string;
  status: CardStatus;
  /** The provider's authorization id, null when the checkout create response never arrived. */
  authorizationId: string | null;
}

export interface DeletionRefusal {
  /** The 409 code. */
  code: string;
  message: string;
  /** The cards that block it, one detail each. */
  blocking: PaymentCard[];
}

/** A card in recovery_required whose checkout create response returned no authorization id (contract rule 2). */
export function isAbandonable(c: PaymentCard): boolean {
  return c.status === 'recovery_required' && c.authorizationId === null;
}

/**
 * Deleting one card (rules 1 and 2): unresolved payments block it, except a
 * recovery_required card without an authorization id, which the caller may abandon.
 */
export function cardDeletionRefusal(c: PaymentCard): DeletionRefusal | null {
  if (isResolved(c.status) || isAbandonable(c)) return null;
  if (c.status === 'recovery_required') {
    return {
      code: 'payment_recovery_required',
      message: `card "${c.key}" has a checkout in recovery at the provider (authorization ${c.authorizationId}); run the recover operation first`,
      blocking: [c],
    };
  }
  return {
    code: 'payment_unresolved',
    message: `card "${c.key}" has an unresolved payment (status ${c.status}); cancel it or sync it until it is resolved`,
    blocking: [c],
  };
}

/**
 * Deleting a wallet (rules 1 and 3) or a vault (rule 3): any unresolved card blocks it,
 * recovery_required ones included: only deleting such a card directly abandons it.
 */
export function containerDeletionRefusal(what: 'wallet' | 'vault', name: string, cards: PaymentCard[]): DeletionRefusal | null {
  const unresolved = cards.filter((c) => !isResolved(c.status));
  if (!unresolved.length) return null;
  const inRecovery = unresolved.filter((c) => c.status === 'recovery_required');
  if (inRecovery.length) {
    return {
      code: `${what}_has_payments_in_recovery`,
      message: `${what} "${name}" has ${inRecovery.length} card(s) in recovery_required; recover them, or abandon one by deleting that card itself (which does not prove no payment occurred)`,
      blocking: unresolved,
    };
  }
  return {
    code: `${what}_has_unresolved_payments`,
    message: `${what} "${name}" has ${unresolved.length} card(s) with unresolved payments; cancel or sync them until they are resolved`,
    blocking: unresolved,
  };
}

/** Operations a card offers in each status. */
export function cardOperations(status: CardStatus): ('fill' | 'sync' | 'cancel' | 'recover')[] {
  if (status === 'active') return ['fill', 'sync', 'cancel'];
  if (status === 'recovery_required') return ['recover'];
  return [];
}
