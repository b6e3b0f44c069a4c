import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { CREATABLE_TYPES, ITEM_TYPES, OPERATION_TYPES, SPEC_SCHEMAS, type OperationType } from './vault-item-types.js';
import { NAME_PATTERN, StringEnum } from './schema-helpers.js';

/**
 * Request schemas of the vault routes: Fastify validates with them, TypeScript types come
 * from them and /openapi.json is generated from them. The per-type parts (an item's spec,
 * an operation's fields) are `if type … then …` branches of one schema, so a bad spec is
 * reported field by field at the edge.
 */
export const VaultName = Type.String({ minLength: 1, maxLength: 255, pattern: NAME_PATTERN, description: '1 to 255 of a-z A-Z 0-9 . _ -' });
export const ItemKey = Type.String({ minLength: 1, maxLength: 255, pattern: NAME_PATTERN, description: 'Immutable item key: 1 to 255 of a-z A-Z 0-9 . _ -' });

export const VaultCreateRequest = Type.Object({ name: VaultName }, { additionalProperties: false });
export type VaultCreateRequest = Static<typeof VaultCreateRequest>;

export const VaultListQuery = Type.Object({
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
});
export type VaultListQuery = Static<typeof VaultListQuery>;

export const VaultParams = Type.Object({ id_or_name: Type.String({ minLength: 1, maxLength: 255 }) });
export const ItemParams = Type.Object({ id_or_name: Type.String({ minLength: 1, maxLength: 255 }), key: ItemKey });
export type ItemParams = Static<typeof ItemParams>;

export const ItemListQuery = Type.Object({ type: Type.Optional(StringEnum(ITEM_TYPES)) });
export type ItemListQuery = Static<typeof ItemListQuery>;

export const ItemGetQuery = Type.Object({
  expand: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 10, description: 'Expansions to include live under `expanded` (repeat or comma-separate).' }),
  ),
});
export type ItemGetQuery = Static<typeof ItemGetQuery>;

/** `if type is T then <branch>`: one schema per discriminator value, plain JSON Schema (OpenAPI 3.1). */
function byType(values: readonly string[], branch: (t: string) => TSchema | null): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const t of values) {
    const then = branch(t);
    if (then) out.push({ if: { properties: { type: { const: t } }, required: ['type'] }, then });
  }
  return out;
}

export const ItemPutRequest = Type.Object(
  {
    type: StringEnum(CREATABLE_TYPES, { description: 'single_use_card items are issued by a wallet (prepare_checkout).' }),
    spec: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'The spec of the type (see docs/vaults.md); optional where every part has a default.' })),
  },
  {
    additionalProperties: false,
    allOf: byType(CREATABLE_TYPES, (t) => Type.Object({ spec: Type.Optional(SPEC_SCHEMAS[t as keyof typeof SPEC_SCHEMAS]) })),
  },
);
export type ItemPutRequest = { type: (typeof CREATABLE_TYPES)[number]; spec?: Record<string, unknown> };

export const ItemPatchRequest = Type.Object(
  {
    version: Type.Integer({ minimum: 1, description: 'The version the change is based on (from the item); a stale one is a 409.' }),
    spec: Type.Optional(Type.Object({}, { additionalProperties: true, description: "A new spec of the item's type, replacing the current one." })),
  },
  { additionalProperties: false },
);
export type ItemPatchRequest = { version: number; spec?: Record<string, unknown> };

export const FillField = Type.Object(
  {
    field: Type.String({ minLength: 1, maxLength: 64, description: "A field of the item (or a derived one, such as a card's expiry)." }),
    selector: Type.String({ minLength: 1, maxLength: 2048, description: 'CSS selector of the input in the page.' }),
  },
  { additionalProperties: false },
);

export const Amount = Type.Object(
  {
    value: Type.Integer({ minimum: 1, maximum: 100_000_000, description: 'In the currency minor unit (cents).' }),
    currency: Type.String({ pattern: '^[A-Za-z]{3}$', description: 'ISO 4217 code.' }),
  },
  { additionalProperties: false },
);

/** Which request fields belong to which operation (the rest are refused by name). */
export const OPERATION_FIELDS: Record<OperationType, { required: string[]; optional: string[] }> = {
  collect: { required: [], optional: [] },
  authorize: { required: [], optional: [] },
  fill: { required: ['browser_id', 'fields'], optional: ['target_id'] },
  prepare_checkout: { required: ['payment_method_id', 'amount'], optional: ['merchant', 'card_key'] },
  sync: { required: [], optional: [] },
  cancel: { required: [], optional: [] },
  recover: { required: [], optional: [] },
};

export const OperationRequest = Type.Object(
  {
    type: StringEnum(OPERATION_TYPES),
    browser_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'fill: the session (id or name) whose page gets the values.' })),
    target_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'fill: the CDP target id of the page; default: the page where the first selector matches.' })),
    fields: Type.Optional(Type.Array(FillField, { minItems: 1, maxItems: 64 })),
    payment_method_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    amount: Type.Optional(Amount),
    merchant: Type.Optional(
      Type.Object(
        { name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })), url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })) },
        { additionalProperties: false },
      ),
    ),
    card_key: Type.Optional(ItemKey),
  },
  {
    additionalProperties: false,
    allOf: byType(OPERATION_TYPES, (t) => {
      const req = OPERATION_FIELDS[t as OperationType].required;
      return req.length ? Type.Unsafe({ required: req }) : null;
    }),
  },
);
export interface OperationRequest {
  type: OperationType;
  browser_id?: string;
  target_id?: string;
  fields?: { field: string; selector: string }[];
  payment_method_id?: string;
  amount?: { value: number; currency: string };
  merchant?: { name?: string; url?: string };
  card_key?: string;
}

/** Fields given that the operation does not use: named, not silently ignored. */
export function checkOperationFields(req: OperationRequest): { field: string; message: string }[] {
  const allowed = OPERATION_FIELDS[req.type];
  const out: { field: string; message: string }[] = [];
  for (const k of Object.keys(req)) {
    if (k === 'type' || allowed.required.includes(k) || allowed.optional.includes(k)) continue;
    out.push({ field: k, message: `is not used by the ${req.type} operation` });
  }
  if (req.merchant?.url !== undefined) {
    try {
      const u = new URL(req.merchant.url);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('scheme');
    } catch {
      out.push({ field: 'merchant.url', message: 'must be an absolute http(s) URL' });
    }
  }
  return out;
}
