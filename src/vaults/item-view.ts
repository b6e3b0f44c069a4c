import {
  EXPANSION_DESCRIPTIONS,
  OPERATION_DESCRIPTIONS,
  actionNameOf,
  expansionsOf,
  fieldsOf,
  operationsAvailable,
} from '../domain/vault-item-types.js';
import type { ItemRecord, VaultRecord } from './vault-repo.js';

/** The contract's `expanded.payment_methods` entry. */
export interface PaymentMethodView {
  id: string;
  provider: string;
  type: string;
  is_default: boolean;
  display: { brand: string; label: string; last4: string };
  capabilities: { single_use_card: { eligible: boolean; reasons: string[] } };
}

export function vaultView(v: VaultRecord): Record<string, unknown> {
  return { id: v.id, name: v.name, created_at: v.createdAt, updated_at: v.updatedAt };
}

/** Whether the item has an unexpired collection session at `nowMs`. */
export function hasOpenAction(i: ItemRecord, nowMs: number): boolean {
  return i.actionId !== null && i.actionExpiresAt !== null && Date.parse(i.actionExpiresAt) > nowMs;
}

/**
 * A Vault item as the API shows it: safe metadata only. Values appear only for fields
 * whose spec marks them non-sensitive (read from the public column; sensitive values are
 * never decrypted for a view). `actionUrl` is given only while a collection session is open.
 */
export function itemView(i: ItemRecord, opts: { nowMs: number; actionUrl?: string | null; expanded?: { payment_methods?: PaymentMethodView[] } }): Record<string, unknown> {
  const state: Record<string, unknown> = {};
  if (i.state.provider) state.provider = i.state.provider;
  state.status = i.state.status;
  state.status_reason = i.state.status_reason;
  if (i.state.authorization_id) state.authorization_id = i.state.authorization_id;
  const fields = fieldsOf(i.type, i.spec);
  if (fields.length) {
    const have = new Set(i.valueFields);
    state.fields = fields.map((f) => {
      const out: Record<string, unknown> = { name: f.name, kind: f.kind, label: f.label, sensitive: f.sensitive, required: f.required, has_value: have.has(f.name) };
      const v = i.publicValues[f.name];
      if (!f.sensitive && have.has(f.name) && typeof v === 'string') out.value = v;
      return out;
    });
  }
  if (i.state.display && Object.keys(i.state.display).length) state.display = i.state.display;

  const body: Record<string, unknown> = {
    id: i.id,
    key: i.key,
    type: i.type,
    version: i.version,
    created_at: i.createdAt,
    updated_at: i.updatedAt,
    spec: i.spec,
    state,
    available_operations: operationsAvailable(i.type, i.state.status).map((t) => ({ type: t, description: OPERATION_DESCRIPTIONS[t] })),
    available_expansions: expansionsOf(i.type).map((t) => ({ type: t, description: EXPANSION_DESCRIPTIONS[t] })),
  };
  const open = hasOpenAction(i, opts.nowMs);
  const name = actionNameOf(i.type);
  if (open && opts.actionUrl && name) body.action = { name, url: opts.actionUrl };
  const expiresAt = open ? i.actionExpiresAt : i.expiresAt;
  if (expiresAt) body.expires_at = expiresAt;
  if (opts.expanded) body.expanded = opts.expanded;
  return body;
}
