import { Type, type Static } from '@sinclair/typebox';
import type { BrowserCreateRequest } from './browser-request.js';
import { ExtensionSelection, ProfileSelection, SessionName, Tags, Viewport } from './browser-request.js';
import { checkCreateRules, checkStartUrl, type Problem } from './browser-rules.js';
import { Nullable } from './schema-helpers.js';
import { TelemetryRequest } from './telemetry-request.js';

/**
 * Browser pools (Kernel's `/browser_pools`, shapes from `@onkernel/sdk` browser-pools):
 * request schemas and the pure rules of a pool. A pool's browsers are ordinary sessions
 * created from the pool's browser configuration, so that configuration is checked with the
 * create request's own rules (checkCreateRules) plus what pools add.
 */

export const DEFAULT_FILL_RATE_PERCENT = 25;
export const DEFAULT_POOL_TIMEOUT_SECONDS = 600;
/** The default acquire wait stays under the Kernel SDK's one-minute request timeout. */
export const MAX_DEFAULT_ACQUIRE_SECONDS = 50;
export const MAX_POOL_SIZE = 1000;

const TimeoutSeconds = Type.Integer({ minimum: 10, maximum: 259200 });
const FillRate = Type.Integer({ minimum: 1, description: 'Percentage of the pool launched per minute (at least one browser a minute).' });

/** The browser part of a pool's configuration, shared by create and update. */
const browserFields = {
  chrome_policy: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  extensions: Type.Optional(Type.Array(ExtensionSelection, { maxItems: 20 })),
  headless: Type.Optional(Type.Boolean()),
  kiosk_mode: Type.Optional(Type.Boolean()),
  // save_changes is accepted and ignored: pool browsers load their profile read-only.
  profile: Type.Optional(ProfileSelection),
  proxy_id: Type.Optional(Type.String()),
  refresh_on_profile_update: Type.Optional(Type.Boolean()),
  start_url: Type.Optional(Type.String({ maxLength: 8192 })),
  stealth: Type.Optional(Type.Boolean()),
  telemetry: Type.Optional(Nullable(TelemetryRequest)),
  viewport: Type.Optional(Viewport),
};

export const PoolCreateRequest = Type.Object(
  {
    size: Type.Integer({ minimum: 1, maximum: MAX_POOL_SIZE }),
    name: Type.Optional(SessionName),
    fill_rate_per_minute: Type.Optional(FillRate),
    timeout_seconds: Type.Optional(TimeoutSeconds),
    ...browserFields,
  },
  { additionalProperties: false },
);
export type PoolCreateRequest = Static<typeof PoolCreateRequest>;

export const PoolUpdateRequest = Type.Object(
  {
    size: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_POOL_SIZE })),
    // "" is a no-op: a pool name cannot be cleared.
    name: Type.Optional(Type.String({ maxLength: 255, pattern: '^[a-zA-Z0-9._-]{0,255}$' })),
    fill_rate_per_minute: Type.Optional(FillRate),
    timeout_seconds: Type.Optional(TimeoutSeconds),
    discard_all_idle: Type.Optional(Type.Boolean()),
    ...browserFields,
  },
  { additionalProperties: false },
);
export type PoolUpdateRequest = Static<typeof PoolUpdateRequest>;

export const PoolAcquireRequest = Type.Object(
  {
    acquire_timeout_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })),
    name: Type.Optional(SessionName),
    start_url: Type.Optional(Type.String({ minLength: 1, maxLength: 8192 })),
    tags: Type.Optional(Tags),
    telemetry: Type.Optional(Nullable(TelemetryRequest)),
  },
  { additionalProperties: false },
);
export type PoolAcquireRequest = Static<typeof PoolAcquireRequest>;

