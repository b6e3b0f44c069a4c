import path from 'node:path';
import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import type { BrowserCreateRequest, BrowserUpdateRequest } from '../domain/browser-request.js';
import type { ExtensionService } from '../extensions/extension-service.js';
import { chromiumBypassList } from '../domain/proxy-bypass.js';
import { egressOf, proxyFields, requestedOnCreate, requestedOnUpdate, type RecordedProxy, type RequestedProxy } from '../domain/proxy-selection.js';
import { Conflict } from '../http/errors.js';
import type { EgressBridges, Upstream } from '../proxies/egress-bridge.js';
import type { ProxyService } from '../proxies/proxy-service.js';
import type { ProfileService } from '../profiles/profile-service.js';
import { profileView } from '../profiles/profile-service.js';
import type { LaunchSpec, StopOptions } from '../runtime/browser-runtime.js';
import type { SessionConfig, SessionRecord } from './session-record.js';

/** What a create request's project resources add to a session: its recorded config and its launch. */
export interface PreparedResources {
  config: Partial<SessionConfig>;
  launch: Pick<LaunchSpec, 'profileDir' | 'extensions' | 'proxy'>;
  /** Undoes the reservations (profile writer, egress bridge) when the session does not start. */
  abort(): Promise<void>;
}

/**
 * The project resources a session uses (profile, extensions, proxy and network) and their
 * part in its lifecycle: resolved and reserved before launch, handed to the runtime,
 * written back or released when the session ends, restored on re-adoption, and shown in
 * the Browser body. SessionService calls these hooks; the rules live here.
 */
export class SessionResources {
  constructor(
    private readonly deps: {
      profiles: ProfileService;
      extensions: ExtensionService;
      proxies: ProxyService;
      bridges: EgressBridges;
      /** BROWSERD_STEALTH_PROXY_URL: the default egress of stealth sessions (absent: direct). */
      stealthProxyUrl?: string;
      log: Logger;
    },
  ) {}

  /**
   * Resolves every reference of the request (404 naming the field when one does not exist)
   * and reserves what the session holds exclusively (409 when taken). `bridgePort`: the
   * session takes over a warm browser's bridge there, switched to its egress (nothing else
   * is changed before that last step, so a failure leaves the warm browser as it was).
   */
  async prepare(p: Principal, req: BrowserCreateRequest, sessionId: string, bridgePort?: number): Promise<PreparedResources> {
    const undo: (() => Promise<void>)[] = [];
    const abort = async () => {
      for (const u of undo.reverse()) await u().catch((err) => this.deps.log.warn({ session_id: sessionId, err: String(err) }, 'could not undo a session reservation'));
    };
    const config: Partial<SessionConfig> = {};
    const launch: PreparedResources['launch'] = {};
    try {
      if (req.extensions?.length) {
        const rows = await this.deps.extensions.resolveForSession(p.projectId, req.extensions);
        config.extensions = rows.map((r) => r.id);
        launch.extensions = rows.map((r) => ({ id: r.id, dir: this.deps.extensions.unpackedDir(r.id) }));
      }
      if (req.profile) {
        const saveChanges = req.profile.save_changes === true;
        const row = await this.deps.profiles.resolve(p.projectId, req.profile);
        if (saveChanges) {
          await this.deps.profiles.claimWriter(row, sessionId);
          undo.push(() => this.deps.profiles.releaseWriter(row.id, sessionId));
        }
        config.profile = { id: row.id, name: row.name, createdAt: row.created_at, saveChanges };
        launch.profileDir = this.deps.profiles.sourceDir(row.id);
      }
      // Egress: every session gets its bridge, so a PATCH can switch it later without a restart.
      const requested = requestedOnCreate(req);
      if (requested) config.proxy = await this.deps.proxies.resolveSelection(p.projectId, requested, fieldOf(requested));
      if (req.network) config.network = req.network;
      const upstream = await this.upstreamFor(config.proxy, req.stealth ?? false);
      let port: number;
      if (bridgePort !== undefined && this.deps.bridges.has(sessionId)) {
        if (upstream) this.deps.bridges.switch(sessionId, upstream);
        port = bridgePort;
      } else port = await this.deps.bridges.open(sessionId, upstream);
      undo.push(() => this.deps.bridges.close(sessionId));
      config.bridgePort = port;
      launch.proxy = { server: `http://127.0.0.1:${port}`, bypassList: chromiumBypassList(req.network?.private_hosts) };
    } catch (err) {
      await abort();
      throw err;
    }
    return { config, launch, abort };
  }

