import type { Logger } from 'pino';
import type { Accounts, Principal } from '../accounts/accounts.js';
import { newId, nowIso } from '../domain/ids.js';
import {
  applyPoolUpdate,
  checkAcquire,
  checkPoolSettings,
  checkPoolUpdate,
  defaultAcquireSeconds,
  fillIntervalMs,
  poolConfigView,
  resolvePoolCreate,
  sessionRequestOf,
  type PoolAcquireRequest,
  type PoolCreateRequest,
  type PoolSettings,
  type PoolUpdateRequest,
} from '../domain/pool-request.js';
import type { ResourceListQuery } from '../domain/resource-requests.js';
import type { TelemetryState } from '../domain/telemetry-config.js';
import { Conflict, InternalError, NotFound, invalidInput } from '../http/errors.js';
import type { SessionResources } from '../sessions/session-resources.js';
import type { PoolLink, SessionService } from '../sessions/session-service.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import { navigateFirstTab, OriginWatch, resetBrowser, webOrigin, type BrowserEndpoint } from './browser-reset.js';
import type { PoolRecord, PoolRepo } from './pool-repo.js';

interface Lease {
  watch: OriginWatch | null;
  /** Origins the lease was sent to before its watch saw them (start URLs). */
  origins: Set<string>;
  baseline: TelemetryState | null;
  /** Release (or its reset) is under way. */
  returning: boolean;
  /** When the lease began, seconds since the epoch (0: unknown, re-adopted after a restart). */
  since: number;
}

interface Waiter {
  resolve(sessionId: string | null): void;
}

/** A pool this node fills and whose browsers it runs. */
interface PoolState {
  rec: PoolRecord;
  /** Available browsers, longest idle first. */
  idle: Set<string>;
  leased: Map<string, Lease>;
  /** Launches under way (one at a time, paced by the fill rate) and the one running. */
  filling: number;
  launch: Promise<void> | null;
  lastLaunchMs: number;
  timer: NodeJS.Timeout | null;
  /** Why the last launch failed; cleared by the next success. */
  fillError: string | null;
  /** Acquire calls waiting, first come first served. */
  waiters: Waiter[];
  deleted: boolean;
}

/**
 * Browser pools: each pool keeps `size` browsers warm (real sessions created through
 * SessionService.create with the pool's configuration), hands them out with acquire (long
 * poll, FIFO among waiters), takes them back with release (reset for the next lease, or
 * ended and replaced), and refills at its fill rate. Pools run on the node that created
 * them; their membership is in the store (browser_pool_members), mirrored here.
 */
export class PoolService implements PoolLink {
  private readonly pools = new Map<string, PoolState>();
  private readonly memberOf = new Map<string, PoolState>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly principals = new Map<string, Principal>();
  private stopping = false;

  constructor(
    private readonly deps: {
      repo: PoolRepo;
      sessions: SessionService;
      accounts: Accounts;
      nodeId: string;
      log: Logger;
      resources?: SessionResources;
      telemetry?: TelemetryService;
    },
  ) {}

  // ---- PoolLink (called by the session service) ------------------------------------

  isIdle(sessionId: string): boolean {
    return this.memberOf.get(sessionId)?.idle.has(sessionId) ?? false;
  }

  poolOf(sessionId: string): { id: string; name?: string } | null {
    const st = this.memberOf.get(sessionId);
    if (!st || !st.leased.has(sessionId)) return null;
    return { id: st.rec.id, ...(st.rec.settings.name !== null ? { name: st.rec.settings.name } : {}) };
  }

  leasedSince(sessionId: string): number | null {
    const lease = this.memberOf.get(sessionId)?.leased.get(sessionId);
    return lease ? lease.since : null;
  }

  /** A session ended (deleted, timed out, crashed, released without reuse): forget it and refill. */
  ended(sessionId: string): void {
    const st = this.memberOf.get(sessionId);
    if (!st) return;
    this.memberOf.delete(sessionId);
    st.idle.delete(sessionId);
    st.leased.get(sessionId)?.watch?.close();
    st.leased.delete(sessionId);
    this.track(this.deps.repo.removeMember(sessionId).catch((err) => this.deps.log.warn({ pool_id: st.rec.id, session_id: sessionId, err: String(err) }, 'could not remove a pool member')));
    this.schedule(st);
  }

  // ---- start and stop ----------------------------------------------------------------

