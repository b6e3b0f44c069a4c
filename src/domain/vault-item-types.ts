import { Type, type Static } from '@sinclair/typebox';
import { parseTotpInput, type TotpSecret } from '../vaults/totp.js';
import { cardOperations, type CardStatus } from './vault-payments.js';
import { StringEnum } from './schema-helpers.js';

/**
 * The seven item types, their specs, fields, statuses, operations and value rules.
 * Pure: the service and the routes ask this module what an item of a type is.
 */
export const ITEM_TYPES = ['credential', 'card', 'identity', 'api_key', 'secure_note', 'wallet', 'single_use_card'] as const;
export type ItemType = (typeof ITEM_TYPES)[number];

/** Types a caller may create with PUT (single_use_card comes from a wallet's prepare_checkout). */
export const CREATABLE_TYPES = ['credential', 'card', 'identity', 'api_key', 'secure_note', 'wallet'] as const;

/** Types whose values a person enters in the collection page. */
export const FORM_TYPES: readonly ItemType[] = ['credential', 'card', 'identity', 'api_key', 'secure_note'];

export const PAYMENT_PROVIDERS = ['link'] as const;
export type PaymentProviderName = (typeof PAYMENT_PROVIDERS)[number];

/** Kinds a credential field may have. */
export const CREDENTIAL_FIELD_KINDS = ['text', 'email', 'password', 'totp'] as const;
/** Every field kind (the fixed fields of the other types add some). */
export type FieldKind = (typeof CREDENTIAL_FIELD_KINDS)[number] | 'tel' | 'card_number' | 'exp_month' | 'exp_year' | 'cvc' | 'secret' | 'note';

export const FIELD_NAME_PATTERN = '^[A-Za-z][A-Za-z0-9_.-]{0,63}$';

// ---- specs ------------------------------------------------------------------------------

export const Origins = Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), {
  minItems: 1,
  maxItems: 20,
  description: 'Origins (scheme://host[:port]) whose pages fill may type this item into; omitted: any page.',
});

export const CredentialFieldSpec = Type.Object(
  {
    name: Type.String({ pattern: FIELD_NAME_PATTERN, description: 'Field name, used by fill (`fields[].field`).' }),
    kind: StringEnum(CREDENTIAL_FIELD_KINDS),
    sensitive: Type.Optional(Type.Boolean({ description: 'Default: true for password and totp (which cannot be false), false for text and email.' })),
    label: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Shown in the collection form.' })),
    required: Type.Optional(Type.Boolean({ description: 'Default true.' })),
  },
  { additionalProperties: false },
);