  /**
   * Resolves the request's profile, extensions and proxy without reserving anything (404
   * naming the field when one does not exist): a browser pool checks its configuration so.
   */
  async resolveReferences(p: Principal, req: BrowserCreateRequest): Promise<{ profileId: string | null; extensionIds: string[] }> {
    const extensionIds = req.extensions?.length ? (await this.deps.extensions.resolveForSession(p.projectId, req.extensions)).map((r) => r.id) : [];
    const profileId = req.profile ? (await this.deps.profiles.resolve(p.projectId, req.profile)).id : null;
    const requested = requestedOnCreate(req);
    if (requested) await this.deps.proxies.resolveSelection(p.projectId, requested, fieldOf(requested));
    return { profileId, extensionIds };
  }

  /** The session runs: its resources count as used. */
  async started(s: SessionRecord): Promise<void> {
    if (s.config.profile) await this.deps.profiles.markUsed(s.config.profile.id);
    if (s.config.extensions?.length) await this.deps.extensions.markUsed(s.config.extensions);
  }

  /** How the runtime ends the session: a session that saves into its profile closes gracefully and is saved before its files go. */
  stopOptions(s: SessionRecord): StopOptions {
    const prof = s.config.profile;
    if (!prof?.saveChanges) return {};
    return {
      graceful: true,
      beforeRemove: async (dir) => {
        try {
          await this.deps.profiles.save(prof.id, path.join(dir, 'profile'));
          this.deps.log.info({ session_id: s.id, profile_id: prof.id }, 'session state saved into its profile');
        } catch (err) {
          this.deps.log.error({ session_id: s.id, profile_id: prof.id, err: String(err) }, 'could not save the session state into its profile');
        }
      },
    };
  }

  /** After the runtime stopped the session (and saved what it saves): releases what it held. */
  async ended(s: SessionRecord): Promise<void> {
    await this.deps.bridges.close(s.id);
    if (s.config.profile?.saveChanges) await this.deps.profiles.releaseWriter(s.config.profile.id, s.id);
  }

  /** Start-up: releases what sessions that were never recorded still hold. */
  async reconcile(): Promise<void> {
    const n = await this.deps.profiles.releaseOrphanWriters();
    if (n) this.deps.log.warn({ profiles: n }, 'released profile writer claims of sessions that were never recorded');
  }

  /** Re-adoption after a restart: restores what lives in this process. False: the session cannot run on. */
  async adopt(s: SessionRecord): Promise<boolean> {
    // The bridge lived in the old process: reopen it on the port Chromium was started with.
    if (s.config.bridgePort === undefined) return true;
    await this.deps.bridges.open(s.id, await this.upstreamFor(s.config.proxy, s.stealth), s.config.bridgePort);
    return true;
  }

  /**
   * PATCH: a new proxy selection (rule 2: none leaves it unchanged) takes effect at once
   * through the session's bridge. Returns the session's new config, or null when unchanged.
   */
  async update(p: Principal, s: SessionRecord, req: BrowserUpdateRequest): Promise<SessionConfig | null> {
    const requested = requestedOnUpdate(req);
    if (!requested) return null;
    const proxy = await this.deps.proxies.resolveSelection(p.projectId, requested, fieldOf(requested));
    if (!this.deps.bridges.has(s.id)) throw new Conflict('this session runs on another node (or started before proxies existed); send the request to its node', 'wrong_node');
    this.deps.bridges.switch(s.id, await this.upstreamFor(proxy, s.stealth));
    return { ...s.config, proxy };
  }

  /** The upstream a selection gives (rules 1 and 3): a proxy, the default stealth proxy, or none (direct). */
  private async upstreamFor(sel: RecordedProxy | undefined, stealth: boolean): Promise<Upstream | null> {
    const egress = egressOf(sel, stealth);
    if (egress.kind === 'proxy') return this.deps.proxies.upstreamById(egress.id);
    if (egress.kind === 'stealth_default' && this.deps.stealthProxyUrl) {
      return { url: this.deps.stealthProxyUrl.replace(/^socks5:/, 'socks5h:'), bypassHosts: [], label: 'default stealth proxy' };
    }
    return null;
  }

  /** The Browser body's fields for these resources. */
  async view(s: SessionRecord): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    const prof = s.config.profile;
    if (prof) {
      const row = await this.deps.profiles.byId(prof.id);
      out.profile = row ? profileView(row) : { id: prof.id, created_at: prof.createdAt, name: prof.name };
      out.profile_save_changes = prof.saveChanges;
    }
    Object.assign(out, proxyFields(s.config.proxy));
    if (s.config.network) out.network = s.config.network;
    return out;
  }
}

/** The request field a selection came from, for error details. */
function fieldOf(r: RequestedProxy): string {
  if ('mode' in r) return 'proxy.mode';
  if ('name' in r) return 'proxy.name';
  return r.via === 'proxy_id' ? 'proxy_id' : 'proxy.id';
}
