import type { ResolvedViewport } from '../domain/viewport.js';
import type { RuntimeHandle } from '../runtime/browser-runtime.js';
import type { BrowserSessionsTable } from '../store/schema.js';

/** Launch configuration kept with the session (JSON column `config`). */
export interface SessionConfig {
  viewport: ResolvedViewport;
  /** Policies applied to this session, echoed back; absent when none were given. */
  chromePolicy?: Record<string, unknown>;
  /** Ids of the vaults linked at creation (immutable; also in browser_session_vaults); absent when none. */
  vaults?: string[];
  /** The profile the session started from (a snapshot of its metadata) and whether it saves back into it. */
  profile?: { id: string; name: string | null; createdAt: string; saveChanges: boolean };
  /** Ids of the extensions loaded at creation, in request order. */
  extensions?: string[];
  /** Proxy selection as last requested (absent: never given, the stealth-derived default). */
  proxy?: { mode: 'direct' | 'default' } | { id: string };
  /** The network configuration given at creation, echoed back (immutable). */
  network?: { private_hosts?: string[] };
  /** Port of the session's local egress bridge (Chromium's --proxy-server), reopened on re-adoption. */
  bridgePort?: number;
}

/** A session row with its JSON columns parsed and booleans restored. */
export interface SessionRecord {
  id: string;
  projectId: string;
  nodeId: string;
  name: string | null;
  status: 'starting' | 'active' | 'deleted';
  headless: boolean;
  stealth: boolean;
  gpu: boolean;
  kioskMode: boolean;
  memory: string;
  region: string;
  timeoutSeconds: number;
  invocationId: string | null;
  startUrl: string | null;
  tags: Record<string, string>;
  config: SessionConfig;
  runtime: RuntimeHandle | null;
  createdAt: string;
  lastActiveAt: string;
  deletedAt: string | null;
  uptimeMs: number | null;
  usageStatus: 'pending' | 'ready' | null;
  endReason: string | null;
}

export function fromRow(r: BrowserSessionsTable): SessionRecord {
  return {
    id: r.id,
    projectId: r.project_id,
    nodeId: r.node_id,
    name: r.name,
    status: r.status as SessionRecord['status'],
    headless: r.headless === 1,
    stealth: r.stealth === 1,
    gpu: r.gpu === 1,
    kioskMode: r.kiosk_mode === 1,
    memory: r.memory,
    region: r.region,
    timeoutSeconds: r.timeout_seconds,
    invocationId: r.invocation_id,
    startUrl: r.start_url,
    tags: JSON.parse(r.tags) as Record<string, string>,
    config: JSON.parse(r.config) as SessionConfig,
    runtime: r.runtime ? (JSON.parse(r.runtime) as RuntimeHandle) : null,
    createdAt: r.created_at,
    lastActiveAt: r.last_active_at,
    deletedAt: r.deleted_at,
    uptimeMs: r.uptime_ms === null ? null : Number(r.uptime_ms),
    usageStatus: r.usage_status as SessionRecord['usageStatus'],
    endReason: r.end_reason,
  };
}

export function toRow(s: SessionRecord): BrowserSessionsTable {
  return {
    id: s.id,
    project_id: s.projectId,
    node_id: s.nodeId,
    name: s.name,
    status: s.status,
    headless: s.headless ? 1 : 0,
    stealth: s.stealth ? 1 : 0,
    gpu: s.gpu ? 1 : 0,
    kiosk_mode: s.kioskMode ? 1 : 0,
    memory: s.memory,
    region: s.region,
    timeout_seconds: s.timeoutSeconds,
    invocation_id: s.invocationId,
    start_url: s.startUrl,
    tags: JSON.stringify(s.tags),
    config: JSON.stringify(s.config),
    runtime: s.runtime ? JSON.stringify(s.runtime) : null,
    created_at: s.createdAt,
    last_active_at: s.lastActiveAt,
    deleted_at: s.deletedAt,
    uptime_ms: s.uptimeMs,
    usage_status: s.usageStatus,
    end_reason: s.endReason,
  };
}
