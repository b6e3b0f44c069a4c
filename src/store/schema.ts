/**
 * Table shapes shared by SQLite and PostgreSQL. Portable types on purpose:
 * times are ISO-8601 UTC text (sortable as text), booleans are 0/1 integers,
 * JSON is text. One set of repositories then reads both stores the same way.
 */
export interface OrganizationsTable {
  id: string;
  name: string;
  plan: string;
  created_at: string;
}

export interface ProjectsTable {
  id: string;
  organization_id: string;
  name: string;
  is_default: number;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  organization_id: string;
  project_id: string | null;
  name: string;
  key_hash: string;
  key_prefix: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface NodesTable {
  id: string;
  address: string;
  region: string;
  capacity: number;
  started_at: string;
  heartbeat_at: string;
}

export interface BrowserSessionsTable {
  id: string;
  project_id: string;
  node_id: string;
  name: string | null;
  /** starting | active | deleted */
  status: string;
  headless: number;
  stealth: number;
  gpu: number;
  kiosk_mode: number;
  memory: string;
  region: string;
  timeout_seconds: number;
  invocation_id: string | null;
  start_url: string | null;
  /** JSON object of tags */
  tags: string;
  /** JSON: the resolved launch configuration (viewport and later chrome_policy, profile, proxy...). */
  config: string;
  /** JSON: what the runtime needs to find the browser again (pids, port, dirs). Null until launched. */
  runtime: string | null;
  created_at: string;
  last_active_at: string;
  deleted_at: string | null;
  uptime_ms: number | null;
  usage_status: string | null;
  end_reason: string | null;
}

export interface BrowserSessionTagsTable {
  session_id: string;
  key: string;
  value: string;
}

export interface Database {
  organizations: OrganizationsTable;
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  settings: SettingsTable;
  nodes: NodesTable;
  browser_sessions: BrowserSessionsTable;
  browser_session_tags: BrowserSessionTagsTable;
}
