import { sql } from 'kysely';
import type { Db } from '../store/database.js';
import { containsPattern } from '../profiles/profile-repo.js';
import type { ProxiesTable } from '../store/schema.js';

export type ProxyRow = ProxiesTable;

/** Persistence of proxies. Deleting is soft: sessions that use a proxy keep it. */
export class ProxyRepo {
  constructor(private readonly db: Db) {}

  async insert(row: ProxyRow): Promise<void> {
    await this.db.insertInto('proxies').values(row).execute();
  }

  /** An active (not deleted) proxy of the project. */
  async active(projectId: string, id: string): Promise<ProxyRow | null> {
    return (await this.db.selectFrom('proxies').selectAll().where('project_id', '=', projectId).where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst()) ?? null;
  }

  /** Any proxy by id, deleted ones too (a running session keeps using the one it selected). */
  async byId(id: string): Promise<ProxyRow | null> {
    return (await this.db.selectFrom('proxies').selectAll().where('id', '=', id).executeTakeFirst()) ?? null;
  }

  async activeByName(projectId: string, name: string): Promise<ProxyRow[]> {
    return this.db.selectFrom('proxies').selectAll().where('project_id', '=', projectId).where('name', '=', name).where('deleted_at', 'is', null).limit(10).execute();
  }

  async list(f: { projectId: string; offset: number; limit: number; name: string | null; query: string | null }): Promise<{ items: ProxyRow[]; hasMore: boolean }> {
    let q = this.db.selectFrom('proxies').selectAll().where('project_id', '=', f.projectId).where('deleted_at', 'is', null);
    if (f.name) q = q.where('name', '=', f.name);
    if (f.query) {
      const like = containsPattern(f.query);
      q = q.where((eb) =>
        eb.or([eb('id', '=', f.query!), sql<boolean>`LOWER(${eb.ref('name')}) LIKE ${like} ESCAPE '\\'`, sql<boolean>`LOWER(${eb.ref('host')}) LIKE ${like} ESCAPE '\\'`]),
      );
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').offset(f.offset).limit(f.limit + 1).execute();
    return { items: rows.slice(0, f.limit), hasMore: rows.length > f.limit };
  }

  async softDelete(id: string, at: string): Promise<void> {
    await this.db.updateTable('proxies').set({ deleted_at: at, updated_at: at }).where('id', '=', id).execute();
  }

  async setHealth(id: string, status: 'available' | 'unavailable' | null, at: string): Promise<void> {
    const set: Partial<ProxyRow> = { last_checked: at };
    if (status) set.status = status;
    await this.db.updateTable('proxies').set(set).where('id', '=', id).execute();
  }
}