  /**
   * After the sessions' reconciliation: the pools of this node come back with the members
   * whose browsers were re-adopted; members whose browser was lost are dropped (and
   * refilled). Call before the session service's reaper starts.
   */
  async start(): Promise<void> {
    const recs = await this.deps.repo.onNode(this.deps.nodeId);
    const members = await this.deps.repo.membersOfPools(recs.map((r) => r.id));
    const states = new Map(recs.map((rec) => [rec.id, this.stateOf(rec)]));
    for (const m of members) {
      const st = states.get(m.poolId)!;
      if (!this.deps.sessions.liveSession(m.sessionId)) {
        await this.deps.repo.removeMember(m.sessionId);
        continue;
      }
      this.memberOf.set(m.sessionId, st);
      if (m.state === 'idle') st.idle.add(m.sessionId);
      else st.leased.set(m.sessionId, { watch: null, origins: new Set(), baseline: m.baseline ? (JSON.parse(m.baseline) as TelemetryState) : null, returning: false, since: 0 });
    }
    for (const st of states.values()) this.schedule(st);
  }

  /** No more launches; waiting acquires answer 204. The browsers themselves end with the sessions. */
  stop(): void {
    this.stopping = true;
    for (const st of this.pools.values()) {
      if (st.timer) clearTimeout(st.timer);
      st.timer = null;
      for (const w of st.waiters.splice(0)) w.resolve(null);
      for (const l of st.leased.values()) l.watch?.close();
    }
  }

  /** Waits for the store writes still under way (after the sessions have ended). */
  async drain(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  // ---- API operations ----------------------------------------------------------------

  async create(p: Principal, req: PoolCreateRequest, schemaProblems: { field: string; message: string }[] = []): Promise<Record<string, unknown>> {
    const settings = resolvePoolCreate(req);
    const resolved = await this.checkSettings(p, settings, schemaProblems);
    const now = nowIso();
    const rec: PoolRecord = { id: newId(), projectId: p.projectId, organizationId: p.organization.id, nodeId: this.deps.nodeId, settings, resolved, createdAt: now, updatedAt: now };
    await this.deps.repo.insert(rec);
    const st = this.stateOf(rec);
    this.deps.log.info({ pool_id: rec.id, size: settings.size, fill_rate_per_minute: settings.fillRatePerMinute }, 'browser pool created');
    this.schedule(st);
    return this.view(rec);
  }

  async get(p: Principal, idOrName: string): Promise<Record<string, unknown>> {
    return this.view(await this.mustFind(p, idOrName));
  }

  async list(p: Principal, q: ResourceListQuery): Promise<{ items: Record<string, unknown>[]; hasMore: boolean }> {
    const page = await this.deps.repo.list({ projectId: p.projectId, offset: q.offset ?? 0, limit: q.limit ?? 20, name: q.name ?? null, query: q.query?.trim() || null });
    return { items: await Promise.all(page.items.map((r) => this.view(r))), hasMore: page.hasMore };
  }

  async update(p: Principal, idOrName: string, req: PoolUpdateRequest): Promise<Record<string, unknown>> {
    const early = checkPoolUpdate(req);
    const st = this.local(await this.mustFind(p, idOrName));
    const next = applyPoolUpdate(st.rec.settings, req);
    const resolved = await this.checkSettings(p, next, early);
    const at = nowIso();
    await this.deps.repo.updateSettings(st.rec.id, next, resolved, at);
    st.rec = { ...st.rec, settings: next, resolved, updatedAt: at };
    // Idle browsers beyond the new size go; with discard_all_idle every idle browser is rebuilt.
    const surplus = req.discard_all_idle ? st.idle.size : Math.max(0, st.idle.size + st.leased.size - next.size);
    await this.endIdle(st, surplus);
    this.restartFill(st);
    return this.view(st.rec);
  }

  async delete(p: Principal, idOrName: string, force: boolean): Promise<void> {
    const st = this.local(await this.mustFind(p, idOrName));
    const leased = st.leased.size;
    if (leased && !force) throw new Conflict(`the pool has ${leased} leased browser(s); release them first or delete with force=true`, 'pool_in_use');
    st.deleted = true;
    if (st.timer) clearTimeout(st.timer);
    st.timer = null;
    for (const w of st.waiters.splice(0)) w.resolve(null);
    // A launch under way finishes first (it ends its browser when it sees the pool deleted).
    await st.launch;
    const all = [...st.idle, ...st.leased.keys()];
    st.idle.clear();
    await Promise.allSettled(all.map((id) => this.deps.sessions.end(id, 'deleted')));
    await this.deps.repo.delete(st.rec.id);
    this.pools.delete(st.rec.id);
    this.deps.log.info({ pool_id: st.rec.id, ended: all.length }, 'browser pool deleted');
  }

  /** Ends every idle browser of the pool; refilling follows at the fill rate. */
  async flush(p: Principal, idOrName: string): Promise<void> {
    const st = this.local(await this.mustFind(p, idOrName));
    await this.endIdle(st, st.idle.size);
    this.restartFill(st);
  }

  /**
   * Leases a browser: at once when one is idle and nobody waits before this caller, else
   * when one frees up within the timeout (null: none did, the route answers 204).
   */
  async acquire(p: Principal, idOrName: string, req: PoolAcquireRequest, signal?: AbortSignal): Promise<Record<string, unknown> | null> {
    const problems = checkAcquire(req);
    if (problems.length) throw invalidInput(problems);
    const st = this.local(await this.mustFind(p, idOrName));
    const waitMs = (req.acquire_timeout_seconds ?? defaultAcquireSeconds(st.rec.settings.size, st.rec.settings.fillRatePerMinute)) * 1000;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const id = await this.take(st, Math.max(0, deadline - Date.now()), signal);
      if (!id) {
        if (st.deleted) throw new NotFound(`browser pool "${idOrName}" was deleted`);
        return null;
      }
      const endpoint = this.endpointOf(id);
      if (!endpoint) {
        // Its browser went away while idle: that one is replaced; wait for another.
        st.leased.delete(id);
        await this.deps.sessions.end(id, 'browser_exited');
        continue;
      }
      return this.lease(p, st, id, req, endpoint);
    }
  }

