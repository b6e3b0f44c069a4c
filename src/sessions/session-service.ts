import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import type { Config } from '../config.js';
import type { BrowserCreateRequest, BrowserUpdateRequest } from '../domain/browser-request.js';
import { checkCreateRules, checkPlanGates, resolveCreate, type ResolvedCreate } from '../domain/browser-rules.js';
import { handOutPlan, warmDecision, warmShape } from '../domain/warm-eligibility.js';
import { checkUpdateProxy } from '../domain/proxy-selection.js';
import { checkChromePolicy } from '../domain/chrome-policy.js';
import { checkUpdateTelemetryRules, resolveCreateState, resolveUpdateState, telemetryView } from '../domain/telemetry-config.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import type { PolicySchemaSource } from '../runtime/policy-schema.js';
import { newId, nowIso } from '../domain/ids.js';
import type { Channel, SessionTokens } from '../gateway/tokens.js';
import { CapacityExhausted, Conflict, Forbidden, InternalError, NotFound, invalidInput } from '../http/errors.js';
import type { BrowserRuntime, LaunchSpec, RuntimeHandle } from '../runtime/browser-runtime.js';
import { browserView } from './browser-view.js';
import type { SessionRecord } from './session-record.js';
import type { PreparedResources, SessionResources } from './session-resources.js';
import type { SessionAgents } from './session-agents.js';
import { openStartUrl } from '../stealth/stealth-hooks.js';
import type { ListFilter, SessionRepo } from './session-repo.js';
import type { WarmBrowser, WarmPool } from './warm-pool.js';

/** What session creation needs from the vaults: resolve the request's references, record the links. */
export interface VaultLinks {
  resolveForSession(projectId: string, refs: { id?: string; name?: string }[]): Promise<string[]>;
  linkSession(sessionId: string, vaultIds: string[]): Promise<void>;
}

/** Something the gateway holds open for a session (a websocket pair); closed when the session ends. */
export interface SessionClient {
  /** Closes the connection; a websocket closes with this code and reason. */
  close(code?: number, reason?: string): void;
}

/**
 * What browser pools tell the session service (src/pools/): idle pool browsers are neither
 * reaped nor reachable through the gateway, leased ones show their pool, and the pool hears
 * of every session that ended (to replace it).
 */
export interface PoolLink {
  isIdle(sessionId: string): boolean;
  poolOf(sessionId: string): { id: string; name?: string } | null;
  /** When the session's current lease began (seconds since the epoch); null when it is not leased from a pool. */
  leasedSince(sessionId: string): number | null;
  ended(sessionId: string): void;
}

/** A session running on this node. */
interface LiveSession {
  record: SessionRecord;
  handle: RuntimeHandle;
  clients: Set<SessionClient>;
  lastActiveMs: number;
}

export type EndReason = 'deleted' | 'inactivity' | 'browser_exited' | 'launch_failed' | 'lost_on_restart' | 'server_shutdown';

/**
 * Lifecycle of browser sessions on this node: create (launch), look up, update, end
 * (soft delete), inactivity reaping and start-up reconciliation. The store is the source
 * of truth; `live` mirrors the sessions whose processes this node owns.
 */
export class SessionService {
  private readonly live = new Map<string, LiveSession>();
  private readonly starting = new Map<string, Promise<unknown>>();
  private readonly ending = new Map<string, Promise<void>>();
  private reaper: NodeJS.Timeout | null = null;
  private pools: PoolLink | null = null;
  private publicUrl: string;

  constructor(
    private readonly deps: {
      repo: SessionRepo;
      runtime: BrowserRuntime;
      tokens: SessionTokens;
      policySchema: PolicySchemaSource;
      config: Config;
      /** Whether memory limits are enforced (cgroups available). */
      memoryEnforced: boolean;
      nodeId: string;
      log: Logger;
      /** Resolves and links the create request's `vaults` (absent: the request may not name any). */
      vaults?: VaultLinks;
      /** Profile, extensions, proxy and network of sessions (absent: requests may not name any). */
      resources?: SessionResources;
      /** Telemetry configuration and capture (absent: telemetry stays off, as the view says). */
      telemetry?: TelemetryService;
      /** browserd's own CDP agents that prepare every target of a session (stealth, capture...). */
      agents?: SessionAgents;
      /** Pre-launched browsers handed to eligible create requests (absent: every session launches fresh). */
      warm?: WarmPool;
    },
  ) {
    this.publicUrl = deps.config.publicUrl ?? '';
  }

