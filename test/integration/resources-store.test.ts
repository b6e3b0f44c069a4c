import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { openStore, type Store } from '../../src/store/database.js';
import { Accounts } from '../../src/accounts/accounts.js';
import { ProfileRepo, type ProfileRow } from '../../src/profiles/profile-repo.js';
import { SessionRepo } from '../../src/sessions/session-repo.js';
import type { SessionRecord } from '../../src/sessions/session-record.js';
import { ApiError } from '../../src/http/errors.js';
import { newId } from '../../src/domain/ids.js';
import { storeBackends } from '../helpers/postgres.js';

/**
 * Persistence of profiles, extensions and proxies on both stores: names unique per project
 * (or not, for proxies), listing and filters, and the profile writer claim.
 */

const BACKENDS = storeBackends('browserd-res-');

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (secs: number) => new Date(T0 + secs * 1000).toISOString();

function sessionRecord(projectId: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: newId(),
    projectId,
    nodeId: 'node-a',
    name: null,
    status: 'active',
    headless: true,
    stealth: false,
    gpu: false,
    kioskMode: false,
    memory: '2GiB',
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
  describe(`project resources on ${backend.name}`, () => {
    let env: Awaited<ReturnType<(typeof BACKENDS)[number]['create']>>;
    let store: Store;
    let accounts: Accounts;
    let orgId: string;

    before(async () => {
      env = await backend.create();
      store = await openStore(env.cfg);
      accounts = new Accounts(store.db);
      orgId = (await accounts.createOrganization(`org-${crypto.randomBytes(4).toString('hex')}`, 'free')).organization.id;
    });
    after(async () => {
      await store?.close();
      await env?.destroy();
    });

    async function project(): Promise<string> {
      return (await accounts.createProject(orgId, `p-${crypto.randomBytes(5).toString('hex')}`)).id;
    }

    describe('profiles', () => {
      const row = (projectId: string, over: Partial<ProfileRow> = {}): ProfileRow => ({
        id: newId(),
        project_id: projectId,
        name: null,
        created_at: at(0),
        updated_at: at(0),
        last_used_at: null,
        writer_session_id: null,
        ...over,
      });

      test('a name is unique within a project (409 name_conflict), free in another, and any number of profiles have none', async () => {
        const repo = new ProfileRepo(store.db);
        const [a, b] = [await project(), await project()];
        await repo.insert(row(a, { name: 'shop' }));
        await assert.rejects(repo.insert(row(a, { name: 'shop' })), (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === 'name_conflict');
        await repo.insert(row(b, { name: 'shop' }));
        await repo.insert(row(a));
        await repo.insert(row(a));
        assert.equal((await repo.list({ projectId: a, offset: 0, limit: 100, name: null, query: null })).items.length, 3);
      });

      test('find by id or name stays inside the project', async () => {
        const repo = new ProfileRepo(store.db);
        const [a, b] = [await project(), await project()];
        const r = row(a, { name: 'mine' });
        await repo.insert(r);
        assert.equal((await repo.find(a, r.id))?.id, r.id);
        assert.equal((await repo.find(a, 'mine'))?.id, r.id);
        assert.equal(await repo.find(b, r.id), null);
        assert.equal(await repo.find(b, 'mine'), null);
      });

      test('list: newest first, pages with hasMore, exact name filter, query matches a name substring (any case) or the exact id', async () => {
        const repo = new ProfileRepo(store.db);
        const p = await project();
        const rows = [row(p, { name: 'Alpha_1', created_at: at(1) }), row(p, { name: 'beta', created_at: at(2) }), row(p, { name: 'alphabet', created_at: at(3) })];
        for (const r of rows) await repo.insert(r);
        const all = await repo.list({ projectId: p, offset: 0, limit: 2, name: null, query: null });
        assert.deepEqual(
          all.items.map((r) => r.name),
          ['alphabet', 'beta'],
        );
        assert.equal(all.hasMore, true);
        const rest = await repo.list({ projectId: p, offset: 2, limit: 2, name: null, query: null });
        assert.deepEqual(
          rest.items.map((r) => r.name),
          ['Alpha_1'],
        );
        assert.equal(rest.hasMore, false);
        assert.deepEqual(
          (await repo.list({ projectId: p, offset: 0, limit: 10, name: 'beta', query: null })).items.map((r) => r.name),
          ['beta'],
        );
        assert.deepEqual(
          (await repo.list({ projectId: p, offset: 0, limit: 10, name: null, query: 'ALPHA' })).items.map((r) => r.name),
          ['alphabet', 'Alpha_1'],
        );
        // LIKE wildcards in the query are literal characters.
        assert.deepEqual(
          (await repo.list({ projectId: p, offset: 0, limit: 10, name: null, query: 'a_1' })).items.map((r) => r.name),
          ['Alpha_1'],
        );
        assert.deepEqual(
          (await repo.list({ projectId: p, offset: 0, limit: 10, name: null, query: rows[1]!.id })).items.map((r) => r.name),
          ['beta'],
        );
      });

      test('one writer at a time: a second claim fails while the first session runs or is still saving, and succeeds once its teardown is complete', async () => {
        const repo = new ProfileRepo(store.db);
        const sessions = new SessionRepo(store.db);
        const p = await project();
        const prof = row(p);
        await repo.insert(prof);
        const first = sessionRecord(p);
        assert.equal(await repo.claimWriter(prof.id, first.id), true);
        // Claimed before the session row exists (create claims first): still held.
        assert.equal(await repo.claimWriter(prof.id, newId()), false);
        await sessions.insert(first);
        assert.equal(await repo.claimWriter(prof.id, newId()), false);
        assert.equal(await repo.activeWriter(prof.id), first.id);
        // Ended but its state not yet written back (usage pending): still held.
        await sessions.markDeleted(first.id, at(10), 10_000, 'deleted');
        assert.equal(await repo.claimWriter(prof.id, newId()), false);
        assert.equal(await repo.activeWriter(prof.id), first.id);
        await sessions.markUsageReady(first.id);
        assert.equal(await repo.activeWriter(prof.id), null);
        const second = newId();
        assert.equal(await repo.claimWriter(prof.id, second), true);
        assert.equal((await repo.byId(prof.id))?.writer_session_id, second);
        // Releasing is by the holder only.
        await repo.releaseWriter(prof.id, first.id);
        assert.equal((await repo.byId(prof.id))?.writer_session_id, second);
        await repo.releaseWriter(prof.id, second);
        assert.equal((await repo.byId(prof.id))?.writer_session_id, null);
      });

      test('claims of sessions that were never recorded are released at start-up; recorded ones are kept', async () => {
        const repo = new ProfileRepo(store.db);
        const sessions = new SessionRepo(store.db);
        const p = await project();
        const orphan = row(p);
        const held = row(p);
        await repo.insert(orphan);
        await repo.insert(held);
        const s = sessionRecord(p);
        await sessions.insert(s);
        assert.equal(await repo.claimWriter(orphan.id, newId()), true);
        assert.equal(await repo.claimWriter(held.id, s.id), true);
        assert.ok((await repo.releaseOrphanWriters()) >= 1);
        assert.equal((await repo.byId(orphan.id))?.writer_session_id, null);
        assert.equal((await repo.byId(held.id))?.writer_session_id, s.id);
      });

      test('markSaved moves updated_at and last_used_at; touchUsed only last_used_at', async () => {
        const repo = new ProfileRepo(store.db);
        const p = await project();
        const r = row(p);
        await repo.insert(r);
        await repo.touchUsed(r.id, at(5));
        let got = (await repo.byId(r.id))!;
        assert.equal(got.updated_at, at(0));
        assert.equal(got.last_used_at, at(5));
        await repo.markSaved(r.id, at(9));
        got = (await repo.byId(r.id))!;
        assert.equal(got.updated_at, at(9));
        assert.equal(got.last_used_at, at(9));
      });
    });
  });
}