export const CredentialSpec = Type.Object(
  {
    fields: Type.Optional(Type.Array(CredentialFieldSpec, { minItems: 1, maxItems: 32, description: 'Default: username (text) and password.' })),
    origins: Type.Optional(Origins),
  },
  { additionalProperties: false },
);
export const CardSpec = Type.Object({ origins: Type.Optional(Origins) }, { additionalProperties: false });
export const IdentitySpec = Type.Object({ origins: Type.Optional(Origins) }, { additionalProperties: false });
export const ApiKeySpec = Type.Object(
  { service: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })), origins: Type.Optional(Origins) },
  { additionalProperties: false },
);
export const SecureNoteSpec = Type.Object(
  { title: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })), origins: Type.Optional(Origins) },
  { additionalProperties: false },
);
export const WalletSpec = Type.Object(
  {
    provider: StringEnum(PAYMENT_PROVIDERS),
    authorization: Type.Optional(
      Type.Object(
        {
          method: StringEnum(['oauth'] as const),
          client: Type.Optional(Type.Object({ type: StringEnum(['service_managed'] as const) }, { additionalProperties: false })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/** Spec schema per creatable type (the PUT body's `spec`). */
export const SPEC_SCHEMAS = {
  credential: CredentialSpec,
  card: CardSpec,
  identity: IdentitySpec,
  api_key: ApiKeySpec,
  secure_note: SecureNoteSpec,
  wallet: WalletSpec,
} as const;

export interface CredentialFieldDef {
  name: string;
  kind: (typeof CREDENTIAL_FIELD_KINDS)[number];
  sensitive: boolean;
  required: boolean;
  label?: string;
}

/** The normalized spec of each type, as stored and returned. */
export type ItemSpec =
  | { fields: CredentialFieldDef[]; origins?: string[] }
  | { origins?: string[] }
  | { service?: string; origins?: string[] }
  | { title?: string; origins?: string[] }
  | WalletNormalizedSpec
  | CardIssuedSpec;

export interface WalletNormalizedSpec {
  provider: PaymentProviderName;
  authorization: { method: 'oauth'; client: { type: 'service_managed' } };
}

/** A single_use_card's spec: what was asked of the provider (set by prepare_checkout). */
export interface CardIssuedSpec {
  provider: PaymentProviderName;
  wallet: { id: string; key: string };
  payment_method_id: string;
  amount: { value: number; currency: string };
  merchant?: { name?: string; url?: string };
}

export interface Problem {
  field: string;
  message: string;
}

/** `https://example.com:8443/` -> `https://example.com:8443`; null when it is not a bare http(s) origin. */
export function normalizeOrigin(raw: string): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return null;
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return null;
  if (u.username || u.password || u.search || u.hash || (u.pathname !== '/' && u.pathname !== '')) return null;
  return u.origin;
}

function normalizeOrigins(origins: string[] | undefined, out: Problem[]): string[] | undefined {
  if (origins === undefined) return undefined;
  const result: string[] = [];
  origins.forEach((o, i) => {
    const n = normalizeOrigin(o);
    if (n === null) out.push({ field: `spec.origins[${i}]`, message: 'must be an http(s) origin: scheme://host[:port], no path, query or credentials' });
    else if (!result.includes(n)) result.push(n);
  });
  return result;
}

const DEFAULT_CREDENTIAL_FIELDS: CredentialFieldDef[] = [
  { name: 'username', kind: 'text', sensitive: false, required: true },
  { name: 'password', kind: 'password', sensitive: true, required: true },
];

/**
 * Applies defaults and the rules a schema cannot express; returns the canonical spec
 * (fixed key order, so equal specs compare equal as JSON) and every problem. The input
 * has passed the type's spec schema.
 */
export function normalizeSpec(type: ItemType, raw: Record<string, unknown> | undefined): { spec: ItemSpec; problems: Problem[] } {
  const problems: Problem[] = [];
  const r = (raw ?? {}) as Record<string, never>;
  const withOrigins = <T extends object>(base: T): T & { origins?: string[] } => {
    const origins = normalizeOrigins(r.origins as string[] | undefined, problems);
    return origins ? { ...base, origins } : base;
  };
  switch (type) {
    case 'credential': {
      const given = (r.fields as Static<typeof CredentialFieldSpec>[] | undefined) ?? null;
      const fields: CredentialFieldDef[] = given
        ? given.map((f, i) => {
            const secretKind = f.kind === 'password' || f.kind === 'totp';
            if (secretKind && f.sensitive === false) problems.push({ field: `spec.fields[${i}].sensitive`, message: `a ${f.kind} field is always sensitive` });
            const d: CredentialFieldDef = { name: f.name, kind: f.kind, sensitive: f.sensitive ?? secretKind, required: f.required ?? true };
            if (f.label !== undefined) d.label = f.label;
            return d;
          })
        : DEFAULT_CREDENTIAL_FIELDS.map((f) => ({ ...f }));
      const seen = new Map<string, number>();
      fields.forEach((f, i) => {
        const lower = f.name.toLowerCase();
        if (seen.has(lower)) problems.push({ field: `spec.fields[${i}].name`, message: `repeats the name of spec.fields[${seen.get(lower)}]` });
        else seen.set(lower, i);
      });
      return { spec: withOrigins({ fields }), problems };
    }
    case 'card':
    case 'identity':
      return { spec: withOrigins({}), problems };
    case 'api_key':
      return { spec: withOrigins(r.service !== undefined ? { service: r.service as string } : {}), problems };
    case 'secure_note':
      return { spec: withOrigins(r.title !== undefined ? { title: r.title as string } : {}), problems };
    case 'wallet': {
      // Every part has one allowed value today; the canonical form spells them out.
      const provider = ((r.provider as string | undefined) ?? 'link') as PaymentProviderName;
      return { spec: { provider, authorization: { method: 'oauth', client: { type: 'service_managed' } } }, problems };
    }
    case 'single_use_card':
      problems.push({ field: 'type', message: "single_use_card items are issued by a wallet's prepare_checkout operation, not created directly" });
      return { spec: {}, problems };
  }
}

// ---- fields -----------------------------------------------------------------------------

export interface FieldDef {
  name: string;
  kind: FieldKind;
  label: string;
  sensitive: boolean;
  required: boolean;
}

const f = (name: string, kind: FieldKind, label: string, sensitive: boolean, required: boolean): FieldDef => ({ name, kind, label, sensitive, required });

const CARD_FIELDS: FieldDef[] = [
  f('cardholder_name', 'text', 'Name on card', false, false),
  f('number', 'card_number', 'Card number', true, true),
  f('exp_month', 'exp_month', 'Expiry month (MM)', false, true),
  f('exp_year', 'exp_year', 'Expiry year (YYYY)', false, true),
  f('cvc', 'cvc', 'Security code (CVC)', true, true),
];
const ISSUED_CARD_FIELDS: FieldDef[] = CARD_FIELDS.filter((x) => x.name !== 'cardholder_name');
// Personal data: every identity value is treated as sensitive (never listed).
const IDENTITY_FIELDS: FieldDef[] = [
  f('given_name', 'text', 'Given name', true, false),
  f('family_name', 'text', 'Family name', true, false),
  f('email', 'email', 'Email', true, false),
  f('phone', 'tel', 'Phone', true, false),
  f('address_line1', 'text', 'Address line 1', true, false),
  f('address_line2', 'text', 'Address line 2', true, false),
  f('city', 'text', 'City', true, false),
  f('region', 'text', 'State / region', true, false),
  f('postal_code', 'text', 'Postal code', true, false),
  f('country', 'text', 'Country', true, false),
];
const API_KEY_FIELDS: FieldDef[] = [f('key_id', 'text', 'Key id (if the service has one)', false, false), f('api_key', 'secret', 'API key', true, true)];
const NOTE_FIELDS: FieldDef[] = [f('note', 'note', 'Note', true, true)];

/** The fields whose values an item holds. Wallets hold OAuth tokens, not fields. */
export function fieldsOf(type: ItemType, spec: ItemSpec): FieldDef[] {
  switch (type) {
    case 'credential':
      return (spec as { fields: CredentialFieldDef[] }).fields.map((d) => ({ name: d.name, kind: d.kind, label: d.label ?? d.name, sensitive: d.sensitive, required: d.required }));
    case 'card':
      return CARD_FIELDS;
    case 'single_use_card':
      return ISSUED_CARD_FIELDS;
    case 'identity':
      return IDENTITY_FIELDS;
    case 'api_key':
      return API_KEY_FIELDS;
    case 'secure_note':
      return NOTE_FIELDS;
    case 'wallet':
      return [];
  }
}

/** Values fill can type that are computed from stored ones. */
const DERIVED: Partial<Record<ItemType, Record<string, string>>> = {
  card: { expiry: 'MM/YY from exp_month and exp_year' },
  single_use_card: { expiry: 'MM/YY from exp_month and exp_year' },
  identity: { full_name: 'given_name and family_name' },
};

/** Field names fill accepts for an item: its fields plus the derived ones. */
export function fillableFieldNames(type: ItemType, spec: ItemSpec): string[] {
  return [...fieldsOf(type, spec).map((x) => x.name), ...Object.keys(DERIVED[type] ?? {})];
}

/** A stored value: text, or a TOTP secret (typed as its current code). */
export type StoredValue = string | TotpSecret;

/**
 * The text fill types for `field`, or null when the item holds no value for it. `now` is
 * for TOTP codes.
 */
export function fillText(type: ItemType, field: string, values: Record<string, StoredValue>, totp: (s: TotpSecret) => string): string | null {
  const v = values[field];
  if (v !== undefined) return typeof v === 'string' ? v : totp(v);
  if (field === 'expiry' && (type === 'card' || type === 'single_use_card')) {
    const m = values.exp_month;
    const y = values.exp_year;
    return typeof m === 'string' && typeof y === 'string' ? `${m}/${y.slice(-2)}` : null;
  }
  if (field === 'full_name' && type === 'identity') {
    const parts = [values.given_name, values.family_name].filter((x): x is string => typeof x === 'string' && x !== '');
    return parts.length ? parts.join(' ') : null;
  }
  return null;
}

// ---- values -----------------------------------------------------------------------------

const MAX_LEN: Partial<Record<FieldKind, number>> = { note: 20_000, secret: 8192, password: 1024 };

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** Card brand from the number's prefix (display only). */
export function cardBrand(number: string): string {
  if (/^4/.test(number)) return 'visa';
  if (/^(5[1-5]|2(2[2-9][1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720))/.test(number)) return 'mastercard';
  if (/^3[47]/.test(number)) return 'amex';
  if (/^(6011|65|64[4-9])/.test(number)) return 'discover';
  if (/^35(2[89]|[3-8])/.test(number)) return 'jcb';
  if (/^3(0[0-5]|[68])/.test(number)) return 'diners';
  if (/^62/.test(number)) return 'unionpay';
  return 'unknown';
}

/** One value checked against its field; the reason never quotes the value. */
export function checkFieldValue(field: FieldDef, raw: string): { ok: true; value: StoredValue } | { ok: false; reason: string } {
  const max = MAX_LEN[field.kind] ?? 1024;
  if (raw.length > max) return { ok: false, reason: `must be at most ${max} characters` };
  const singleLine = field.kind !== 'note';
  // eslint-disable-next-line no-control-regex
  if (singleLine ? /[\u0000-\u001f\u007f]/.test(raw) : /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(raw)) {
    return { ok: false, reason: singleLine ? 'must be one line without control characters' : 'must not contain control characters' };
  }
  const t = raw.trim();
  switch (field.kind) {
    case 'email':
      return /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(t) ? { ok: true, value: t } : { ok: false, reason: 'must be an email address' };
    case 'totp': {
      const p = parseTotpInput(t);
      return p.ok ? { ok: true, value: p.value } : { ok: false, reason: p.reason };
    }
    case 'tel':
      return /^[0-9+()\-.\s]{3,32}$/.test(t) ? { ok: true, value: t } : { ok: false, reason: 'must be a phone number (digits, spaces, + ( ) - .)' };
    case 'card_number': {
      const digits = t.replace(/[\s-]/g, '');
      if (!/^\d{12,19}$/.test(digits)) return { ok: false, reason: 'must be 12 to 19 digits' };
      if (!luhn(digits)) return { ok: false, reason: 'is not a valid card number (checksum)' };
      return { ok: true, value: digits };
    }
    case 'exp_month': {
      if (!/^\d{1,2}$/.test(t) || Number(t) < 1 || Number(t) > 12) return { ok: false, reason: 'must be a month, 1 to 12' };
      return { ok: true, value: String(Number(t)).padStart(2, '0') };
    }
    case 'exp_year': {
      if (!/^(\d{2}|\d{4})$/.test(t)) return { ok: false, reason: 'must be a year (YYYY or YY)' };
      const y = t.length === 2 ? 2000 + Number(t) : Number(t);
      if (y < 2000 || y > 2100) return { ok: false, reason: 'must be a year between 2000 and 2100' };
      return { ok: true, value: String(y) };
    }
    case 'cvc':
      return /^\d{3,4}$/.test(t) ? { ok: true, value: t } : { ok: false, reason: 'must be 3 or 4 digits' };
    case 'password':
    case 'secret':
    case 'note':
      // Kept exactly as entered: leading or trailing spaces can be part of a secret.
      return raw === '' ? { ok: false, reason: 'is required' } : { ok: true, value: raw };
    case 'text':
      return { ok: true, value: t };
  }
}

/**
 * What a person submitted in the collection form, checked field by field. An empty or
 * missing field means "no value", or "keep the current one" when the item already holds a
 * value for it (`existing`: the names of the fields that do). Problems name the field
 * (`values.<name>`), never the value.
 */
export function checkValues(
  type: ItemType,
  spec: ItemSpec,
  input: Record<string, unknown>,
  existing: string[] = [],
): { values: Record<string, StoredValue>; kept: string[]; problems: Problem[] } {
  const fields = fieldsOf(type, spec);
  const problems: Problem[] = [];
  const values: Record<string, StoredValue> = {};
  const kept: string[] = [];
  const known = new Set(fields.map((x) => x.name));
  const had = new Set(existing);
  for (const name of Object.keys(input)) {
    if (!known.has(name)) problems.push({ field: `values.${name}`, message: 'is not a field of this item' });
  }
  for (const field of fields) {
    const raw = input[field.name];
    if (raw !== undefined && raw !== null && typeof raw !== 'string') {
      problems.push({ field: `values.${field.name}`, message: 'must be a string' });
      continue;
    }
    const text = (raw as string | undefined | null) ?? '';
    // Secrets are kept exactly as typed (spaces included); only an empty one is "no value".
    const blank = field.kind === 'password' || field.kind === 'secret' || field.kind === 'note' ? text === '' : text.trim() === '';
    if (blank) {
      if (had.has(field.name)) kept.push(field.name);
      else if (field.required) problems.push({ field: `values.${field.name}`, message: 'is required' });
      continue;
    }
    const c = checkFieldValue(field, text);
    if (c.ok) values[field.name] = c.value;
    else problems.push({ field: `values.${field.name}`, message: c.reason });
  }
  if (type === 'identity' && !problems.length && !Object.keys(values).length && !kept.length) problems.push({ field: 'values', message: 'at least one field needs a value' });
  if (type === 'card' && !problems.length && typeof values.exp_month === 'string' && typeof values.exp_year === 'string') {
    const now = new Date();
    const y = Number(values.exp_year);
    const m = Number(values.exp_month);
    if (y < now.getUTCFullYear() || (y === now.getUTCFullYear() && m < now.getUTCMonth() + 1)) problems.push({ field: 'values.exp_year', message: 'the card has expired' });
  }
  return { values, kept, problems };
}

/**
 * Which stored values survive a spec change. A value is kept only while its field still
 * exists with the same kind and is at least as sensitive as before: a value collected as
 * sensitive can never become readable by flipping the flag (it is dropped instead).
 */
export function valuesKeptAcrossSpecChange(before: FieldDef[], after: FieldDef[], names: string[]): string[] {
  const old = new Map(before.map((x) => [x.name, x]));
  const now = new Map(after.map((x) => [x.name, x]));
  return names.filter((n) => {
    const a = old.get(n);
    const b = now.get(n);
    return !!a && !!b && a.kind === b.kind && (b.sensitive || !a.sensitive);
  });
}

// ---- statuses and operations ------------------------------------------------------------

export const FORM_STATUSES = ['pending_values', 'ready'] as const;
export const WALLET_STATUSES = ['pending_authorization', 'active'] as const;
export type ItemStatus = (typeof FORM_STATUSES)[number] | (typeof WALLET_STATUSES)[number] | CardStatus;

/** The form status after values change: ready once every required field has a value. */
export function formStatus(type: ItemType, spec: ItemSpec, valueNames: string[]): (typeof FORM_STATUSES)[number] {
  const have = new Set(valueNames);
  const fields = fieldsOf(type, spec);
  const missing = fields.filter((x) => x.required && !have.has(x.name));
  if (missing.length) return 'pending_values';
  if (type === 'identity' && !valueNames.length) return 'pending_values';
  return 'ready';
}

export const OPERATION_TYPES = ['collect', 'fill', 'authorize', 'prepare_checkout', 'sync', 'cancel', 'recover'] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];

export const OPERATION_DESCRIPTIONS: Record<OperationType, string> = {
  collect: 'Open a collection session: a page where a person enters (or replaces) the secret values.',
  fill: "Type the item's values into a page of a browser session linked to this vault.",
  authorize: 'Open an authorization session: a link where the wallet owner grants access at the provider.',
  prepare_checkout: 'Have the provider issue a single-use card for one payment; creates a single_use_card item.',
  sync: "Refresh the card's payment status from the provider.",
  cancel: "Cancel the card's authorization at the provider.",
  recover: "Ask the provider what became of a checkout whose creation response was lost.",
};

/** Operations an item type has in any status (400 when asked for another). */
export function operationsOfType(type: ItemType): OperationType[] {
  if (FORM_TYPES.includes(type)) return ['collect', 'fill'];
  if (type === 'wallet') return ['authorize', 'prepare_checkout'];
  return ['fill', 'sync', 'cancel', 'recover'];
}

/** Operations available now (409 when asked for another of the type's operations). */
export function operationsAvailable(type: ItemType, status: ItemStatus): OperationType[] {
  if (FORM_TYPES.includes(type)) return status === 'ready' ? ['collect', 'fill'] : ['collect'];
  if (type === 'wallet') return status === 'active' ? ['authorize', 'prepare_checkout'] : ['authorize'];
  return cardOperations(status as CardStatus);
}

export const EXPANSION_TYPES = ['payment_methods'] as const;
export type ExpansionType = (typeof EXPANSION_TYPES)[number];
export const EXPANSION_DESCRIPTIONS: Record<ExpansionType, string> = {
  payment_methods: "The wallet's payment methods, read live from the provider (never stored).",
};

export function expansionsOf(type: ItemType): ExpansionType[] {
  return type === 'wallet' ? ['payment_methods'] : [];
}

/** The action a collection session of this type carries. */
export function actionNameOf(type: ItemType): 'collect' | 'link_oauth' | null {
  if (FORM_TYPES.includes(type)) return 'collect';
  if (type === 'wallet') return 'link_oauth';
  return null;
}

/** Whether the single-item GET opens a collection session: the item waits for a person. */
export function needsCollection(type: ItemType, status: ItemStatus): boolean {
  return (FORM_TYPES.includes(type) && status === 'pending_values') || (type === 'wallet' && status === 'pending_authorization');
}
