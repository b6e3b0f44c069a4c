import { Type } from '@sinclair/typebox';
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  BrowserPoolSchema,
  PoolAcquireRequest,
  PoolCreateRequest,
  PoolDeleteRequest,
  PoolReleaseRequest,
  PoolUpdateRequest,
} from '../domain/pool-request.js';
import { IdOrName, ResourceListQuery } from '../domain/resource-requests.js';
import { principalOf } from '../http/auth.js';
import { invalidInput } from '../http/errors.js';
import { setPageHeaders } from '../http/pagination.js';
import { problemsFromAjv, validFieldsOf } from '../http/validation.js';
import type { PoolService } from '../pools/pool-service.js';
import { BrowserSchema, errorResponses as errors } from './schemas.js';

const tags = ['browser_pools'];
type Params = { id_or_name: string };

/** A missing body reads as {} (the SDK sends none for flush, may send none for acquire). */
const emptyBodyIsObject = async (req: FastifyRequest) => {
  if (req.body === undefined || req.body === null) (req as { body: unknown }).body = {};
};

/**
 * Schema problems and the rules beyond the schema in one answer: the rules run on the
 * fields that passed it (as POST /browsers does).
 */
function splitValidation<T>(req: FastifyRequest): { body: T; problems: { field: string; message: string }[] } {
  const invalid = req.validationError;
  if (!invalid) return { body: req.body as T, problems: [] };
  const errs = invalid.validation as ErrorObject[];
  const problems = problemsFromAjv(errs, 'body');
  const rest = validFieldsOf(req.body, errs);
  if (!rest) throw invalidInput(problems);
  return { body: rest as T, problems };
}

/** Kernel's /browser_pools (paths and shapes of `@onkernel/sdk` browserPools). */
export function browserPoolRoutes(app: FastifyInstance, pools: PoolService): void {
  app.post<{ Body: PoolCreateRequest }>(
    '/browser_pools',
    { schema: { summary: 'Create a browser pool: `size` browsers kept warm with one configuration', tags, body: PoolCreateRequest, response: { 200: BrowserPoolSchema, ...errors } }, preValidation: emptyBodyIsObject, attachValidation: true },
    async (req) => {
      const { body, problems } = splitValidation<PoolCreateRequest>(req);
      // A size the schema refused is already named (so the answer is a 400); the other rules still run.
      return pools.create(principalOf(req), typeof body.size === 'number' ? body : { ...body, size: 1 }, problems);
    },
  );

  app.get<{ Querystring: ResourceListQuery }>(
    '/browser_pools',
    { schema: { summary: 'List browser pools, newest first (headers X-Has-More, X-Next-Offset); `name` exact, `query` substring of the name or the id', tags, querystring: ResourceListQuery, response: { 200: Type.Array(BrowserPoolSchema), ...errors } } },
    async (req, reply) => {
      const page = await pools.list(principalOf(req), req.query);
      setPageHeaders(reply, req.query.offset ?? 0, page.items.length, page.hasMore);
      return page.items;
    },
  );

  app.get<{ Params: Params }>(
    '/browser_pools/:id_or_name',
    { schema: { summary: 'Get a browser pool by id or name', tags, params: IdOrName, response: { 200: BrowserPoolSchema, ...errors } } },
    async (req) => pools.get(principalOf(req), req.params.id_or_name),
  );

  app.patch<{ Params: Params; Body: PoolUpdateRequest }>(
    '/browser_pools/:id_or_name',
    { schema: { summary: 'Update a browser pool: given fields replace the configuration; idle browsers beyond the size go, `discard_all_idle` rebuilds every idle one', tags, params: IdOrName, body: PoolUpdateRequest, response: { 200: BrowserPoolSchema, ...errors } }, preValidation: emptyBodyIsObject },
    async (req) => pools.update(principalOf(req), req.params.id_or_name, req.body),
  );

  app.delete<{ Params: Params; Body: PoolDeleteRequest; Querystring: { force?: boolean } }>(
    '/browser_pools/:id_or_name',
    {
      schema: { summary: 'Delete a browser pool and end its browsers (409 while browsers are leased, unless force=true)', tags, params: IdOrName, body: PoolDeleteRequest, querystring: Type.Object({ force: Type.Optional(Type.Boolean()) }), response: { 204: Type.Null(), ...errors } },
      preValidation: emptyBodyIsObject,
    },
    async (req, reply) => {
      await pools.delete(principalOf(req), req.params.id_or_name, req.body.force === true || req.query.force === true);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: Params; Body: PoolAcquireRequest }>(
    '/browser_pools/:id_or_name/acquire',
    {
      schema: { summary: 'Acquire a browser (long poll): 200 Browser with `pool`, or 204 when none frees up within acquire_timeout_seconds', tags, params: IdOrName, body: PoolAcquireRequest, response: { 200: BrowserSchema, 204: Type.Null(), ...errors } },
      preValidation: emptyBodyIsObject,
    },
    async (req, reply) => {
      // A caller that hangs up stops waiting: no browser is leased to nobody.
      const gone = new AbortController();
      const onClose = () => {
        if (!reply.sent) gone.abort();
      };
      reply.raw.once('close', onClose);
      try {
        const browser = await pools.acquire(principalOf(req), req.params.id_or_name, req.body, gone.signal);
        if (!browser) return reply.code(204).send();
        return browser;
      } finally {
        reply.raw.off('close', onClose);
      }
    },
  );

  app.post<{ Params: Params; Body: PoolReleaseRequest }>(
    '/browser_pools/:id_or_name/release',
    { schema: { summary: 'Release a leased browser: reuse=true (default) resets it (no tabs, cookies or storage of the lease) for the next lease; reuse=false ends it and a new one is filled', tags, params: IdOrName, body: PoolReleaseRequest, response: { 204: Type.Null(), ...errors } } },
    async (req, reply) => {
      await pools.release(principalOf(req), req.params.id_or_name, req.body.session_id, req.body.reuse ?? true);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: Params }>(
    '/browser_pools/:id_or_name/flush',
    { schema: { summary: 'End every idle browser of the pool (leased ones are not affected); the pool refills at its fill rate', tags, params: IdOrName, response: { 204: Type.Null(), ...errors } } },
    async (req, reply) => {
      await pools.flush(principalOf(req), req.params.id_or_name);
      return reply.code(204).send();
    },
  );
}
