import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { IdOrName, ProfileCreateRequest, ProfileDownloadQuery, ProfileSchema, ResourceListQuery } from '../domain/resource-requests.js';
import { principalOf } from '../http/auth.js';
import { setPageHeaders } from '../http/pagination.js';
import type { ProfileService } from '../profiles/profile-service.js';
import { errorResponses as errors } from './schemas.js';

const tags = ['profiles'];
const one = { 200: ProfileSchema, ...errors };

/** Content-Disposition with a plain ASCII file name (names are [A-Za-z0-9._-] or ids). */
export function attachment(filename: string): string {
  return `attachment; filename="${filename.replace(/[^A-Za-z0-9._-]/g, '_')}"`;
}

export function profileRoutes(app: FastifyInstance, profiles: ProfileService): void {
  app.post<{ Body: ProfileCreateRequest }>(
    '/profiles',
    {
      schema: { summary: 'Create a profile (name unique in the project; 409 name_conflict)', tags, body: ProfileCreateRequest, response: one },
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) (req as { body: unknown }).body = {};
      },
    },
    async (req) => profiles.create(principalOf(req), req.body),
  );

  app.get<{ Querystring: ResourceListQuery }>(
    '/profiles',
    { schema: { summary: 'List profiles, newest first (headers X-Has-More, X-Next-Offset)', tags, querystring: ResourceListQuery, response: { 200: Type.Array(ProfileSchema), ...errors } } },
    async (req, reply) => {
      const offset = req.query.offset ?? 0;
      const page = await profiles.list(principalOf(req), req.query);
      setPageHeaders(reply, offset, page.items.length, page.hasMore);
      return page.items;
    },
  );

  app.get<{ Params: { id_or_name: string } }>(
    '/profiles/:id_or_name',
    { schema: { summary: 'Get a profile by id or name', tags, params: IdOrName, response: one } },
    async (req) => profiles.get(principalOf(req), req.params.id_or_name),
  );

  app.delete<{ Params: { id_or_name: string } }>(
    '/profiles/:id_or_name',
    { schema: { summary: 'Delete a profile and its stored state (409 while a session saves into it)', tags, params: IdOrName, response: { 204: Type.Null(), ...errors } } },
    async (req, reply) => {
      await profiles.delete(principalOf(req), req.params.id_or_name);
      return reply.code(204).send();
    },
  );

  app.get<{ Params: { id_or_name: string }; Querystring: ProfileDownloadQuery }>(
    '/profiles/:id_or_name/download',
    {
      schema: {
        summary: "Download the profile's stored browser state: a tar.gz (or tar) of Chromium's user-data-dir without caches",
        tags,
        params: IdOrName,
        querystring: ProfileDownloadQuery,
        response: { 200: Type.String({ format: 'binary' }), ...errors },
      },
    },
    async (req, reply) => {
      const d = await profiles.download(principalOf(req), req.params.id_or_name, req.query.format);
      return reply.type(d.contentType).header('content-disposition', attachment(d.filename)).send(d.stream);
    },
  );
}
