import { Type } from '@sinclair/typebox';
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ITEM_TYPES } from '../domain/vault-item-types.js';
import {
  ItemGetQuery,
  ItemListQuery,
  ItemParams,
  ItemPatchRequest,
  ItemPutRequest,
  OperationRequest,
  VaultCreateRequest,
  VaultListQuery,
  VaultParams,
} from '../domain/vault-request.js';
import { principalOf } from '../http/auth.js';
import { Conflict, invalidInput } from '../http/errors.js';
import { setPageHeaders } from '../http/pagination.js';
import { problemsFromAjv } from '../http/validation.js';
import type { SessionService } from '../sessions/session-service.js';
import type { BrowserAccess, VaultService } from '../vaults/vault-service.js';
import { StringEnum } from '../domain/schema-helpers.js';
import { errorResponses as errors } from './schemas.js';
import { vaultPageRoutes } from './vault-pages.js';

// ---- response schemas (they also drive serialization: a field not listed never leaves) ------

export const VaultSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});

const Described = Type.Object({ type: Type.String(), description: Type.String() });

const FieldState = Type.Object({
  name: Type.String(),
  kind: Type.String(),
  label: Type.String(),
  sensitive: Type.Boolean(),
  required: Type.Boolean(),
  has_value: Type.Boolean(),
  value: Type.Optional(Type.String({ description: 'Only for fields the spec marks non-sensitive.' })),
});

export const PaymentMethodSchema = Type.Object({
  id: Type.String(),
  provider: Type.String(),
  type: Type.String(),
  is_default: Type.Boolean(),
  display: Type.Object({ brand: Type.String(), label: Type.String(), last4: Type.String() }),
  capabilities: Type.Object({ single_use_card: Type.Object({ eligible: Type.Boolean(), reasons: Type.Array(Type.String()) }) }),
});

/** The contract's Vault item, plus `version` (for PATCH). Never a sensitive value. */
export const VaultItemSchema = Type.Object({
  id: Type.String(),
  key: Type.String(),
  type: StringEnum(ITEM_TYPES),
  version: Type.Integer({ description: 'Changes with every change of the item; PATCH carries it.' }),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  spec: Type.Record(Type.String(), Type.Unknown()),
  state: Type.Object({
    provider: Type.Optional(Type.String()),
    status: Type.String(),
    status_reason: Type.String(),
    authorization_id: Type.Optional(Type.String()),
    fields: Type.Optional(Type.Array(FieldState)),
    display: Type.Optional(
      Type.Object({ brand: Type.Optional(Type.String()), last4: Type.Optional(Type.String()), exp_month: Type.Optional(Type.String()), exp_year: Type.Optional(Type.String()) }),
    ),
  }),
  available_operations: Type.Array(Described),
  available_expansions: Type.Array(Described),
  action: Type.Optional(Type.Object({ name: Type.String(), url: Type.String() })),
  expanded: Type.Optional(Type.Object({ payment_methods: Type.Optional(Type.Array(PaymentMethodSchema)) })),
  expires_at: Type.Optional(Type.String({ format: 'date-time' })),
});

export const FillResultSchema = Type.Object({
  type: Type.Literal('fill'),
  item: Type.Object({ id: Type.String(), key: Type.String(), type: Type.String() }),
  browser_id: Type.String(),
  target_id: Type.String(),
  origin: Type.String(),
  fields: Type.Array(
    Type.Object({
      field: Type.String(),
      selector: Type.String(),
      status: StringEnum(['filled', 'not_found', 'not_fillable', 'no_value', 'invalid_selector', 'failed'] as const),
      message: Type.Optional(Type.String()),
    }),
  ),
});

/** Fill needs a live session of the caller's project and its browser's loopback CDP endpoint. */
export function browserAccess(sessions: SessionService): BrowserAccess {
  return {
    async resolve(p, browserId) {
      const b = await sessions.get(p, browserId, false);
      const id = b.session_id as string;
      const live = sessions.liveSession(id);
      if (!live) throw new Conflict(`browser session ${id} is not running on this node (starting, ending, or on another node)`, 'session_not_running');
      return { sessionId: id, endpoint: `ws://127.0.0.1:${live.handle.chromium.port}${live.handle.chromium.wsPath}` };
    },
  };
}

/** Schema problems without the `if … then` wrapper errors (the branch's own errors name the field). */
function bodyProblems(req: FastifyRequest): { field: string; message: string }[] {
  const errs = ((req.validationError?.validation ?? []) as ErrorObject[]).filter((e) => e.keyword !== 'if');
  return problemsFromAjv(errs, 'body');
}

const tags = ['vaults'];

/**
 * The vault routes (docs/vaults.md): vaults, items, operations, and the pages a person uses
 * to enter values or authorize a wallet. Routes only: parse, call the service, serialize.
 */
