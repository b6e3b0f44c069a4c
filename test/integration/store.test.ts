import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { openStore, type Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrations.js';
import { Accounts, DEFAULT_ORG_NAME, DEFAULT_PROJECT_NAME } from '../../src/accounts/accounts.js';
import { hashApiKey } from '../../src/accounts/api-key-secret.js';
import { SessionRepo, type ListFilter } from '../../src/sessions/session-repo.js';
import type { SessionRecord } from '../../src/sessions/session-record.js';
import { ApiError, Conflict, NotFound } from '../../src/http/errors.js';
import { newId } from '../../src/domain/ids.js';
import type { StoreConfig } from '../../src/config.js';
import { createTestDatabase } from '../helpers/postgres.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

interface Backend {
  name: string;
  /** A fresh, empty store config and a function that removes it. */
  create(): Promise<{ cfg: StoreConfig; destroy(): Promise<void> }>;
}

const BACKENDS: Backend[] = [
  {
    name: 'SQLite',
    async create() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-store-'));
      return {
        cfg: { kind: 'sqlite', file: path.join(dir, 'db', 'browserd.sqlite') },
        async destroy() {
          fs.rmSync(dir, { recursive: true, force: true });
        },
      };
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

/** Asserts that `p` rejects with an ApiError of this class, status and code. */
async function rejectsWith(p: Promise<unknown>, cls: new (...args: never[]) => ApiError, status: number, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    return true;
  });
}

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (secs: number) => new Date(T0 + secs * 1000).toISOString();

function record(projectId: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: newId(),
    projectId,
    nodeId: 'node-a',
    name: null,
    status: 'starting',
    headless: false,
    stealth: false,
    gpu: false,
    kioskMode: false,
    memory: '8GiB',
    region: 'us-east',
    timeoutSeconds: 60,
    invocationId: null,
    startUrl: null,
    tags: {},
    config: { viewport: { width: 1920, height: 1080, refresh_rate: 25 } },
    runtime: null,
    createdAt: at(0),
    lastActiveAt: at(0),
    deletedAt: null,
    uptimeMs: null,
    usageStatus: null,
    endReason: null,
    ...over,
  };
}

