import { Ajv, type ValidateFunction } from 'ajv';
import { SPEC_SCHEMAS } from '../domain/vault-item-types.js';
import { problemsFromAjv } from '../http/validation.js';

/**
 * The spec schema of one type, for PATCH (whose body does not name the type: the item
 * does). Same settings as the request-body validator, same field paths (`spec.…`).
 */
const ajv = new Ajv({ allErrors: true, strict: false, strictNumbers: true, coerceTypes: false, useDefaults: false, removeAdditional: false });
const compiled = new Map<string, ValidateFunction>();

export function specProblems(type: keyof typeof SPEC_SCHEMAS, spec: unknown): { field: string; message: string }[] {
  let v = compiled.get(type);
  if (!v) {
    v = ajv.compile(SPEC_SCHEMAS[type]);
    compiled.set(type, v);
  }
  if (v(spec)) return [];
  return problemsFromAjv(v.errors ?? [], 'spec').map((p) => ({ field: p.field.replace(/^spec\.\(body\)$/, 'spec'), message: p.message }));
}
