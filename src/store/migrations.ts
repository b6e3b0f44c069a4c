import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';

/**
 * Migrations live in code (not files) so the compiled server and the tests run the
 * same list on SQLite and PostgreSQL. Only portable column types are used.
 */
const migrations: Record<string, Migration> = {
  '0001_foundation': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('organizations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('plan', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('projects')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('is_default', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('projects_org_name', ['organization_id', 'name'])
        .execute();
      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('project_id', 'text', (c) => c.references('projects.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('key_prefix', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('revoked_at', 'text')
        .addColumn('last_used_at', 'text')
        .execute();
      await db.schema
        .createTable('settings')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('nodes')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('address', 'text', (c) => c.notNull())
        .addColumn('region', 'text', (c) => c.notNull())
        .addColumn('capacity', 'integer', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('heartbeat_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('browser_sessions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('node_id', 'text', (c) => c.notNull())
        .addColumn('name', 'text')
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('headless', 'integer', (c) => c.notNull())
        .addColumn('stealth', 'integer', (c) => c.notNull())
        .addColumn('gpu', 'integer', (c) => c.notNull())
        .addColumn('kiosk_mode', 'integer', (c) => c.notNull())
        .addColumn('memory', 'text', (c) => c.notNull())
        .addColumn('region', 'text', (c) => c.notNull())
        .addColumn('timeout_seconds', 'integer', (c) => c.notNull())
        .addColumn('invocation_id', 'text')
        .addColumn('start_url', 'text')
        .addColumn('tags', 'text', (c) => c.notNull())
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('runtime', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('last_active_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .addColumn('uptime_ms', 'bigint')
        .addColumn('usage_status', 'text')
        .addColumn('end_reason', 'text')
        .execute();
      // Name is unique among the project's active sessions only: a partial index, which both engines support.
      await sql`CREATE UNIQUE INDEX browser_sessions_active_name ON browser_sessions (project_id, name) WHERE deleted_at IS NULL AND name IS NOT NULL`.execute(db);
      await db.schema.createIndex('browser_sessions_node_active').on('browser_sessions').columns(['node_id', 'deleted_at']).execute();
      await db.schema
        .createTable('browser_session_tags')
        .addColumn('session_id', 'text', (c) => c.notNull().references('browser_sessions.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('value', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('browser_session_tags_pk', ['session_id', 'key'])
        .execute();
      await db.schema.createIndex('browser_session_tags_kv').on('browser_session_tags').columns(['key', 'value']).execute();
      await db.schema.createIndex('browser_sessions_project_created').on('browser_sessions').columns(['project_id', 'created_at']).execute();
    },
  },
  '0002_vaults': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('vaults')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('vaults_project_name', ['project_id', 'name'])
        .execute();
      await db.schema.createIndex('vaults_project_created').on('vaults').columns(['project_id', 'created_at']).execute();
      await db.schema
        .createTable('vault_items')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('vault_id', 'text', (c) => c.notNull().references('vaults.id'))
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('spec', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('public_values', 'text', (c) => c.notNull())
        .addColumn('value_fields', 'text', (c) => c.notNull())
        .addColumn('version', 'integer', (c) => c.notNull())
        .addColumn('parent_id', 'text')
        .addColumn('idempotency_key', 'text')
        .addColumn('expires_at', 'text')
        .addColumn('action_id', 'text')
        .addColumn('action_expires_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('vault_items_vault_key', ['vault_id', 'key'])
        .execute();
      await db.schema.createIndex('vault_items_parent').on('vault_items').column('parent_id').execute();
      // Secret values live apart from the metadata: deleting this row destroys the item's only data key.
      await db.schema
        .createTable('vault_item_secrets')
        .addColumn('item_id', 'text', (c) => c.primaryKey().references('vault_items.id'))
        .addColumn('kek_id', 'text', (c) => c.notNull())
        .addColumn('wrapped_key', 'text', (c) => c.notNull())
        .addColumn('ciphertext', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      // Links are immutable and outlive the vault (a deleted vault leaves a dangling id that matches nothing).
      await db.schema
        .createTable('browser_session_vaults')
        .addColumn('session_id', 'text', (c) => c.notNull().references('browser_sessions.id'))
        .addColumn('vault_id', 'text', (c) => c.notNull())
        .addColumn('position', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('browser_session_vaults_pk', ['session_id', 'vault_id'])
        .execute();
      await db.schema.createIndex('browser_session_vaults_vault').on('browser_session_vaults').column('vault_id').execute();
    },
  },
  '0003_profiles_extensions_proxies': {
    async up(db: Kysely<any>) {
      // Names are optional; a UNIQUE constraint lets any number of NULL names through in both engines.
      await db.schema
        .createTable('profiles')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('name', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('last_used_at', 'text')
        // The one active session that will write its state back (save_changes: true), if any.
        .addColumn('writer_session_id', 'text')
        .addUniqueConstraint('profiles_project_name', ['project_id', 'name'])
        .execute();
      await db.schema.createIndex('profiles_project_created').on('profiles').columns(['project_id', 'created_at']).execute();
      await db.schema
        .createTable('extensions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('name', 'text')
        .addColumn('size_bytes', 'integer', (c) => c.notNull())
        .addColumn('checksum', 'text', (c) => c.notNull())
        .addColumn('manifest_name', 'text', (c) => c.notNull())
        .addColumn('manifest_version', 'integer', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('last_used_at', 'text')
        .addUniqueConstraint('extensions_project_name', ['project_id', 'name'])
        .execute();
      await db.schema.createIndex('extensions_project_created').on('extensions').columns(['project_id', 'created_at']).execute();
      // Proxies are soft-deleted (sessions that use one keep it); names need not be unique.
      await db.schema
        .createTable('proxies')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('name', 'text')
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('protocol', 'text', (c) => c.notNull())
        .addColumn('host', 'text', (c) => c.notNull())
        .addColumn('port', 'integer', (c) => c.notNull())
        .addColumn('username', 'text')
        // JSON: the password sealed with AES-256-GCM (never stored or returned in clear).
        .addColumn('password_sealed', 'text')
        .addColumn('bypass_hosts', 'text', (c) => c.notNull())
        .addColumn('status', 'text')
        .addColumn('last_checked', 'text')
        .addColumn('ip_address', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .execute();
      await db.schema.createIndex('proxies_project_created').on('proxies').columns(['project_id', 'created_at']).execute();
    },
  },
  '0004_telemetry': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('browser_session_telemetry')
        .addColumn('session_id', 'text', (c) => c.primaryKey().references('browser_sessions.id'))
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('telemetry_events')
        .addColumn('session_id', 'text', (c) => c.notNull())
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('ts', 'bigint', (c) => c.notNull())
        .addColumn('category', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('event', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('telemetry_events_pk', ['session_id', 'seq'])
        .execute();
      await db.schema.createIndex('telemetry_events_session_ts').on('telemetry_events').columns(['session_id', 'ts']).execute();
      await db.schema
        .createTable('telemetry_destinations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('name', 'text')
        .addColumn('endpoint', 'text', (c) => c.notNull())
        .addColumn('headers', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('telemetry_destinations_project_name', ['project_id', 'name'])
        .execute();
    },
  },
  '0005_browser_pools': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('browser_pools')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        // The node that fills the pool and runs its browsers.
        .addColumn('node_id', 'text', (c) => c.notNull())
        .addColumn('name', 'text')
        .addColumn('size', 'integer', (c) => c.notNull())
        .addColumn('fill_rate_per_minute', 'integer', (c) => c.notNull())
        .addColumn('timeout_seconds', 'integer', (c) => c.notNull())
        // JSON: the browser configuration (browser_pool_config without size, fill rate, timeout).
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('browser_pools_project_name', ['project_id', 'name'])
        .execute();
      // A session that belongs to a pool: idle (available) or leased. The row goes when the session ends.
      await db.schema
        .createTable('browser_pool_members')
        .addColumn('session_id', 'text', (c) => c.primaryKey().references('browser_sessions.id'))
        .addColumn('pool_id', 'text', (c) => c.notNull().references('browser_pools.id'))
        .addColumn('state', 'text', (c) => c.notNull())
        // JSON TelemetryState the session had when leased (restored on release with reuse); null while idle.
        .addColumn('baseline', 'text')
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('browser_pool_members_pool').on('browser_pool_members').columns(['pool_id', 'state']).execute();
    },
  },
};

class InCodeMigrations implements MigrationProvider {
  async getMigrations() {
    return migrations;
  }
}

export async function migrateToLatest(db: Kysely<any>): Promise<void> {
  const migrator = new Migrator({ db, provider: new InCodeMigrations() });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`database migration ${failed?.migrationName ?? ''} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
