import { Ajv, type ErrorObject } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';

/**
 * Two validators: request bodies are checked strictly (no type coercion, no silently
 * removed fields, every error reported); query strings and path parameters arrive as
 * text and are coerced to the schema's types.
 */
// strictNumbers: strict=false would otherwise let NaN/Infinity (JSON 1e400) pass as numbers and integers.
const common = { allErrors: true, strict: false, strictNumbers: true, removeAdditional: false } as const;
const bodyAjv = new Ajv({ ...common, coerceTypes: false, useDefaults: false });
const textAjv = new Ajv({ ...common, coerceTypes: 'array', useDefaults: true });

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv;
  return ajv.compile(schema as object);
};

function decodePointer(seg: string): string {
  return seg.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** `/extensions/0/name` -> `extensions[0].name`. */
export function fieldPath(segments: string[]): string {
  let out = '';
  for (const s of segments) out += /^\d+$/.test(s) ? `[${s}]` : out ? `.${s}` : s;
  return out;
}

/** One problem per Ajv error, naming the field; `part` prefixes non-body fields (query, params). */
export function problemsFromAjv(errors: ErrorObject[], part: string | undefined): { field: string; message: string }[] {
  const seen = new Set<string>();
  const out: { field: string; message: string }[] = [];
  for (const e of errors) {
    const segs = e.instancePath.split('/').slice(1).map(decodePointer);
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'required') {
      segs.push(String(e.params.missingProperty));
      message = 'is required';
    } else if (e.keyword === 'additionalProperties') {
      const key = String(e.params.additionalProperty);
      const parent = segs[segs.length - 1];
      segs.push(key);
      message = parent === 'tags' ? 'tag key must be 1 to 128 characters of A-Z a-z 0-9 space _ . : / = + @ -' : 'is not a known field';
    } else if (e.keyword === 'pattern' && segs[0] === 'tags') {
      message = 'tag value must be 0 to 256 characters of A-Z a-z 0-9 space _ . : / = + @ -';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params.allowedValues as unknown[]).map(String).join(', ')}`;
    }
    let field = fieldPath(segs) || '(body)';
    if (part && part !== 'body') field = `${part === 'querystring' ? 'query' : part}.${field}`;
    const key = `${field}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ field, message });
  }
  return out;
}

/**
 * The body without the top-level fields the schema refused (unknown ones included): what
 * is left passes the schema, so the rules beyond it can run on it and every broken rule
 * is answered at once. Null when the body is not an object at all.
 */
export function validFieldsOf(body: unknown, errors: ErrorObject[]): Record<string, unknown> | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const rest: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const e of errors) {
    const top = e.instancePath.split('/')[1] ?? (e.keyword === 'additionalProperties' ? String(e.params.additionalProperty) : undefined);
    if (top === undefined) return null;
    delete rest[decodePointer(top)];
  }
  return rest;
}