  setPoolLink(link: PoolLink): void {
    this.pools = link;
  }

  /** The inactivity timeout counts from now (a pool browser was just leased). */
  restartIdleClock(id: string): void {
    const l = this.live.get(id);
    if (l) l.lastActiveMs = Date.now();
  }

  /** Closes every client connection of a session (a pool browser returned by its lessee). */
  closeClients(id: string, reason: string): void {
    const l = this.live.get(id);
    if (l) for (const c of [...l.clients]) c.close(1000, reason);
  }

  setPublicUrl(url: string): void {
    this.publicUrl = url;
  }

  get activeCount(): number {
    return this.live.size + this.starting.size;
  }

  // ---- API operations -------------------------------------------------------------

  /**
   * `schemaProblems`: what the schema refused; `req` is then the rest of the body (see
   * validFieldsOf), so the answer lists every broken rule at once.
   */
  async create(p: Principal, req: BrowserCreateRequest, schemaProblems: { field: string; message: string }[] = []): Promise<Record<string, unknown>> {
    const problems = [...schemaProblems, ...checkCreateRules(req), ...(await this.chromePolicyProblems(req.chrome_policy))];
    if (problems.length) throw invalidInput(problems);
    const gate = checkPlanGates(req, p.organization.plan);
    if (gate) throw new Forbidden(gate, 'plan_required');
    const r = resolveCreate(req);
    // Unknown vaults are a 404 naming each entry; resolved once, by id or name, and linked by id.
    const vaultIds = req.vaults?.length ? await this.mustVaults().resolveForSession(p.projectId, req.vaults) : [];
    const telemetry = await this.createTelemetryState(p, req);
    if (!this.deps.config.regions.includes(r.region)) {
      throw new CapacityExhausted(`no node serves region ${r.region}; this node serves ${this.deps.config.regions.join(', ')}`);
    }
    const full = () => new CapacityExhausted(`this node is at its capacity of ${this.deps.config.maxSessions} sessions; retry later`);
    if (this.activeCount >= this.deps.config.maxSessions) throw full();
    // Warm start: an eligible request takes a pre-launched browser, whose id the session gets
    // (or the one being launched, rather than starting a second launch next to it).
    let warm = await this.takeWarm(req, r);
    // Checked again after that wait, and from here to holding the slot nothing waits.
    if (this.activeCount >= this.deps.config.maxSessions) {
      if (warm) this.deps.warm?.giveBack(warm);
      throw full();
    }
    const fromWarm = warm !== null;
    const now = nowIso();
    const record: SessionRecord = {
      id: warm?.id ?? newId(),
      projectId: p.projectId,
      nodeId: this.deps.nodeId,
      name: r.name,
      status: 'starting',
      headless: r.headless,
      stealth: r.stealth,
      gpu: r.gpu,
      kioskMode: r.kioskMode,
      memory: r.memory,
      region: r.region,
      timeoutSeconds: r.timeoutSeconds,
      invocationId: r.invocationId,
      startUrl: r.startUrl,
      tags: r.tags,
      config: { viewport: r.viewport, ...(r.chromePolicy ? { chromePolicy: r.chromePolicy } : {}), ...(vaultIds.length ? { vaults: vaultIds } : {}) },
      runtime: null,
      createdAt: now,
      lastActiveAt: now,
      deletedAt: null,
      uptimeMs: null,
      usageStatus: null,
      endReason: null,
    };
    // The slot is held from here, so concurrent creates cannot overshoot the capacity.
    let release!: () => void;
    this.starting.set(record.id, new Promise<void>((res) => (release = res)));
    let prepared: PreparedResources | null = null;
    try {
      // Profile, extensions, proxy: resolved (404 naming the field) and reserved (409) before the session is recorded.
      try {
        prepared = this.deps.resources ? await this.deps.resources.prepare(p, req, record.id, warm?.bridgePort ?? undefined) : null;
      } catch (err) {
        // Nothing of the warm browser was changed yet: it waits for the next request.
        if (warm) this.deps.warm?.giveBack(warm);
        warm = null;
        throw err;
      }
      if (prepared) record.config = { ...record.config, ...prepared.config };
      // A warm browser runs already: recorded active with its handle at once (one store write, not two).
      if (warm) Object.assign(record, { status: 'active', runtime: warm.handle });
      await this.deps.repo.insert(record);
      if (telemetry.categories || telemetry.excludedMethods.length) await this.deps.telemetry?.setState(record.id, telemetry);
      await this.deps.telemetry?.open(record.id);
      if (vaultIds.length) {
        try {
          await this.mustVaults().linkSession(record.id, vaultIds);
        } catch (err) {
          await this.deps.repo.markDeleted(record.id, nowIso(), 0, 'launch_failed');
          await this.deps.repo.markUsageReady(record.id);
          throw err;
        }
      }
      let handle: RuntimeHandle;
      try {
        const taken = warm;
        warm = null;
        handle = await this.launchOrHandOut(taken, r, {
          sessionId: record.id,
          headless: r.headless,
          kioskMode: r.kioskMode,
          width: r.viewport.width,
          height: r.viewport.height,
          refreshRate: r.viewport.refresh_rate,
          // Stealth: the first tab opens start_url once the stealth agent is in place (below).
          startUrl: r.stealth ? null : r.startUrl,
          stealth: r.stealth,
          chromePolicy: r.chromePolicy,
          memoryBytes: this.deps.memoryEnforced ? r.memoryBytes : null,
          ...prepared?.launch,
        });
      } catch (err) {
        this.deps.log.error({ session_id: record.id, err: String(err) }, 'browser launch failed');
        await this.deps.repo.markDeleted(record.id, nowIso(), 0, 'launch_failed');
        await this.deps.repo.markUsageReady(record.id);
        throw new InternalError('the browser failed to start; nothing was kept', 'launch_failed');
      }
      const recorded = record.runtime === handle;
      record.status = 'active';
      record.runtime = handle;
      try {
        if (!recorded) await this.deps.repo.markActive(record.id, handle);
      } catch (err) {
        await this.deps.runtime.stop(record.id, handle);
        throw err;
      }
      this.live.set(record.id, { record, handle, clients: new Set(), lastActiveMs: Date.now() });
      this.deps.telemetry?.watch(record.id, handle.chromium);
      // Features that prepare every target (stealth...) are in place before the client hears of the session.
      await this.deps.agents?.start(record, handle.chromium);
      if (r.stealth && r.startUrl && this.deps.agents) await openStartUrl(this.deps.agents, record.id, r.startUrl, this.deps.log);
      this.deps.log.info({ session_id: record.id, headless: r.headless, pid: handle.chromium.pid, warm: fromWarm }, 'session started');
      this.deps.resources?.started(record).catch((err) => this.deps.log.warn({ session_id: record.id, err: String(err) }, 'could not record resource use'));
    } catch (err) {
      await prepared?.abort();
      if (warm) await this.deps.warm?.discard(warm, { closeBridge: true, reason: 'session creation failed' });
      throw err;
    } finally {
      this.starting.delete(record.id);
      release();
    }
    return this.view(record);
  }

