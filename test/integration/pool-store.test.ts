import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { openStore, type Store } from '../../src/store/database.js';
import { Accounts } from '../../src/accounts/accounts.js';
import { PoolRepo, type PoolRecord } from '../../src/pools/pool-repo.js';
import { resolvePoolCreate } from '../../src/domain/pool-request.js';
import { SessionRepo } from '../../src/sessions/session-repo.js';
import type { SessionRecord } from '../../src/sessions/session-record.js';
import { ApiError } from '../../src/http/errors.js';
import { newId } from '../../src/domain/ids.js';
import { storeBackends } from '../helpers/postgres.js';

/**
 * Persistence of browser pools on both stores: names unique per project, lookup by id or
 * name, list filters, members (idle/leased) and their counts, and idle pool browsers hidden
 * from the session listing and lookup.
 */

const BACKENDS = storeBackends('browserd-pools-');

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
  describe(`browser pools on ${backend.name}`, () => {
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

    const pool = (projectId: string, name: string | null, secs = 0): PoolRecord => ({
      id: newId(),
      projectId,
      organizationId: orgId,
      nodeId: 'node-a',
      settings: { ...resolvePoolCreate({ size: 2, headless: true, viewport: { width: 800, height: 600 } }), name },
      resolved: { profileId: null, extensionIds: ['ext-1'] },
      createdAt: at(secs),
      updatedAt: at(secs),
    });

    test('a pool name is unique within a project (409 name_conflict), free in another; settings round-trip', async () => {
      const repo = new PoolRepo(store.db);
      const [a, b] = [await project(), await project()];
      const p = pool(a, 'warm');
      await repo.insert(p);
      await assert.rejects(repo.insert(pool(a, 'warm')), (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === 'name_conflict');
      await repo.insert(pool(b, 'warm'));
      await repo.insert(pool(a, null));
      await repo.insert(pool(a, null));
      const byName = await repo.find(a, 'warm');
      assert.deepEqual(byName, p);
      assert.deepEqual(await repo.find(a, p.id), p);
      assert.equal(await repo.find(b, p.id), null, 'another project does not see it');
      const renamed = { ...p.settings, name: 'hot', size: 5 };
      await repo.updateSettings(p.id, renamed, { profileId: 'prof', extensionIds: [] }, at(9));
      const back = (await repo.find(a, 'hot'))!;
      assert.equal(back.settings.size, 5);
      assert.deepEqual(back.resolved, { profileId: 'prof', extensionIds: [] });
      const other = pool(a, 'other');
      await repo.insert(other);
      await assert.rejects(repo.updateSettings(other.id, { ...other.settings, name: 'hot' }, other.resolved, at(10)), (e: unknown) => e instanceof ApiError && e.status === 409 && e.code === 'name_conflict');
    });

    test('list: newest first, name exact, query substring or id, pages', async () => {
      const repo = new PoolRepo(store.db);
      const a = await project();
      const [x, y, z] = [pool(a, 'alpha-pool', 1), pool(a, 'beta-pool', 2), pool(a, 'Gamma', 3)];
      for (const p of [x, y, z]) await repo.insert(p);
      const all = await repo.list({ projectId: a, offset: 0, limit: 10, name: null, query: null });
      assert.deepEqual(all.items.map((p) => p.id), [z.id, y.id, x.id]);
      assert.deepEqual((await repo.list({ projectId: a, offset: 0, limit: 10, name: 'beta-pool', query: null })).items.map((p) => p.id), [y.id]);
      assert.deepEqual((await repo.list({ projectId: a, offset: 0, limit: 10, name: null, query: 'POOL' })).items.map((p) => p.id), [y.id, x.id]);
      assert.deepEqual((await repo.list({ projectId: a, offset: 0, limit: 10, name: null, query: z.id })).items.map((p) => p.id), [z.id]);
      const page = await repo.list({ projectId: a, offset: 0, limit: 2, name: null, query: null });
      assert.equal(page.hasMore, true);
      assert.equal((await repo.list({ projectId: a, offset: 2, limit: 2, name: null, query: null })).hasMore, false);
    });

    test('members: idle then leased; counts; idle members are hidden from the session list and lookup; delete removes them', async () => {
      const repo = new PoolRepo(store.db);
      const sessions = new SessionRepo(store.db);
      const a = await project();
      const p = pool(a, 'members');
      await repo.insert(p);
      const [s1, s2, plain] = [sessionRecord(a), sessionRecord(a), sessionRecord(a)];
      for (const s of [s1, s2, plain]) await sessions.insert(s);
      await repo.addMember(p.id, s1.id, at(1));
      await repo.addMember(p.id, s2.id, at(2));
      assert.deepEqual((await repo.counts([p.id])).get(p.id), { idle: 2, leased: 0 });
      const listed = async () => (await sessions.list({ projectId: a, status: 'active', tags: {}, query: null, offset: 0, limit: 10 })).items.map((s) => s.id);
      assert.deepEqual(await listed(), [plain.id]);
      assert.equal(await sessions.find(a, s1.id, false), null);

      await repo.setMemberState(s1.id, 'leased', '{"categories":null}', at(3));
      assert.deepEqual((await repo.member(s1.id))!, { sessionId: s1.id, poolId: p.id, state: 'leased', baseline: '{"categories":null}' });
      assert.deepEqual((await repo.counts([p.id])).get(p.id), { idle: 1, leased: 1 });
      assert.deepEqual(new Set(await listed()), new Set([plain.id, s1.id]));
      assert.equal((await sessions.find(a, s1.id, false))!.id, s1.id);

      await repo.removeMember(s2.id);
      assert.equal(await repo.member(s2.id), null);
      assert.equal((await sessions.find(a, s2.id, false))!.id, s2.id, 'no longer a pool member: an ordinary session');
      await repo.delete(p.id);
      assert.equal(await repo.find(a, p.id), null);
      assert.deepEqual(await repo.membersOfPools([p.id]), []);
    });
  });
}
