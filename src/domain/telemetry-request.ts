import { Type, type Static } from '@sinclair/typebox';
import type { Problem } from './browser-rules.js';
import { StringEnum } from './schema-helpers.js';

/** The CDP methods `control.cdp.excluded_methods` may name (the contract's list). */
export const EXCLUDABLE_CDP_METHODS = [
  'Input.dispatchMouseEvent', 'Input.dispatchKeyEvent', 'Input.insertText', 'Input.imeSetComposition', 'Input.dispatchTouchEvent',
  'Input.dispatchDragEvent', 'Input.cancelDragging', 'Input.emulateTouchFromMouseEvent', 'Input.synthesizePinchGesture',
  'Input.synthesizeScrollGesture', 'Input.synthesizeTapGesture', 'DOM.setFileInputFiles', 'DOM.focus', 'DOM.scrollIntoViewIfNeeded',
  'Page.bringToFront', 'Page.captureScreenshot', 'Page.captureSnapshot', 'Page.handleJavaScriptDialog', 'Page.navigate',
  'Page.navigateToHistoryEntry', 'Page.reload', 'Page.printToPDF', 'Page.startScreencast', 'Page.stopScreencast', 'Page.stopLoading',
  'Page.close', 'Page.setWebLifecycleState', 'Target.activateTarget', 'Target.closeTarget', 'Target.createTarget',
  'Target.createBrowserContext', 'Target.disposeBrowserContext', 'Target.openDevTools', 'Browser.cancelDownload', 'Browser.close',
  'Browser.setWindowBounds', 'Browser.setContentsSize', 'Autofill.trigger',
] as const;

export const OPERATIONAL_CATEGORIES = ['control', 'connection', 'system', 'captcha'] as const;
export const OPT_IN_CATEGORIES = ['console', 'network', 'page', 'interaction', 'screenshot', 'platform'] as const;
export const CATEGORIES = [...OPERATIONAL_CATEGORIES, ...OPT_IN_CATEGORIES] as const;
export type Category = (typeof CATEGORIES)[number];

const CategoryFlag = Type.Object({ enabled: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
const ControlCategory = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean()),
    cdp: Type.Optional(
      Type.Object(
        { excluded_methods: Type.Optional(Type.Array(StringEnum(EXCLUDABLE_CDP_METHODS), { uniqueItems: true })) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TelemetryCategories = Type.Object(
  {
    control: Type.Optional(ControlCategory),
    connection: Type.Optional(CategoryFlag),
    system: Type.Optional(CategoryFlag),
    captcha: Type.Optional(CategoryFlag),
    console: Type.Optional(CategoryFlag),
    network: Type.Optional(CategoryFlag),
    page: Type.Optional(CategoryFlag),
    interaction: Type.Optional(CategoryFlag),
    screenshot: Type.Optional(CategoryFlag),
    platform: Type.Optional(CategoryFlag),
  },
  { additionalProperties: false },
);

export const TelemetryExportRequest = Type.Object(
  {
    otlp: Type.Optional(
      Type.Object(
        {
          destination: Type.Optional(
            Type.Object({ id: Type.Optional(Type.String({ minLength: 1 })), name: Type.Optional(Type.String({ minLength: 1 })) }, { additionalProperties: false }),
          ),
          enabled: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TelemetryRequest = Type.Object(
  { enabled: Type.Optional(Type.Boolean()), browser: Type.Optional(TelemetryCategories), export: Type.Optional(TelemetryExportRequest) },
  { additionalProperties: false },
);
export type TelemetryRequest = Static<typeof TelemetryRequest>;

/** Category flags of an active configuration (all ten named). */
export type CategoryFlags = Record<Category, boolean>;

const DEFAULT_FLAGS: CategoryFlags = {
  control: true, connection: true, system: true, captcha: true,
  console: false, network: false, page: false, interaction: false, screenshot: false, platform: false,
};

function hasCategorySettings(t: TelemetryRequest): boolean {
  return !!t.browser && Object.keys(t.browser).length > 0;
}

/**
 * Telemetry rules 1 and 2 on create: the categories captured, or null when capture is
 * not started (omitted, null, {}, enabled=false, or all four operational categories
 * explicitly disabled, or nothing left enabled).
 */
export function resolveCreateTelemetry(t: TelemetryRequest | null | undefined): CategoryFlags | null {
  if (!t || t.enabled === false) return null;
  if (t.enabled === undefined && !hasCategorySettings(t)) return null;
  const flags: CategoryFlags = { ...DEFAULT_FLAGS };
  for (const c of CATEGORIES) {
    const v = t.browser?.[c]?.enabled;
    if (v !== undefined) flags[c] = v;
  }
  if (OPERATIONAL_CATEGORIES.every((c) => t.browser?.[c]?.enabled === false)) return null;
  return CATEGORIES.some((c) => flags[c]) ? flags : null;
}

/** Cross-field telemetry rules of the create request. */
export function checkTelemetryRules(t: TelemetryRequest | null | undefined): Problem[] {
  const out: Problem[] = [];
  if (!t) return out;
  if (t.enabled === false && hasCategorySettings(t)) out.push({ field: 'telemetry.enabled', message: 'enabled=false cannot be combined with browser category settings' });
  const otlp = t.export?.otlp;
  if (otlp?.destination) {
    const given = ['id', 'name'].filter((k) => otlp.destination![k as 'id' | 'name'] !== undefined);
    if (given.length !== 1) out.push({ field: 'telemetry.export.otlp.destination', message: `exactly one of id, name must be given (got ${given.length ? given.join(', ') : 'none'})` });
    if (otlp.enabled === false) out.push({ field: 'telemetry.export.otlp.enabled', message: 'enabled=false cannot be combined with a destination' });
    else if (resolveCreateTelemetry(t) === null) out.push({ field: 'telemetry.export.otlp.destination', message: 'exporting requires telemetry capture to be enabled' });
  }
  return out;
}