for (const backend of BACKENDS) {
  describe(`store on ${backend.name}`, () => {
    let env: Awaited<ReturnType<Backend['create']>>;
    let store: Store;
    let accounts: Accounts;
    let repo: SessionRepo;
    let orgId: string;

    before(async () => {
      env = await backend.create();
      store = await openStore(env.cfg);
      accounts = new Accounts(store.db);
      repo = new SessionRepo(store.db);
      orgId = (await accounts.createOrganization(`org-${crypto.randomBytes(4).toString('hex')}`, 'free')).organization.id;
    });
    after(async () => {
      await store?.close();
      await env?.destroy();
    });

    /** A fresh project, so each test lists only its own sessions. */
    async function project(): Promise<string> {
      return (await accounts.createProject(orgId, `p-${crypto.randomBytes(5).toString('hex')}`)).id;
    }
    function filter(projectId: string, over: Partial<ListFilter> = {}): ListFilter {
      return { projectId, status: 'active', tags: {}, query: null, offset: 0, limit: 100, ...over };
    }
    async function ids(f: ListFilter): Promise<string[]> {
      return (await repo.list(f)).items.map((s) => s.id);
    }

    describe('migrations', () => {
      test('running them again (twice) changes nothing and keeps the data', async () => {
        const before = await accounts.listOrganizations();
        await migrateToLatest(store.db);
        await migrateToLatest(store.db);
        const rows = await sql<{ name: string }>`SELECT name FROM kysely_migration`.execute(store.db);
        assert.deepEqual(
          rows.rows.map((r) => r.name),
          ['0001_foundation', '0002_vaults', '0003_profiles_extensions_proxies', '0004_telemetry', '0005_browser_pools'],
        );
        assert.deepEqual(await accounts.listOrganizations(), before);
        assert.equal(await store.ping(), true);
      });
      test('a second store opened on the same database migrates idempotently and sees the same data', async () => {
        const other = await openStore(env.cfg);
        try {
          assert.equal(other.kind, env.cfg.kind);
          const seen = await new Accounts(other.db).findOrganization(orgId);
          assert.equal(seen?.id, orgId);
        } finally {
          await other.close();
        }
      });
    });

    describe('Accounts', () => {
      test('ensureDefaultOrganization creates the default organization once, with its default project', async () => {
        const a = await accounts.ensureDefaultOrganization();
        const b = await accounts.ensureDefaultOrganization();
        assert.equal(a.id, b.id);
        assert.equal(a.name, DEFAULT_ORG_NAME);
        assert.equal(a.plan, 'free');
        const named = (await accounts.listOrganizations()).filter((o) => o.name === DEFAULT_ORG_NAME);
        assert.equal(named.length, 1);
        const projects = await accounts.listProjects(a.id);
        assert.equal(projects.length, 1);
        assert.equal(projects[0]!.name, DEFAULT_PROJECT_NAME);
        assert.equal(projects[0]!.is_default, true);
        assert.equal((await accounts.defaultProject(a.id)).id, projects[0]!.id);
      });
      test('ensureDefaultOrganization called concurrently still yields one organization', async () => {
        const [x, y, z] = await Promise.all([accounts.ensureDefaultOrganization(), accounts.ensureDefaultOrganization(), accounts.ensureDefaultOrganization()]);
        assert.equal(x.id, y.id);
        assert.equal(y.id, z.id);
        assert.equal((await accounts.listOrganizations()).filter((o) => o.name === DEFAULT_ORG_NAME).length, 1);
      });
      test('creating an organization with a taken name is a Conflict and leaves no half-created rows', async () => {
        const name = `dup-${crypto.randomBytes(4).toString('hex')}`;
        const { organization, defaultProject } = await accounts.createOrganization(name, 'start_up');
        assert.equal(organization.plan, 'start_up');
        assert.equal(defaultProject.organization_id, organization.id);
        assert.equal(defaultProject.is_default, true);
        const projectsBefore = await store.db.selectFrom('projects').select('id').execute();
        await rejectsWith(accounts.createOrganization(name, 'free'), Conflict, 409, 'conflict');
        const projectsAfter = await store.db.selectFrom('projects').select('id').execute();
        assert.equal(projectsAfter.length, projectsBefore.length);
        assert.equal((await accounts.findOrganization(name))?.plan, 'start_up');
      });
      test('findOrganization by id or name; unknown is null', async () => {
        const o = await accounts.findOrganization(orgId);
        assert.ok(o);
        assert.equal((await accounts.findOrganization(o.name))?.id, orgId);
        assert.equal(await accounts.findOrganization('no-such-org'), null);
      });
      test('projects: create, find by id or name, duplicates refused, scoped to the organization', async () => {
        const name = `proj-${crypto.randomBytes(4).toString('hex')}`;
        const p = await accounts.createProject(orgId, name);
        assert.equal(p.is_default, false);
        assert.equal(p.organization_id, orgId);
        assert.deepEqual(await accounts.findProject(orgId, p.id), p);
        assert.deepEqual(await accounts.findProject(orgId, name), p);
        assert.equal(await accounts.findProject(orgId, 'no-such-project'), null);
        await rejectsWith(accounts.createProject(orgId, name), Conflict, 409, 'conflict');
        const other = await accounts.createOrganization(`other-${crypto.randomBytes(4).toString('hex')}`, 'free');
        assert.equal(await accounts.findProject(other.organization.id, p.id), null);
        assert.equal(await accounts.findProject(other.organization.id, name), null);
        const same = await accounts.createProject(other.organization.name, name);
        assert.notEqual(same.id, p.id);
        await rejectsWith(accounts.createProject('no-such-org', 'x'), NotFound, 404, 'not_found');
        assert.ok((await accounts.listProjects(orgId)).some((x) => x.id === p.id));
      });
      test('API keys are stored only as a hash: the plain key appears nowhere in the row', async () => {
        const { key, info } = await accounts.createKey({ organizationId: orgId, name: 'ci' });
        assert.match(key, /^bd_/);
        const row = await store.db.selectFrom('api_keys').selectAll().where('id', '=', info.id).executeTakeFirstOrThrow();
        assert.equal(row.key_hash, hashApiKey(key));
        assert.equal(row.key_prefix, key.slice(0, 8));
        for (const [col, v] of Object.entries(row)) {
          if (typeof v !== 'string') continue;
          assert.ok(!v.includes(key), `column ${col} holds the plain key`);
          assert.ok(!v.includes(key.slice(8)), `column ${col} holds the secret part of the key`);
        }
        const listed = await accounts.listKeys(orgId);
        const mine = listed.find((k) => k.id === info.id);
        assert.ok(mine);
        assert.ok(!('key_hash' in mine));
        assert.ok(!JSON.stringify(listed).includes(key));
      });
      test('authenticate finds the active key with its organization; a wrong key is null', async () => {
        const { key, info } = await accounts.createKey({ organizationId: orgId });
        const who = await accounts.authenticate(key);
        assert.ok(who);
        assert.equal(who.keyId, info.id);
        assert.equal(who.organization.id, orgId);
        assert.equal(who.keyProjectId, null);
        assert.equal(await accounts.authenticate(`${key}x`), null);
        assert.equal(await accounts.authenticate('bd_not-a-key'), null);
      });
      test('a project-scoped key reports its project; a project of another organization is refused', async () => {
        const pid = await project();
        const { key } = await accounts.createKey({ organizationId: orgId, projectId: pid });
        assert.equal((await accounts.authenticate(key))?.keyProjectId, pid);
        const other = await accounts.createOrganization(`o-${crypto.randomBytes(4).toString('hex')}`, 'free');
        await rejectsWith(accounts.createKey({ organizationId: other.organization.id, projectId: pid }), NotFound, 404, 'not_found');
      });
      test('a revoked key is not authenticated; revoking twice keeps the first time', async () => {
        const { key, info } = await accounts.createKey({ organizationId: orgId });
        const heldBefore = await accounts.countKeys();
        const r1 = await accounts.revokeKey(info.id);
        assert.ok(r1.revoked_at);
        assert.ok(!('key_hash' in r1));
        assert.equal(await accounts.authenticate(key), null);
        // A revoked key is still held by the store (so a restart does not mint a new first key).
        assert.equal(await accounts.countKeys(), heldBefore);
        const r2 = await accounts.revokeKey(info.id);
        assert.equal(r2.revoked_at, r1.revoked_at);
        await rejectsWith(accounts.revokeKey('nosuchkey'), NotFound, 404, 'not_found');
      });
      test('ensureKey is idempotent and re-activates a revoked configured key', async () => {
        const plain = `configured-${crypto.randomBytes(8).toString('hex')}`;
        await accounts.ensureKey(plain, orgId, 'configured');
        await accounts.ensureKey(plain, orgId, 'configured');
        const rows = await store.db.selectFrom('api_keys').selectAll().where('key_hash', '=', hashApiKey(plain)).execute();
        assert.equal(rows.length, 1);
        assert.equal(rows[0]!.name, 'configured');
        const who = await accounts.authenticate(plain);
        assert.equal(who?.organization.id, orgId);
        await accounts.revokeKey(rows[0]!.id);
        assert.equal(await accounts.authenticate(plain), null);
        await accounts.ensureKey(plain, orgId, 'configured');
        assert.equal((await accounts.authenticate(plain))?.keyId, rows[0]!.id);
      });
      test('the same plain key cannot be created twice', async () => {
        const plain = `k-${crypto.randomBytes(10).toString('hex')}`;
        await accounts.createKey({ organizationId: orgId, plainKey: plain });
        await rejectsWith(accounts.createKey({ organizationId: orgId, plainKey: plain }), Conflict, 409, 'conflict');
      });
      test('setPlan changes the plan seen by lookups and by authentication', async () => {
        const { organization } = await accounts.createOrganization(`plan-${crypto.randomBytes(4).toString('hex')}`, 'free');
        const { key } = await accounts.createKey({ organizationId: organization.id });
        const updated = await accounts.setPlan(organization.name, 'enterprise');
        assert.equal(updated.plan, 'enterprise');
        assert.equal((await accounts.findOrganization(organization.id))?.plan, 'enterprise');
        assert.equal((await accounts.authenticate(key))?.organization.plan, 'enterprise');
        await accounts.setPlan(organization.id, 'hobbyist');
        assert.equal((await accounts.findOrganization(organization.id))?.plan, 'hobbyist');
        await rejectsWith(accounts.setPlan('no-such-org', 'free'), NotFound, 404, 'not_found');
      });
    });

    describe('SessionRepo', () => {
      test('insert, then find by id and by name; every field survives the round trip', async () => {
        const pid = await project();
        const s = record(pid, {
          name: 'full.record_1',
          status: 'active',
          headless: true,
          stealth: true,
          gpu: true,
          kioskMode: true,
          memory: '16GiB',
          region: 'eu-west',
          timeoutSeconds: 259200,
          invocationId: 'inv-1',
          startUrl: 'https://example.com/',
          tags: { team: 'a', 'env:stage': 'b c' },
          config: { viewport: { width: 1280, height: 800, refresh_rate: 60 } },
          runtime: { dir: '/tmp/x', chromium: { pid: 123, port: 9222, wsPath: '/devtools/browser/abc' }, display: { pid: 124, number: 99 } },
          createdAt: at(1),
          lastActiveAt: at(2),
        });
        await repo.insert(s);
        assert.deepEqual(await repo.byId(s.id), s);
        assert.deepEqual(await repo.find(pid, s.id, false), s);
        assert.deepEqual(await repo.find(pid, 'full.record_1', false), s);
        assert.equal(await repo.byId('nosuchsession'), null);
        assert.equal(await repo.find(pid, 'no-such-name', true), null);
        const otherProject = await project();
        assert.equal(await repo.find(otherProject, s.id, true), null);
        assert.equal(await repo.find(otherProject, 'full.record_1', true), null);
      });

      test('a name is unique among active sessions of a project only', async () => {
        const pid = await project();
        const first = record(pid, { name: 'agent', createdAt: at(1) });
        await repo.insert(first);
        await rejectsWith(repo.insert(record(pid, { name: 'agent', createdAt: at(2) })), Conflict, 409, 'name_conflict');
        // the failed insert left nothing behind
        assert.deepEqual(await ids(filter(pid, { status: 'all' })), [first.id]);
        // another project may use the name
        await repo.insert(record(await project(), { name: 'agent' }));
        // sessions without a name never collide
        await repo.insert(record(pid, { createdAt: at(3) }));
        await repo.insert(record(pid, { createdAt: at(4) }));
        // once the first has ended, the name is free again
        assert.equal(await repo.markDeleted(first.id, at(10), 9000, 'deleted'), true);
        const second = record(pid, { name: 'agent', createdAt: at(11) });
        await repo.insert(second);
        assert.equal((await repo.find(pid, 'agent', false))?.id, second.id);
        assert.equal(await repo.markDeleted(second.id, at(20), 9000, 'deleted'), true);
        assert.equal(await repo.find(pid, 'agent', false), null);
        // with deleted ones, the most recently ended one of that name
        assert.equal((await repo.find(pid, 'agent', true))?.id, second.id);
        assert.equal(await repo.find(pid, first.id, false), null);
        assert.equal((await repo.find(pid, first.id, true))?.id, first.id);
      });

      test('renaming onto an active name is a name_conflict; the session keeps its name', async () => {
        const pid = await project();
        const a = record(pid, { name: 'a' });
        const b = record(pid, { name: 'b' });
        await repo.insert(a);
        await repo.insert(b);
        await rejectsWith(repo.update(b.id, { name: 'a' }), Conflict, 409, 'name_conflict');
        assert.equal((await repo.byId(b.id))?.name, 'b');
        await repo.update(b.id, { name: null });
        assert.equal((await repo.byId(b.id))?.name, null);
        await repo.update(a.id, { name: 'b' });
        assert.equal((await repo.find(pid, 'b', false))?.id, a.id);
      });

      test('list by status: active, deleted, all', async () => {
        const pid = await project();
        const live = record(pid, { createdAt: at(1) });
        const gone = record(pid, { createdAt: at(2) });
        await repo.insert(live);
        await repo.insert(gone);
        await repo.markDeleted(gone.id, at(3), 1000, 'deleted');
        assert.deepEqual(await ids(filter(pid, { status: 'active' })), [live.id]);
        assert.deepEqual(await ids(filter(pid, { status: 'deleted' })), [gone.id]);
        assert.deepEqual(await ids(filter(pid, { status: 'all' })), [gone.id, live.id]);
      });

      test('list is newest first (by created_at, not insertion order) and paginates with offset/limit/hasMore', async () => {
        const pid = await project();
        const order = [3, 0, 4, 1, 2]; // insertion order of creation times
        const byTime = new Map<number, string>();
        for (const t of order) {
          const s = record(pid, { createdAt: at(t) });
          byTime.set(t, s.id);
          await repo.insert(s);
        }
        const newestFirst = [4, 3, 2, 1, 0].map((t) => byTime.get(t)!);
        assert.deepEqual(await ids(filter(pid)), newestFirst);
        const p1 = await repo.list(filter(pid, { offset: 0, limit: 2 }));
        const p2 = await repo.list(filter(pid, { offset: 2, limit: 2 }));
        const p3 = await repo.list(filter(pid, { offset: 4, limit: 2 }));
        assert.deepEqual(p1.items.map((s) => s.id), newestFirst.slice(0, 2));
        assert.deepEqual(p2.items.map((s) => s.id), newestFirst.slice(2, 4));
        assert.deepEqual(p3.items.map((s) => s.id), newestFirst.slice(4));
        assert.deepEqual([p1.hasMore, p2.hasMore, p3.hasMore], [true, true, false]);
        const exact = await repo.list(filter(pid, { offset: 0, limit: 5 }));
        assert.equal(exact.items.length, 5);
        assert.equal(exact.hasMore, false);
        const past = await repo.list(filter(pid, { offset: 10, limit: 5 }));
        assert.deepEqual(past, { items: [], hasMore: false });
      });

      test('sessions created in the same instant have a stable order across pages', async () => {
        const pid = await project();
        const made: string[] = [];
        for (let i = 0; i < 6; i++) {
          const s = record(pid, { createdAt: at(5) });
          made.push(s.id);
          await repo.insert(s);
        }
        const all = await ids(filter(pid));
        const paged: string[] = [];
        for (let off = 0; off < 6; off += 2) paged.push(...(await ids(filter(pid, { offset: off, limit: 2 }))));
        assert.deepEqual(paged, all);
        assert.deepEqual([...all].sort(), [...made].sort());
      });

      test('tag filters: every pair must match (AND)', async () => {
        const pid = await project();
        const a = record(pid, { tags: { team: 'x', env: 'prod' }, createdAt: at(1) });
        const b = record(pid, { tags: { team: 'x', env: 'dev' }, createdAt: at(2) });
        const c = record(pid, { tags: { team: 'y', env: 'prod' }, createdAt: at(3) });
        const d = record(pid, { tags: {}, createdAt: at(4) });
        for (const s of [a, b, c, d]) await repo.insert(s);
        assert.deepEqual(await ids(filter(pid, { tags: { team: 'x' } })), [b.id, a.id]);
        assert.deepEqual(await ids(filter(pid, { tags: { env: 'prod' } })), [c.id, a.id]);
        assert.deepEqual(await ids(filter(pid, { tags: { team: 'x', env: 'prod' } })), [a.id]);
        assert.deepEqual(await ids(filter(pid, { tags: { team: 'y', env: 'dev' } })), []);
        assert.deepEqual(await ids(filter(pid, { tags: { team: 'X' } })), [], 'values match exactly');
        assert.deepEqual(await ids(filter(pid, { tags: { nosuch: 'x' } })), []);
        assert.deepEqual(await ids(filter(pid, { tags: {} })), [d.id, c.id, b.id, a.id]);
      });

      test('tag filters see only this project', async () => {
        const pid = await project();
        const other = await project();
        const mine = record(pid, { tags: { k: 'v' } });
        await repo.insert(mine);
        await repo.insert(record(other, { tags: { k: 'v' } }));
        assert.deepEqual(await ids(filter(pid, { tags: { k: 'v' } })), [mine.id]);
      });

      test('query: name substring or exact id; % and _ in the query are literal', async () => {
        const pid = await project();
        const plain = record(pid, { name: 'checkout-bot-1', createdAt: at(1) });
        const under = record(pid, { name: 'a_b', createdAt: at(2) });
        const axb = record(pid, { name: 'axb', createdAt: at(3) });
        const dotted = record(pid, { name: 'v1.2', createdAt: at(4) });
        const unnamed = record(pid, { createdAt: at(5) });
        for (const s of [plain, under, axb, dotted, unnamed]) await repo.insert(s);
        // '%' cannot be in a session name (schema), but a query may contain it: it must not act as a wildcard
        const pct = record(pid, { name: 'x', createdAt: at(6) });
        await repo.insert(pct);
        await store.db.updateTable('browser_sessions').set({ name: '50%off' }).where('id', '=', pct.id).execute();

        assert.deepEqual(await ids(filter(pid, { query: 'bot' })), [plain.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'checkout-bot-1' })), [plain.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'a_b' })), [under.id], '_ is not a one-character wildcard');
        assert.deepEqual(await ids(filter(pid, { query: '_' })), [under.id]);
        assert.deepEqual(await ids(filter(pid, { query: '%' })), [pct.id], '% is not an any-string wildcard');
        assert.deepEqual(await ids(filter(pid, { query: '0%o' })), [pct.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'a%b' })), []);
        assert.deepEqual(await ids(filter(pid, { query: '\\' })), []);
        assert.deepEqual(await ids(filter(pid, { query: '.' })), [dotted.id]);
        assert.deepEqual(await ids(filter(pid, { query: unnamed.id })), [unnamed.id], 'an exact id matches');
        assert.deepEqual(await ids(filter(pid, { query: unnamed.id.slice(0, 10) })), [], 'a partial id does not');
        assert.deepEqual(await ids(filter(pid, { query: 'nothing-like-this' })), []);
      });

      test('query matches names the same way on every store (case-insensitive)', async () => {
        const pid = await project();
        const s = record(pid, { name: 'Checkout-Bot' });
        await repo.insert(s);
        assert.deepEqual(await ids(filter(pid, { query: 'checkout' })), [s.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'BOT' })), [s.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'Checkout-Bot' })), [s.id]);
      });

      test('query, tags and status combine', async () => {
        const pid = await project();
        const a = record(pid, { name: 'job-a', tags: { k: '1' }, createdAt: at(1) });
        const b = record(pid, { name: 'job-b', tags: { k: '1' }, createdAt: at(2) });
        const c = record(pid, { name: 'other', tags: { k: '1' }, createdAt: at(3) });
        for (const s of [a, b, c]) await repo.insert(s);
        await repo.markDeleted(b.id, at(4), 1, 'deleted');
        assert.deepEqual(await ids(filter(pid, { query: 'job', tags: { k: '1' } })), [a.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'job', tags: { k: '1' }, status: 'all' })), [b.id, a.id]);
        assert.deepEqual(await ids(filter(pid, { query: 'job', status: 'deleted' })), [b.id]);
      });

      test('update replaces the tags; the tag filter follows', async () => {
        const pid = await project();
        const s = record(pid, { tags: { old: '1', keep: 'x' } });
        await repo.insert(s);
        await repo.update(s.id, { tags: { keep: 'y', fresh: '' } });
        assert.deepEqual((await repo.byId(s.id))?.tags, { keep: 'y', fresh: '' });
        assert.deepEqual(await ids(filter(pid, { tags: { old: '1' } })), []);
        assert.deepEqual(await ids(filter(pid, { tags: { keep: 'x' } })), []);
        assert.deepEqual(await ids(filter(pid, { tags: { keep: 'y' } })), [s.id]);
        assert.deepEqual(await ids(filter(pid, { tags: { fresh: '' } })), [s.id]);
        await repo.update(s.id, { name: 'renamed' });
        assert.deepEqual((await repo.byId(s.id))?.tags, { keep: 'y', fresh: '' }, 'a name-only update keeps the tags');
        assert.equal((await repo.byId(s.id))?.name, 'renamed');
        await repo.update(s.id, { tags: {} });
        assert.deepEqual((await repo.byId(s.id))?.tags, {});
        assert.deepEqual(await ids(filter(pid, { tags: { keep: 'y' } })), []);
        const left = await store.db.selectFrom('browser_session_tags').selectAll().where('session_id', '=', s.id).execute();
        assert.deepEqual(left, []);
      });

      test('markDeleted succeeds only once; the first deletion is kept', async () => {
        const pid = await project();
        const s = record(pid, { name: 'once' });
        await repo.insert(s);
        assert.equal(await repo.markDeleted(s.id, at(100), 5000, 'deleted'), true);
        assert.equal(await repo.markDeleted(s.id, at(200), 9999, 'timeout'), false);
        const r = await repo.byId(s.id);
        assert.equal(r?.status, 'deleted');
        assert.equal(r?.deletedAt, at(100));
        assert.equal(r?.uptimeMs, 5000);
        assert.equal(r?.endReason, 'deleted');
        assert.equal(r?.usageStatus, 'pending');
        await repo.markUsageReady(s.id);
        assert.equal((await repo.byId(s.id))?.usageStatus, 'ready');
        assert.equal(await repo.markDeleted('nosuchsession', at(1), 0, 'x'), false);
      });

      test('concurrent markDeleted: exactly one caller wins', async () => {
        const pid = await project();
        const s = record(pid);
        await repo.insert(s);
        const results = await Promise.all(Array.from({ length: 5 }, (_, i) => repo.markDeleted(s.id, at(i), i, `r${i}`)));
        assert.equal(results.filter(Boolean).length, 1);
      });

      test('markActive stores the runtime handle; touch moves last_active_at', async () => {
        const pid = await project();
        const s = record(pid);
        await repo.insert(s);
        const handle = { dir: '/d', chromium: { pid: 1, port: 2, wsPath: '/w' }, display: null };
        await repo.markActive(s.id, handle);
        await repo.touch(s.id, at(42));
        const r = await repo.byId(s.id);
        assert.equal(r?.status, 'active');
        assert.deepEqual(r?.runtime, handle);
        assert.equal(r?.lastActiveAt, at(42));
      });

      test('large uptimes round-trip as numbers', async () => {
        const pid = await project();
        const s = record(pid);
        await repo.insert(s);
        const threeDaysMs = 259200 * 1000 + 123;
        await repo.markDeleted(s.id, at(1), threeDaysMs, 'timeout');
        const r = await repo.byId(s.id);
        assert.equal(r?.uptimeMs, threeDaysMs);
        assert.equal(typeof r?.uptimeMs, 'number');
      });

      test('unfinishedOnNode: live sessions and deleted ones with usage pending, on that node only', async () => {
        const pid = await project();
        const node = `node-${crypto.randomBytes(4).toString('hex')}`;
        const live = record(pid, { nodeId: node, status: 'active' });
        const starting = record(pid, { nodeId: node, status: 'starting' });
        const pending = record(pid, { nodeId: node });
        const ready = record(pid, { nodeId: node });
        const elsewhere = record(pid, { nodeId: `${node}-other` });
        for (const s of [live, starting, pending, ready, elsewhere]) await repo.insert(s);
        await repo.markDeleted(pending.id, at(1), 1, 'deleted');
        await repo.markDeleted(ready.id, at(1), 1, 'deleted');
        await repo.markUsageReady(ready.id);
        const got = (await repo.unfinishedOnNode(node)).map((s) => s.id).sort();
        assert.deepEqual(got, [live.id, starting.id, pending.id].sort());
        assert.deepEqual(await repo.unfinishedOnNode('node-with-nothing'), []);
      });
    });
  });
}

