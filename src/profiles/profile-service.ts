import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import { newId, nowIso } from '../domain/ids.js';
import type { ProfileCreateRequest, ResourceListQuery } from '../domain/resource-requests.js';
import { ApiError, BadRequest, Conflict, NotFound } from '../http/errors.js';
import type { ProfileFiles } from './profile-files.js';
import type { ProfileRepo, ProfileRow } from './profile-repo.js';

/** The contract's Profile metadata. */
export interface ProfileView {
  id: string;
  created_at: string;
  name: string | null;
  last_used_at?: string;
  updated_at?: string;
}

export function profileView(r: ProfileRow): ProfileView {
  const v: ProfileView = { id: r.id, created_at: r.created_at, name: r.name, updated_at: r.updated_at };
  if (r.last_used_at) v.last_used_at = r.last_used_at;
  return v;
}

/**
 * Profiles: saved browser state (cookies, local storage, IndexedDB...) that sessions start
 * from and, with save_changes, write back to when they end. One writer at a time per
 * profile (see docs/profiles.md); any number of sessions may start from it.
 */
export class ProfileService {
  constructor(private readonly deps: { repo: ProfileRepo; files: ProfileFiles; log: Logger }) {}

  // ---- API ----------------------------------------------------------------------------

  async create(p: Principal, req: ProfileCreateRequest): Promise<ProfileView> {
    const now = nowIso();
    const row: ProfileRow = { id: newId(), project_id: p.projectId, name: req.name ?? null, created_at: now, updated_at: now, last_used_at: null, writer_session_id: null };
    this.deps.files.create(row.id);
    try {
      await this.deps.repo.insert(row);
    } catch (err) {
      this.deps.files.remove(row.id);
      throw err;
    }
    return profileView(row);
  }

  async get(p: Principal, idOrName: string): Promise<ProfileView> {
    return profileView(await this.mustFind(p.projectId, idOrName));
  }

  async list(p: Principal, q: ResourceListQuery): Promise<{ items: ProfileView[]; hasMore: boolean }> {
    const page = await this.deps.repo.list({ projectId: p.projectId, offset: q.offset ?? 0, limit: q.limit ?? 20, name: q.name ?? null, query: q.query?.trim() || null });
    return { items: page.items.map(profileView), hasMore: page.hasMore };
  }

  /** Refused (409) while a session that will write back into the profile is still running. */
  async delete(p: Principal, idOrName: string): Promise<void> {
    const row = await this.mustFind(p.projectId, idOrName);
    const writer = await this.deps.repo.activeWriter(row.id);
    if (writer) throw new Conflict(`profile "${idOrName}" is in use by session ${writer}, which saves its changes into it when it ends; delete that session first`, 'profile_in_use');
    await this.deps.repo.delete(row.id);
    this.deps.files.remove(row.id);
  }

  async download(p: Principal, idOrName: string, format: string | undefined): Promise<{ stream: Readable; filename: string; contentType: string }> {
    const row = await this.mustFind(p.projectId, idOrName);
    if (format === 'tar.zst') throw new BadRequest('invalid request: query.format: tar.zst is not available on this server; use tar.gz (the default) or tar', [{ code: 'invalid_input', message: 'query.format: tar.zst is not available on this server; use tar.gz (the default) or tar' }]);
    const gzip = format !== 'tar';
    return {
      stream: this.deps.files.archive(row.id, gzip),
      filename: `${row.name ?? row.id}.${gzip ? 'tar.gz' : 'tar'}`,
      contentType: gzip ? 'application/gzip' : 'application/x-tar',
    };
  }

  // ---- sessions -----------------------------------------------------------------------

  /** The profile a create request names; 404 naming `profile` when it does not exist in the project. */
  async resolve(projectId: string, sel: { id?: string; name?: string }): Promise<ProfileRow> {
    const row = sel.id !== undefined ? await this.deps.repo.byId(sel.id) : await this.deps.repo.find(projectId, sel.name!);
    if (!row || row.project_id !== projectId || (sel.name !== undefined && row.name !== sel.name)) {
      const message = sel.id !== undefined ? `profile: no profile with id "${sel.id}" in this project` : `profile: no profile named "${sel.name}" in this project`;
      throw new ApiError(404, 'profile_not_found', message, [{ code: 'profile_not_found', message }]);
    }
    return row;
  }

  /** Reserves the profile for a session that saves into it; 409 while another one does. */
  async claimWriter(row: ProfileRow, sessionId: string): Promise<void> {
    if (await this.deps.repo.claimWriter(row.id, sessionId)) return;
    const holder = (await this.deps.repo.byId(row.id))?.writer_session_id;
    throw new Conflict(
      `profile "${row.name ?? row.id}" is already used with save_changes by session ${holder ?? '(unknown)'}; only one session at a time may save into a profile (start this one without save_changes, or end the other first)`,
      'profile_in_use',
    );
  }

  async releaseWriter(profileId: string, sessionId: string): Promise<void> {
    await this.deps.repo.releaseWriter(profileId, sessionId);
  }

  /** The directory a session copies its starting state from (null: never saved, start fresh). */
  sourceDir(profileId: string): string | null {
    return this.deps.files.current(profileId);
  }

  async markUsed(profileId: string): Promise<void> {
    await this.deps.repo.touchUsed(profileId, nowIso());
  }

  /** Writes an ended session's user-data-dir back into the profile, atomically, and moves updated_at/last_used_at. */
  async save(profileId: string, userDataDir: string): Promise<void> {
    if (!(await this.deps.repo.byId(profileId))) {
      this.deps.log.warn({ profile_id: profileId }, 'profile was deleted before its session ended; changes not saved');
      return;
    }
    this.deps.files.save(profileId, userDataDir);
    await this.deps.repo.markSaved(profileId, nowIso());
  }

  async byId(id: string): Promise<ProfileRow | null> {
    return this.deps.repo.byId(id);
  }

  async releaseOrphanWriters(): Promise<number> {
    return this.deps.repo.releaseOrphanWriters();
  }

  private async mustFind(projectId: string, idOrName: string): Promise<ProfileRow> {
    const row = await this.deps.repo.find(projectId, idOrName);
    if (!row) throw new NotFound(`profile "${idOrName}" not found`, 'profile_not_found');
    return row;
  }
}
