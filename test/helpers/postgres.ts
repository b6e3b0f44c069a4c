import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { StoreConfig } from '../../src/config.js';

/**
 * A fresh PostgreSQL database for one test, created through BROWSERD_TEST_PG_URL (a role
 * with CREATEDB; `./run test` sets it up). Returns its URL and a drop function.
 */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = process.env.BROWSERD_TEST_PG_URL;
  if (!admin) throw new Error('BROWSERD_TEST_PG_URL is not set: run the suite with ./run test (it installs and starts PostgreSQL)');
  const name = `browserd_t_${crypto.randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const u = new URL(admin);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Both stores a store test runs on: a SQLite file in a fresh temp dir (named with `prefix`) and a fresh PostgreSQL database. */
export function storeBackends(prefix: string): { name: string; create(): Promise<{ cfg: StoreConfig; destroy(): Promise<void> }> }[] {
  return [
    {
      name: 'SQLite',
      async create() {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
        return { cfg: { kind: 'sqlite', file: path.join(dir, 'browserd.sqlite') }, destroy: async () => fs.rmSync(dir, { recursive: true, force: true }) };
      },
    },
    {
      name: 'PostgreSQL',
      async create() {
        const db = await createTestDatabase();
        return { cfg: { kind: 'postgres', url: db.url }, destroy: () => db.drop() };
      },
    },
  ];
}
