import { sql } from 'kysely';
import type { Db } from '../store/database.js';
import { isUniqueViolation } from '../store/database.js';
import { Conflict } from '../http/errors.js';
import { fromRow, toRow, type SessionRecord } from './session-record.js';

export interface ListFilter {
  projectId: string;
  status: 'active' | 'deleted' | 'all';
  tags: Record<string, string>;
  query: string | null;
  offset: number;
  limit: number;
}

function nameTaken(name: string | null): Conflict {
  return new Conflict(`a session named "${name}" is already active in this project`, 'name_conflict');
}

/** Persistence of browser sessions and their tag index. Every write is one transaction. */
export class SessionRepo {
  constructor(private readonly db: Db) {}

  async insert(s: SessionRecord): Promise<void> {
    try {
      await this.db.transaction().execute(async (tx) => {
        await tx.insertInto('browser_sessions').values(toRow(s)).execute();
        await this.writeTags(tx as unknown as Db, s.id, s.tags);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(s.name);
      throw err;
    }
  }

  private async writeTags(db: Db, id: string, tags: Record<string, string>): Promise<void> {
    await db.deleteFrom('browser_session_tags').where('session_id', '=', id).execute();
    const rows = Object.entries(tags).map(([key, value]) => ({ session_id: id, key, value }));
    if (rows.length) await db.insertInto('browser_session_tags').values(rows).execute();
  }

  async markActive(id: string, runtime: SessionRecord['runtime']): Promise<void> {
    await this.db.updateTable('browser_sessions').set({ status: 'active', runtime: JSON.stringify(runtime) }).where('id', '=', id).execute();
  }

  async update(id: string, patch: { name?: string | null; tags?: Record<string, string>; config?: SessionRecord['config'] }): Promise<void> {
    try {
      await this.db.transaction().execute(async (tx) => {
        const set: Record<string, unknown> = {};
        if (patch.name !== undefined) set.name = patch.name;
        if (patch.tags !== undefined) set.tags = JSON.stringify(patch.tags);
        if (patch.config !== undefined) set.config = JSON.stringify(patch.config);
        if (Object.keys(set).length) await tx.updateTable('browser_sessions').set(set).where('id', '=', id).execute();
        if (patch.tags !== undefined) await this.writeTags(tx as unknown as Db, id, patch.tags);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(patch.name ?? null);
      throw err;
    }
  }

  async touch(id: string, at: string): Promise<void> {
    await this.db.updateTable('browser_sessions').set({ last_active_at: at }).where('id', '=', id).execute();
  }

  /** Soft delete: returns false when the session was already deleted (someone else ended it). */
  async markDeleted(id: string, deletedAt: string, uptimeMs: number, reason: string): Promise<boolean> {
    const r = await this.db
      .updateTable('browser_sessions')
      .set({ status: 'deleted', deleted_at: deletedAt, uptime_ms: uptimeMs, usage_status: 'pending', end_reason: reason })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async markUsageReady(id: string): Promise<void> {
    await this.db.updateTable('browser_sessions').set({ usage_status: 'ready' }).where('id', '=', id).execute();
  }

  async byId(id: string): Promise<SessionRecord | null> {
    const r = await this.db.selectFrom('browser_sessions').selectAll().where('id', '=', id).executeTakeFirst();
    return r ? fromRow(r) : null;
  }

  /**
   * Looks a session up by id, else by name among active ones, else (with deleted) the newest
   * deleted one of that name. Idle pool browsers are not found: they belong to their pool
   * until acquired.
   */
  async find(projectId: string, idOrName: string, includeDeleted: boolean): Promise<SessionRecord | null> {
    const byId = await this.db.selectFrom('browser_sessions').selectAll().where('project_id', '=', projectId).where('id', '=', idOrName).executeTakeFirst();
    if (byId && byId.deleted_at === null && (await this.isIdlePoolMember(byId.id))) return null;
    if (byId && (includeDeleted || byId.deleted_at === null)) return fromRow(byId);
    let q = this.db.selectFrom('browser_sessions').selectAll().where('project_id', '=', projectId).where('name', '=', idOrName);
    if (!includeDeleted) q = q.where('deleted_at', 'is', null);
    const byName = await q.orderBy('deleted_at', 'desc').orderBy('created_at', 'desc').executeTakeFirst();
    return byName ? fromRow(byName) : null;
  }

  private async isIdlePoolMember(id: string): Promise<boolean> {
    const m = await this.db.selectFrom('browser_pool_members').select('state').where('session_id', '=', id).executeTakeFirst();
    return m?.state === 'idle';
  }

  /** One page, newest first, plus whether more follow. Idle pool browsers are not listed. */
  async list(f: ListFilter): Promise<{ items: SessionRecord[]; hasMore: boolean }> {
    let q = this.db
      .selectFrom('browser_sessions')
      .selectAll()
      .where('project_id', '=', f.projectId)
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('browser_pool_members')
              .select('browser_pool_members.session_id')
              .whereRef('browser_pool_members.session_id', '=', 'browser_sessions.id')
              .where('browser_pool_members.state', '=', 'idle'),
          ),
        ),
      );
    if (f.status === 'active') q = q.where('deleted_at', 'is', null);
    if (f.status === 'deleted') q = q.where('deleted_at', 'is not', null);
    for (const [key, value] of Object.entries(f.tags)) {
      q = q.where((eb) =>
        eb.exists(
          eb
            .selectFrom('browser_session_tags')
            .select('browser_session_tags.session_id')
            .whereRef('browser_session_tags.session_id', '=', 'browser_sessions.id')
            .where('browser_session_tags.key', '=', key)
            .where('browser_session_tags.value', '=', value),
        ),
      );
    }
    if (f.query) {
      // LOWER on both sides: SQLite's LIKE ignores ASCII case, PostgreSQL's does not; both stores must answer alike.
      const like = `%${f.query.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      q = q.where((eb) => eb.or([eb('id', '=', f.query!), sql<boolean>`LOWER(${eb.ref('name')}) LIKE ${like} ESCAPE '\\'`]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').offset(f.offset).limit(f.limit + 1).execute();
    return { items: rows.slice(0, f.limit).map(fromRow), hasMore: rows.length > f.limit };
  }

  /** Sessions this node must look after at start-up: not yet deleted, or deleted with usage still pending. */
  async unfinishedOnNode(nodeId: string): Promise<SessionRecord[]> {
    const rows = await this.db
      .selectFrom('browser_sessions')
      .selectAll()
      .where('node_id', '=', nodeId)
      .where((eb) => eb.or([eb('deleted_at', 'is', null), eb('usage_status', '=', 'pending')]))
      .execute();
    return rows.map(fromRow);
  }
}
