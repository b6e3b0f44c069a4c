import type { TelemetryState } from '../domain/telemetry-config.js';
import type { Db } from '../store/database.js';
import type { TelemetryEvent } from './telemetry-events.js';
import { SqliteEventWriter } from './event-writer.js';
import { openJson, sealJson, type SealedSecret } from '../vaults/envelope.js';
import type { KeyEncryptionKey } from '../vaults/kek.js';

export interface StoredEvent {
  seq: number;
  event: TelemetryEvent;
}

export interface EventQuery {
  sessionId: string;
  order: 'asc' | 'desc';
  /** Cursor: asc reads seq > after, desc reads seq < before. */
  after?: number;
  before?: number;
  sinceUs?: number;
  untilUs?: number;
  categories?: string[];
  limit: number;
}

/** Persistence of telemetry configurations, events and export destinations. */
export class TelemetryRepo {
  private readonly writer: SqliteEventWriter | null;

  /** `sqliteFile`: event inserts go to a writer thread with its own connection to that file (else through `db`). */
  constructor(
    readonly db: Db,
    sqliteFile?: string,
  ) {
    this.writer = sqliteFile ? new SqliteEventWriter(sqliteFile) : null;
  }

  async close(): Promise<void> {
    await this.writer?.close();
  }

  async state(sessionId: string): Promise<TelemetryState | null> {
    const r = await this.db.selectFrom('browser_session_telemetry').select('state').where('session_id', '=', sessionId).executeTakeFirst();
    return r ? (JSON.parse(r.state) as TelemetryState) : null;
  }

  async putState(sessionId: string, state: TelemetryState): Promise<void> {
    const row = { session_id: sessionId, state: JSON.stringify(state), updated_at: new Date().toISOString() };
    await this.db
      .insertInto('browser_session_telemetry')
      .values(row)
      .onConflict((oc) => oc.column('session_id').doUpdateSet({ state: row.state, updated_at: row.updated_at }))
      .execute();
  }

  async lastSeq(sessionId: string): Promise<number> {
    const r = await this.db.selectFrom('telemetry_events').select((eb) => eb.fn.max('seq').as('m')).where('session_id', '=', sessionId).executeTakeFirst();
    return r?.m == null ? 0 : Number(r.m);
  }

  async insertEvents(rows: { sessionId: string; seq: number; event: TelemetryEvent }[]): Promise<void> {
    if (this.writer && !this.writer.broken) {
      try {
        await this.writer.write(rows.map((r) => [r.sessionId, r.seq, r.event.ts, r.event.category, r.event.type, JSON.stringify(r.event)]));
        return;
      } catch (err) {
        // A dead writer thread: these rows and the next go through the main connection. A failed statement is the caller's error.
        if (!this.writer.broken) throw err;
      }
    }
    // Chunks keep each statement under SQLite's bound-parameter limit (6 per row).
    for (let i = 0; i < rows.length; i += 500) {
      await this.db
        .insertInto('telemetry_events')
        .values(rows.slice(i, i + 500).map((r) => ({ session_id: r.sessionId, seq: r.seq, ts: r.event.ts, category: r.event.category, type: r.event.type, event: JSON.stringify(r.event) })))
        .execute();
    }
  }

  /** One page of events plus whether more follow (in the read direction). */
  async events(q: EventQuery): Promise<{ items: StoredEvent[]; hasMore: boolean }> {
    let s = this.db.selectFrom('telemetry_events').select(['seq', 'event']).where('session_id', '=', q.sessionId);
    if (q.after !== undefined) s = s.where('seq', '>', q.after);
    if (q.before !== undefined) s = s.where('seq', '<', q.before);
    if (q.sinceUs !== undefined) s = s.where('ts', '>=', q.sinceUs);
    if (q.untilUs !== undefined) s = s.where('ts', '<', q.untilUs);
    if (q.categories) s = s.where('category', 'in', q.categories);
    const rows = await s.orderBy('seq', q.order).limit(q.limit + 1).execute();
    return { items: rows.slice(0, q.limit).map((r) => ({ seq: Number(r.seq), event: JSON.parse(r.event) as TelemetryEvent })), hasMore: rows.length > q.limit };
  }

  /** Retention: keeps the newest `keep` events of a session. */
  async prune(sessionId: string, keep: number): Promise<void> {
    const last = await this.lastSeq(sessionId);
    if (last > keep) await this.pruneThrough(sessionId, last - keep);
  }

  /** Deletes a session's events up to and including `seq` (a range of its primary key). */
  async pruneThrough(sessionId: string, seq: number): Promise<void> {
    await this.db.deleteFrom('telemetry_events').where('session_id', '=', sessionId).where('seq', '<=', seq).execute();
  }
}

export interface DestinationRecord {
  id: string;
  projectId: string;
  name: string | null;
  endpoint: string;
  /** Names of the headers sent with every export (values are sealed; see DestinationRepo.headers). */
  headerNames: string[];
  createdAt: string;
  updatedAt: string;
}

