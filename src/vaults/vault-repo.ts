import { sql, type Transaction } from 'kysely';
import type { Db } from '../store/database.js';
import type { Database, VaultItemsTable, VaultsTable } from '../store/schema.js';
import type { ItemSpec, ItemStatus, ItemType } from '../domain/vault-item-types.js';
import type { SealedSecret } from './envelope.js';

export interface VaultRecord {
  id: string;
  projectId: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

/** Safe state of an item: what listings show besides the spec. */
export interface ItemState {
  status: ItemStatus;
  status_reason: string;
  provider?: string;
  authorization_id?: string;
  display?: { brand?: string; last4?: string; exp_month?: string; exp_year?: string };
}

export interface ItemRecord {
  id: string;
  vaultId: string;
  projectId: string;
  key: string;
  type: ItemType;
  spec: ItemSpec;
  state: ItemState;
  publicValues: Record<string, string>;
  valueFields: string[];
  version: number;
  parentId: string | null;
  idempotencyKey: string | null;
  expiresAt: string | null;
  actionId: string | null;
  actionExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

function vaultFromRow(r: VaultsTable): VaultRecord {
  return { id: r.id, projectId: r.project_id, name: r.name, createdAt: r.created_at, updatedAt: r.updated_at };
}

export function itemFromRow(r: VaultItemsTable): ItemRecord {
  return {
    id: r.id,
    vaultId: r.vault_id,
    projectId: r.project_id,
    key: r.key,
    type: r.type as ItemType,
    spec: JSON.parse(r.spec) as ItemSpec,
    state: JSON.parse(r.state) as ItemState,
    publicValues: JSON.parse(r.public_values) as Record<string, string>,
    valueFields: JSON.parse(r.value_fields) as string[],
    version: Number(r.version),
    parentId: r.parent_id,
    idempotencyKey: r.idempotency_key,
    expiresAt: r.expires_at,
    actionId: r.action_id,
    actionExpiresAt: r.action_expires_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export function itemToRow(i: ItemRecord): VaultItemsTable {
  return {
    id: i.id,
    vault_id: i.vaultId,
    project_id: i.projectId,
    key: i.key,
    type: i.type,
    spec: JSON.stringify(i.spec),
    state: JSON.stringify(i.state),
    public_values: JSON.stringify(i.publicValues),
    value_fields: JSON.stringify(i.valueFields),
    version: i.version,
    parent_id: i.parentId,
    idempotency_key: i.idempotencyKey,
    expires_at: i.expiresAt,
    action_id: i.actionId,
    action_expires_at: i.actionExpiresAt,
    created_at: i.createdAt,
    updated_at: i.updatedAt,
  };
}

/** Columns an item update may change. */
export type ItemPatch = Partial<Pick<ItemRecord, 'spec' | 'state' | 'publicValues' | 'valueFields' | 'version' | 'expiresAt' | 'actionId' | 'actionExpiresAt' | 'updatedAt'>>;

function patchToRow(p: ItemPatch): Partial<VaultItemsTable> {
  const out: Partial<VaultItemsTable> = {};
  if (p.spec !== undefined) out.spec = JSON.stringify(p.spec);
  if (p.state !== undefined) out.state = JSON.stringify(p.state);
  if (p.publicValues !== undefined) out.public_values = JSON.stringify(p.publicValues);
  if (p.valueFields !== undefined) out.value_fields = JSON.stringify(p.valueFields);
  if (p.version !== undefined) out.version = p.version;
  if (p.expiresAt !== undefined) out.expires_at = p.expiresAt;
  if (p.actionId !== undefined) out.action_id = p.actionId;
  if (p.actionExpiresAt !== undefined) out.action_expires_at = p.actionExpiresAt;
  if (p.updatedAt !== undefined) out.updated_at = p.updatedAt;
  return out;
}

type Tx = Transaction<Database> | Db;

/**
 * Persistence of vaults, items, their sealed secrets and session links (Kysely, both
 * engines). Deleting an item or a vault removes the secret rows in the same transaction,
 * then `scrub()` makes sure the bytes do not stay behind in the SQLite file.
 */
export class VaultRepo {
  constructor(
    readonly db: Db,
    private readonly kind: 'sqlite' | 'postgres',
  ) {}

  /** Turns on zeroing of deleted content for the SQLite connection (one connection serves the whole process). */
  async prepare(): Promise<void> {
    if (this.kind === 'sqlite') await sql`PRAGMA secure_delete = ON`.execute(this.db);
  }

  transaction<T>(fn: (tx: Transaction<Database>) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(fn);
  }

  // ---- vaults ---------------------------------------------------------------------------

  async insertVault(v: VaultRecord): Promise<void> {
    await this.db.insertInto('vaults').values({ id: v.id, project_id: v.projectId, name: v.name, created_at: v.createdAt, updated_at: v.updatedAt }).execute();
  }

  async countVaults(projectId: string): Promise<number> {
    const r = await this.db.selectFrom('vaults').select((eb) => eb.fn.countAll<number>().as('n')).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(r.n);
  }

  /** By id first, else by name, within the project. */
  async findVault(projectId: string, idOrName: string, tx: Tx = this.db): Promise<VaultRecord | null> {
    const byId = await tx.selectFrom('vaults').selectAll().where('project_id', '=', projectId).where('id', '=', idOrName).executeTakeFirst();
    if (byId) return vaultFromRow(byId);
    const byName = await tx.selectFrom('vaults').selectAll().where('project_id', '=', projectId).where('name', '=', idOrName).executeTakeFirst();
    return byName ? vaultFromRow(byName) : null;
  }

  async listVaults(projectId: string, offset: number, limit: number): Promise<{ items: VaultRecord[]; hasMore: boolean }> {
    const rows = await this.db
      .selectFrom('vaults')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .offset(offset)
      .limit(limit + 1)
      .execute();
    return { items: rows.slice(0, limit).map(vaultFromRow), hasMore: rows.length > limit };
  }

  /** Locks the vault row until the transaction ends (PostgreSQL; SQLite transactions are already serial). */
  async lockVault(tx: Tx, id: string): Promise<boolean> {
    let q = tx.selectFrom('vaults').select('id').where('id', '=', id);
    if (this.kind === 'postgres') q = q.forUpdate();
    return (await q.executeTakeFirst()) !== undefined;
  }

  async deleteVaultCascade(tx: Tx, vaultId: string): Promise<void> {
    const ids = (await tx.selectFrom('vault_items').select('id').where('vault_id', '=', vaultId).execute()).map((r) => r.id);
    if (ids.length) {
      await tx.deleteFrom('vault_item_secrets').where('item_id', 'in', ids).execute();
      await tx.deleteFrom('vault_items').where('id', 'in', ids).execute();
    }
    await tx.deleteFrom('vaults').where('id', '=', vaultId).execute();
  }

  // ---- items ----------------------------------------------------------------------------

  async insertItem(tx: Tx, i: ItemRecord): Promise<void> {
    await tx.insertInto('vault_items').values(itemToRow(i)).execute();
  }

  async countItems(tx: Tx, vaultId: string): Promise<number> {
    const r = await tx.selectFrom('vault_items').select((eb) => eb.fn.countAll<number>().as('n')).where('vault_id', '=', vaultId).executeTakeFirstOrThrow();
    return Number(r.n);
  }

  async itemByKey(vaultId: string, key: string, tx: Tx = this.db): Promise<ItemRecord | null> {
    const r = await tx.selectFrom('vault_items').selectAll().where('vault_id', '=', vaultId).where('key', '=', key).executeTakeFirst();
    return r ? itemFromRow(r) : null;
  }

  async itemById(id: string, tx: Tx = this.db): Promise<ItemRecord | null> {
    const r = await tx.selectFrom('vault_items').selectAll().where('id', '=', id).executeTakeFirst();
    return r ? itemFromRow(r) : null;
  }

  /** Items of a vault by key (a listing has no pages: a vault holds at most MAX_ITEMS). */
  async listItems(vaultId: string, type: ItemType | null): Promise<ItemRecord[]> {
    let q = this.db.selectFrom('vault_items').selectAll().where('vault_id', '=', vaultId);
    if (type) q = q.where('type', '=', type);
    return (await q.orderBy('key').execute()).map(itemFromRow);
  }

  async childItems(parentId: string, tx: Tx = this.db): Promise<ItemRecord[]> {
    return (await tx.selectFrom('vault_items').selectAll().where('parent_id', '=', parentId).orderBy('key').execute()).map(itemFromRow);
  }

  async itemsOfType(vaultId: string, type: ItemType, tx: Tx = this.db): Promise<ItemRecord[]> {
    return (await tx.selectFrom('vault_items').selectAll().where('vault_id', '=', vaultId).where('type', '=', type).orderBy('key').execute()).map(itemFromRow);
  }

  /**
   * Updates an item; with `ifVersion` / `ifActionId` only when the row still has that
   * version / collection session. Returns whether a row changed.
   */
  async updateItem(tx: Tx, id: string, patch: ItemPatch, cond: { ifVersion?: number; ifActionId?: string | null } = {}): Promise<boolean> {
    let q = tx.updateTable('vault_items').set(patchToRow(patch)).where('id', '=', id);
    if (cond.ifVersion !== undefined) q = q.where('version', '=', cond.ifVersion);
    if (cond.ifActionId !== undefined) q = cond.ifActionId === null ? q.where('action_id', 'is', null) : q.where('action_id', '=', cond.ifActionId);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async deleteItems(tx: Tx, ids: string[]): Promise<void> {
    if (!ids.length) return;
    await tx.deleteFrom('vault_item_secrets').where('item_id', 'in', ids).execute();
    await tx.deleteFrom('vault_items').where('id', 'in', ids).execute();
  }

  // ---- secrets --------------------------------------------------------------------------

  async putSecret(tx: Tx, itemId: string, s: SealedSecret, at: string): Promise<void> {
    await tx.deleteFrom('vault_item_secrets').where('item_id', '=', itemId).execute();
    await tx.insertInto('vault_item_secrets').values({ item_id: itemId, kek_id: s.kekId, wrapped_key: s.wrappedKey, ciphertext: s.ciphertext, created_at: at }).execute();
  }

  async dropSecret(tx: Tx, itemId: string): Promise<void> {
    await tx.deleteFrom('vault_item_secrets').where('item_id', '=', itemId).execute();
  }

  async getSecret(itemId: string, tx: Tx = this.db): Promise<SealedSecret | null> {
    const r = await tx.selectFrom('vault_item_secrets').selectAll().where('item_id', '=', itemId).executeTakeFirst();
    return r ? { kekId: r.kek_id, wrappedKey: r.wrapped_key, ciphertext: r.ciphertext } : null;
  }

  /**
   * After a deletion: SQLite zeroes freed cells itself (secure_delete); the checkpoint
   * then writes the zeroed pages into the database file and truncates the WAL, where the
   * old page images would otherwise linger. PostgreSQL gets a VACUUM of the two tables
   * (what it leaves in its own WAL and free space is outside browserd's reach: the data
   * key is gone from the live table either way; see docs/vaults.md).
   */
  async scrub(): Promise<void> {
    if (this.kind === 'sqlite') {
      // Another connection (the telemetry event writer's) may hold the database for a moment:
      // a busy checkpoint, or SQLITE_BUSY thrown, is retried; the deletion itself is already done.
      let lastErr: unknown = null;
      for (let attempt = 0; attempt < 40; attempt++) {
        try {
          const r = await sql<{ busy: number }>`PRAGMA wal_checkpoint(TRUNCATE)`.execute(this.db);
          if (!r.rows[0] || Number(r.rows[0].busy) === 0) return;
        } catch (err) {
          lastErr = err;
        }
        await new Promise((res) => setTimeout(res, 50));
      }
      if (lastErr) throw lastErr;
    } else {
      await sql`VACUUM vault_item_secrets, vault_items`.execute(this.db);
    }
  }

  // ---- session links ----------------------------------------------------------------------

  async linkSession(sessionId: string, vaultIds: string[]): Promise<void> {
    if (!vaultIds.length) return;
    await this.db
      .insertInto('browser_session_vaults')
      .values(vaultIds.map((vault_id, position) => ({ session_id: sessionId, vault_id, position })))
      .execute();
  }

  async isLinked(sessionId: string, vaultId: string): Promise<boolean> {
    const r = await this.db.selectFrom('browser_session_vaults').select('vault_id').where('session_id', '=', sessionId).where('vault_id', '=', vaultId).executeTakeFirst();
    return r !== undefined;
  }

  async vaultsById(projectId: string, ids: string[]): Promise<VaultRecord[]> {
    if (!ids.length) return [];
    return (await this.db.selectFrom('vaults').selectAll().where('project_id', '=', projectId).where('id', 'in', ids).execute()).map(vaultFromRow);
  }

  async vaultsByName(projectId: string, names: string[]): Promise<VaultRecord[]> {
    if (!names.length) return [];
    return (await this.db.selectFrom('vaults').selectAll().where('project_id', '=', projectId).where('name', 'in', names).execute()).map(vaultFromRow);
  }
}

/** True when the error is a foreign-key violation in either engine. */
export function isForeignKeyViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  if (!e) return false;
  return e.code === '23503' || e.code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || /FOREIGN KEY constraint failed/.test(e.message ?? '');
}
