import { CdpClient } from '../runtime/cdp-client.js';

/** One field to type: the value is only ever in this process and in the CDP message to the page. */
export interface FillInstruction {
  field: string;
  selector: string;
  /** Null when the item holds no value for the field. */
  value: string | null;
}

export type FillStatus = 'filled' | 'not_found' | 'not_fillable' | 'no_value' | 'invalid_selector' | 'failed';

export interface FillFieldResult {
  field: string;
  selector: string;
  status: FillStatus;
  /** Why a field was not filled; never the value. */
  message?: string;
}

export interface FillOutcome {
  targetId: string;
  origin: string;
  fields: FillFieldResult[];
}

/** No page to fill (none open, or `target_id` names none). */
export class FillNoPage extends Error {}
/** The page's origin is not among the item's `origins`. */
export class FillOriginRefused extends Error {
  constructor(readonly origin: string) {
    super(`the page's origin ${origin} is not among the item's origins`);
  }
}

const GROUP = 'browserd-vault-fill';

/** Counts the selectors that match in a page, whether it has focus, and its origin. */
const PROBE = `function (selectors) {
  let matches = 0;
  for (const s of selectors) { try { if (document.querySelector(s)) matches++; } catch (e) {} }
  return { matches, focus: document.hasFocus(), origin: location.origin };
}`;

/**
 * Focuses the element and selects its current content, so the typed text replaces it.
 * Returns 'text', 'select', or why the element takes no text.
 */
const PREPARE = `function () {
  const el = this;
  if (!(el instanceof Element)) return 'the selector matched something that is not an element';
  const tag = el.tagName.toLowerCase();
  if (tag === 'select') return el.disabled ? 'the element is disabled' : 'select';
  if (tag === 'input') {
    const t = (el.getAttribute('type') || 'text').toLowerCase();
    if (!['text', 'email', 'password', 'tel', 'number', 'search', 'url'].includes(t)) return 'an input of type ' + t + ' takes no text';
    if (el.disabled) return 'the element is disabled';
    if (el.readOnly) return 'the element is read-only';
  } else if (tag === 'textarea') {
    if (el.disabled) return 'the element is disabled';
    if (el.readOnly) return 'the element is read-only';
  } else if (!el.isContentEditable) {
    return 'the element is not a text input, textarea, select or editable element';
  }
  el.scrollIntoView({ block: 'center', inline: 'nearest' });
  el.focus();
  const root = el.getRootNode();
  const active = root && root.activeElement !== undefined ? root.activeElement : document.activeElement;
  if (active !== el) return 'the element cannot be focused';
  if (tag === 'input' || tag === 'textarea') {
    try { el.select(); } catch (e) { el.value = ''; }
  } else {
    const r = document.createRange();
    r.selectNodeContents(el);
    const s = getSelection();
    s.removeAllRanges();
    s.addRange(r);
  }
  return 'text';
}`;

/** Picks the option of a <select> that matches the value (by value, text, or number). */
const CHOOSE = `function (v) {
  const el = this;
  const want = String(v).trim().toLowerCase();
  const opts = Array.from(el.options);
  const num = (s) => /^\\d+$/.test(s.trim()) ? Number(s.trim()) : NaN;
  let o = opts.find((x) => x.value === v)
    || opts.find((x) => x.value.trim().toLowerCase() === want)
    || opts.find((x) => x.text.trim().toLowerCase() === want);
  if (!o && /^\\d+$/.test(want)) o = opts.find((x) => num(x.value) === Number(want)) || opts.find((x) => num(x.text) === Number(want));
  if (!o && /^\\d{4}$/.test(want)) o = opts.find((x) => x.value.trim() === want.slice(2) || x.text.trim() === want.slice(2));
  if (!o) return false;
  el.focus();
  el.value = o.value;
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return true;
}`;

interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
}

interface RemoteObject {
  objectId?: string;
  subtype?: string;
  value?: unknown;
}

/**
 * Types values into a page of a session over a private CDP connection to its browser
 * (not the gateway relay, so nothing of it reaches an agent's connection or cdp_command
 * telemetry). Text goes in with Input.insertText: the page sees beforeinput/input events
 * as from an IME, and no key events carry the characters. The page is `targetId`, else
 * the page where most selectors match (the focused one on a tie).
 */