export const PoolReleaseRequest = Type.Object(
  { session_id: Type.String({ minLength: 1, maxLength: 255 }), reuse: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type PoolReleaseRequest = Static<typeof PoolReleaseRequest>;

export const PoolDeleteRequest = Type.Object({ force: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
export type PoolDeleteRequest = Static<typeof PoolDeleteRequest>;

/** The BrowserPool body. `fill_error` is browserd's own: why the pool is short of browsers, when it is. */
export const BrowserPoolSchema = Type.Object({
  id: Type.String(),
  name: Type.Optional(Type.String()),
  acquired_count: Type.Integer(),
  available_count: Type.Integer(),
  browser_pool_config: Type.Record(Type.String(), Type.Unknown()),
  created_at: Type.String({ format: 'date-time' }),
  extension_ids: Type.Array(Type.String()),
  profile_id: Type.Optional(Type.String()),
  fill_error: Type.Optional(Type.String()),
});

/** The browser configuration a pool keeps (as sent, save_changes dropped). */
export interface PoolBrowserConfig {
  chrome_policy?: Record<string, unknown>;
  extensions?: { id?: string; name?: string }[];
  headless?: boolean;
  kiosk_mode?: boolean;
  profile?: { id?: string; name?: string };
  proxy_id?: string;
  refresh_on_profile_update?: boolean;
  start_url?: string;
  stealth?: boolean;
  telemetry?: TelemetryRequest | null;
  viewport?: { width: number; height: number; refresh_rate?: number };
}

/** A pool's whole configuration: what `browser_pool_config` echoes. */
export interface PoolSettings {
  name: string | null;
  size: number;
  fillRatePerMinute: number;
  timeoutSeconds: number;
  browser: PoolBrowserConfig;
}

const BROWSER_KEYS = ['chrome_policy', 'extensions', 'headless', 'kiosk_mode', 'profile', 'proxy_id', 'refresh_on_profile_update', 'start_url', 'stealth', 'telemetry', 'viewport'] as const;

function browserPart(req: Partial<Record<(typeof BROWSER_KEYS)[number], unknown>>): PoolBrowserConfig {
  const out: Record<string, unknown> = {};
  for (const k of BROWSER_KEYS) if (req[k] !== undefined) out[k] = req[k];
  if (req.profile) {
    const { id, name } = req.profile as { id?: string; name?: string };
    out.profile = { ...(id !== undefined ? { id } : {}), ...(name !== undefined ? { name } : {}) };
  }
  return out as PoolBrowserConfig;
}

/** The create request with its defaults applied. */
export function resolvePoolCreate(req: PoolCreateRequest): PoolSettings {
  const browser = browserPart(req);
  // Kernel: with a profile, refresh_on_profile_update defaults to true.
  if (browser.profile && browser.refresh_on_profile_update === undefined) browser.refresh_on_profile_update = true;
  return {
    name: req.name ?? null,
    size: req.size,
    fillRatePerMinute: req.fill_rate_per_minute ?? DEFAULT_FILL_RATE_PERCENT,
    timeoutSeconds: req.timeout_seconds ?? DEFAULT_POOL_TIMEOUT_SECONDS,
    browser,
  };
}

/**
 * The create request a pool browser is launched with. `withStartUrl`: only newly warmed
 * browsers get the pool's start_url. The pool's timeout is the session's inactivity
 * timeout (it applies while leased; idle pool browsers are never reaped).
 */
export function sessionRequestOf(s: PoolSettings, withStartUrl = true): BrowserCreateRequest {
  const b = s.browser;
  const req: BrowserCreateRequest = { timeout_seconds: s.timeoutSeconds, headless: b.headless ?? false };
  if (b.chrome_policy && Object.keys(b.chrome_policy).length) req.chrome_policy = b.chrome_policy;
  if (b.extensions?.length) req.extensions = b.extensions;
  if (b.kiosk_mode !== undefined) req.kiosk_mode = b.kiosk_mode;
  if (b.profile && (b.profile.id || b.profile.name)) req.profile = { ...b.profile, save_changes: false };
  if (b.proxy_id) req.proxy_id = b.proxy_id;
  if (withStartUrl && b.start_url) req.start_url = b.start_url;
  if (b.stealth !== undefined) req.stealth = b.stealth;
  if (b.telemetry) req.telemetry = b.telemetry;
  if (b.viewport) req.viewport = b.viewport;
  return req;
}

/** Telemetry export is not offered for pools (contract: "Browser pools reject it"). */
function exportProblem(t: unknown, field = 'telemetry.export'): Problem[] {
  if (t && typeof t === 'object' && (t as { export?: unknown }).export !== undefined) {
    return [{ field, message: 'telemetry export is not available for browser pools; create the session with POST /browsers to export its telemetry' }];
  }
  return [];
}

/**
 * Every rule a pool's configuration breaks: the create request's rules on the browser
 * part (field names are the same), plus the pool's own.
 */
export function checkPoolSettings(s: PoolSettings): Problem[] {
  const out: Problem[] = [];
  const b = s.browser;
  const req = sessionRequestOf(s);
  // The rules run on what was sent (an empty profile or proxy_id is only a clear on update).
  if (b.profile && !(b.profile.id || b.profile.name)) req.profile = { ...b.profile };
  out.push(...exportProblem(b.telemetry));
  const { telemetry, ...rest } = req;
  out.push(...checkCreateRules({ ...rest, ...(telemetry ? { telemetry: { ...telemetry, export: undefined } } : {}) }));
  if (b.start_url !== undefined && b.start_url !== '' && checkStartUrl(b.start_url) === null && !out.some((p) => p.field === 'start_url')) {
    out.push({ field: 'start_url', message: 'must be an absolute http or https URL' });
  }
  if (b.refresh_on_profile_update === true && !(b.profile && (b.profile.id || b.profile.name))) {
    out.push({ field: 'refresh_on_profile_update', message: 'requires a profile to be set on the pool' });
  }
  return out;
}

/** Rules of an acquire request: its start_url and telemetry override. */
export function checkAcquire(req: PoolAcquireRequest): Problem[] {
  const out: Problem[] = [...exportProblem(req.telemetry)];
  if (req.start_url !== undefined && checkStartUrl(req.start_url) === null) out.push({ field: 'start_url', message: 'must be an absolute http or https URL' });
  if (req.telemetry?.enabled === false && req.telemetry.browser && Object.keys(req.telemetry.browser).length) {
    out.push({ field: 'telemetry.enabled', message: 'enabled=false cannot be combined with browser category settings' });
  }
  return out;
}

/**
 * An update applied to the current settings (Kernel semantics: omitted fields stay; "" clears
 * proxy_id and start_url; `profile: {id: ""}` clears the profile and refresh_on_profile_update;
 * `{}` clears chrome_policy, `[]` the extensions; an empty name is a no-op; telemetry: null or
 * {} unchanged, enabled=false clears, enabled=true replaces, categories merge).
 */
export function applyPoolUpdate(cur: PoolSettings, u: PoolUpdateRequest): PoolSettings {
  const b: PoolBrowserConfig = { ...cur.browser };
  const next: PoolSettings = {
    name: u.name ? u.name : cur.name,
    size: u.size ?? cur.size,
    fillRatePerMinute: u.fill_rate_per_minute ?? cur.fillRatePerMinute,
    timeoutSeconds: u.timeout_seconds ?? cur.timeoutSeconds,
    browser: b,
  };
  if (u.chrome_policy !== undefined) {
    if (Object.keys(u.chrome_policy).length) b.chrome_policy = u.chrome_policy;
    else delete b.chrome_policy;
  }
  if (u.extensions !== undefined) {
    if (u.extensions.length) b.extensions = u.extensions;
    else delete b.extensions;
  }
  for (const k of ['headless', 'kiosk_mode', 'stealth'] as const) if (u[k] !== undefined) b[k] = u[k];
  if (u.viewport !== undefined) b.viewport = u.viewport;
  for (const k of ['proxy_id', 'start_url'] as const) {
    if (u[k] === undefined) continue;
    if (u[k] === '') delete b[k];
    else b[k] = u[k];
  }
  if (u.profile !== undefined) {
    const sel = browserPart({ profile: u.profile }).profile!;
    if (!sel.id && !sel.name) {
      delete b.profile;
      delete b.refresh_on_profile_update;
    } else {
      const same = cur.browser.profile?.id === sel.id && cur.browser.profile?.name === sel.name;
      b.profile = sel;
      if (!same && u.refresh_on_profile_update === undefined) b.refresh_on_profile_update = true;
    }
  }
  if (u.refresh_on_profile_update !== undefined && (b.profile || u.refresh_on_profile_update)) b.refresh_on_profile_update = u.refresh_on_profile_update;
  if (u.telemetry && Object.keys(u.telemetry).length) {
    const t = u.telemetry;
    if (t.enabled === false) delete b.telemetry;
    else if (t.enabled === true || !b.telemetry) b.telemetry = { ...(t.enabled !== undefined ? { enabled: t.enabled } : {}), ...(t.browser ? { browser: t.browser } : {}) };
    else b.telemetry = { ...b.telemetry, browser: { ...b.telemetry.browser, ...t.browser } };
  }
  return next;
}

/** Rules an update breaks beyond the schema (export is refused here too). */
export function checkPoolUpdate(u: PoolUpdateRequest): Problem[] {
  return exportProblem(u.telemetry);
}

/** Browsers launched per minute: the fill rate is a percentage of the size, at least one a minute. */
export function launchesPerMinute(size: number, fillRatePercent: number): number {
  return Math.max(1, Math.ceil((size * fillRatePercent) / 100));
}

/** Milliseconds between two launches of a pool. */
export function fillIntervalMs(size: number, fillRatePercent: number): number {
  return Math.round(60_000 / launchesPerMinute(size, fillRatePercent));
}

/**
 * The acquire wait when none is given: the time filling the whole pool takes at its fill
 * rate (Kernel's default), at most MAX_DEFAULT_ACQUIRE_SECONDS so it ends before the SDK's
 * request timeout; the SDK's answer to a 204 is to ask again.
 */
export function defaultAcquireSeconds(size: number, fillRatePercent: number): number {
  const fill = Math.ceil((size / launchesPerMinute(size, fillRatePercent)) * 60);
  return Math.min(MAX_DEFAULT_ACQUIRE_SECONDS, Math.max(1, fill));
}

/** The `browser_pool_config` of the BrowserPool body. */
export function poolConfigView(s: PoolSettings): Record<string, unknown> {
  return {
    ...s.browser,
    headless: s.browser.headless ?? false,
    kiosk_mode: s.browser.kiosk_mode ?? false,
    stealth: s.browser.stealth ?? false,
    ...(s.name !== null ? { name: s.name } : {}),
    size: s.size,
    fill_rate_per_minute: s.fillRatePerMinute,
    timeout_seconds: s.timeoutSeconds,
  };
}
