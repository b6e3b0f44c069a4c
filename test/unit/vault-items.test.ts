import assert from 'node:assert/strict';
import { Ajv } from 'ajv';
import { describe, test } from 'node:test';
import {
  ITEM_TYPES,
  actionNameOf,
  cardBrand,
  checkFieldValue,
  checkValues,
  expansionsOf,
  fieldsOf,
  fillText,
  fillableFieldNames,
  formStatus,
  needsCollection,
  normalizeOrigin,
  normalizeSpec,
  operationsAvailable,
  operationsOfType,
  valuesKeptAcrossSpecChange,
  type FieldDef,
  type ItemSpec,
} from '../../src/domain/vault-item-types.js';
import { ItemPutRequest, OperationRequest, checkOperationFields } from '../../src/domain/vault-request.js';
import { problemsFromAjv } from '../../src/http/validation.js';
import { specProblems } from '../../src/vaults/spec-validation.js';

const spec = (type: Parameters<typeof normalizeSpec>[0], raw?: Record<string, unknown>): ItemSpec => {
  const r = normalizeSpec(type, raw);
  assert.deepEqual(r.problems, []);
  return r.spec;
};

describe('seven item types', () => {
  test('the list', () => assert.deepEqual([...ITEM_TYPES], ['credential', 'card', 'identity', 'api_key', 'secure_note', 'wallet', 'single_use_card']));
});

describe('specs', () => {
  test('credential: default fields username (text, not sensitive) and password (sensitive)', () => {
    assert.deepEqual(spec('credential'), {
      fields: [
        { name: 'username', kind: 'text', sensitive: false, required: true },
        { name: 'password', kind: 'password', sensitive: true, required: true },
      ],
    });
  });
  test('credential: sensitive defaults by kind; label and required kept; origins normalized and deduplicated', () => {
    const s = spec('credential', {
      fields: [{ name: 'email', kind: 'email', label: 'E-mail' }, { name: 'code', kind: 'totp', required: false }, { name: 'pin', kind: 'text', sensitive: true }],
      origins: ['https://Example.com/', 'https://example.com', 'http://127.0.0.1:8080'],
    });
    assert.deepEqual(s, {
      fields: [
        { name: 'email', kind: 'email', sensitive: false, required: true, label: 'E-mail' },
        { name: 'code', kind: 'totp', sensitive: true, required: false },
        { name: 'pin', kind: 'text', sensitive: true, required: true },
      ],
      origins: ['https://example.com', 'http://127.0.0.1:8080'],
    });
  });
  test('credential: a password or totp field cannot be non-sensitive; names are unique (case-insensitively)', () => {
    const r = normalizeSpec('credential', { fields: [{ name: 'p', kind: 'password', sensitive: false }, { name: 'o', kind: 'totp', sensitive: false }, { name: 'P', kind: 'text' }] });
    assert.deepEqual(r.problems.map((p) => p.field), ['spec.fields[0].sensitive', 'spec.fields[1].sensitive', 'spec.fields[2].name']);
  });
  test('origins must be bare http(s) origins', () => {
    for (const bad of ['ftp://x.com', 'https://x.com/login', 'https://u:p@x.com', 'https://x.com/?a=1', 'x.com']) assert.equal(normalizeOrigin(bad), null, bad);
    const r = normalizeSpec('card', { origins: ['https://ok.test', 'https://x.com/path'] });
    assert.deepEqual(r.problems, [{ field: 'spec.origins[1]', message: 'must be an http(s) origin: scheme://host[:port], no path, query or credentials' }]);
  });
  test('wallet: the canonical spec spells out the contract shape', () => {
    const s = spec('wallet', { provider: 'link' });
    assert.deepEqual(s, { provider: 'link', authorization: { method: 'oauth', client: { type: 'service_managed' } } });
    assert.deepEqual(spec('wallet', { provider: 'link', authorization: { method: 'oauth', client: { type: 'service_managed' } } }), s);
  });
  test('single_use_card cannot be created directly', () => {
    assert.match(normalizeSpec('single_use_card', {}).problems[0]!.message, /prepare_checkout/);
  });
  test('equal specs compare equal as JSON whatever the key order given', () => {
    const a = spec('credential', { origins: ['https://a.test'], fields: [{ kind: 'text', name: 'u' }] });
    const b = spec('credential', { fields: [{ name: 'u', kind: 'text' }], origins: ['https://a.test/'] });
    assert.equal(JSON.stringify(a), JSON.stringify(b));
  });
});