export async function fillPage(endpoint: string, instructions: FillInstruction[], opts: { targetId?: string; origins?: string[] }): Promise<FillOutcome> {
  const cdp = await CdpClient.connect(endpoint);
  const attached: string[] = [];
  try {
    const { targetInfos } = await cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
    let pages = targetInfos.filter((t) => t.type === 'page' && !t.url.startsWith('devtools://'));
    if (opts.targetId) pages = pages.filter((t) => t.targetId === opts.targetId);
    if (!pages.length) throw new FillNoPage(opts.targetId ? `the session has no page with target id ${opts.targetId}` : 'the session has no open page');

    const selectors = [...new Set(instructions.map((i) => i.selector))];
    let best: { targetId: string; sessionId: string; matches: number; focus: boolean; origin: string } | null = null;
    for (const t of pages) {
      const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId: t.targetId, flatten: true });
      attached.push(sessionId);
      const probe = await callOnGlobal<{ matches: number; focus: boolean; origin: string }>(cdp, sessionId, PROBE, [selectors]);
      const better = !best || probe.matches > best.matches || (probe.matches === best.matches && probe.focus && !best.focus);
      if (better) best = { targetId: t.targetId, sessionId, ...probe };
    }
    const page = best!;
    if (opts.origins && !opts.origins.includes(page.origin)) throw new FillOriginRefused(page.origin);

    const results: FillFieldResult[] = [];
    for (const ins of instructions) results.push(await fillOne(cdp, page.sessionId, ins));
    await cdp.send('Runtime.releaseObjectGroup', { objectGroup: GROUP }, page.sessionId).catch(() => undefined);
    return { targetId: page.targetId, origin: page.origin, fields: results };
  } finally {
    for (const sessionId of attached) await cdp.send('Target.detachFromTarget', { sessionId }).catch(() => undefined);
    cdp.close();
  }
}

async function callOnGlobal<T>(cdp: CdpClient, sessionId: string, fn: string, args: unknown[]): Promise<T> {
  const { result: global } = await cdp.send<{ result: RemoteObject }>('Runtime.evaluate', { expression: 'globalThis', objectGroup: GROUP }, sessionId);
  const r = await cdp.send<{ result: RemoteObject; exceptionDetails?: unknown }>(
    'Runtime.callFunctionOn',
    { objectId: global.objectId, functionDeclaration: fn, arguments: args.map((value) => ({ value })), returnByValue: true },
    sessionId,
  );
  if (r.exceptionDetails) throw new Error('the page refused the probe');
  return r.result.value as T;
}

async function fillOne(cdp: CdpClient, sessionId: string, ins: FillInstruction): Promise<FillFieldResult> {
  const base = { field: ins.field, selector: ins.selector };
  if (ins.value === null) return { ...base, status: 'no_value', message: 'the item holds no value for this field' };
  try {
    const found = await cdp.send<{ result: RemoteObject; exceptionDetails?: unknown }>(
      'Runtime.evaluate',
      { expression: `document.querySelector(${JSON.stringify(ins.selector)})`, objectGroup: GROUP },
      sessionId,
    );
    if (found.exceptionDetails) return { ...base, status: 'invalid_selector', message: 'the selector is not valid CSS' };
    if (!found.result.objectId || found.result.subtype === 'null') return { ...base, status: 'not_found', message: 'no element matches the selector' };
    const prep = await cdp.send<{ result: RemoteObject }>(
      'Runtime.callFunctionOn',
      { objectId: found.result.objectId, functionDeclaration: PREPARE, returnByValue: true },
      sessionId,
    );
    const how = prep.result.value;
    if (how === 'select') {
      const chosen = await cdp.send<{ result: RemoteObject }>(
        'Runtime.callFunctionOn',
        { objectId: found.result.objectId, functionDeclaration: CHOOSE, arguments: [{ value: ins.value }], returnByValue: true },
        sessionId,
      );
      return chosen.result.value === true ? { ...base, status: 'filled' } : { ...base, status: 'not_fillable', message: 'no option of the select matches the value' };
    }
    if (how !== 'text') return { ...base, status: 'not_fillable', message: String(how) };
    await cdp.send('Input.insertText', { text: ins.value }, sessionId);
    return { ...base, status: 'filled' };
  } catch {
    // The CDP error could quote the command's parameters; only the fact is reported.
    return { ...base, status: 'failed', message: 'the browser did not complete the input' };
  }
}
