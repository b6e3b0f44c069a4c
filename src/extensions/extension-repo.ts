import { sql } from 'kysely';
import type { Db } from '../store/database.js';
import { isUniqueViolation } from '../store/database.js';
import { Conflict } from '../http/errors.js';
import { containsPattern } from '../profiles/profile-repo.js';
import type { ExtensionsTable } from '../store/schema.js';

export type ExtensionRow = ExtensionsTable;

/** Persistence of uploaded extensions' metadata (the files are in ExtensionService's directory). */
export class ExtensionRepo {
  constructor(private readonly db: Db) {}

  async insert(row: ExtensionRow): Promise<void> {
    try {
      await this.db.insertInto('extensions').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`an extension named "${row.name}" already exists in this project`, 'name_conflict');
      throw err;
    }
  }

  /** By id, else by name, within the project. */
  async find(projectId: string, idOrName: string): Promise<ExtensionRow | null> {
    const byId = await this.db.selectFrom('extensions').selectAll().where('project_id', '=', projectId).where('id', '=', idOrName).executeTakeFirst();
    if (byId) return byId;
    return (await this.db.selectFrom('extensions').selectAll().where('project_id', '=', projectId).where('name', '=', idOrName).executeTakeFirst()) ?? null;
  }

  async byIds(projectId: string, ids: string[]): Promise<ExtensionRow[]> {
    if (!ids.length) return [];
    return this.db.selectFrom('extensions').selectAll().where('project_id', '=', projectId).where('id', 'in', ids).execute();
  }

  async byNames(projectId: string, names: string[]): Promise<ExtensionRow[]> {
    if (!names.length) return [];
    return this.db.selectFrom('extensions').selectAll().where('project_id', '=', projectId).where('name', 'in', names).execute();
  }

  async list(f: { projectId: string; offset: number; limit: number; name: string | null; query: string | null }): Promise<{ items: ExtensionRow[]; hasMore: boolean }> {
    let q = this.db.selectFrom('extensions').selectAll().where('project_id', '=', f.projectId);
    if (f.name) q = q.where('name', '=', f.name);
    if (f.query) {
      const like = containsPattern(f.query);
      q = q.where((eb) => eb.or([eb('id', '=', f.query!), sql<boolean>`LOWER(${eb.ref('name')}) LIKE ${like} ESCAPE '\\'`]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').offset(f.offset).limit(f.limit + 1).execute();
    return { items: rows.slice(0, f.limit), hasMore: rows.length > f.limit };
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('extensions').where('id', '=', id).execute();
  }

  async touchUsed(ids: string[], at: string): Promise<void> {
    if (ids.length) await this.db.updateTable('extensions').set({ last_used_at: at }).where('id', 'in', ids).execute();
  }
}
