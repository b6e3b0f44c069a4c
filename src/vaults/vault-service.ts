import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import type { LinkProviderConfig } from '../config.js';
import { newId } from '../domain/ids.js';
import {
  FORM_TYPES,
  actionNameOf,
  cardBrand,
  checkValues,
  expansionsOf,
  fieldsOf,
  fillText,
  fillableFieldNames,
  formStatus,
  needsCollection,
  normalizeSpec,
  operationsAvailable,
  operationsOfType,
  valuesKeptAcrossSpecChange,
  type CardIssuedSpec,
  type FieldDef,
  type ItemSpec,
  type ItemType,
  type PaymentProviderName,
  type StoredValue,
  type WalletNormalizedSpec,
} from '../domain/vault-item-types.js';
import {
  cardDeletionRefusal,
  cardStatusFromProvider,
  containerDeletionRefusal,
  isResolved,
  type CardStatus,
  type DeletionRefusal,
  type PaymentCard,
} from '../domain/vault-payments.js';
import { checkOperationFields, type ItemPatchRequest, type ItemPutRequest, type OperationRequest } from '../domain/vault-request.js';
import { ApiError, Conflict, Forbidden, NotFound, Unauthorized, invalidInput } from '../http/errors.js';
import { isUniqueViolation, type Db } from '../store/database.js';
import { CollectTokens, pkceChallenge, type CollectPurpose } from './collect-tokens.js';
import { itemContext, openJson, sealJson } from './envelope.js';
import { FillNoPage, FillOriginRefused, fillPage } from './fill.js';
import { hasOpenAction, itemView, vaultView, type PaymentMethodView } from './item-view.js';
import { loadLocalKek, type KeyEncryptionKey } from './kek.js';
import { LinkProvider } from './providers/link.js';
import {
  ProviderAuthorizationLost,
  ProviderRefused,
  ProviderTokenRejected,
  ProviderUnavailable,
  type OAuthTokens,
  type PaymentProvider,
  type ProviderCheckout,
} from './providers/payment-provider.js';
import { specProblems } from './spec-validation.js';
import { totpCode, type TotpSecret } from './totp.js';
import { isForeignKeyViolation, VaultRepo, type ItemRecord, type ItemState, type VaultRecord } from './vault-repo.js';

/** How long a collection link stays valid. */
export const COLLECTION_TTL_MS = 15 * 60_000;
export const MAX_ITEMS_PER_VAULT = 500;
export const MAX_VAULTS_PER_PROJECT = 1000;
/** A checkout still `creating` after this long lost its answer (the provider call times out well before). */
export const CHECKOUT_STALE_MS = 2 * 60_000;

/** What an item's encrypted blob holds. */
interface SecretPayload {
  values?: Record<string, StoredValue>;
  oauth?: OAuthTokens;
}

/** How fill reaches a session's browser: the live session of the project and its CDP endpoint. */
export interface BrowserAccess {
  /** Throws NotFound when the project has no such active session, Conflict when it does not run here. */
  resolve(p: Principal, browserId: string): Promise<{ sessionId: string; endpoint: string }>;
}

const gone = (message: string, code = 'link_expired') => new ApiError(410, code, message);
const badGateway = (message: string) => new ApiError(502, 'provider_unavailable', message);
const walletNotAuthorized = (key: string, why?: string) =>
  new Conflict(`wallet "${key}" is not authorized at its provider${why ? ` (${why})` : ''}; run the authorize operation and have the owner approve`, 'wallet_not_authorized');

function refusalError(r: DeletionRefusal): ApiError {
  return new ApiError(
    409,
    r.code,
    r.message,
    r.blocking.map((c) => ({ code: c.status === 'recovery_required' ? 'payment_recovery_required' : 'payment_unresolved', message: `${c.key}: status ${c.status}${c.authorizationId ? `, authorization ${c.authorizationId}` : ', no authorization id'}` })),
  );
}

const FORM_REASON = {
  pending_values: 'waiting for a person to enter the values (collect)',
  ready: 'the values are stored encrypted',
};

function cardReason(s: CardStatus): string {
  switch (s) {
    case 'creating':
      return 'the checkout is being created at the provider';
    case 'active':
      return 'the provider authorized the card for this payment';
    case 'recovery_required':
      return "the provider's answer to the checkout request was lost, so no authorization id is known; run recover, or delete this card to abandon it (which does not prove that no payment occurred)";
    case 'completed':
      return 'the provider reports the payment captured';
    case 'cancelled':
      return 'the authorization was cancelled';
    case 'expired':
      return 'the authorization expired unused';
    case 'failed':
      return 'the provider has no checkout for this request: none was created';
  }
}

/**
 * Vaults and their items: the rules of docs/vaults.md over the store, the envelope
 * encryption, collection sessions, fill and the wallets' payment providers. Secret values
 * are decrypted only to be written again, to be typed into a page, or to call a provider;
 * nothing here returns or logs them.
 */
export class VaultService {
  private publicUrl = '';
  private readonly walletLocks = new Map<string, Promise<unknown>>();

  constructor(
    private readonly deps: {
      repo: VaultRepo;
      kek: KeyEncryptionKey;
      tokens: CollectTokens;
      providers: Partial<Record<PaymentProviderName, PaymentProvider>>;
      log: Logger;
      now?: () => number;
    },
  ) {}

  /** Builds the service over an open store: the KEK (env or key file), the link-signing key, the providers. */
  static async open(opts: {
    db: Db;
    storeKind: 'sqlite' | 'postgres';
    dataDir: string;
    kek?: Buffer;
    link?: LinkProviderConfig;
    log: Logger;
    providers?: Partial<Record<PaymentProviderName, PaymentProvider>>;
    now?: () => number;
  }): Promise<VaultService> {
    const loaded = loadLocalKek({ configured: opts.kek, dataDir: opts.dataDir });
    if (loaded.created) opts.log.info({ file: loaded.file }, 'created the vault key-encryption key file (mode 0600); keep a copy of it: without it no vault item can be read');
    const repo = new VaultRepo(opts.db, opts.storeKind);
    await repo.prepare();
    const tokens = await CollectTokens.load(opts.db, loaded.kek);
    opts.log.info({ kek: loaded.kek.id, source: loaded.source }, 'vault key-encryption key loaded');
    const providers = opts.providers ?? (opts.link ? { link: new LinkProvider(opts.link) } : {});
    return new VaultService({ repo, kek: loaded.kek, tokens, providers, log: opts.log, now: opts.now });
  }

