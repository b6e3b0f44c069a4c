import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import type { Accounts, Principal } from '../../src/accounts/accounts.js';
import { ApiError, CapacityExhausted, Conflict } from '../../src/http/errors.js';
import type { MemberRecord, PoolRecord, PoolRepo } from '../../src/pools/pool-repo.js';
import { PoolService } from '../../src/pools/pool-service.js';
import type { PoolLink, SessionService } from '../../src/sessions/session-service.js';

/**
 * The pool's leasing logic against a fake session service (no browsers): FIFO among waiting
 * acquires, 204 (null) on timeout, replacement of ended browsers, a failed lease leaves the
 * browser available, fill errors are reported, delete refuses while leased unless forced.
 * The real sessions, CDP reset and store are covered by e2e/browser-pools and
 * integration/pool-store.
 */

class FakeRepo {
  pools = new Map<string, PoolRecord>();
  members = new Map<string, MemberRecord>();
  async insert(p: PoolRecord) {
    this.pools.set(p.id, p);
  }
  async updateSettings() {}
  async find(_projectId: string, idOrName: string) {
    return this.pools.get(idOrName) ?? [...this.pools.values()].find((p) => p.settings.name === idOrName) ?? null;
  }
  async onNode() {
    return [...this.pools.values()];
  }
  async delete(id: string) {
    this.pools.delete(id);
  }
  async addMember(poolId: string, sessionId: string) {
    this.members.set(sessionId, { sessionId, poolId, state: 'idle', baseline: null });
  }
  async setMemberState(sessionId: string, state: 'idle' | 'leased') {
    const m = this.members.get(sessionId);
    if (m) m.state = state;
  }
  async removeMember(sessionId: string) {
    this.members.delete(sessionId);
  }
  async membersOfPools() {
    return [...this.members.values()];
  }
}

class FakeSessions {
  link!: PoolLink;
  live = new Set<string>();
  ended: string[] = [];
  failWith: Error | null = null;
  private n = 0;
  async create() {
    if (this.failWith) throw this.failWith;
    const id = `s${this.n++}`;
    this.live.add(id);
    return { session_id: id };
  }
  async end(id: string) {
    if (!this.live.delete(id)) return;
    this.ended.push(id);
    this.link.ended(id);
  }
  liveSession(id: string) {
    // A live browser on a closed port: the CDP watch fails (logged), the lease goes on.
    return this.live.has(id) ? { record: {}, handle: { chromium: { pid: 0, port: 1, wsPath: '/devtools/browser/x' } } } : null;
  }
  restartIdleClock() {}
  closeClients() {}
  async get(_p: Principal, id: string) {
    return { session_id: id, pool: this.link.poolOf(id) };
  }
  async update(_p: Principal, _id: string, req: { name?: string | null }) {
    if (req.name === 'taken') throw new Conflict('a session named "taken" is already active in this project', 'name_conflict');
  }
  async chromePolicyProblems() {
    return [];
  }
}

const principal = { keyId: 'k', organization: { id: 'org', name: 'o', plan: 'free', created_at: '' }, projectId: 'proj', keyProjectId: null } as unknown as Principal;

