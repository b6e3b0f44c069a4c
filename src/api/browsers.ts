import type { FastifyInstance } from 'fastify';
import {
  BrowserCreateRequest,
  BrowserListQuery,
  BrowserUpdateRequest,
  IdOrNameParams,
  RetrieveQuery,
} from '../domain/browser-request.js';
import type { ErrorObject } from 'ajv';
import { principalOf } from '../http/auth.js';
import { invalidInput } from '../http/errors.js';
import { problemsFromAjv, validFieldsOf } from '../http/validation.js';
import { setPageHeaders } from '../http/pagination.js';
import type { SessionService } from '../sessions/session-service.js';
import { Type } from '@sinclair/typebox';
import { BrowserSchema, errorResponses as errors } from './schemas.js';

const one = { 200: BrowserSchema, ...errors };

/** Tag filters arrive deepObject-style: ?tags[team]=backend&tags[env]=staging. */
function tagFilter(query: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) {
    const m = /^tags\[(.+)\]$/.exec(k);
    if (m) out[m[1]!] = Array.isArray(v) ? String(v[v.length - 1]) : String(v);
  }
  return out;
}

export function browserRoutes(app: FastifyInstance, sessions: SessionService): void {
  app.post<{ Body: BrowserCreateRequest }>(
    '/browsers',
    {
      schema: { summary: 'Create a browser session', tags: ['browsers'], body: BrowserCreateRequest, response: one },
      // All fields are optional: an empty body (no content at all) means {}.
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) (req as { body: unknown }).body = {};
      },
      // Schema problems are not answered alone: the rules beyond the schema run on the
      // fields that passed it, so one answer names every broken rule.
      attachValidation: true,
    },
    async (req) => {
      const invalid = req.validationError;
      if (!invalid) return sessions.create(principalOf(req), req.body);
      const errors = invalid.validation as ErrorObject[];
      const schemaProblems = problemsFromAjv(errors, 'body');
      const rest = validFieldsOf(req.body, errors);
      if (!rest) throw invalidInput(schemaProblems);
      return sessions.create(principalOf(req), rest as BrowserCreateRequest, schemaProblems);
    },
  );

  app.get<{ Querystring: BrowserListQuery }>(
    '/browsers',
    {
      schema: {
        summary: 'List browser sessions (headers X-Has-More, X-Next-Offset; filter by tag with tags[key]=value)',
        tags: ['browsers'],
        querystring: BrowserListQuery,
        response: { 200: Type.Array(BrowserSchema), ...errors },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const offset = q.offset ?? 0;
      const limit = q.limit ?? 20;
      const status = q.status ?? (q.include_deleted ? 'all' : 'active');
      const page = await sessions.list(principalOf(req), {
        status,
        offset,
        limit,
        query: q.query?.trim() || null,
        tags: tagFilter(req.query as Record<string, unknown>),
      });
      setPageHeaders(reply, offset, page.items.length, page.hasMore);
      return page.items;
    },
  );

  app.get<{ Params: { id_or_name: string }; Querystring: { include_deleted?: boolean } }>(
    '/browsers/:id_or_name',
    { schema: { summary: 'Get a browser session', tags: ['browsers'], params: IdOrNameParams, querystring: RetrieveQuery, response: one } },
    async (req) => sessions.get(principalOf(req), req.params.id_or_name, req.query.include_deleted === true),
  );

  app.patch<{ Params: { id_or_name: string }; Body: BrowserUpdateRequest }>(
    '/browsers/:id_or_name',
    {
      schema: { summary: 'Update a browser session (name, tags, telemetry, proxy)', tags: ['browsers'], params: IdOrNameParams, body: BrowserUpdateRequest, response: one },
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) (req as { body: unknown }).body = {};
        // Fixed at creation by the contract: say so rather than "not a known field".
        const fixed = (['network', 'extensions', 'vaults', 'region'] as const).filter((k) => typeof req.body === 'object' && Object.hasOwn(req.body as object, k));
        if (fixed.length) throw invalidInput(fixed.map((f) => ({ field: f, message: 'cannot be changed after creation' })));
      },
    },
    async (req) => sessions.update(principalOf(req), req.params.id_or_name, req.body),
  );

  app.delete<{ Params: { id_or_name: string } }>(
    '/browsers/:id_or_name',
    { schema: { summary: 'Delete (end) a browser session', tags: ['browsers'], params: IdOrNameParams, response: { 204: Type.Null(), ...errors } } },
    async (req, reply) => {
      await sessions.delete(principalOf(req), req.params.id_or_name);
      return reply.code(204).send();
    },
  );
}
