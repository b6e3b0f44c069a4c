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

export interface VaultsTable {
  id: string;
  project_id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

/** Metadata of a vault item; never a secret value (those are in vault_item_secrets, encrypted). */
export interface VaultItemsTable {
  id: string;
  vault_id: string;
  project_id: string;
  key: string;
  type: string;
  /** JSON: the normalized spec. */
  spec: string;
  /** JSON: status, status_reason and type-specific safe state (provider, authorization id, card display). */
  state: string;
  /** JSON object: values of fields marked non-sensitive (shown in listings). */
  public_values: string;
  /** JSON array: names of the fields that hold a value, sensitive or not. */
  value_fields: string;
  version: number;
  /** single_use_card: the wallet item that issued it. */
  parent_id: string | null;
  /** single_use_card: the Idempotency-Key of its checkout at the provider. */
  idempotency_key: string | null;
  expires_at: string | null;
  /** The open collection session (at most one per item) and its expiry. */
  action_id: string | null;
  action_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

/** One item's secret values: AES-256-GCM under a data key that is stored only wrapped by the KEK. */
export interface VaultItemSecretsTable {
  item_id: string;
  kek_id: string;
  /** base64 */
  wrapped_key: string;
  /** base64 */
  ciphertext: string;
  created_at: string;
}

export interface BrowserSessionVaultsTable {
  session_id: string;
  vault_id: string;
  position: number;
}

export interface ProfilesTable {
  id: string;
  project_id: string;
  name: string | null;
  created_at: string;
  updated_at: string;
  last_used_at: string | null;
  /** The active session that writes its state back when it ends (save_changes: true); at most one. */
  writer_session_id: string | null;
}

export interface ExtensionsTable {
  id: string;
  project_id: string;
  name: string | null;
  size_bytes: number;
  /** SHA-256 (hex) of the uploaded archive's exact bytes. */
  checksum: string;
  manifest_name: string;
  manifest_version: number;
  version: string;
  created_at: string;
  last_used_at: string | null;
}

export interface ProxiesTable {
  id: string;
  project_id: string;
  name: string | null;
  type: string;
  /** http | https | socks5 */
  protocol: string;
  host: string;
  port: number;
  username: string | null;
  /** JSON: the password sealed with AES-256-GCM; null when the proxy has none. */
  password_sealed: string | null;
  /** JSON array of host patterns the proxy itself is bypassed for. */
  bypass_hosts: string;
  status: string | null;
  last_checked: string | null;
  ip_address: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

/** A session's telemetry configuration (JSON TelemetryState); absent row: never configured. */
export interface BrowserSessionTelemetryTable {
  session_id: string;
  state: string;
  updated_at: string;
}

/** Captured telemetry events of a session, in capture order (seq). */
export interface TelemetryEventsTable {
  session_id: string;
  seq: number;
  /** Unix microseconds. */
  ts: number;
  category: string;
  type: string;
  /** JSON: the whole event (category, type, ts, source, data). */
  event: string;
}

/** OTLP/HTTP destinations telemetry can be exported to. */
export interface TelemetryDestinationsTable {
  id: string;
  project_id: string;
  name: string | null;
  endpoint: string;
  /** JSON object of headers sent with every export request. */
  headers: string;
  created_at: string;
  updated_at: string;
}

/** A browser pool: browsers kept warm with one configuration, leased with acquire, returned with release. */
export interface BrowserPoolsTable {
  id: string;
  project_id: string;
  organization_id: string;
  node_id: string;
  name: string | null;
  size: number;
  fill_rate_per_minute: number;
  timeout_seconds: number;
  /** JSON {browser, resolved}: the browser configuration as sent (domain/pool-request.ts) and its resolved profile/extension ids. */
  config: string;
  created_at: string;
  updated_at: string;
}

/** A session of a pool; `state` is idle or leased. */
export interface BrowserPoolMembersTable {
  session_id: string;
  pool_id: string;
  state: string;
  baseline: string | null;
  updated_at: string;
}

export interface Database {
  organizations: OrganizationsTable;
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  settings: SettingsTable;
  nodes: NodesTable;
  browser_sessions: BrowserSessionsTable;
  browser_session_tags: BrowserSessionTagsTable;
  vaults: VaultsTable;
  vault_items: VaultItemsTable;
  vault_item_secrets: VaultItemSecretsTable;
  browser_session_vaults: BrowserSessionVaultsTable;
  profiles: ProfilesTable;
  extensions: ExtensionsTable;
  proxies: ProxiesTable;
  browser_session_telemetry: BrowserSessionTelemetryTable;
  telemetry_events: TelemetryEventsTable;
  telemetry_destinations: TelemetryDestinationsTable;
  browser_pools: BrowserPoolsTable;
  browser_pool_members: BrowserPoolMembersTable;
}