describe('spec schemas (the PUT body and PATCH)', () => {
  const ajv = new Ajv({ allErrors: true, strict: false, strictNumbers: true });
  const put = ajv.compile(ItemPutRequest);
  const problems = (body: unknown) => {
    if (put(body)) return [];
    return problemsFromAjv((put.errors ?? []).filter((e) => e.keyword !== 'if'), 'body').map((p) => `${p.field}: ${p.message}`);
  };
  test('a valid body of each creatable type', () => {
    for (const b of [
      { type: 'credential' },
      { type: 'credential', spec: { fields: [{ name: 'u', kind: 'email' }] } },
      { type: 'card', spec: { origins: ['https://shop.test'] } },
      { type: 'identity' },
      { type: 'api_key', spec: { service: 'openai' } },
      { type: 'secure_note', spec: { title: 'recovery codes' } },
      { type: 'wallet', spec: { provider: 'link' } },
    ]) assert.deepEqual(problems(b), [], JSON.stringify(b));
  });
  test('the spec is checked against its type, field by field', () => {
    assert.deepEqual(problems({ type: 'credential', spec: { fields: [{ name: 'u', kind: 'pin', extra: 1 }] } }), [
      'spec.fields[0].extra: is not a known field',
      'spec.fields[0].kind: must be one of text, email, password, totp',
    ]);
    assert.deepEqual(problems({ type: 'wallet', spec: { provider: 'stripe' } }), ['spec.provider: must be one of link']);
    assert.deepEqual(problems({ type: 'card', spec: { fields: [] } }), ['spec.fields: is not a known field']);
    assert.deepEqual(problems({ type: 'single_use_card' }), ['type: must be one of credential, card, identity, api_key, secure_note, wallet']);
    assert.deepEqual(problems({ spec: {} }), ['type: is required']);
  });
  test('PATCH uses the same per-type schema', () => {
    assert.deepEqual(specProblems('api_key', { service: '' }), [{ field: 'spec.service', message: 'must NOT have fewer than 1 characters' }]);
    assert.deepEqual(specProblems('secure_note', { title: 't' }), []);
  });
  test('operations: the fields each type requires, and fields it does not use are named', () => {
    const op = ajv.compile(OperationRequest);
    assert.equal(op({ type: 'fill', browser_id: 'b' }), false);
    assert.ok(op.errors!.some((e) => e.keyword === 'required' && e.params.missingProperty === 'fields'));
    assert.equal(op({ type: 'prepare_checkout', payment_method_id: 'pm', amount: { value: 100, currency: 'usd' } }), true);
    assert.deepEqual(checkOperationFields({ type: 'collect', browser_id: 'b' }), [{ field: 'browser_id', message: 'is not used by the collect operation' }]);
    assert.deepEqual(checkOperationFields({ type: 'prepare_checkout', payment_method_id: 'p', amount: { value: 1, currency: 'usd' }, merchant: { url: 'javascript:x' } }), [
      { field: 'merchant.url', message: 'must be an absolute http(s) URL' },
    ]);
  });
});

describe('fields', () => {
  test('card fields: number and cvc sensitive, expiry and holder not', () => {
    const f = fieldsOf('card', spec('card'));
    assert.deepEqual(f.filter((x) => x.sensitive).map((x) => x.name), ['number', 'cvc']);
    assert.deepEqual(fillableFieldNames('card', spec('card')), ['cardholder_name', 'number', 'exp_month', 'exp_year', 'cvc', 'expiry']);
  });
  test('identity values are all sensitive; wallet has no fields', () => {
    assert.ok(fieldsOf('identity', spec('identity')).every((x) => x.sensitive));
    assert.deepEqual(fieldsOf('wallet', spec('wallet', { provider: 'link' })), []);
  });
  test('derived fill values: card expiry MM/YY, identity full name, TOTP as its current code', () => {
    assert.equal(fillText('card', 'expiry', { exp_month: '03', exp_year: '2031' }, () => ''), '03/31');
    assert.equal(fillText('identity', 'full_name', { given_name: 'Ada', family_name: 'Lovelace' }, () => ''), 'Ada Lovelace');
    assert.equal(fillText('credential', 'otp', { otp: { secret: 'X', algorithm: 'SHA1', digits: 6, period: 30 } }, () => '123456'), '123456');
    assert.equal(fillText('credential', 'missing', {}, () => ''), null);
  });
});

