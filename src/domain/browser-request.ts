import { Type, type Static } from '@sinclair/typebox';
import { REGIONS } from '../config.js';
import { NAME_PATTERN, Nullable, StringEnum } from './schema-helpers.js';
import { TelemetryRequest } from './telemetry-request.js';

/**
 * The Browser creation request of the contract, as one schema: Fastify validates with it,
 * TypeScript types come from it, and /openapi.json is generated from it. Rules that span
 * several fields live in browser-rules.ts as plain functions.
 */
export const SessionName = Type.String({ minLength: 1, maxLength: 255, pattern: NAME_PATTERN });

const ByIdOrName = (nameSchema = SessionName) =>
  Type.Object(
    { id: Type.Optional(Type.String({ minLength: 1 })), name: Type.Optional(nameSchema) },
    { additionalProperties: false },
  );

export const ExtensionSelection = ByIdOrName();
export const VaultReference = ByIdOrName(Type.String({ minLength: 1, maxLength: 255 }));

export const ProfileSelection = Type.Object(
  {
    id: Type.Optional(Type.String({ minLength: 1 })),
    name: Type.Optional(SessionName),
    save_changes: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
);

export const ProxySelection = Type.Object(
  {
    mode: Type.Optional(StringEnum(['direct', 'default'] as const)),
    id: Type.Optional(Type.String({ minLength: 1 })),
    name: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

export const NetworkConfiguration = Type.Object(
  { private_hosts: Type.Optional(Type.Array(Type.String({ maxLength: 255 }), { maxItems: 32 })) },
  { additionalProperties: false },
);

export const TAG_KEY_PATTERN = '^[A-Za-z0-9 _.:/=+@-]{1,128}$';
export const TAG_VALUE_PATTERN = '^[A-Za-z0-9 _.:/=+@-]*$';
export const Tags = Type.Record(Type.String({ pattern: TAG_KEY_PATTERN }), Type.String({ maxLength: 256, pattern: TAG_VALUE_PATTERN }), {
  maxProperties: 50,
  additionalProperties: false,
});

export const Viewport = Type.Object(
  {
    width: Type.Integer({ minimum: 1 }),
    height: Type.Integer({ minimum: 1 }),
    refresh_rate: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
);


export const BrowserCreateRequest = Type.Object(
  {
    chrome_policy: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    extensions: Type.Optional(Type.Array(ExtensionSelection, { maxItems: 20 })),
    gpu: Type.Optional(Type.Boolean()),
    headless: Type.Optional(Type.Boolean()),
    invocation_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    kiosk_mode: Type.Optional(Type.Boolean()),
    memory: Type.Optional(StringEnum(['8GiB', '16GiB'] as const)),
    name: Type.Optional(SessionName),
    network: Type.Optional(NetworkConfiguration),
    profile: Type.Optional(ProfileSelection),
    proxy: Type.Optional(ProxySelection),
    // Deprecated in the contract (use proxy); marked so in /openapi.json.
    proxy_id: Type.Optional(Type.String({ minLength: 1, deprecated: true })),
    region: Type.Optional(StringEnum(REGIONS)),
    start_url: Type.Optional(Type.String({ minLength: 1, maxLength: 8192 })),
    stealth: Type.Optional(Type.Boolean()),
    tags: Type.Optional(Tags),
    telemetry: Type.Optional(Nullable(TelemetryRequest)),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 10, maximum: 259200 })),
    vaults: Type.Optional(Type.Array(VaultReference, { maxItems: 20 })),
    viewport: Type.Optional(Viewport),
  },
  { additionalProperties: false },
);
export type BrowserCreateRequest = Static<typeof BrowserCreateRequest>;

export const BrowserUpdateRequest = Type.Object(
  {
    name: Type.Optional(Nullable(Type.String({ maxLength: 255, pattern: '^[a-zA-Z0-9._-]{0,255}$' }))),
    tags: Type.Optional(Nullable(Tags)),
    proxy: Type.Optional(ProxySelection),
    proxy_id: Type.Optional(Nullable(Type.String({ deprecated: true }))),
    telemetry: Type.Optional(Nullable(TelemetryRequest)),
    profile: Type.Optional(ProfileSelection),
    disable_default_proxy: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type BrowserUpdateRequest = Static<typeof BrowserUpdateRequest>;

export const BrowserListQuery = Type.Object({
  // Bounded so the store never sees an offset beyond a 64-bit integer (SQLite: "datatype mismatch", a 500).
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  status: Type.Optional(StringEnum(['active', 'deleted', 'all'] as const)),
  include_deleted: Type.Optional(Type.Boolean()),
  query: Type.Optional(Type.String({ maxLength: 255 })),
});
export type BrowserListQuery = Static<typeof BrowserListQuery>;

export const IdOrNameParams = Type.Object({ id_or_name: Type.String({ minLength: 1, maxLength: 255 }) });
export const RetrieveQuery = Type.Object({ include_deleted: Type.Optional(Type.Boolean()) });