  async release(p: Principal, idOrName: string, sessionId: string, reuse: boolean): Promise<void> {
    const st = this.local(await this.mustFind(p, idOrName));
    const lease = st.leased.get(sessionId);
    if (!lease) {
      if (st.idle.has(sessionId)) throw new Conflict(`browser session "${sessionId}" is not leased (it is idle in the pool)`, 'not_leased');
      throw new NotFound(`browser session "${sessionId}" is not a browser of pool "${idOrName}"`);
    }
    if (lease.returning) throw new Conflict(`browser session "${sessionId}" is already being released`, 'not_leased');
    lease.returning = true;
    // From here no token reaches it: the lessee's connections close and cannot come back during the reset.
    lease.since = Number.MAX_SAFE_INTEGER;
    lease.watch?.close();
    this.deps.sessions.closeClients(sessionId, 'released to its pool');
    const endpoint = this.endpointOf(sessionId);
    const overSize = st.idle.size + st.leased.size > st.rec.settings.size;
    if (!reuse || !endpoint || overSize || st.deleted) {
      await this.deps.sessions.end(sessionId, 'deleted');
      return;
    }
    try {
      const origins = new Set([...lease.origins, ...(lease.watch?.origins ?? [])]);
      const r = await resetBrowser(endpoint, origins);
      // The lease's name, tags and telemetry override go; the browser keeps its creation config.
      await this.deps.sessions.update(p, sessionId, { name: null, tags: null });
      if (lease.baseline && this.deps.telemetry) await this.deps.telemetry.setState(sessionId, lease.baseline);
      await this.deps.repo.setMemberState(sessionId, 'idle', null, nowIso());
      st.leased.delete(sessionId);
      if (st.deleted || !this.memberOf.has(sessionId)) return;
      st.idle.add(sessionId);
      this.deps.log.info({ pool_id: st.rec.id, session_id: sessionId, closed_tabs: r.closedTabs, cleared_origins: r.clearedOrigins }, 'pool browser reset and returned');
      this.offer(st);
    } catch (err) {
      this.deps.log.warn({ pool_id: st.rec.id, session_id: sessionId, err: String(err) }, 'could not reset a released pool browser; replacing it');
      await this.deps.sessions.end(sessionId, 'deleted');
    }
  }

  // ---- leasing -----------------------------------------------------------------------

