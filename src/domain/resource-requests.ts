import { Type, type Static } from '@sinclair/typebox';
import { NAME_PATTERN, Nullable, StringEnum } from './schema-helpers.js';

/**
 * Request and response schemas of the project-scoped resources sessions use: profiles,
 * extensions and proxies. Shapes follow the Kernel API (`@onkernel/sdk`) where the
 * contract names only the resource. One schema per request gives validation, the
 * TypeScript type and the /openapi.json entry.
 */

export const ResourceName = Type.String({ minLength: 1, maxLength: 255, pattern: NAME_PATTERN });

/** Offset pagination like GET /browsers, plus Kernel's `name` (exact) and `query` (substring of name, or the id) filters. */
export const ResourceListQuery = Type.Object({
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  query: Type.Optional(Type.String({ maxLength: 255 })),
});
export type ResourceListQuery = Static<typeof ResourceListQuery>;

export const IdOrName = Type.Object({ id_or_name: Type.String({ minLength: 1, maxLength: 255 }) });
export const IdOnly = Type.Object({ id: Type.String({ minLength: 1, maxLength: 255 }) });

// ---- profiles ------------------------------------------------------------------------

export const ProfileCreateRequest = Type.Object({ name: Type.Optional(ResourceName) }, { additionalProperties: false });
export type ProfileCreateRequest = Static<typeof ProfileCreateRequest>;

/** The contract's Profile metadata (also the `profile` of a Browser body). */
export const ProfileSchema = Type.Object({
  id: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  name: Nullable(Type.String()),
  last_used_at: Type.Optional(Type.String({ format: 'date-time' })),
  updated_at: Type.Optional(Type.String({ format: 'date-time' })),
});

export const PROFILE_FORMATS = ['tar.gz', 'tar', 'tar.zst'] as const;
export const ProfileDownloadQuery = Type.Object({
  format: Type.Optional(StringEnum(PROFILE_FORMATS, { description: 'tar.gz (default) or tar. tar.zst is not available on this server.' })),
});
export type ProfileDownloadQuery = Static<typeof ProfileDownloadQuery>;
