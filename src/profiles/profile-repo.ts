import { sql } from 'kysely';
import type { Db } from '../store/database.js';
import { isUniqueViolation } from '../store/database.js';
import { Conflict } from '../http/errors.js';
import type { ProfilesTable } from '../store/schema.js';

export type ProfileRow = ProfilesTable;

/** A LIKE pattern matching `q` anywhere, case-insensitively in both engines (see session-repo). */
export function containsPattern(q: string): string {
  return `%${q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** Persistence of profile metadata (the browser state itself lives in files, see ProfileFiles). */
export class ProfileRepo {
  constructor(private readonly db: Db) {}

  async insert(row: ProfileRow): Promise<void> {
    try {
      await this.db.insertInto('profiles').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`a profile named "${row.name}" already exists in this project`, 'name_conflict');
      throw err;
    }
  }

  /** By id, else by name, within the project. */
  async find(projectId: string, idOrName: string): Promise<ProfileRow | null> {
    const byId = await this.db.selectFrom('profiles').selectAll().where('project_id', '=', projectId).where('id', '=', idOrName).executeTakeFirst();
    if (byId) return byId;
    return (await this.db.selectFrom('profiles').selectAll().where('project_id', '=', projectId).where('name', '=', idOrName).executeTakeFirst()) ?? null;
  }

  async byId(id: string): Promise<ProfileRow | null> {
    return (await this.db.selectFrom('profiles').selectAll().where('id', '=', id).executeTakeFirst()) ?? null;
  }

  async list(f: { projectId: string; offset: number; limit: number; name: string | null; query: string | null }): Promise<{ items: ProfileRow[]; hasMore: boolean }> {
    let q = this.db.selectFrom('profiles').selectAll().where('project_id', '=', f.projectId);
    if (f.name) q = q.where('name', '=', f.name);
    if (f.query) {
      const like = containsPattern(f.query);
      q = q.where((eb) => eb.or([eb('id', '=', f.query!), sql<boolean>`LOWER(${eb.ref('name')}) LIKE ${like} ESCAPE '\\'`]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').offset(f.offset).limit(f.limit + 1).execute();
    return { items: rows.slice(0, f.limit), hasMore: rows.length > f.limit };
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('profiles').where('id', '=', id).execute();
  }

  /**
   * Makes `sessionId` the profile's one writer. It succeeds when there is no writer, or when
   * the writer's session has ended completely (usage ready: its state was written back).
   * Returns false when another session still holds the profile.
   */
  async claimWriter(profileId: string, sessionId: string): Promise<boolean> {
    const r = await this.db
      .updateTable('profiles')
      .set({ writer_session_id: sessionId })
      .where('id', '=', profileId)
      .where((eb) =>
        eb.or([
          eb('writer_session_id', 'is', null),
          eb.exists(
            eb
              .selectFrom('browser_sessions')
              .select('browser_sessions.id')
              .whereRef('browser_sessions.id', '=', 'profiles.writer_session_id')
              .where('browser_sessions.usage_status', '=', 'ready'),
          ),
        ]),
      )
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async releaseWriter(profileId: string, sessionId: string): Promise<void> {
    await this.db.updateTable('profiles').set({ writer_session_id: null }).where('id', '=', profileId).where('writer_session_id', '=', sessionId).execute();
  }

  /** Claims left by a create that never recorded its session (a crash between the two writes). */
  async releaseOrphanWriters(): Promise<number> {
    const r = await this.db
      .updateTable('profiles')
      .set({ writer_session_id: null })
      .where('writer_session_id', 'is not', null)
      .where((eb) => eb.not(eb.exists(eb.selectFrom('browser_sessions').select('browser_sessions.id').whereRef('browser_sessions.id', '=', 'profiles.writer_session_id'))))
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** The active session writing into the profile, if any (ended-but-not-saved counts as active). */
  async activeWriter(profileId: string): Promise<string | null> {
    const row = await this.db
      .selectFrom('profiles')
      .innerJoin('browser_sessions', 'browser_sessions.id', 'profiles.writer_session_id')
      .select('browser_sessions.id as sid')
      .where('profiles.id', '=', profileId)
      .where((eb) => eb.or([eb('browser_sessions.usage_status', 'is', null), eb('browser_sessions.usage_status', '!=', 'ready')]))
      .executeTakeFirst();
    return row?.sid ?? null;
  }

  async touchUsed(id: string, at: string): Promise<void> {
    await this.db.updateTable('profiles').set({ last_used_at: at }).where('id', '=', id).execute();
  }

  async markSaved(id: string, at: string): Promise<void> {
    await this.db.updateTable('profiles').set({ updated_at: at, last_used_at: at }).where('id', '=', id).execute();
  }
}