describe('values from the collection form', () => {
  const cred = spec('credential', { fields: [{ name: 'email', kind: 'email' }, { name: 'password', kind: 'password' }, { name: 'otp', kind: 'totp', required: false }] });
  test('checked and normalized; problems name the field and never quote the value', () => {
    const r = checkValues('credential', cred, { email: 'not-an-email-SECRETX', password: '', otp: 'bad-SECRETX', nope: 'x' });
    assert.deepEqual(r.problems.map((p) => p.field), ['values.nope', 'values.email', 'values.password', 'values.otp']);
    for (const p of r.problems) assert.ok(!p.message.includes('SECRETX'), p.message);
  });
  test('passwords keep their spaces; text is trimmed; TOTP is parsed', () => {
    const r = checkValues('credential', cred, { email: ' a@b.co ', password: ' pw with spaces ', otp: 'JBSWY3DPEHPK3PXP' });
    assert.deepEqual(r.problems, []);
    assert.deepEqual(r.values, { email: 'a@b.co', password: ' pw with spaces ', otp: { secret: 'JBSWY3DPEHPK3PXP', algorithm: 'SHA1', digits: 6, period: 30 } });
  });
  test('an empty field keeps the value the item already holds', () => {
    const r = checkValues('credential', cred, { email: 'new@b.co' }, ['email', 'password']);
    assert.deepEqual(r.problems, []);
    assert.deepEqual(r.kept, ['password']);
    assert.deepEqual(Object.keys(r.values), ['email']);
  });
  test('card: Luhn, month, year, cvc; expired cards are refused', () => {
    const c = spec('card');
    const ok = checkValues('card', c, { number: '4242 4242 4242 4242', exp_month: '3', exp_year: '35', cvc: '123' });
    assert.deepEqual(ok.problems, []);
    assert.deepEqual(ok.values, { number: '4242424242424242', exp_month: '03', exp_year: '2035', cvc: '123' });
    const bad = checkValues('card', c, { number: '4242424242424241', exp_month: '13', exp_year: '1999', cvc: '12' });
    assert.deepEqual(bad.problems.map((p) => p.field), ['values.number', 'values.exp_month', 'values.exp_year', 'values.cvc']);
    const old = checkValues('card', c, { number: '4242424242424242', exp_month: '01', exp_year: '2001', cvc: '123' });
    assert.deepEqual(old.problems, [{ field: 'values.exp_year', message: 'the card has expired' }]);
  });
  test('identity needs at least one value', () => {
    assert.deepEqual(checkValues('identity', spec('identity'), {}).problems, [{ field: 'values', message: 'at least one field needs a value' }]);
  });
  test('single-line fields refuse control characters; notes take newlines', () => {
    const f: FieldDef = { name: 'n', kind: 'text', label: 'n', sensitive: false, required: true };
    assert.equal(checkFieldValue(f, 'a\nb').ok, false);
    assert.equal(checkFieldValue({ ...f, kind: 'note' }, 'a\nb').ok, true);
  });
  test('card brands', () => {
    assert.equal(cardBrand('4242424242424242'), 'visa');
    assert.equal(cardBrand('5555555555554444'), 'mastercard');
    assert.equal(cardBrand('378282246310005'), 'amex');
    assert.equal(cardBrand('6011111111111117'), 'discover');
  });
});