/** The `headers` column: names in clear, values sealed under the KEK (envelope encryption, bound to the destination). */
interface StoredHeaders {
  names: string[];
  sealed: SealedSecret | null;
}

type DestinationRow = { id: string; project_id: string; name: string | null; endpoint: string; headers: string; created_at: string; updated_at: string };

/** Both encryption layers are bound to the destination: sealed values moved to another row do not open. */
function headersContext(destinationId: string): string {
  return `browserd/telemetry-destination/${destinationId}/headers`;
}

/** A row written before headers were sealed holds the plain JSON object of the headers. */
function parseHeaders(raw: string): { stored: StoredHeaders } | { legacy: Record<string, string> } {
  const v = JSON.parse(raw) as unknown;
  if (v && typeof v === 'object' && Array.isArray((v as StoredHeaders).names) && 'sealed' in (v as object)) return { stored: v as StoredHeaders };
  return { legacy: (v ?? {}) as Record<string, string> };
}

/**
 * OTLP destinations of a project. Header values (often credentials) are sealed with the
 * project's envelope encryption (src/vaults/envelope.ts) under the vaults' KEK and opened
 * only for the exporter; names stay readable for the API's `header_names`. A row from before
 * sealing is sealed the first time it is read.
 */
export class DestinationRepo {
  constructor(
    private readonly db: Db,
    private readonly kek: KeyEncryptionKey,
  ) {}

  private async seal(id: string, headers: Record<string, string>): Promise<string> {
    const names = Object.keys(headers).sort();
    const stored: StoredHeaders = { names, sealed: names.length ? await sealJson(this.kek, headersContext(id), headers) : null };
    return JSON.stringify(stored);
  }

  private async record(r: DestinationRow): Promise<DestinationRecord> {
    const h = parseHeaders(r.headers);
    let names: string[];
    if ('legacy' in h) {
      names = Object.keys(h.legacy).sort();
      await this.db.updateTable('telemetry_destinations').set({ headers: await this.seal(r.id, h.legacy) }).where('id', '=', r.id).where('headers', '=', r.headers).execute();
    } else names = h.stored.names;
    return { id: r.id, projectId: r.project_id, name: r.name, endpoint: r.endpoint, headerNames: names, createdAt: r.created_at, updatedAt: r.updated_at };
  }

  async insert(d: DestinationRecord, headers: Record<string, string>): Promise<void> {
    await this.db
      .insertInto('telemetry_destinations')
      .values({ id: d.id, project_id: d.projectId, name: d.name, endpoint: d.endpoint, headers: await this.seal(d.id, headers), created_at: d.createdAt, updated_at: d.updatedAt })
      .execute();
  }

  async list(projectId: string): Promise<DestinationRecord[]> {
    const rows = await this.db.selectFrom('telemetry_destinations').selectAll().where('project_id', '=', projectId).orderBy('created_at', 'desc').orderBy('id').execute();
    return Promise.all(rows.map((r) => this.record(r)));
  }

  async find(projectId: string, idOrName: string): Promise<DestinationRecord | null> {
    const rows = await this.db
      .selectFrom('telemetry_destinations')
      .selectAll()
      .where('project_id', '=', projectId)
      .where((eb) => eb.or([eb('id', '=', idOrName), eb('name', '=', idOrName)]))
      .execute();
    const r = rows.find((x) => x.id === idOrName) ?? rows[0];
    return r ? this.record(r) : null;
  }

  async byId(id: string): Promise<DestinationRecord | null> {
    const r = await this.db.selectFrom('telemetry_destinations').selectAll().where('id', '=', id).executeTakeFirst();
    return r ? this.record(r) : null;
  }

  /** The header values, opened (for the exporter only; never returned by the API). */
  async headers(id: string): Promise<Record<string, string>> {
    const r = await this.db.selectFrom('telemetry_destinations').select('headers').where('id', '=', id).executeTakeFirst();
    if (!r) return {};
    const h = parseHeaders(r.headers);
    if ('legacy' in h) return h.legacy;
    return h.stored.sealed ? openJson<Record<string, string>>(this.kek, headersContext(id), h.stored.sealed) : {};
  }

  /**
   * Changes the given fields (`headers` replaces the whole set, sealed anew) and bumps
   * updated_at; the record after the change, or null when the destination is gone.
   * A name taken in the project throws the store's unique violation.
   */
  async update(id: string, changes: { name?: string | null; endpoint?: string; headers?: Record<string, string> }, updatedAt: string): Promise<DestinationRecord | null> {
    await this.db
      .updateTable('telemetry_destinations')
      .set({
        ...(changes.name !== undefined ? { name: changes.name } : {}),
        ...(changes.endpoint !== undefined ? { endpoint: changes.endpoint } : {}),
        ...(changes.headers !== undefined ? { headers: await this.seal(id, changes.headers) } : {}),
        updated_at: updatedAt,
      })
      .where('id', '=', id)
      .execute();
    return this.byId(id);
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('telemetry_destinations').where('id', '=', id).execute();
  }
}
