import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ProxyCheckRequest, ProxyCheckSchema, ProxyCreateRequest, ProxySchema } from '../domain/proxy-request.js';
import { IdOnly, ResourceListQuery } from '../domain/resource-requests.js';
import { principalOf } from '../http/auth.js';
import { setPageHeaders } from '../http/pagination.js';
import type { ProxyService } from '../proxies/proxy-service.js';
import { errorResponses as errors } from './schemas.js';

const tags = ['proxies'];

/** Proxy routes; as in Kernel's API a proxy is addressed by id only (names need not be unique). */
export function proxyRoutes(app: FastifyInstance, proxies: ProxyService): void {
  app.post<{ Body: ProxyCreateRequest }>(
    '/proxies',
    { schema: { summary: 'Create a proxy (type custom; protocol http, https or socks5; host, port, optional username/password). The password is stored encrypted and never returned.', tags, body: ProxyCreateRequest, response: { 200: ProxySchema, ...errors } } },
    async (req) => proxies.create(principalOf(req), req.body),
  );

  app.get<{ Querystring: ResourceListQuery }>(
    '/proxies',
    { schema: { summary: 'List proxies, newest first (headers X-Has-More, X-Next-Offset); query matches name, host or id', tags, querystring: ResourceListQuery, response: { 200: Type.Array(ProxySchema), ...errors } } },
    async (req, reply) => {
      const page = await proxies.list(principalOf(req), req.query);
      setPageHeaders(reply, req.query.offset ?? 0, page.items.length, page.hasMore);
      return page.items;
    },
  );

  app.get<{ Params: { id: string } }>(
    '/proxies/:id',
    { schema: { summary: 'Get a proxy by id', tags, params: IdOnly, response: { 200: ProxySchema, ...errors } } },
    async (req) => proxies.get(principalOf(req), req.params.id),
  );

  app.delete<{ Params: { id: string } }>(
    '/proxies/:id',
    { schema: { summary: 'Delete a proxy (soft: sessions using it keep it)', tags, params: IdOnly, response: { 204: Type.Null(), ...errors } } },
    async (req, reply) => {
      await proxies.delete(principalOf(req), req.params.id);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { id: string }; Body: ProxyCheckRequest }>(
    '/proxies/:id/check',
    {
      schema: { summary: 'Connect through the proxy and report the result (optionally fetching `url`)', tags, params: IdOnly, body: ProxyCheckRequest, response: { 200: ProxyCheckSchema, ...errors } },
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) (req as { body: unknown }).body = {};
      },
    },
    async (req) => proxies.check(principalOf(req), req.params.id, req.body),
  );
}