  async get(p: Principal, idOrName: string, includeDeleted: boolean): Promise<Record<string, unknown>> {
    return this.view(await this.mustFind(p, idOrName, includeDeleted));
  }

  async list(p: Principal, f: Omit<ListFilter, 'projectId'>): Promise<{ items: Record<string, unknown>[]; hasMore: boolean }> {
    const page = await this.deps.repo.list({ ...f, projectId: p.projectId });
    return { items: await Promise.all(page.items.map((s) => this.view(s))), hasMore: page.hasMore };
  }

  async update(p: Principal, idOrName: string, req: BrowserUpdateRequest): Promise<Record<string, unknown>> {
    const startedMs = Date.now();
    const problems: { field: string; message: string }[] = [...checkUpdateProxy(req)];
    if (req.profile !== undefined) problems.push({ field: 'profile', message: "cannot be loaded into a running session (a profile's state is copied in before Chromium starts); create a session with it" });
    problems.push(...checkUpdateTelemetryRules(req.telemetry));
    if (problems.length) throw invalidInput(problems);
    const s = await this.mustFind(p, idOrName, false);
    const patch: Parameters<SessionRepo['update']>[1] = {};
    // A new proxy selection switches the running session's egress at once (rule 2: omitted, unchanged).
    const config = await this.deps.resources?.update(p, s, req);
    if (config) patch.config = config;
    // Kernel semantics: omitted leaves unchanged; "" (or null) clears the name; {} (or null) clears the tags.
    if (req.name !== undefined) patch.name = req.name === '' || req.name === null ? null : req.name;
    if (req.tags !== undefined) patch.tags = req.tags ?? {};
    await this.deps.repo.update(s.id, patch);
    if (req.telemetry && this.deps.telemetry) {
      await this.deps.telemetry.setState(s.id, resolveUpdateState(await this.deps.telemetry.stateOf(s.id), req.telemetry));
    }
    const fresh = (await this.deps.repo.byId(s.id))!;
    const live = this.live.get(s.id);
    if (live) live.record = { ...live.record, name: fresh.name, tags: fresh.tags, config: fresh.config };
    // platform telemetry: the API call that managed the running session (by the state it left: on when this PATCH switched it on).
    const changed = Object.keys(req).filter((k) => (req as Record<string, unknown>)[k] !== undefined);
    this.deps.telemetry?.platformCall(s.id, { operationId: 'updateBrowser', status: 200, startedMs, changed });
    return this.view(fresh);
  }