async function until(what: string, fn: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + 10_000;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('pool service', () => {
  let sessions: FakeSessions;
  let repo: FakeRepo;
  let pools: PoolService;

  before(async () => {
    sessions = new FakeSessions();
    repo = new FakeRepo();
    pools = new PoolService({
      repo: repo as unknown as PoolRepo,
      sessions: sessions as unknown as SessionService,
      accounts: { findOrganization: async () => principal.organization } as unknown as Accounts,
      nodeId: 'node-a',
      log: pino({ level: 'silent' }),
    });
    sessions.link = pools;
    await pools.start();
  });
  after(() => pools.stop());

  const availableIn = async (pool: string) => (await pools.get(principal, pool)).available_count as number;

  test('FIFO among waiters; a browser that ends is replaced; acquire times out with null', async () => {
    // 100000 % of one browser a minute: one launch every 60 ms.
    await pools.create(principal, { name: 'fifo', size: 1, fill_rate_per_minute: 100000, headless: true });
    await until('the pool to fill', async () => (await availableIn('fifo')) === 1);
    const first = await pools.acquire(principal, 'fifo', { acquire_timeout_seconds: 0 });
    assert.ok(first);
    assert.deepEqual(first.pool, { id: (await pools.get(principal, 'fifo')).id, name: 'fifo' });
    assert.equal(pools.isIdle(first.session_id as string), false);
    // Tokens signed from the lease's second on belong to it; an idle or unknown browser has no lease.
    const since = pools.leasedSince(first.session_id as string);
    assert.ok(since !== null && since <= Math.floor(Date.now() / 1000) && since > Math.floor(Date.now() / 1000) - 60);
    assert.equal(pools.leasedSince('nobody'), null);
    assert.equal(await pools.acquire(principal, 'fifo', { acquire_timeout_seconds: 0 }), null);

    const b = pools.acquire(principal, 'fifo', { acquire_timeout_seconds: 10 });
    const c = pools.acquire(principal, 'fifo', { acquire_timeout_seconds: 10 });
    await pools.release(principal, 'fifo', first.session_id as string, false);
    assert.deepEqual(sessions.ended, [first.session_id]);
    const gotB = await b;
    assert.ok(gotB && gotB.session_id !== first.session_id, 'the first waiter gets the replacement');
    // The second waiter is still waiting: the next browser is its.
    await sessions.end(gotB.session_id as string); // deleted by its user: the pool replaces it
    const gotC = await c;
    assert.ok(gotC && gotC.session_id !== gotB.session_id);
    await pools.delete(principal, 'fifo', true);
  });

  test('a lease that fails (name taken) leaves the browser available; release of an idle or unknown browser is refused', async () => {
    await pools.create(principal, { name: 'names', size: 1, fill_rate_per_minute: 100000, headless: true });
    await until('the pool to fill', async () => (await availableIn('names')) === 1);
    await assert.rejects(pools.acquire(principal, 'names', { name: 'taken', acquire_timeout_seconds: 0 }), (e: unknown) => e instanceof ApiError && e.status === 409);
    assert.equal(await availableIn('names'), 1);
    const idle = [...repo.members.values()].find((m) => m.state === 'idle')!.sessionId;
    assert.ok(pools.isIdle(idle));
    await assert.rejects(pools.release(principal, 'names', idle, true), (e: unknown) => e instanceof ApiError && e.status === 409);
    await assert.rejects(pools.release(principal, 'names', 'nobody', true), (e: unknown) => e instanceof ApiError && e.status === 404);
    await pools.delete(principal, 'names', false);
    assert.equal(sessions.live.has(idle), false, 'delete ends idle browsers');
  });

  test('a pool that cannot launch says why, and fills once it can', async () => {
    sessions.failWith = new CapacityExhausted('this node is at its capacity of 1 sessions; retry later');
    await pools.create(principal, { name: 'full', size: 1, fill_rate_per_minute: 100000, headless: true });
    await until('a fill error', async () => typeof (await pools.get(principal, 'full')).fill_error === 'string');
    assert.match((await pools.get(principal, 'full')).fill_error as string, /capacity/);
    sessions.failWith = null;
    await until('the pool to fill', async () => (await availableIn('full')) === 1);
    assert.equal((await pools.get(principal, 'full')).fill_error, undefined);
    await pools.delete(principal, 'full', false);
  });

  test('delete refuses while a browser is leased (409 pool_in_use), force ends it', async () => {
    await pools.create(principal, { name: 'busy', size: 1, fill_rate_per_minute: 100000, headless: true });
    await until('the pool to fill', async () => (await availableIn('busy')) === 1);
    const lease = await pools.acquire(principal, 'busy', { acquire_timeout_seconds: 0 });
    assert.ok(lease);
    await assert.rejects(pools.delete(principal, 'busy', false), (e: unknown) => e instanceof ApiError && e.code === 'pool_in_use');
    await pools.delete(principal, 'busy', true);
    assert.ok(sessions.ended.includes(lease.session_id as string));
    await assert.rejects(pools.get(principal, 'busy'), (e: unknown) => e instanceof ApiError && e.status === 404);
  });
});