export async function vaultRoutes(app: FastifyInstance, deps: { vaults: VaultService; sessions: SessionService }): Promise<void> {
  const { vaults } = deps;
  const browsers = browserAccess(deps.sessions);
  const one = { 200: VaultSchema, ...errors };

  app.post<{ Body: VaultCreateRequest }>(
    '/vaults',
    { schema: { summary: 'Create a vault, or return the vault of that name (201 created, 200 existing)', tags, body: VaultCreateRequest, response: { 201: VaultSchema, ...one } } },
    async (req, reply) => {
      const r = await vaults.createVault(principalOf(req), req.body.name);
      return reply.code(r.created ? 201 : 200).send(r.vault);
    },
  );

  app.get<{ Querystring: VaultListQuery }>(
    '/vaults',
    { schema: { summary: "List the project's vaults (headers X-Has-More, X-Next-Offset)", tags, querystring: VaultListQuery, response: { 200: Type.Array(VaultSchema), ...errors } } },
    async (req, reply) => {
      const offset = req.query.offset ?? 0;
      const limit = req.query.limit ?? 20;
      const page = await vaults.listVaults(principalOf(req), offset, limit);
      setPageHeaders(reply, offset, page.items.length, page.hasMore);
      return page.items;
    },
  );

  app.get<{ Params: { id_or_name: string } }>(
    '/vaults/:id_or_name',
    { schema: { summary: 'Get a vault by id or name', tags, params: VaultParams, response: one } },
    async (req) => vaults.getVault(principalOf(req), req.params.id_or_name),
  );

  app.delete<{ Params: { id_or_name: string } }>(
    '/vaults/:id_or_name',
    { schema: { summary: 'Delete a vault with all its items (409 while a payment is unresolved)', tags, params: VaultParams, response: { 204: Type.Null(), ...errors } } },
    async (req, reply) => {
      await vaults.deleteVault(principalOf(req), req.params.id_or_name);
      return reply.code(204).send();
    },
  );

  app.get<{ Params: { id_or_name: string }; Querystring: ItemListQuery }>(
    '/vaults/:id_or_name/items',
    {
      schema: {
        summary: 'List the items of a vault: safe metadata only, never a secret value; never opens a collection session',
        tags,
        params: VaultParams,
        querystring: ItemListQuery,
        response: { 200: Type.Array(VaultItemSchema), ...errors },
      },
    },
    async (req) => vaults.listItems(principalOf(req), req.params.id_or_name, req.query.type ?? null),
  );

  app.put<{ Params: ItemParams; Body: ItemPutRequest }>(
    '/vaults/:id_or_name/items/:key',
    {
      schema: {
        summary: 'Create an item, or return it unchanged when it exists with the same spec (201 created, 200 existing, 409 different spec)',
        tags,
        params: ItemParams,
        body: ItemPutRequest,
        response: { 200: VaultItemSchema, 201: VaultItemSchema, ...errors },
      },
      attachValidation: true,
    },
    async (req, reply) => {
      if (req.validationError) throw invalidInput(bodyProblems(req));
      const r = await vaults.putItem(principalOf(req), req.params.id_or_name, req.params.key, req.body);
      return reply.code(r.created ? 201 : 200).send(r.item);
    },
  );

  app.get<{ Params: ItemParams; Querystring: ItemGetQuery }>(
    '/vaults/:id_or_name/items/:key',
    {
      schema: {
        summary: 'Get an item; opens a collection session (action) when it waits for a person; expand=payment_methods reads a wallet live',
        tags,
        params: ItemParams,
        querystring: ItemGetQuery,
        response: { 200: VaultItemSchema, ...errors },
      },
    },
    async (req) => vaults.getItem(principalOf(req), req.params.id_or_name, req.params.key, req.query.expand ?? []),
  );

  app.patch<{ Params: ItemParams; Body: ItemPatchRequest }>(
    '/vaults/:id_or_name/items/:key',
    { schema: { summary: "Change an item's spec, carrying its current version (409 when stale)", tags, params: ItemParams, body: ItemPatchRequest, response: { 200: VaultItemSchema, ...errors } } },
    async (req) => vaults.patchItem(principalOf(req), req.params.id_or_name, req.params.key, req.body),
  );

  app.delete<{ Params: ItemParams }>(
    '/vaults/:id_or_name/items/:key',
    {
      schema: {
        summary: 'Delete an item with its data key and ciphertext (409 while a payment is unresolved)',
        tags,
        params: ItemParams,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (req, reply) => {
      await vaults.deleteItem(principalOf(req), req.params.id_or_name, req.params.key);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: ItemParams; Body: OperationRequest }>(
    '/vaults/:id_or_name/items/:key/operations',
    {
      schema: {
        summary: 'Run an operation on an item: collect, fill, authorize, prepare_checkout, sync, cancel, recover',
        tags,
        params: ItemParams,
        body: OperationRequest,
        response: { 200: Type.Union([FillResultSchema, VaultItemSchema]), ...errors },
      },
      attachValidation: true,
    },
    async (req) => {
      if (req.validationError) throw invalidInput(bodyProblems(req));
      return vaults.operate(principalOf(req), req.params.id_or_name, req.params.key, req.body, browsers);
    },
  );

  await vaultPageRoutes(app, vaults);
}