  async delete(p: Principal, idOrName: string): Promise<void> {
    const s = await this.mustFind(p, idOrName, false);
    await this.starting.get(s.id);
    if (s.nodeId !== this.deps.nodeId) {
      throw new Conflict('this session runs on another node; send the request to that node', 'wrong_node');
    }
    await this.end(s.id, 'deleted');
  }

  // ---- gateway hooks ---------------------------------------------------------------

  /** The running session a gateway connection may attach to, or null if it is not active on this node. */
  liveSession(id: string): { record: SessionRecord; handle: RuntimeHandle } | null {
    const l = this.live.get(id);
    return l && !this.ending.has(id) && !this.pools?.isIdle(id) ? { record: l.record, handle: l.handle } : null;
  }

  /**
   * False for a connection token signed before the session's current pool lease began: a
   * released pool browser is not reachable with an earlier lessee's URLs.
   */
  tokenCurrent(id: string, issuedAtSeconds: number | undefined): boolean {
    const since = this.pools?.leasedSince(id);
    return since === null || since === undefined || (issuedAtSeconds ?? 0) >= since;
  }

  /** Registers an open client connection (activity); returns the function that unregisters it. */
  attach(id: string, client: SessionClient): () => void {
    const l = this.live.get(id);
    if (!l) {
      client.close();
      return () => undefined;
    }
    l.clients.add(client);
    l.lastActiveMs = Date.now();
    return () => {
      if (!l.clients.delete(client)) return;
      l.lastActiveMs = Date.now();
      this.deps.repo.touch(id, new Date(l.lastActiveMs).toISOString()).catch((err) => this.deps.log.warn({ session_id: id, err: String(err) }, 'could not record activity'));
    };
  }

  async urls(s: SessionRecord): Promise<{ cdp: string; webdriver: string; liveView: string | null }> {
    const base = this.publicUrl;
    const wsBase = base.replace(/^http/, 'ws');
    const token = (channel: Channel) => this.deps.tokens.sign({ sessionId: s.id, channel, readonly: false });
    const [cdp, bidi, live] = await Promise.all([token('cdp'), token('bidi'), s.headless ? Promise.resolve(null) : token('live')]);
    return {
      cdp: `${wsBase}/browser/cdp?jwt=${cdp}`,
      webdriver: `${wsBase}/browser/bidi?jwt=${bidi}`,
      liveView: live ? `${base}/browser/live?jwt=${live}` : null,
    };
  }

  // ---- lifecycle ------------------------------------------------------------------

  /**
   * Ends a session: soft delete in the store (usage pending), close its clients, end its
   * processes and remove its files, then mark usage ready. Idempotent and concurrency-safe.
   */
  end(id: string, reason: EndReason): Promise<void> {
    const running = this.ending.get(id);
    if (running) return running;
    const job = this.doEnd(id, reason).finally(() => {
      this.ending.delete(id);
      this.pools?.ended(id);
    });
    this.ending.set(id, job);
    return job;
  }

