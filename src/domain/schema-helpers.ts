import { Type, type TSchema, type Static } from '@sinclair/typebox';

/** A string enum as a plain JSON-schema `enum` (one clear error, unlike a union of literals). */
export function StringEnum<const T extends readonly string[]>(values: T, opts: Record<string, unknown> = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...opts });
}

/** `T | null` as `nullable: true`, which Ajv reports as one error instead of an anyOf cascade. */
export function Nullable<T extends TSchema>(schema: T) {
  return Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });
}

export const NAME_PATTERN = '^[a-zA-Z0-9._-]{1,255}$';
