import { Type } from '@sinclair/typebox';
import { Tags, Viewport } from '../domain/browser-request.js';
import { Nullable, StringEnum } from '../domain/schema-helpers.js';
import { REGIONS } from '../config.js';

export const ErrorDetailSchema = Type.Object({ code: Type.String(), message: Type.String() });
export const ErrorBodySchema = Type.Object({
  code: Type.String(),
  message: Type.String(),
  details: Type.Optional(Type.Array(ErrorDetailSchema)),
  inner_error: Type.Optional(ErrorDetailSchema),
});

const ByIdOrName = Type.Object({ id: Type.Optional(Type.String()), name: Type.Optional(Type.String()) });

/**
 * The Browser body (contract: "Browser (response of POST /browsers)"). It also drives
 * serialization, so a field not listed here never leaves the server.
 */
export const BrowserSchema = Type.Object({
  session_id: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  deleted_at: Type.Optional(Type.String({ format: 'date-time' })),
  cdp_ws_url: Type.String(),
  webdriver_ws_url: Type.String(),
  browser_live_view_url: Type.Optional(Type.String()),
  base_url: Type.Optional(Type.String()),
  region: StringEnum(REGIONS),
  stealth: Type.Boolean(),
  headless: Type.Boolean(),
  gpu: Type.Optional(Type.Boolean()),
  kiosk_mode: Type.Optional(Type.Boolean()),
  memory: StringEnum(['1GiB', '2GiB', '6GiB', '8GiB', '16GiB'] as const),
  timeout_seconds: Type.Integer(),
  name: Type.Optional(Type.String()),
  tags: Type.Optional(Tags),
  chrome_policy: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  network: Type.Optional(Type.Object({ private_hosts: Type.Optional(Type.Array(Type.String())) })),
  proxy: Type.Optional(Type.Object({ mode: Type.Optional(Type.String()), id: Type.Optional(Type.String()), name: Type.Optional(Type.String()) })),
  proxy_id: Type.Optional(Type.String({ deprecated: true })),
  profile: Type.Optional(
    Type.Object({
      id: Type.String(),
      created_at: Type.String({ format: 'date-time' }),
      name: Nullable(Type.String()),
      last_used_at: Type.Optional(Type.String({ format: 'date-time' })),
      updated_at: Type.Optional(Type.String({ format: 'date-time' })),
    }),
  ),
  profile_save_changes: Type.Optional(Type.Boolean()),
  pool: Type.Optional(Type.Object({ id: Type.String(), name: Type.Optional(Type.String()) })),
  start_url: Type.Optional(Type.String()),
  invocation_id: Type.Optional(Type.String()),
  telemetry: Nullable(Type.Object({ browser: Type.Optional(Type.Record(Type.String(), Type.Unknown())), export: Type.Optional(Type.Record(Type.String(), Type.Unknown())) })),
  usage: Type.Object({ uptime_ms: Type.Integer() }),
  usage_status: Type.Optional(StringEnum(['pending', 'ready'] as const)),
  vaults: Type.Optional(Type.Array(ByIdOrName)),
  viewport: Type.Optional(Viewport),
});

export const errorResponses = { '4xx': ErrorBodySchema, '5xx': ErrorBodySchema };
