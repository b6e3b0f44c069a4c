import crypto from 'node:crypto';
import pg from 'pg';

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
