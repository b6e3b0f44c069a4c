import type { Plan } from '../accounts/plans.js';
import type { Region } from '../config.js';
import type { BrowserCreateRequest } from './browser-request.js';
import { checkPrivateHosts } from './private-hosts.js';
import { checkTelemetryRules } from './telemetry-request.js';
import { resolveViewport, type ResolvedViewport } from './viewport.js';

/** A broken rule, naming the field (dotted path, `[i]` for array entries). */
export interface Problem {
  field: string;
  message: string;
}

/** What a valid create request resolves to: every default applied. */
export interface ResolvedCreate {
  name: string | null;
  headless: boolean;
  stealth: boolean;
  gpu: boolean;
  kioskMode: boolean;
  memory: MemorySize;
  region: Region;
  timeoutSeconds: number;
  invocationId: string | null;
  startUrl: string | null;
  tags: Record<string, string>;
  viewport: ResolvedViewport;
  chromePolicy: Record<string, unknown> | null;
  /** The memory limit the session runs with, in bytes (see resolveMemory). */
  memoryBytes: number;
}

export const DEFAULT_TIMEOUT_SECONDS = 60;

function exactlyOne(obj: Record<string, unknown>, keys: string[], field: string, out: Problem[]): void {
  const given = keys.filter((k) => obj[k] !== undefined);
  if (given.length !== 1) out.push({ field, message: `exactly one of ${keys.join(', ')} must be given (got ${given.length ? given.join(', ') : 'none'})` });
}

/** An http(s) URL, re-serialised; anything else is a problem. */
export function checkStartUrl(raw: string): string | null {
  try {
    const u = new URL(raw);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.toString() : null;
  } catch {
    return null;
  }
}

/**
 * Cross-field and semantic rules of the create request that the schema cannot express.
 * Pure: the caller passes the plan. Returns every problem, not only the first.
 */
export function checkCreateRules(req: BrowserCreateRequest): Problem[] {
  const out: Problem[] = [];
  req.extensions?.forEach((e, i) => exactlyOne(e, ['id', 'name'], `extensions[${i}]`, out));
  req.vaults?.forEach((v, i) => exactlyOne(v, ['id', 'name'], `vaults[${i}]`, out));
  if (req.profile) exactlyOne(req.profile, ['id', 'name'], 'profile', out);
  if (req.proxy) exactlyOne(req.proxy, ['mode', 'id', 'name'], 'proxy', out);
  if (req.proxy !== undefined && req.proxy_id !== undefined) out.push({ field: 'proxy_id', message: 'cannot be combined with proxy' });
  if (req.gpu === true && req.headless === true) out.push({ field: 'gpu', message: 'GPU acceleration requires headless=false' });
  if (req.gpu === true && req.region !== undefined && req.region !== 'us-east') out.push({ field: 'gpu', message: 'GPU acceleration requires region=us-east' });
  if (req.start_url !== undefined && checkStartUrl(req.start_url) === null) out.push({ field: 'start_url', message: 'must be an absolute http or https URL' });
  if (req.network?.private_hosts) out.push(...checkPrivateHosts(req.network.private_hosts));
  out.push(...checkTelemetryRules(req.telemetry));

  // Not built yet, so refused rather than silently ignored.
  if (req.gpu === true) out.push({ field: 'gpu', message: 'GPU acceleration is not available on this node' });
  return out;
}

/**
 * Plan gates: choosing a region or a GPU needs the Start-Up or Enterprise plan.
 * Returns the reason for a 403, or null.
 */
export function checkPlanGates(req: BrowserCreateRequest, plan: Plan): string | null {
  const premium = plan === 'start_up' || plan === 'enterprise';
  if (req.region !== undefined && !premium) return `choosing a region requires the Start-Up or Enterprise plan (organization plan: ${plan})`;
  if (req.gpu === true && !premium) return `GPU acceleration requires the Start-Up or Enterprise plan (organization plan: ${plan})`;
  return null;
}

/** Memory sizes of the Browser response. */
export type MemorySize = '1GiB' | '2GiB' | '6GiB' | '8GiB' | '16GiB';
const GIB = 1024 ** 3;
export const HEADLESS_MEMORY: MemorySize = '2GiB';
export const GPU_MEMORY: MemorySize = '16GiB';

/**
 * The memory a session gets and reports. The request's `memory` applies to headful,
 * non-GPU sessions (default 8GiB). Headless sessions run with a fixed 2GiB and GPU
 * sessions with a fixed 16GiB, whatever was asked, and report that.
 */
export function resolveMemory(headless: boolean, gpu: boolean, requested: '8GiB' | '16GiB' | undefined): { memory: MemorySize; bytes: number } {
  const memory: MemorySize = headless ? HEADLESS_MEMORY : gpu ? GPU_MEMORY : (requested ?? '8GiB');
  return { memory, bytes: Number.parseInt(memory, 10) * GIB };
}

export function resolveCreate(req: BrowserCreateRequest): ResolvedCreate {
  const headless = req.headless ?? false;
  const gpu = req.gpu ?? false;
  const mem = resolveMemory(headless, gpu, req.memory);
  return {
    name: req.name ?? null,
    headless,
    stealth: req.stealth ?? false,
    gpu,
    kioskMode: req.kiosk_mode ?? false,
    memory: mem.memory,
    memoryBytes: mem.bytes,
    chromePolicy: req.chrome_policy ?? null,
    region: req.region ?? 'us-east',
    timeoutSeconds: req.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS,
    invocationId: req.invocation_id ?? null,
    startUrl: req.start_url !== undefined ? checkStartUrl(req.start_url) : null,
    tags: req.tags ?? {},
    viewport: resolveViewport(req.viewport),
  };
}
