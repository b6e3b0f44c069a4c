import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CARD_STATUSES,
  PROVIDER_CHECKOUT_STATUSES,
  cardDeletionRefusal,
  cardOperations,
  cardStatusFromProvider,
  containerDeletionRefusal,
  isAbandonable,
  isResolved,
  type CardStatus,
  type PaymentCard,
} from '../../src/domain/vault-payments.js';

const card = (status: CardStatus, authorizationId: string | null = 'auth_1', key = `c-${status}`): PaymentCard => ({ key, status, authorizationId });

describe('resolved and unresolved', () => {
  const expected: Record<CardStatus, boolean> = {
    creating: false,
    active: false,
    recovery_required: false,
    completed: true,
    cancelled: true,
    expired: true,
    failed: true,
  };
  for (const s of CARD_STATUSES) test(s, () => assert.equal(isResolved(s), expected[s]));
});

describe('provider checkout status -> card status', () => {
  const expected = { authorized: 'active', captured: 'completed', cancelled: 'cancelled', expired: 'expired' } as const;
  for (const s of PROVIDER_CHECKOUT_STATUSES) test(s, () => assert.equal(cardStatusFromProvider(s), expected[s]));
});

describe('operations per card status', () => {
  test('active: fill, sync, cancel; recovery_required: recover; resolved and creating: none', () => {
    assert.deepEqual(cardOperations('active'), ['fill', 'sync', 'cancel']);
    assert.deepEqual(cardOperations('recovery_required'), ['recover']);
    for (const s of ['creating', 'completed', 'cancelled', 'expired', 'failed'] as const) assert.deepEqual(cardOperations(s), [], s);
  });
});

describe('deleting a card (contract rules 1 and 2)', () => {
  test('resolved cards may be deleted', () => {
    for (const s of ['completed', 'cancelled', 'expired', 'failed'] as const) assert.equal(cardDeletionRefusal(card(s)), null, s);
  });
  test('rule 1: an unresolved payment blocks it (payment_unresolved)', () => {
    for (const s of ['creating', 'active'] as const) {
      const r = cardDeletionRefusal(card(s));
      assert.equal(r?.code, 'payment_unresolved', s);
      assert.deepEqual(r?.blocking, [card(s)]);
    }
  });
  test('rule 2: recovery_required without an authorization id may be abandoned by deleting the card', () => {
    const c = card('recovery_required', null);
    assert.equal(isAbandonable(c), true);
    assert.equal(cardDeletionRefusal(c), null);
  });
  test('recovery_required with an authorization id stays blocked (payment_recovery_required)', () => {
    const c = card('recovery_required', 'auth_9');
    assert.equal(isAbandonable(c), false);
    assert.equal(cardDeletionRefusal(c)?.code, 'payment_recovery_required');
  });
});

describe('deleting a wallet or a vault (rules 1 and 3)', () => {
  for (const what of ['wallet', 'vault'] as const) {
    test(`${what}: no cards, or only resolved ones: allowed`, () => {
      assert.equal(containerDeletionRefusal(what, 'w', []), null);
      assert.equal(containerDeletionRefusal(what, 'w', [card('completed'), card('failed', null)]), null);
    });
    test(`${what}: an unresolved child card blocks it, naming only the unresolved ones`, () => {
      const r = containerDeletionRefusal(what, 'w', [card('completed'), card('active')]);
      assert.equal(r?.code, `${what}_has_unresolved_payments`);
      assert.deepEqual(r?.blocking.map((c) => c.key), ['c-active']);
    });
    test(`${what}: rule 3: a recovery_required card without authorization id still blocks it (only deleting the card abandons it)`, () => {
      const r = containerDeletionRefusal(what, 'w', [card('recovery_required', null), card('active')]);
      assert.equal(r?.code, `${what}_has_payments_in_recovery`);
      assert.deepEqual(r?.blocking.map((c) => c.key).sort(), ['c-active', 'c-recovery_required']);
      assert.match(r!.message, /does not prove no payment occurred/, 'rule 4 is said where abandoning is suggested');
    });
  }
});