  private async doEnd(id: string, reason: EndReason): Promise<void> {
    const l = this.live.get(id);
    const record = l?.record ?? (await this.deps.repo.byId(id));
    if (!record) return;
    const deletedAt = record.deletedAt ?? nowIso();
    if (!record.deletedAt) {
      const uptime = Math.max(0, Date.parse(deletedAt) - Date.parse(record.createdAt));
      await this.deps.repo.markDeleted(id, deletedAt, uptime, reason);
    }
    if (l) for (const c of [...l.clients]) c.close(1000, `session ended (${reason})`);
    await this.deps.telemetry?.unwatch(id);
    await this.deps.agents?.stop(id);
    try {
      await this.deps.runtime.stop(id, l?.handle ?? record.runtime, this.deps.resources?.stopOptions(record));
    } finally {
      this.live.delete(id);
    }
    await this.deps.telemetry?.close(id);
    await this.deps.resources?.ended(record);
    await this.deps.repo.markUsageReady(id);
    this.deps.log.info({ session_id: id, reason }, 'session ended');
  }

  /** One pass of the inactivity reaper: ends idle sessions and sessions whose browser died. */
  async reapOnce(nowMs = Date.now()): Promise<void> {
    const jobs: Promise<void>[] = [];
    for (const [id, l] of this.live) {
      if (this.ending.has(id)) continue;
      if (!this.deps.runtime.isRunning(l.handle)) {
        this.deps.telemetry?.emit(id, { category: 'system', type: 'service_crashed', source: { kind: 'local_process', event: 'process_exit' }, data: { phase: 'running', service_name: 'chromium', pid: l.handle.chromium.pid } });
        jobs.push(this.end(id, 'browser_exited'));
      }
      // An idle pool browser waits for its next lease; the pool's timeout applies once leased.
      else if (l.clients.size === 0 && !this.pools?.isIdle(id) && nowMs - l.lastActiveMs >= l.record.timeoutSeconds * 1000) jobs.push(this.end(id, 'inactivity'));
    }
    const results = await Promise.allSettled(jobs);
    for (const r of results) if (r.status === 'rejected') this.deps.log.error({ err: String(r.reason) }, 'reaper could not end a session');
  }

  startReaper(): void {
    if (this.reaper) return;
    this.reaper = setInterval(() => void this.reapOnce(), this.deps.config.reaperIntervalMs);
    this.reaper.unref();
  }

  /**
   * Start-up reconciliation after a crash or restart: every session the store lists as
   * unfinished on this node is re-adopted if its Chromium still answers, else ended;
   * then every process and directory the store does not know about is removed.
   */
  async reconcile(): Promise<{ adopted: number; ended: number; swept: { processes: number; dirs: number } }> {
    const unfinished = await this.deps.repo.unfinishedOnNode(this.deps.nodeId);
    let adopted = 0;
    let ended = 0;
    for (const s of unfinished) {
      if (s.deletedAt === null && s.status === 'active' && s.runtime && (await this.deps.runtime.probe(s.runtime, s.id)) && (await this.adoptResources(s))) {
        // The grace period restarts now: the server was away, not the clients' fault.
        this.live.set(s.id, { record: s, handle: s.runtime, clients: new Set(), lastActiveMs: Date.now() });
        await this.deps.telemetry?.open(s.id);
        this.deps.telemetry?.watch(s.id, s.runtime.chromium);
        await this.deps.agents?.start(s, s.runtime.chromium);
        adopted++;
        continue;
      }
      await this.end(s.id, 'lost_on_restart');
      ended++;
    }
    const swept = await this.deps.runtime.sweep(new Set(this.live.keys()));
    await this.deps.resources?.reconcile();
    return { adopted, ended, swept };
  }

  /** Stops the reaper and ends every session this node runs. */
  async shutdown(): Promise<void> {
    if (this.reaper) clearInterval(this.reaper);
    this.reaper = null;
    await this.deps.warm?.shutdown();
    await Promise.allSettled([...this.starting.values()]);
    await Promise.allSettled([...this.live.keys()].map((id) => this.end(id, 'server_shutdown')));
  }