  private take(st: PoolState, waitMs: number, signal?: AbortSignal): Promise<string | null> {
    if (!st.waiters.length && st.idle.size) return Promise.resolve(this.handOut(st));
    if (waitMs <= 0 || this.stopping || st.deleted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const w: Waiter = {
        resolve: (id) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(id);
        },
      };
      const drop = () => {
        const i = st.waiters.indexOf(w);
        if (i >= 0) st.waiters.splice(i, 1);
        w.resolve(null);
      };
      const onAbort = () => drop();
      const timer = setTimeout(drop, waitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      st.waiters.push(w);
    });
  }

  /**
   * Moves the longest-idle browser to leased, synchronously: it is handed out once, and its
   * inactivity clock starts now (the reaper must not count the idle time as the lease's).
   */
  private handOut(st: PoolState): string {
    const [id] = st.idle;
    st.idle.delete(id!);
    // Tokens signed in this second or later belong to this lease (JWT iat has one-second resolution).
    st.leased.set(id!, { watch: null, origins: new Set(), baseline: null, returning: false, since: Math.floor(Date.now() / 1000) });
    this.deps.sessions.restartIdleClock(id!);
    return id!;
  }

  /** Idle browsers go to the waiters, first come first served. */
  private offer(st: PoolState): void {
    while (st.waiters.length && st.idle.size) st.waiters.shift()!.resolve(this.handOut(st));
  }

  private async lease(p: Principal, st: PoolState, id: string, req: PoolAcquireRequest, endpoint: BrowserEndpoint): Promise<Record<string, unknown>> {
    const lease = st.leased.get(id)!;
    try {
      lease.baseline = this.deps.telemetry ? await this.deps.telemetry.stateOf(id) : null;
      await this.deps.repo.setMemberState(id, 'leased', lease.baseline ? JSON.stringify(lease.baseline) : null, nowIso());
      if (req.name !== undefined || req.tags !== undefined || req.telemetry) {
        await this.deps.sessions.update(p, id, { ...(req.name !== undefined ? { name: req.name } : {}), ...(req.tags !== undefined ? { tags: req.tags } : {}), ...(req.telemetry ? { telemetry: req.telemetry } : {}) });
      }
    } catch (err) {
      // Nothing of this lease stays: the browser is available again.
      await this.deps.repo.setMemberState(id, 'idle', null, nowIso()).catch(() => undefined);
      st.leased.delete(id);
      if (this.memberOf.has(id) && !st.deleted) {
        st.idle.add(id);
        this.offer(st);
      }
      throw err;
    }
    this.deps.sessions.restartIdleClock(id);
    try {
      lease.watch = await OriginWatch.start(endpoint);
    } catch (err) {
      this.deps.log.warn({ session_id: id, err: String(err) }, 'could not watch the leased browser; release will clear only the origins it finds then');
    }
    const url = req.start_url;
    if (url) {
      const o = webOrigin(url);
      if (o) lease.origins.add(o);
      navigateFirstTab(endpoint, url).catch((err) => this.deps.log.info({ session_id: id, err: String(err) }, 'start_url navigation failed (best effort)'));
    }
    this.deps.log.info({ pool_id: st.rec.id, session_id: id }, 'pool browser leased');
    return this.deps.sessions.get(p, id, false);
  }

  // ---- filling -----------------------------------------------------------------------

  private restartFill(st: PoolState): void {
    if (st.timer) clearTimeout(st.timer);
    st.timer = null;
    this.schedule(st);
  }

  /** Starts the next launch when the pool is short and its pace allows, else arms a timer. */
  private schedule(st: PoolState): void {
    if (this.stopping || st.deleted || st.timer || st.filling) return;
    const s = st.rec.settings;
    if (st.idle.size + st.leased.size >= s.size) {
      st.fillError = null;
      return;
    }
    const wait = st.lastLaunchMs + fillIntervalMs(s.size, s.fillRatePerMinute) - Date.now();
    if (wait > 0) {
      st.timer = setTimeout(() => {
        st.timer = null;
        this.schedule(st);
      }, wait);
      st.timer.unref();
      return;
    }
    const job = this.launchOne(st);
    st.launch = job;
    this.track(job);
  }

  private async launchOne(st: PoolState): Promise<void> {
    st.filling++;
    st.lastLaunchMs = Date.now();
    let id: string | null = null;
    try {
      const body = await this.deps.sessions.create(await this.principalOf(st.rec), sessionRequestOf(st.rec.settings));
      id = body.session_id as string;
      if (st.deleted || this.stopping) {
        await this.deps.sessions.end(id, 'deleted');
        return;
      }
      await this.deps.repo.addMember(st.rec.id, id, nowIso());
      this.memberOf.set(id, st);
      st.idle.add(id);
      st.fillError = null;
      this.offer(st);
    } catch (err) {
      st.fillError = err instanceof Error ? err.message : String(err);
      this.deps.log.warn({ pool_id: st.rec.id, err: st.fillError }, 'browser pool could not launch a browser; retrying at its fill rate');
      if (id) await this.deps.sessions.end(id, 'launch_failed').catch(() => undefined);
    } finally {
      st.filling--;
      st.launch = null;
      this.schedule(st);
    }
  }

  private async endIdle(st: PoolState, count: number): Promise<void> {
    const victims = [...st.idle].slice(0, count);
    for (const id of victims) st.idle.delete(id);
    await Promise.allSettled(victims.map((id) => this.deps.sessions.end(id, 'deleted')));
  }

  // ---- helpers -----------------------------------------------------------------------

  private stateOf(rec: PoolRecord): PoolState {
    const st: PoolState = { rec, idle: new Set(), leased: new Map(), filling: 0, launch: null, lastLaunchMs: 0, timer: null, fillError: null, waiters: [], deleted: false };
    this.pools.set(rec.id, st);
    return st;
  }

  /** Every rule of a pool configuration, references resolved (404 naming the field when one is unknown). */
  private async checkSettings(p: Principal, s: PoolSettings, early: { field: string; message: string }[]): Promise<PoolRecord['resolved']> {
    const problems = [...early, ...checkPoolSettings(s), ...(await this.deps.sessions.chromePolicyProblems(s.browser.chrome_policy))];
    if (problems.length) throw invalidInput(problems);
    return this.deps.resources ? this.deps.resources.resolveReferences(p, sessionRequestOf(s)) : { profileId: null, extensionIds: [] };
  }

  private async principalOf(rec: PoolRecord): Promise<Principal> {
    const cached = this.principals.get(rec.organizationId);
    if (cached) return { ...cached, projectId: rec.projectId, keyProjectId: rec.projectId };
    const organization = await this.deps.accounts.findOrganization(rec.organizationId);
    if (!organization) throw new InternalError(`the organization of pool ${rec.id} no longer exists`);
    const p: Principal = { keyId: `pool:${rec.id}`, organization, projectId: rec.projectId, keyProjectId: rec.projectId };
    this.principals.set(rec.organizationId, p);
    return p;
  }

  private endpointOf(id: string): BrowserEndpoint | null {
    const live = this.deps.sessions.liveSession(id);
    return live ? { port: live.handle.chromium.port, wsPath: live.handle.chromium.wsPath } : null;
  }

  private track(job: Promise<unknown>): void {
    this.pending.add(job);
    void job.finally(() => this.pending.delete(job));
  }

  private async mustFind(p: Principal, idOrName: string): Promise<PoolRecord> {
    const rec = await this.deps.repo.find(p.projectId, idOrName);
    if (!rec) throw new NotFound(`browser pool "${idOrName}" not found`);
    return rec;
  }

  /** The pool's state on this node; its browsers run only on the node that created it. */
  private local(rec: PoolRecord): PoolState {
    const st = this.pools.get(rec.id);
    if (!st || rec.nodeId !== this.deps.nodeId) throw new Conflict('this browser pool runs on another node; send the request to that node', 'wrong_node');
    return st;
  }

  private async view(rec: PoolRecord): Promise<Record<string, unknown>> {
    const st = this.pools.get(rec.id);
    const counts = st ? { idle: st.idle.size, leased: st.leased.size } : ((await this.deps.repo.counts([rec.id])).get(rec.id) ?? { idle: 0, leased: 0 });
    const s = (st?.rec ?? rec).settings;
    const body: Record<string, unknown> = {
      id: rec.id,
      acquired_count: counts.leased,
      available_count: counts.idle,
      browser_pool_config: poolConfigView(s),
      created_at: rec.createdAt,
      extension_ids: (st?.rec ?? rec).resolved.extensionIds,
    };
    if (s.name !== null) body.name = s.name;
    const profileId = (st?.rec ?? rec).resolved.profileId;
    if (profileId) body.profile_id = profileId;
    if (st?.fillError && st.idle.size + st.leased.size < s.size) body.fill_error = st.fillError;
    return body;
  }
}
