import path from 'node:path';
import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import type { BrowserCreateRequest, BrowserUpdateRequest } from '../domain/browser-request.js';
import type { ExtensionService } from '../extensions/extension-service.js';
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
  constructor(private readonly deps: { profiles: ProfileService; extensions: ExtensionService; log: Logger }) {}

  /**
   * Resolves every reference of the request (404 naming the field when one does not exist)
   * and reserves what the session holds exclusively (409 when taken).
   */
  async prepare(p: Principal, req: BrowserCreateRequest, sessionId: string): Promise<PreparedResources> {
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
    } catch (err) {
      await abort();
      throw err;
    }
    return { config, launch, abort };
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
    if (s.config.profile?.saveChanges) await this.deps.profiles.releaseWriter(s.config.profile.id, s.id);
  }

  /** Start-up: releases what sessions that were never recorded still hold. */
  async reconcile(): Promise<void> {
    const n = await this.deps.profiles.releaseOrphanWriters();
    if (n) this.deps.log.warn({ profiles: n }, 'released profile writer claims of sessions that were never recorded');
  }

  /** Re-adoption after a restart: restores what lives in this process. False: the session cannot run on. */
  async adopt(_s: SessionRecord): Promise<boolean> {
    return true;
  }

  /** PATCH: nothing of these resources changes yet (see the proxy part). */
  async update(_p: Principal, _s: SessionRecord, _req: BrowserUpdateRequest): Promise<SessionConfig | null> {
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
    return out;
  }
}