describe('spec changes never reveal a value', () => {
  const F = (name: string, kind: FieldDef['kind'], sensitive: boolean): FieldDef => ({ name, kind, label: name, sensitive, required: true });
  test('kept: same kind and at least as sensitive; dropped: removed, kind changed, or made readable', () => {
    const before = [F('u', 'text', false), F('p', 'password', true), F('pin', 'text', true), F('x', 'text', false)];
    const after = [F('u', 'text', true), F('p', 'text', false), F('pin', 'text', false)];
    assert.deepEqual(valuesKeptAcrossSpecChange(before, after, ['u', 'p', 'pin', 'x']), ['u']);
  });
});

describe('statuses, operations, expansions, actions', () => {
  test('form types: pending_values until every required field has a value', () => {
    const c = spec('credential');
    assert.equal(formStatus('credential', c, ['username']), 'pending_values');
    assert.equal(formStatus('credential', c, ['username', 'password']), 'ready');
    assert.equal(formStatus('identity', spec('identity'), []), 'pending_values');
    assert.equal(formStatus('identity', spec('identity'), ['email']), 'ready');
  });
  test('operations by type and status', () => {
    assert.deepEqual(operationsAvailable('credential', 'pending_values'), ['collect']);
    assert.deepEqual(operationsAvailable('card', 'ready'), ['collect', 'fill']);
    assert.deepEqual(operationsAvailable('wallet', 'pending_authorization'), ['authorize']);
    assert.deepEqual(operationsAvailable('wallet', 'active'), ['authorize', 'prepare_checkout']);
    assert.deepEqual(operationsAvailable('single_use_card', 'recovery_required'), ['recover']);
    assert.deepEqual(operationsOfType('secure_note'), ['collect', 'fill']);
  });
  test('wallets expand payment_methods; actions: collect for form types, link_oauth for wallets', () => {
    assert.deepEqual(expansionsOf('wallet'), ['payment_methods']);
    assert.deepEqual(expansionsOf('card'), []);
    assert.equal(actionNameOf('api_key'), 'collect');
    assert.equal(actionNameOf('wallet'), 'link_oauth');
    assert.equal(actionNameOf('single_use_card'), null);
  });
  test('the single-item GET opens a collection session only for items waiting for a person', () => {
    assert.equal(needsCollection('credential', 'pending_values'), true);
    assert.equal(needsCollection('credential', 'ready'), false);
    assert.equal(needsCollection('wallet', 'pending_authorization'), true);
    assert.equal(needsCollection('wallet', 'active'), false);
    assert.equal(needsCollection('single_use_card', 'active'), false);
  });
});

describe('the item view', () => {
  const base = {
    id: 'i1',
    vaultId: 'v1',
    projectId: 'p1',
    key: 'k',
    type: 'credential' as const,
    spec: spec('credential'),
    state: { status: 'ready' as const, status_reason: 'r' },
    publicValues: { username: 'ada', password: 'leaked-by-a-bug' },
    valueFields: ['username', 'password'],
    version: 3,
    parentId: null,
    idempotencyKey: 'idem-secret-ish',
    expiresAt: null,
    actionId: 'a1',
    actionExpiresAt: new Date(2000).toISOString(),
    createdAt: 'c',
    updatedAt: 'u',
  };
  test('shows a value only for a field the spec marks non-sensitive, whatever the public column holds', async () => {
    const { itemView } = await import('../../src/vaults/item-view.js');
    const v = itemView(base, { nowMs: 1000, actionUrl: 'http://x/vault-collect?jwt=t' }) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.deepEqual(v.state.fields.map((f: Record<string, unknown>) => [f.name, f.value]), [['username', 'ada'], ['password', undefined]]);
    assert.ok(!JSON.stringify(v).includes('leaked-by-a-bug'));
    assert.ok(!JSON.stringify(v).includes('idem-secret-ish'));
    assert.deepEqual(v.action, { name: 'collect', url: 'http://x/vault-collect?jwt=t' });
    assert.equal(v.expires_at, new Date(2000).toISOString());
  });
  test('an expired collection session is neither shown as action nor as expires_at', async () => {
    const { itemView } = await import('../../src/vaults/item-view.js');
    const v = itemView(base, { nowMs: 5000, actionUrl: 'http://x' });
    assert.equal(v.action, undefined);
    assert.equal(v.expires_at, undefined);
  });
});
