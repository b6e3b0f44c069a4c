import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import type { StoreConfig } from '../config.js';
import { migrateToLatest } from './migrations.js';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

export interface Store {
  db: Db;
  kind: StoreConfig['kind'];
  /** True when a trivial query answers. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Opens the store and brings its schema up to date.
 * SQLite runs in WAL mode with synchronous=FULL so that a write acknowledged to a
 * client has reached the disk and survives kill -9 (and power loss) of the server.
 */
export async function openStore(cfg: StoreConfig): Promise<Store> {
  let db: Db;
  if (cfg.kind === 'sqlite') {
    fs.mkdirSync(path.dirname(cfg.file), { recursive: true, mode: 0o700 });
    const sqlite = new BetterSqlite3(cfg.file);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 5000');
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  } else {
    // bigint (int8) columns come back as strings by default; our values fit in a double.
    pg.types.setTypeParser(20, (v) => Number(v));
    const pool = new pg.Pool({ connectionString: cfg.url, max: 10 });
    // An idle client that loses its server emits 'error'; without a listener that would crash the process.
    pool.on('error', () => undefined);
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  }
  await migrateToLatest(db);
  return {
    db,
    kind: cfg.kind,
    async ping() {
      try {
        await sql`SELECT 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      await db.destroy();
    },
  };
}

/** True when the error is a unique-constraint violation in either engine. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  if (!e) return false;
  return e.code === '23505' || e.code === 'SQLITE_CONSTRAINT_UNIQUE' || /UNIQUE constraint failed/.test(e.message ?? '');
}