  // ---- helpers --------------------------------------------------------------------

  private async adoptResources(s: SessionRecord): Promise<boolean> {
    if (!this.deps.resources) return true;
    try {
      return await this.deps.resources.adopt(s);
    } catch (err) {
      this.deps.log.warn({ session_id: s.id, err: String(err) }, 'could not restore what the session uses; ending it');
      return false;
    }
  }

  /** What is wrong with a create request's chrome_policy (also checked for a pool's configuration). */
  async chromePolicyProblems(policy: Record<string, unknown> | undefined): Promise<{ field: string; message: string }[]> {
    if (!policy || !Object.keys(policy).length) return [];
    if (!this.deps.runtime.isolatesPolicies) {
      return [{ field: 'chrome_policy', message: 'per-session policies need browserd to run as root (each session gets its own mount namespace)' }];
    }
    return checkChromePolicy(policy, await this.policySchema());
  }

  /** A warm browser for this request when it is eligible and one is ready (see domain/warm-eligibility). */
  private async takeWarm(req: BrowserCreateRequest, r: ResolvedCreate): Promise<WarmBrowser | null> {
    if (!this.deps.warm) return null;
    const d = warmDecision(req, r);
    if (!d.warm) {
      this.deps.log.debug({ reason: d.reason }, 'launching fresh: not eligible for a warm browser');
      return null;
    }
    return this.deps.warm.takeOrAwait(d.kind);
  }

  /** Hands out the warm browser taken for the session (a fresh launch when it does not take the changes), else launches. */
  private async launchOrHandOut(warm: WarmBrowser | null, r: ResolvedCreate, spec: LaunchSpec): Promise<RuntimeHandle> {
    const pool = this.deps.warm;
    if (warm && pool) {
      try {
        return await pool.handOut(warm, handOutPlan(r, warmShape(warm.kind), this.deps.memoryEnforced));
      } catch (err) {
        this.deps.log.warn({ session_id: spec.sessionId, err: String(err) }, 'the warm browser could not be handed out; launching a fresh one');
        await pool.discard(warm, { closeBridge: false, reason: 'hand-out failed' });
      }
    }
    return pool ? pool.trackLaunch(() => this.deps.runtime.launch(spec)) : this.deps.runtime.launch(spec);
  }

  private mustVaults(): VaultLinks {
    if (!this.deps.vaults) throw new InternalError('vaults are not available on this server');
    return this.deps.vaults;
  }

  private async policySchema() {
    try {
      return await this.deps.policySchema.get();
    } catch (err) {
      this.deps.log.error({ err: String(err) }, 'could not read the Chromium policy schema');
      throw new InternalError('could not read the installed Chromium policy schema to check chrome_policy', 'policy_schema_unavailable');
    }
  }

  private async mustFind(p: Principal, idOrName: string, includeDeleted: boolean): Promise<SessionRecord> {
    const s = await this.deps.repo.find(p.projectId, idOrName, includeDeleted);
    if (!s) throw new NotFound(`browser session "${idOrName}" not found`);
    return s;
  }

  private async view(s: SessionRecord): Promise<Record<string, unknown>> {
    const [urls, extra, telemetry] = await Promise.all([this.urls(s), this.deps.resources?.view(s) ?? {}, this.deps.telemetry?.stateOf(s.id)]);
    const pool = s.deletedAt ? null : this.pools?.poolOf(s.id);
    return { ...browserView(s, urls), ...extra, ...(pool ? { pool } : {}), telemetry: telemetry ? telemetryView(telemetry) : null };
  }

  /** Telemetry rules 1, 2 and 4 on create; the export destination is looked up in the project (404 when unknown). */
  private async createTelemetryState(p: Principal, req: BrowserCreateRequest) {
    const dest = req.telemetry?.export?.otlp?.destination;
    if (!this.deps.telemetry) {
      if (resolveCreateState(req.telemetry).categories) throw invalidInput([{ field: 'telemetry', message: 'telemetry capture is not available on this server' }]);
      return resolveCreateState(null);
    }
    const destId = dest && resolveCreateState(req.telemetry).categories ? await this.deps.telemetry.resolveDestination(p.projectId, dest) : null;
    return resolveCreateState(req.telemetry, destId);
  }
}
