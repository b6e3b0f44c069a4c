import { sql } from 'kysely';
import type { Db } from '../store/database.js';
import { isUniqueViolation } from '../store/database.js';
import { Conflict } from '../http/errors.js';
import { containsPattern } from '../profiles/profile-repo.js';
import type { PoolSettings } from '../domain/pool-request.js';
import type { BrowserPoolsTable } from '../store/schema.js';

/** A pool row with its configuration parsed. */
export interface PoolRecord {
  id: string;
  projectId: string;
  organizationId: string;
  nodeId: string;
  settings: PoolSettings;
  /** What the configuration's references resolved to when it was last set. */
  resolved: { profileId: string | null; extensionIds: string[] };
  createdAt: string;
  updatedAt: string;
}

export type MemberState = 'idle' | 'leased';

export interface MemberRecord {
  sessionId: string;
  poolId: string;
  state: MemberState;
  /** JSON TelemetryState the session had when leased. */
  baseline: string | null;
}

function fromRow(r: BrowserPoolsTable): PoolRecord {
  const config = JSON.parse(r.config) as { browser: PoolSettings['browser']; resolved: PoolRecord['resolved'] };
  return {
    id: r.id,
    projectId: r.project_id,
    organizationId: r.organization_id,
    nodeId: r.node_id,
    settings: { name: r.name, size: r.size, fillRatePerMinute: r.fill_rate_per_minute, timeoutSeconds: r.timeout_seconds, browser: config.browser },
    resolved: config.resolved,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function nameTaken(name: string | null): Conflict {
  return new Conflict(`a browser pool named "${name}" already exists in this project`, 'name_conflict');
}

/** Persistence of browser pools and their members (the sessions each pool holds). */
export class PoolRepo {
  constructor(private readonly db: Db) {}

  async insert(p: PoolRecord): Promise<void> {
    try {
      await this.db
        .insertInto('browser_pools')
        .values({
          id: p.id,
          project_id: p.projectId,
          organization_id: p.organizationId,
          node_id: p.nodeId,
          name: p.settings.name,
          size: p.settings.size,
          fill_rate_per_minute: p.settings.fillRatePerMinute,
          timeout_seconds: p.settings.timeoutSeconds,
          config: JSON.stringify({ browser: p.settings.browser, resolved: p.resolved }),
          created_at: p.createdAt,
          updated_at: p.updatedAt,
        })
        .execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(p.settings.name);
      throw err;
    }
  }

  async updateSettings(id: string, s: PoolSettings, resolved: PoolRecord['resolved'], at: string): Promise<void> {
    try {
      await this.db
        .updateTable('browser_pools')
        .set({ name: s.name, size: s.size, fill_rate_per_minute: s.fillRatePerMinute, timeout_seconds: s.timeoutSeconds, config: JSON.stringify({ browser: s.browser, resolved }), updated_at: at })
        .where('id', '=', id)
        .execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(s.name);
      throw err;
    }
  }

  /** By id, else by name, within the project. */
  async find(projectId: string, idOrName: string): Promise<PoolRecord | null> {
    const byId = await this.db.selectFrom('browser_pools').selectAll().where('project_id', '=', projectId).where('id', '=', idOrName).executeTakeFirst();
    if (byId) return fromRow(byId);
    const byName = await this.db.selectFrom('browser_pools').selectAll().where('project_id', '=', projectId).where('name', '=', idOrName).executeTakeFirst();
    return byName ? fromRow(byName) : null;
  }

  async onNode(nodeId: string): Promise<PoolRecord[]> {
    return (await this.db.selectFrom('browser_pools').selectAll().where('node_id', '=', nodeId).execute()).map(fromRow);
  }

  async list(f: { projectId: string; offset: number; limit: number; name: string | null; query: string | null }): Promise<{ items: PoolRecord[]; hasMore: boolean }> {
    let q = this.db.selectFrom('browser_pools').selectAll().where('project_id', '=', f.projectId);
    if (f.name) q = q.where('name', '=', f.name);
    if (f.query) {
      const like = containsPattern(f.query);
      q = q.where((eb) => eb.or([eb('id', '=', f.query!), sql<boolean>`LOWER(${eb.ref('name')}) LIKE ${like} ESCAPE '\\'`]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').offset(f.offset).limit(f.limit + 1).execute();
    return { items: rows.slice(0, f.limit).map(fromRow), hasMore: rows.length > f.limit };
  }

  /** Deletes the pool; its member rows must be gone already. */
  async delete(id: string): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('browser_pool_members').where('pool_id', '=', id).execute();
      await tx.deleteFrom('browser_pools').where('id', '=', id).execute();
    });
  }

  // ---- members ----------------------------------------------------------------------

  async addMember(poolId: string, sessionId: string, at: string): Promise<void> {
    await this.db.insertInto('browser_pool_members').values({ session_id: sessionId, pool_id: poolId, state: 'idle', baseline: null, updated_at: at }).execute();
  }

  async setMemberState(sessionId: string, state: MemberState, baseline: string | null, at: string): Promise<void> {
    await this.db.updateTable('browser_pool_members').set({ state, baseline, updated_at: at }).where('session_id', '=', sessionId).execute();
  }

  async removeMember(sessionId: string): Promise<void> {
    await this.db.deleteFrom('browser_pool_members').where('session_id', '=', sessionId).execute();
  }

  async member(sessionId: string): Promise<MemberRecord | null> {
    const r = await this.db.selectFrom('browser_pool_members').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
    return r ? { sessionId: r.session_id, poolId: r.pool_id, state: r.state as MemberState, baseline: r.baseline } : null;
  }

  async membersOfPools(poolIds: string[]): Promise<MemberRecord[]> {
    if (!poolIds.length) return [];
    const rows = await this.db.selectFrom('browser_pool_members').selectAll().where('pool_id', 'in', poolIds).orderBy('updated_at').execute();
    return rows.map((r) => ({ sessionId: r.session_id, poolId: r.pool_id, state: r.state as MemberState, baseline: r.baseline }));
  }

  /** Counts of idle and leased members per pool. */
  async counts(poolIds: string[]): Promise<Map<string, { idle: number; leased: number }>> {
    const out = new Map<string, { idle: number; leased: number }>();
    for (const m of await this.membersOfPools(poolIds)) {
      const c = out.get(m.poolId) ?? { idle: 0, leased: 0 };
      if (m.state === 'idle') c.idle++;
      else c.leased++;
      out.set(m.poolId, c);
    }
    return out;
  }
}