describe('SQLite durability', () => {
  test('every insert acknowledged before kill -9 is in the store afterwards', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-durable-'));
    const file = path.join(dir, 'browserd.sqlite');
    try {
      const setup = await openStore({ kind: 'sqlite', file });
      const { defaultProject } = await new Accounts(setup.db).createOrganization('durable', 'free');
      await setup.close();

      const script = `
        import { openStore } from ${JSON.stringify(path.join(ROOT, 'src/store/database.ts'))};
        import { SessionRepo } from ${JSON.stringify(path.join(ROOT, 'src/sessions/session-repo.ts'))};
        import { newId, nowIso } from ${JSON.stringify(path.join(ROOT, 'src/domain/ids.ts'))};
        const store = await openStore({ kind: 'sqlite', file: process.env.DB_FILE });
        const repo = new SessionRepo(store.db);
        process.stdout.write('ready\\n');
        for (let i = 0; i < 1000000; i++) {
          const id = newId();
          const t = nowIso();
          await repo.insert({
            id, projectId: process.env.PROJECT_ID, nodeId: 'n', name: 'd' + i, status: 'active',
            headless: true, stealth: false, gpu: false, kioskMode: false, memory: '8GiB', region: 'us-east',
            timeoutSeconds: 60, invocationId: null, startUrl: null, tags: { i: String(i) },
            config: { viewport: { width: 1, height: 1, refresh_rate: 60 } }, runtime: null,
            createdAt: t, lastActiveAt: t, deletedAt: null, uptimeMs: null, usageStatus: null, endReason: null,
          });
          process.stdout.write(id + '\\n');
        }
      `;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: ROOT,
        env: { ...process.env, DB_FILE: file, PROJECT_ID: defaultProject.id },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
      const acknowledged: string[] = [];
      const KILL_AFTER = 150;
      await new Promise<void>((resolve, reject) => {
        const lines = readline.createInterface({ input: child.stdout });
        const timer = setTimeout(() => reject(new Error(`child did not write ${KILL_AFTER} rows in 60 s:\n${stderr}`)), 60_000);
        lines.on('line', (l) => {
          if (l === 'ready') return;
          acknowledged.push(l);
          if (acknowledged.length === KILL_AFTER) {
            clearTimeout(timer);
            child.kill('SIGKILL'); // mid-way: the child is in the middle of its next insert
            resolve();
          }
        });
        child.once('exit', () => {
          clearTimeout(timer);
          if (acknowledged.length < KILL_AFTER) reject(new Error(`child exited early:\n${stderr}`));
        });
      });
      const { signal } = await exited;
      assert.equal(signal, 'SIGKILL');

      const reopened = await openStore({ kind: 'sqlite', file });
      try {
        const repo = new SessionRepo(reopened.db);
        const missing: string[] = [];
        for (const id of acknowledged) if (!(await repo.byId(id))) missing.push(id);
        assert.deepEqual(missing, [], `${missing.length} acknowledged rows lost`);
        const rows = await reopened.db.selectFrom('browser_sessions').select('id').execute();
        assert.ok(rows.length >= acknowledged.length);
        // the tag rows written in the same transaction survived too
        const tagRows = await reopened.db.selectFrom('browser_session_tags').select('session_id').execute();
        const tagged = new Set(tagRows.map((r) => r.session_id));
        for (const id of acknowledged) assert.ok(tagged.has(id), `tags of ${id} lost`);
        const integrity = await sql<{ integrity_check: string }>`PRAGMA integrity_check`.execute(reopened.db);
        assert.equal(integrity.rows[0]?.integrity_check, 'ok');
      } finally {
        await reopened.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