  setPublicUrl(url: string): void {
    this.publicUrl = url.replace(/\/+$/, '');
  }

  get repo(): VaultRepo {
    return this.deps.repo;
  }

  private now(): number {
    return this.deps.now ? this.deps.now() : Date.now();
  }

  private iso(ms = this.now()): string {
    return new Date(ms).toISOString();
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.walletLocks.values()]);
  }

  // ---- vaults -----------------------------------------------------------------------------

  /** Creates the vault, or returns the project's vault of that name. */
  async createVault(p: Principal, name: string): Promise<{ vault: Record<string, unknown>; created: boolean }> {
    const existing = (await this.deps.repo.vaultsByName(p.projectId, [name]))[0];
    if (existing) return { vault: vaultView(existing), created: false };
    if ((await this.deps.repo.countVaults(p.projectId)) >= MAX_VAULTS_PER_PROJECT) {
      throw new Conflict(`the project already has ${MAX_VAULTS_PER_PROJECT} vaults`, 'vault_limit_reached');
    }
    const at = this.iso();
    const v: VaultRecord = { id: newId(), projectId: p.projectId, name, createdAt: at, updatedAt: at };
    try {
      await this.deps.repo.insertVault(v);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      const raced = (await this.deps.repo.vaultsByName(p.projectId, [name]))[0];
      if (raced) return { vault: vaultView(raced), created: false };
      throw err;
    }
    this.deps.log.info({ vault_id: v.id, project_id: p.projectId }, 'vault created');
    return { vault: vaultView(v), created: true };
  }

  async getVault(p: Principal, idOrName: string): Promise<Record<string, unknown>> {
    return vaultView(await this.mustVault(p, idOrName));
  }

  async listVaults(p: Principal, offset: number, limit: number): Promise<{ items: Record<string, unknown>[]; hasMore: boolean }> {
    const page = await this.deps.repo.listVaults(p.projectId, offset, limit);
    return { items: page.items.map(vaultView), hasMore: page.hasMore };
  }

  /** Deletes the vault with every item and secret; refused while a payment is unresolved (rules 1, 3). */
  async deleteVault(p: Principal, idOrName: string): Promise<void> {
    const v = await this.mustVault(p, idOrName);
    const wallets = await this.deps.repo.itemsOfType(v.id, 'wallet');
    const grants = await this.grantsOf(wallets);
    await this.deps.repo.transaction(async (tx) => {
      if (!(await this.deps.repo.lockVault(tx, v.id))) throw new NotFound(`vault "${idOrName}" not found`, 'vault_not_found');
      const cards = await this.deps.repo.itemsOfType(v.id, 'single_use_card', tx);
      const refusal = containerDeletionRefusal('vault', v.name, cards.map((c) => this.paymentCard(c)));
      if (refusal) throw refusalError(refusal);
      await this.deps.repo.deleteVaultCascade(tx, v.id);
    });
    await this.deps.repo.scrub();
    this.deps.log.info({ vault_id: v.id }, 'vault deleted with its items and their data keys');
    await this.revokeGrants(grants);
  }

  // ---- items: read ------------------------------------------------------------------------

  /** Every item of the vault, safe metadata only. Never opens or renews a collection session. */
  async listItems(p: Principal, vaultRef: string, type: ItemType | null): Promise<Record<string, unknown>[]> {
    const v = await this.mustVault(p, vaultRef);
    const items = await this.deps.repo.listItems(v.id, type);
    const out: Record<string, unknown>[] = [];
    for (const i of items) out.push(await this.view(await this.settle(i)));
    return out;
  }

  /**
   * One item. When it waits for a person (values to enter, a wallet to authorize) this
   * opens a collection session, or returns the open one. `expand` reads live data.
   */
  async getItem(p: Principal, vaultRef: string, key: string, expand: string[]): Promise<Record<string, unknown>> {
    const v = await this.mustVault(p, vaultRef);
    let item = await this.settle(await this.mustItem(v, key));
    const wanted = [...new Set(expand.flatMap((e) => e.split(',')).map((e) => e.trim()).filter(Boolean))];
    const available = expansionsOf(item.type) as string[];
    const bad = wanted.filter((e) => !available.includes(e));
    if (bad.length) {
      throw invalidInput(
        bad.map((e) => ({ field: 'query.expand', message: `"${e}" is not an expansion of a ${item.type} item (available: ${available.length ? available.join(', ') : 'none'})` })),
      );
    }
    if (needsCollection(item.type, item.state.status) && this.canCollect(item)) item = await this.openCollection(item, false);
    let expanded: { payment_methods?: PaymentMethodView[] } | undefined;
    if (wanted.includes('payment_methods')) expanded = { payment_methods: await this.paymentMethods(item) };
    return this.view(item, expanded);
  }

  // ---- items: write -------------------------------------------------------------------------

  /** Creates the item, or returns it unchanged when it exists with the same type and spec (409 otherwise). */
  async putItem(p: Principal, vaultRef: string, key: string, body: ItemPutRequest): Promise<{ item: Record<string, unknown>; created: boolean }> {
    const v = await this.mustVault(p, vaultRef);
    const { spec, problems } = normalizeSpec(body.type, body.spec);
    if (body.type === 'wallet' && !this.deps.providers[(spec as WalletNormalizedSpec).provider]) {
      problems.push({ field: 'spec.provider', message: `provider "${(spec as WalletNormalizedSpec).provider}" is not configured on this server (BROWSERD_LINK_URL)` });
    }
    if (problems.length) throw invalidInput(problems);
    const same = async (existing: ItemRecord) => {
      if (existing.type !== body.type || JSON.stringify(existing.spec) !== JSON.stringify(spec)) {
        throw new Conflict(`item "${key}" already exists with a different ${existing.type !== body.type ? 'type' : 'spec'}; change it with PATCH or delete it first`, 'item_exists');
      }
      return { item: await this.view(await this.settle(existing)), created: false };
    };
    const existing = await this.deps.repo.itemByKey(v.id, key);
    if (existing) return same(existing);
    const at = this.iso();
    const isWallet = body.type === 'wallet';
    const state: ItemState = isWallet
      ? {
          provider: (spec as WalletNormalizedSpec).provider,
          status: 'pending_authorization',
          status_reason: 'waiting for the wallet owner to authorize browserd at the provider (authorize)',
        }
      : { status: 'pending_values', status_reason: FORM_REASON.pending_values };
    const item: ItemRecord = {
      id: newId(),
      vaultId: v.id,
      projectId: p.projectId,
      key,
      type: body.type,
      spec,
      state,
      publicValues: {},
      valueFields: [],
      version: 1,
      parentId: null,
      idempotencyKey: null,
      expiresAt: null,
      actionId: null,
      actionExpiresAt: null,
      createdAt: at,
      updatedAt: at,
    };
    try {
      await this.insertItem(v, item);
    } catch (err) {
      if (isUniqueViolation(err)) {
        const raced = await this.deps.repo.itemByKey(v.id, key);
        if (raced) return same(raced);
      }
      throw err;
    }
    this.deps.log.info({ vault_id: v.id, item_id: item.id, type: item.type }, 'vault item created');
    return { item: await this.view(item), created: true };
  }

  /** Replaces the spec when `version` is current. Values whose field changed are dropped, never revealed. */
  async patchItem(p: Principal, vaultRef: string, key: string, body: ItemPatchRequest): Promise<Record<string, unknown>> {
    const v = await this.mustVault(p, vaultRef);
    const item = await this.settle(await this.mustItem(v, key));
    if (body.version !== item.version) {
      throw new Conflict(`item "${key}" is at version ${item.version}, not ${body.version}; read it again and retry`, 'version_mismatch');
    }
    if (body.spec === undefined) return this.view(item);
    if (item.type === 'single_use_card') throw invalidInput([{ field: 'spec', message: 'the spec of a single_use_card is what its checkout asked for and cannot change' }]);
    const schemaProblems = specProblems(item.type, body.spec);
    if (schemaProblems.length) throw invalidInput(schemaProblems);
    const { spec, problems } = normalizeSpec(item.type, body.spec);
    if (item.type === 'wallet' && JSON.stringify(spec) !== JSON.stringify(item.spec)) {
      problems.push({ field: 'spec', message: "a wallet's provider and authorization cannot change; create another wallet" });
    }
    if (problems.length) throw invalidInput(problems);
    if (JSON.stringify(spec) === JSON.stringify(item.spec)) return this.view(item);

    const before = fieldsOf(item.type, item.spec);
    const after = fieldsOf(item.type, spec);
    const kept = valuesKeptAcrossSpecChange(before, after, item.valueFields);
    const at = this.iso();
    const next: ItemRecord = { ...item, spec, version: item.version + 1, updatedAt: at };
    // Read before the transaction: on SQLite the transaction holds the only connection.
    const old = FORM_TYPES.includes(item.type) ? await this.readValues(item) : {};
    await this.deps.repo.transaction(async (tx) => {
      if (FORM_TYPES.includes(item.type)) {
        const values: Record<string, StoredValue> = {};
        for (const n of kept) if (old[n] !== undefined) values[n] = old[n]!;
        Object.assign(next, await this.writeValues(tx, next, values, after, at));
        const status = formStatus(item.type, spec, next.valueFields);
        next.state = { status, status_reason: status === 'ready' ? FORM_REASON.ready : 'the spec changed and some fields need values (collect)' };
      }
      const ok = await this.deps.repo.updateItem(tx, item.id, { spec: next.spec, state: next.state, publicValues: next.publicValues, valueFields: next.valueFields, version: next.version, updatedAt: at }, { ifVersion: item.version });
      if (!ok) throw new Conflict(`item "${key}" changed meanwhile; read it again and retry`, 'version_mismatch');
    });
    if (kept.length < item.valueFields.length) await this.deps.repo.scrub();
    return this.view(next);
  }

  /** Deletes the item with its data key and ciphertext (rules 1 to 4 for payments). */
  async deleteItem(p: Principal, vaultRef: string, key: string): Promise<void> {
    const v = await this.mustVault(p, vaultRef);
    const item = await this.settle(await this.mustItem(v, key));
    const grants = item.type === 'wallet' ? await this.grantsOf([item]) : [];
    let abandoned = false;
    await this.deps.repo.transaction(async (tx) => {
      if (!(await this.deps.repo.lockVault(tx, v.id))) throw new NotFound(`vault "${vaultRef}" not found`, 'vault_not_found');
      const fresh = await this.deps.repo.itemById(item.id, tx);
      if (!fresh) throw new NotFound(`item "${key}" not found in vault "${v.name}"`, 'item_not_found');
      if (fresh.type === 'single_use_card') {
        const card = this.paymentCard(fresh);
        const refusal = cardDeletionRefusal(card);
        if (refusal) throw refusalError(refusal);
        abandoned = card.status === 'recovery_required';
        await this.deps.repo.deleteItems(tx, [fresh.id]);
      } else if (fresh.type === 'wallet') {
        const cards = await this.deps.repo.childItems(fresh.id, tx);
        const refusal = containerDeletionRefusal('wallet', fresh.key, cards.map((c) => this.paymentCard(c)));
        if (refusal) throw refusalError(refusal);
        await this.deps.repo.deleteItems(tx, [...cards.map((c) => c.id), fresh.id]);
      } else {
        await this.deps.repo.deleteItems(tx, [fresh.id]);
      }
    });
    await this.deps.repo.scrub();
    if (abandoned) this.deps.log.warn({ item_id: item.id, idempotency_key: item.idempotencyKey }, 'a checkout whose outcome is unknown was abandoned by deleting its card');
    this.deps.log.info({ vault_id: v.id, item_id: item.id, type: item.type }, 'vault item deleted with its data key');
    await this.revokeGrants(grants);
  }

  // ---- operations ---------------------------------------------------------------------------

  async operate(p: Principal, vaultRef: string, key: string, req: OperationRequest, browsers: BrowserAccess): Promise<Record<string, unknown>> {
    const fieldProblems = checkOperationFields(req);
    if (fieldProblems.length) throw invalidInput(fieldProblems);
    const v = await this.mustVault(p, vaultRef);
    const item = await this.settle(await this.mustItem(v, key));
    const ofType = operationsOfType(item.type);
    if (!ofType.includes(req.type)) {
      throw invalidInput([{ field: 'type', message: `a ${item.type} item has no ${req.type} operation (its operations: ${ofType.join(', ')})` }]);
    }
    const now = operationsAvailable(item.type, item.state.status);
    if (!now.includes(req.type)) {
      throw new Conflict(
        `${req.type} is not available for ${item.type} "${key}" in status ${item.state.status} (available now: ${now.length ? now.join(', ') : 'none'})`,
        'operation_not_available',
      );
    }
    switch (req.type) {
      case 'collect':
        return this.view(await this.openCollection(item, true));
      case 'authorize':
        this.providerOf(item);
        return this.view(await this.openCollection(item, true));
      case 'fill':
        return this.fill(p, v, item, req, browsers);
      case 'prepare_checkout':
        return this.prepareCheckout(v, item, req);
      case 'sync':
      case 'cancel':
      case 'recover':
        return this.cardOperation(item, req.type);
    }
  }

  private async fill(p: Principal, v: VaultRecord, item: ItemRecord, req: OperationRequest, browsers: BrowserAccess): Promise<Record<string, unknown>> {
    const names = fillableFieldNames(item.type, item.spec);
    const problems = req.fields!.flatMap((f, i) =>
      names.includes(f.field) ? [] : [{ field: `fields[${i}].field`, message: `"${f.field}" is not a field of this ${item.type} item (fields: ${names.join(', ')})` }],
    );
    if (problems.length) throw invalidInput(problems);
    const session = await browsers.resolve(p, req.browser_id!);
    if (!(await this.deps.repo.isLinked(session.sessionId, v.id))) {
      throw new Forbidden(`browser session ${session.sessionId} was not created with vault "${v.name}" in its vaults`, 'vault_not_linked');
    }
    const values = await this.readValues(item);
    const totp = (s: TotpSecret) => totpCode(s, this.now());
    const instructions = req.fields!.map((f) => ({ field: f.field, selector: f.selector, value: fillText(item.type, f.field, values, totp) }));
    const origins = (item.spec as { origins?: string[] }).origins;
    let outcome;
    try {
      outcome = await fillPage(session.endpoint, instructions, { targetId: req.target_id, origins });
    } catch (err) {
      if (err instanceof FillNoPage) throw new Conflict(err.message, 'no_page');
      if (err instanceof FillOriginRefused) throw new Forbidden(`${err.message} (${origins!.join(', ')}); nothing was typed`, 'origin_not_allowed');
      this.deps.log.error({ item_id: item.id, session_id: session.sessionId, err: err instanceof Error ? err.message : 'error' }, 'fill failed');
      throw new ApiError(500, 'fill_failed', 'the browser could not be reached to fill the page');
    } finally {
      for (const ins of instructions) ins.value = null;
    }
    this.deps.log.info(
      { vault_id: v.id, item_id: item.id, session_id: session.sessionId, fields: outcome.fields.map((f) => `${f.field}:${f.status}`) },
      'vault item filled into a page',
    );
    return {
      type: 'fill',
      item: { id: item.id, key: item.key, type: item.type },
      browser_id: session.sessionId,
      target_id: outcome.targetId,
      origin: outcome.origin,
      fields: outcome.fields,
    };
  }

  // ---- payments -----------------------------------------------------------------------------

  private async prepareCheckout(v: VaultRecord, wallet: ItemRecord, req: OperationRequest): Promise<Record<string, unknown>> {
    const provider = this.providerOf(wallet);
    const key = req.card_key ?? `${wallet.key.slice(0, 200)}-checkout-${newId().slice(0, 10)}`;
    const at = this.iso();
    const spec: CardIssuedSpec = {
      provider: provider.name,
      wallet: { id: wallet.id, key: wallet.key },
      payment_method_id: req.payment_method_id!,
      amount: { value: req.amount!.value, currency: req.amount!.currency.toLowerCase() },
      ...(req.merchant ? { merchant: { ...(req.merchant.name ? { name: req.merchant.name } : {}), ...(req.merchant.url ? { url: req.merchant.url } : {}) } } : {}),
    };
    const card: ItemRecord = {
      id: newId(),
      vaultId: v.id,
      projectId: v.projectId,
      key,
      type: 'single_use_card',
      spec,
      state: { provider: provider.name, status: 'creating', status_reason: cardReason('creating') },
      publicValues: {},
      valueFields: [],
      version: 1,
      parentId: wallet.id,
      idempotencyKey: `${newId()}${newId()}`,
      expiresAt: null,
      actionId: null,
      actionExpiresAt: null,
      createdAt: at,
      updatedAt: at,
    };
    // Recorded before the provider is called: whatever happens next, the card (and its
    // unresolved payment) is in the store.
    try {
      await this.insertItem(v, card, async (tx) => {
        const w = await this.deps.repo.itemById(wallet.id, tx);
        if (!w || w.state.status !== 'active') throw walletNotAuthorized(wallet.key);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`an item "${key}" already exists in vault "${v.name}"`, 'item_exists');
      throw err;
    }
    let checkout: ProviderCheckout;
    // Whether a create request may have reached the provider without a usable answer: a
    // refused token (401) or a refresh failing before the call means nothing was created.
    let maybeCreated = false;
    try {
      checkout = await this.withAccess(wallet, async (token) => {
        maybeCreated = true;
        try {
          return await provider.createCheckout(token, { payment_method_id: spec.payment_method_id, amount: spec.amount, ...(spec.merchant ? { merchant: spec.merchant } : {}) }, card.idempotencyKey!);
        } catch (err) {
          if (err instanceof ProviderTokenRejected || err instanceof ProviderRefused) maybeCreated = false;
          throw err;
        }
      });
    } catch (err) {
      if (!maybeCreated) {
        // Nothing exists at the provider: the card goes, and the caller learns why.
        await this.deps.repo.transaction((tx) => this.deps.repo.deleteItems(tx, [card.id]));
        if (err instanceof ProviderRefused) {
          throw new ApiError(409, 'checkout_refused', `the provider refused the checkout: ${err.message}`, [{ code: err.code, message: err.message }]);
        }
        if (err instanceof ProviderUnavailable) throw badGateway(err.message);
        throw err;
      }
      const why = err instanceof ProviderUnavailable ? err.message : 'unexpected error';
      this.deps.log.warn({ item_id: card.id, idempotency_key: card.idempotencyKey, err: why }, 'checkout outcome unknown: card needs recovery');
      const state: ItemState = { provider: provider.name, status: 'recovery_required', status_reason: `${cardReason('recovery_required')} [${why}]` };
      await this.deps.repo.updateItem(this.deps.repo.db, card.id, { state, version: card.version + 1, updatedAt: this.iso() });
      return this.view({ ...card, state, version: card.version + 1 });
    }
    return this.view(await this.applyCheckout(card, checkout));
  }

  private async cardOperation(card: ItemRecord, op: 'sync' | 'cancel' | 'recover'): Promise<Record<string, unknown>> {
    const wallet = card.parentId ? await this.deps.repo.itemById(card.parentId) : null;
    if (!wallet) throw new Conflict(`the wallet that issued card "${card.key}" no longer exists`, 'wallet_missing');
    if (wallet.state.status !== 'active') throw walletNotAuthorized(wallet.key);
    const provider = this.providerOf(wallet);
    const authId = card.state.authorization_id ?? null;
    try {
      if (op === 'recover') {
        const found = await this.withAccess(wallet, (t) => provider.findCheckout(t, card.idempotencyKey!));
        if (!found) {
          const state: ItemState = { provider: provider.name, status: 'failed', status_reason: cardReason('failed') };
          await this.deps.repo.updateItem(this.deps.repo.db, card.id, { state, version: card.version + 1, updatedAt: this.iso() });
          return this.view({ ...card, state, version: card.version + 1 });
        }
        return this.view(await this.applyCheckout(card, found));
      }
      if (op === 'sync') return this.view(await this.applyCheckout(card, await this.withAccess(wallet, (t) => provider.getCheckout(t, authId!))));
      try {
        return this.view(await this.applyCheckout(card, await this.withAccess(wallet, (t) => provider.cancelCheckout(t, authId!))));
      } catch (err) {
        if (!(err instanceof ProviderRefused)) throw err;
        const now = await this.applyCheckout(card, await this.withAccess(wallet, (t) => provider.getCheckout(t, authId!)));
        if (isResolved(now.state.status as CardStatus)) return this.view(now);
        throw new ApiError(409, 'cancel_refused', `the provider refused to cancel: ${err.message}`, [{ code: err.code, message: err.message }]);
      }
    } catch (err) {
      if (err instanceof ProviderUnavailable) throw badGateway(`${err.message}; the card is unchanged (status ${card.state.status})`);
      if (err instanceof ProviderRefused) throw new ApiError(409, 'provider_refused', `the provider refused: ${err.message}`, [{ code: err.code, message: err.message }]);
      throw err;
    }
  }

  /** Records the provider's view of a checkout on its card: status, authorization id, card values while active. */
  private async applyCheckout(card: ItemRecord, co: ProviderCheckout): Promise<ItemRecord> {
    const status = cardStatusFromProvider(co.status);
    const at = this.iso();
    const next: ItemRecord = { ...card, version: card.version + 1, updatedAt: at, expiresAt: co.expires_at };
    const display = { ...(card.state.display ?? {}) };
    await this.deps.repo.transaction(async (tx) => {
      if (status === 'active' && co.card) {
        const values: Record<string, StoredValue> = { number: co.card.number, exp_month: co.card.exp_month, exp_year: co.card.exp_year, cvc: co.card.cvc };
        Object.assign(next, await this.writeValues(tx, next, values, fieldsOf('single_use_card', card.spec), at));
        Object.assign(display, { brand: co.card.brand || cardBrand(co.card.number), last4: co.card.last4, exp_month: co.card.exp_month, exp_year: co.card.exp_year });
      } else if (isResolved(status)) {
        // A resolved card cannot pay again: its values are destroyed with their data key.
        await this.deps.repo.dropSecret(tx, card.id);
        next.publicValues = {};
        next.valueFields = [];
      }
      next.state = { provider: card.state.provider, status, status_reason: cardReason(status), authorization_id: co.id, ...(Object.keys(display).length ? { display } : {}) };
      await this.deps.repo.updateItem(tx, card.id, {
        state: next.state,
        publicValues: next.publicValues,
        valueFields: next.valueFields,
        version: next.version,
        expiresAt: next.expiresAt,
        updatedAt: at,
      });
    });
    if (isResolved(status) && card.valueFields.length) await this.deps.repo.scrub();
    return next;
  }

  /** A card left `creating` past the deadline lost its answer (a crash mid-call): it needs recovery. */
  private async settle(i: ItemRecord): Promise<ItemRecord> {
    if (i.type !== 'single_use_card' || i.state.status !== 'creating' || this.now() - Date.parse(i.updatedAt) < CHECKOUT_STALE_MS) return i;
    const state: ItemState = { ...i.state, status: 'recovery_required', status_reason: `${cardReason('recovery_required')} [the checkout request did not finish]` };
    const at = this.iso();
    const ok = await this.deps.repo.updateItem(this.deps.repo.db, i.id, { state, version: i.version + 1, updatedAt: at }, { ifVersion: i.version });
    if (ok) return { ...i, state, version: i.version + 1, updatedAt: at };
    return (await this.deps.repo.itemById(i.id)) ?? i;
  }

  private paymentCard(c: ItemRecord): PaymentCard {
    let status = c.state.status as CardStatus;
    if (status === 'creating' && this.now() - Date.parse(c.updatedAt) >= CHECKOUT_STALE_MS) status = 'recovery_required';
    return { key: c.key, status, authorizationId: c.state.authorization_id ?? null };
  }

  private async paymentMethods(wallet: ItemRecord): Promise<PaymentMethodView[]> {
    if (wallet.state.status !== 'active') throw walletNotAuthorized(wallet.key, `status ${wallet.state.status}`);
    const provider = this.providerOf(wallet);
    try {
      const methods = await this.withAccess(wallet, (t) => provider.paymentMethods(t));
      return methods.map((m) => ({
        id: m.id,
        provider: provider.name,
        type: m.type,
        is_default: m.is_default,
        display: { brand: m.brand, label: m.label, last4: m.last4 },
        capabilities: { single_use_card: { eligible: m.single_use_card.eligible, reasons: m.single_use_card.reasons } },
      }));
    } catch (err) {
      if (err instanceof ProviderUnavailable) throw badGateway(err.message);
      if (err instanceof ProviderRefused) throw new ApiError(409, 'provider_refused', `the provider refused: ${err.message}`, [{ code: err.code, message: err.message }]);
      throw err;
    }
  }

  // ---- wallet grants ------------------------------------------------------------------------

  /** Runs `fn` with a valid access token: refreshes it when it is about to expire or is refused, once. */
  private async withAccess<T>(wallet: ItemRecord, fn: (accessToken: string) => Promise<T>): Promise<T> {
    const provider = this.providerOf(wallet);
    let tokens = await this.currentTokens(wallet);
    if (tokens.expires_at && Date.parse(tokens.expires_at) - this.now() < 60_000) tokens = await this.refreshTokens(wallet, provider, tokens);
    try {
      return await fn(tokens.access_token);
    } catch (err) {
      if (!(err instanceof ProviderTokenRejected)) throw err;
    }
    tokens = await this.refreshTokens(wallet, provider, tokens);
    try {
      return await fn(tokens.access_token);
    } catch (err) {
      if (err instanceof ProviderTokenRejected) {
        await this.loseAuthorization(wallet, 'the provider refused a freshly refreshed access token');
        throw walletNotAuthorized(wallet.key, 'the provider refused its access token');
      }
      throw err;
    }
  }

  private async currentTokens(wallet: ItemRecord): Promise<OAuthTokens> {
    const secret = await this.readSecret(wallet.id);
    if (!secret?.oauth) throw walletNotAuthorized(wallet.key);
    return secret.oauth;
  }

  /** One refresh per wallet at a time (providers rotate refresh tokens: a second one would be refused). */
  private async refreshTokens(wallet: ItemRecord, provider: PaymentProvider, seen: OAuthTokens): Promise<OAuthTokens> {
    const running = this.walletLocks.get(wallet.id);
    if (running) {
      await running.catch(() => undefined);
      const now = await this.currentTokens(wallet);
      if (now.access_token !== seen.access_token) return now;
    }
    const job = (async () => {
      if (!seen.refresh_token) {
        await this.loseAuthorization(wallet, 'the access token expired and the provider gave no refresh token');
        throw walletNotAuthorized(wallet.key, 'its access token expired');
      }
      let fresh: OAuthTokens;
      try {
        fresh = await provider.refresh(seen.refresh_token);
      } catch (err) {
        if (err instanceof ProviderAuthorizationLost) {
          await this.loseAuthorization(wallet, 'the provider no longer accepts this wallet\'s authorization');
          throw walletNotAuthorized(wallet.key, 'the provider revoked its authorization');
        }
        if (err instanceof ProviderUnavailable) throw badGateway(err.message);
        throw err;
      }
      if (!fresh.refresh_token) fresh.refresh_token = seen.refresh_token;
      const sealed = await sealJson(this.deps.kek, itemContext(wallet.id), { oauth: fresh } satisfies SecretPayload);
      await this.deps.repo.transaction((tx) => this.deps.repo.putSecret(tx, wallet.id, sealed, this.iso()));
      return fresh;
    })();
    this.walletLocks.set(wallet.id, job);
    try {
      return await job;
    } finally {
      if (this.walletLocks.get(wallet.id) === job) this.walletLocks.delete(wallet.id);
    }
  }

  /** The grant is gone: its tokens are destroyed and the wallet waits for authorization again. */
  private async loseAuthorization(wallet: ItemRecord, reason: string): Promise<void> {
    const fresh = (await this.deps.repo.itemById(wallet.id)) ?? wallet;
    const state: ItemState = { provider: fresh.state.provider, status: 'pending_authorization', status_reason: `${reason}; authorize again` };
    await this.deps.repo.transaction(async (tx) => {
      await this.deps.repo.dropSecret(tx, wallet.id);
      await this.deps.repo.updateItem(tx, wallet.id, { state, version: fresh.version + 1, updatedAt: this.iso() });
    });
    await this.deps.repo.scrub();
    this.deps.log.warn({ item_id: wallet.id }, 'wallet authorization lost');
  }

  private async grantsOf(wallets: ItemRecord[]): Promise<{ provider: PaymentProvider; token: string }[]> {
    const out: { provider: PaymentProvider; token: string }[] = [];
    for (const w of wallets) {
      const provider = this.deps.providers[(w.spec as WalletNormalizedSpec).provider];
      if (!provider) continue;
      const s = await this.readSecret(w.id).catch(() => null);
      const token = s?.oauth?.refresh_token ?? s?.oauth?.access_token;
      if (token) out.push({ provider, token });
    }
    return out;
  }

  /** Best effort: a deleted wallet's grant is revoked at the provider too. */
  private async revokeGrants(grants: { provider: PaymentProvider; token: string }[]): Promise<void> {
    for (const g of grants) {
      await g.provider.revoke(g.token).catch((err) => this.deps.log.warn({ err: err instanceof Error ? err.message : 'error' }, 'could not revoke a deleted wallet\'s grant at the provider'));
    }
  }

  // ---- collection sessions -----------------------------------------------------------------

  private canCollect(i: ItemRecord): boolean {
    return i.type !== 'wallet' || !!this.deps.providers[(i.spec as WalletNormalizedSpec).provider];
  }

  /** Opens a collection session (or, unless `fresh`, keeps the open one). At most one per item. */
  private async openCollection(item: ItemRecord, fresh: boolean): Promise<ItemRecord> {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (!fresh && hasOpenAction(item, this.now())) return item;
      const actionId = newId();
      const actionExpiresAt = this.iso(this.now() + COLLECTION_TTL_MS);
      if (await this.deps.repo.updateItem(this.deps.repo.db, item.id, { actionId, actionExpiresAt }, { ifActionId: item.actionId })) {
        return { ...item, actionId, actionExpiresAt };
      }
      const again = await this.deps.repo.itemById(item.id);
      if (!again) throw new NotFound(`item "${item.key}" not found`, 'item_not_found');
      item = again;
      fresh = false; // someone else just opened one: share it
    }
    return item;
  }

  private purposeOf(i: ItemRecord): CollectPurpose {
    return i.type === 'wallet' ? 'vault-oauth' : 'vault-collect';
  }

  private async actionUrl(i: ItemRecord): Promise<string | null> {
    if (!hasOpenAction(i, this.now()) || !actionNameOf(i.type)) return null;
    const token = await this.deps.tokens.sign({ sessionId: i.actionId!, itemId: i.id, purpose: this.purposeOf(i) }, Date.parse(i.actionExpiresAt!));
    return i.type === 'wallet' ? `${this.publicUrl}/vault-oauth/start?jwt=${token}` : `${this.publicUrl}/vault-collect?jwt=${token}`;
  }

  /** The item behind a collection token whose session is still the open one. */
  private async collectionItem(token: string | undefined, purpose: CollectPurpose): Promise<{ item: ItemRecord; sessionId: string }> {
    const v = await this.deps.tokens.verify(token, purpose);
    if (!v.ok) {
      if (v.reason === 'this link has expired') throw gone('this link has expired; ask for a new one');
      throw new Unauthorized(`${v.reason}`);
    }
    const item = await this.deps.repo.itemById(v.claims.itemId);
    if (!item) throw new NotFound('the item of this link no longer exists', 'item_not_found');
    if (item.actionId !== v.claims.sessionId) throw gone('this link was already used or replaced by a newer one', 'link_used');
    if (!hasOpenAction(item, this.now())) throw gone('this link has expired; ask for a new one');
    return { item, sessionId: v.claims.sessionId };
  }

  /** What the collection page shows: the item and its fields, never a value. */
  async collectForm(token: string | undefined): Promise<Record<string, unknown>> {
    const { item } = await this.collectionItem(token, 'vault-collect');
    const vault = await this.deps.repo.db.selectFrom('vaults').select('name').where('id', '=', item.vaultId).executeTakeFirst();
    const have = new Set(item.valueFields);
    return {
      vault: vault?.name ?? '',
      item: { key: item.key, type: item.type, status: item.state.status },
      fields: fieldsOf(item.type, item.spec).map((f) => ({ name: f.name, label: f.label, kind: f.kind, sensitive: f.sensitive, required: f.required, has_value: have.has(f.name) })),
      expires_at: item.actionExpiresAt,
    };
  }

  /** Stores what a person entered (encrypted) and closes the collection session. */
  async collectSubmit(token: string | undefined, input: Record<string, unknown>): Promise<Record<string, unknown>> {
    const { item, sessionId } = await this.collectionItem(token, 'vault-collect');
    if (!FORM_TYPES.includes(item.type)) throw new Conflict(`a ${item.type} item takes no values from a form`, 'not_collectable');
    const checked = checkValues(item.type, item.spec, input, item.valueFields);
    if (checked.problems.length) throw invalidInput(checked.problems);
    const values: Record<string, StoredValue> = { ...checked.values };
    if (checked.kept.length) {
      const old = await this.readValues(item);
      for (const n of checked.kept) if (old[n] !== undefined) values[n] = old[n]!;
    }
    const at = this.iso();
    const next: ItemRecord = { ...item, version: item.version + 1, updatedAt: at, actionId: null, actionExpiresAt: null };
    await this.deps.repo.transaction(async (tx) => {
      Object.assign(next, await this.writeValues(tx, next, values, fieldsOf(item.type, item.spec), at));
      const status = formStatus(item.type, item.spec, next.valueFields);
      next.state = { status, status_reason: status === 'ready' ? FORM_REASON.ready : FORM_REASON.pending_values };
      const ok = await this.deps.repo.updateItem(
        tx,
        item.id,
        { state: next.state, publicValues: next.publicValues, valueFields: next.valueFields, version: next.version, updatedAt: at, actionId: null, actionExpiresAt: null },
        { ifActionId: sessionId },
      );
      if (!ok) throw gone('this link was already used or replaced by a newer one', 'link_used');
    });
    // The previous ciphertext and data key were replaced: make sure their bytes go too.
    if (item.valueFields.length) await this.deps.repo.scrub();
    this.deps.log.info({ item_id: item.id, fields: next.valueFields }, 'vault item values collected');
    return { item: { key: item.key, type: item.type }, state: { status: next.state.status, status_reason: next.state.status_reason } };
  }

  /** Where the authorization link sends the owner: the provider's authorization page (PKCE). */
  async oauthStart(token: string | undefined): Promise<string> {
    const { item, sessionId } = await this.collectionItem(token, 'vault-oauth');
    const provider = this.providerOf(item);
    return provider.authorizationUrl({ state: token!, codeChallenge: pkceChallenge(this.deps.tokens.pkceVerifier(sessionId)), redirectUri: this.redirectUri() });
  }

  /** The provider's redirect back: exchanges the code, stores the tokens encrypted, the wallet becomes active. */
  async oauthCallback(q: { state?: string; code?: string; error?: string }): Promise<{ status: 'active' | 'declined'; key: string }> {
    const { item, sessionId } = await this.collectionItem(q.state, 'vault-oauth');
    const provider = this.providerOf(item);
    const at = this.iso();
    if (q.error || !q.code) {
      const why = (q.error ?? 'no code').replace(/[^a-z0-9_]/gi, '').slice(0, 64) || 'error';
      const state: ItemState = { ...item.state, status_reason: `the authorization at the provider did not complete (${why}); authorize again` };
      await this.deps.repo.updateItem(this.deps.repo.db, item.id, { state, actionId: null, actionExpiresAt: null }, { ifActionId: sessionId });
      return { status: 'declined', key: item.key };
    }
    let tokens: OAuthTokens;
    try {
      tokens = await provider.exchangeCode({ code: q.code, codeVerifier: this.deps.tokens.pkceVerifier(sessionId), redirectUri: this.redirectUri() });
    } catch (err) {
      if (err instanceof ProviderUnavailable) throw badGateway(err.message);
      throw new ApiError(400, 'authorization_failed', 'the provider refused the authorization code; start again from a new link');
    }
    const sealed = await sealJson(this.deps.kek, itemContext(item.id), { oauth: tokens } satisfies SecretPayload);
    const state: ItemState = { provider: item.state.provider, status: 'active', status_reason: 'authorized by the wallet owner at the provider' };
    await this.deps.repo.transaction(async (tx) => {
      const ok = await this.deps.repo.updateItem(tx, item.id, { state, version: item.version + 1, updatedAt: at, actionId: null, actionExpiresAt: null }, { ifActionId: sessionId });
      if (!ok) throw gone('this link was already used or replaced by a newer one', 'link_used');
      await this.deps.repo.putSecret(tx, item.id, sealed, at);
    });
    this.deps.log.info({ item_id: item.id }, 'wallet authorized');
    return { status: 'active', key: item.key };
  }

  private redirectUri(): string {
    return `${this.publicUrl}/vault-oauth/callback`;
  }

  // ---- session links ------------------------------------------------------------------------

  /** The vault ids of a create request's `vaults`, in order; 404 naming every unknown entry, 400 for repeats. */
  async resolveForSession(projectId: string, refs: { id?: string; name?: string }[]): Promise<string[]> {
    const byId = await this.deps.repo.vaultsById(projectId, refs.flatMap((r) => (r.id !== undefined ? [r.id] : [])));
    const byName = await this.deps.repo.vaultsByName(projectId, refs.flatMap((r) => (r.name !== undefined ? [r.name] : [])));
    const ids: string[] = [];
    const missing: { field: string; message: string }[] = [];
    const repeated: { field: string; message: string }[] = [];
    refs.forEach((r, i) => {
      const v = r.id !== undefined ? byId.find((x) => x.id === r.id) : byName.find((x) => x.name === r.name);
      if (!v) missing.push({ field: `vaults[${i}]`, message: r.id !== undefined ? `no vault with id "${r.id}" in this project` : `no vault named "${r.name}" in this project` });
      else if (ids.includes(v.id)) repeated.push({ field: `vaults[${i}]`, message: `names vault "${v.name}" again (vaults[${ids.indexOf(v.id)}])` });
      else ids.push(v.id);
    });
    if (missing.length) {
      throw new ApiError(
        404,
        'vault_not_found',
        missing.length === 1 ? `${missing[0]!.field}: ${missing[0]!.message}` : `${missing.length} vaults not found`,
        missing.map((m) => ({ code: 'vault_not_found', message: `${m.field}: ${m.message}` })),
      );
    }
    if (repeated.length) throw invalidInput(repeated);
    return ids;
  }

  async linkSession(sessionId: string, vaultIds: string[]): Promise<void> {
    await this.deps.repo.linkSession(sessionId, vaultIds);
  }

  // ---- helpers ----------------------------------------------------------------------------

  private providerOf(item: ItemRecord): PaymentProvider {
    const name = (item.spec as { provider?: PaymentProviderName }).provider ?? 'link';
    const p = this.deps.providers[name];
    if (!p) throw new Conflict(`provider "${name}" is not configured on this server (BROWSERD_LINK_URL)`, 'provider_not_configured');
    return p;
  }

  private async mustVault(p: Principal, idOrName: string): Promise<VaultRecord> {
    const v = await this.deps.repo.findVault(p.projectId, idOrName);
    if (!v) throw new NotFound(`vault "${idOrName}" not found`, 'vault_not_found');
    return v;
  }

  private async mustItem(v: VaultRecord, key: string): Promise<ItemRecord> {
    const i = await this.deps.repo.itemByKey(v.id, key);
    if (!i) throw new NotFound(`item "${key}" not found in vault "${v.name}"`, 'item_not_found');
    return i;
  }

  /** Inserts under the vault's lock, within the item limit; `check` runs in the same transaction. */
  private async insertItem(v: VaultRecord, item: ItemRecord, check?: (tx: Parameters<Parameters<VaultRepo['transaction']>[0]>[0]) => Promise<void>): Promise<void> {
    try {
      await this.deps.repo.transaction(async (tx) => {
        if (!(await this.deps.repo.lockVault(tx, v.id))) throw new NotFound(`vault "${v.name}" not found`, 'vault_not_found');
        if ((await this.deps.repo.countItems(tx, v.id)) >= MAX_ITEMS_PER_VAULT) throw new Conflict(`vault "${v.name}" already holds ${MAX_ITEMS_PER_VAULT} items`, 'vault_full');
        if (check) await check(tx);
        await this.deps.repo.insertItem(tx, item);
      });
    } catch (err) {
      if (isForeignKeyViolation(err)) throw new NotFound(`vault "${v.name}" not found`, 'vault_not_found');
      throw err;
    }
  }

  private async readSecret(itemId: string): Promise<SecretPayload | null> {
    const sealed = await this.deps.repo.getSecret(itemId);
    return sealed ? openJson<SecretPayload>(this.deps.kek, itemContext(itemId), sealed) : null;
  }

  /** Every value of a form item or card: the sensitive ones decrypted, the others from the public column. */
  private async readValues(item: ItemRecord): Promise<Record<string, StoredValue>> {
    const secret = await this.readSecret(item.id);
    return { ...item.publicValues, ...(secret?.values ?? {}) };
  }

  /**
   * Stores values under the fields' sensitivity: sensitive ones sealed under a fresh data
   * key (replacing the old key and ciphertext), the others in the public column.
   */
  private async writeValues(
    tx: Parameters<Parameters<VaultRepo['transaction']>[0]>[0],
    item: ItemRecord,
    values: Record<string, StoredValue>,
    fields: FieldDef[],
    at: string,
  ): Promise<{ publicValues: Record<string, string>; valueFields: string[] }> {
    const secret: Record<string, StoredValue> = {};
    const publicValues: Record<string, string> = {};
    for (const f of fields) {
      const v = values[f.name];
      if (v === undefined) continue;
      if (f.sensitive || typeof v !== 'string') secret[f.name] = v;
      else publicValues[f.name] = v;
    }
    if (Object.keys(secret).length) await this.deps.repo.putSecret(tx, item.id, await sealJson(this.deps.kek, itemContext(item.id), { values: secret } satisfies SecretPayload), at);
    else await this.deps.repo.dropSecret(tx, item.id);
    return { publicValues, valueFields: fields.map((f) => f.name).filter((n) => values[n] !== undefined) };
  }

  private async view(i: ItemRecord, expanded?: { payment_methods?: PaymentMethodView[] }): Promise<Record<string, unknown>> {
    return itemView(i, { nowMs: this.now(), actionUrl: await this.actionUrl(i), expanded });
  }
}
