import {
  CATEGORIES,
  OPERATIONAL_CATEGORIES,
  resolveCreateTelemetry,
  type Category,
  type CategoryFlags,
  type TelemetryRequest,
} from './telemetry-request.js';

/**
 * What a session keeps of its telemetry request: the categories captured (null: no capture),
 * the excluded CDP methods (kept even while capture is off: the list is merged independently
 * of `enabled`), and the creation-time export binding.
 */
export interface TelemetryState {
  categories: CategoryFlags | null;
  excludedMethods: string[];
  /** OTLP export bound at creation (null: not exporting). Never changed by an update. */
  exportDestinationId: string | null;
}

export const NO_TELEMETRY: TelemetryState = { categories: null, excludedMethods: [], exportDestinationId: null };

const DEFAULT_FLAGS: CategoryFlags = {
  control: true, connection: true, system: true, captcha: true,
  console: false, network: false, page: false, interaction: false, screenshot: false, platform: false,
};

function layer(base: CategoryFlags, t: TelemetryRequest): CategoryFlags {
  const flags = { ...base };
  for (const c of CATEGORIES) {
    const v = t.browser?.[c]?.enabled;
    if (v !== undefined) flags[c] = v;
  }
  return flags;
}

function anyOn(flags: CategoryFlags): boolean {
  return CATEGORIES.some((c) => flags[c]);
}

function hasCategoryFlag(t: TelemetryRequest): boolean {
  return CATEGORIES.some((c) => t.browser?.[c]?.enabled !== undefined);
}

/** `excluded_methods` merged independently: omitted keeps the list, a list (even empty) replaces it. */
function mergeExcluded(current: string[], t: TelemetryRequest | null | undefined): string[] {
  const given = t?.browser?.control?.cdp?.excluded_methods;
  return given === undefined ? current : [...given];
}

/**
 * Rules 1, 2 and 4 on create. `exportDestinationId` is the destination the request's
 * `export.otlp.destination` resolved to (the caller looks it up; null when none was named).
 */
export function resolveCreateState(t: TelemetryRequest | null | undefined, exportDestinationId: string | null = null): TelemetryState {
  const categories = resolveCreateTelemetry(t);
  return {
    categories,
    excludedMethods: mergeExcluded([], t),
    exportDestinationId: categories && t?.export?.otlp?.enabled !== false ? exportDestinationId : null,
  };
}

/**
 * Rule 3 (and 4) on update. Omitted, null and {} leave the configuration as it is;
 * enabled=false stops capture; enabled=true resolves afresh from the default set plus the
 * provided categories; otherwise provided category flags merge onto the current selection
 * (or onto the default set when nothing is captured). A selection with no category left
 * on stops capture. A `browser` carrying only `control.cdp.excluded_methods` changes the
 * list and nothing else. `export` is ignored: the creation-time binding stays.
 */
export function resolveUpdateState(current: TelemetryState, t: TelemetryRequest | null | undefined): TelemetryState {
  if (!t) return current;
  const excludedMethods = mergeExcluded(current.excludedMethods, t);
  let categories = current.categories;
  if (t.enabled === false) categories = null;
  else if (t.enabled === true) categories = layer(DEFAULT_FLAGS, t);
  else if (hasCategoryFlag(t)) categories = layer(current.categories ?? DEFAULT_FLAGS, t);
  if (categories && !anyOn(categories)) categories = null;
  return { categories, excludedMethods, exportDestinationId: current.exportDestinationId };
}

/** Cross-field rules of an update's telemetry (export is ignored on update, so not checked). */
export function checkUpdateTelemetryRules(t: TelemetryRequest | null | undefined): { field: string; message: string }[] {
  if (t?.enabled === false && t.browser && Object.keys(t.browser).length > 0) {
    return [{ field: 'telemetry.enabled', message: 'enabled=false cannot be combined with browser category settings' }];
  }
  return [];
}

/**
 * The Browser body's `telemetry`: null while nothing is captured; otherwise every
 * category's flag (control with its excluded methods when there are any) and the export
 * state (`destination` only when exporting).
 */
export function telemetryView(s: TelemetryState): Record<string, unknown> | null {
  if (!s.categories) return null;
  const browser: Record<string, unknown> = {};
  for (const c of CATEGORIES) browser[c] = { enabled: s.categories[c] };
  if (s.excludedMethods.length) browser.control = { enabled: s.categories.control, cdp: { excluded_methods: s.excludedMethods } };
  const otlp: Record<string, unknown> = { enabled: s.exportDestinationId !== null };
  if (s.exportDestinationId !== null) otlp.destination = s.exportDestinationId;
  return { browser, export: { otlp } };
}

export function captures(s: TelemetryState | null | undefined, c: Category): boolean {
  return !!s?.categories?.[c];
}

export { OPERATIONAL_CATEGORIES };
