import fs from 'node:fs';
import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ExtensionService } from '../extensions/extension-service.js';
import { IdOrName, ResourceListQuery } from '../domain/resource-requests.js';
import { NAME_PATTERN } from '../domain/schema-helpers.js';
import { principalOf } from '../http/auth.js';
import { ApiError, invalidInput } from '../http/errors.js';
import { setPageHeaders } from '../http/pagination.js';
import { attachment } from './profiles.js';
import { errorResponses as errors } from './schemas.js';

/** The largest extension archive accepted. */
export const MAX_EXTENSION_UPLOAD_BYTES = 64 * 1024 * 1024;

const tags = ['extensions'];

export const ExtensionSchema = Type.Object({
  id: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  size_bytes: Type.Integer({ description: 'Size of the uploaded archive in bytes' }),
  checksum: Type.String({ description: 'SHA-256 (lowercase hex) of the exact uploaded archive bytes' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

/**
 * Extension routes. Multipart parsing is registered in this scope only, so no other route
 * accepts multipart bodies.
 */
export async function extensionRoutes(app: FastifyInstance, extensions: ExtensionService): Promise<void> {
  await app.register(async (scope) => {
    await scope.register(multipart, { limits: { fileSize: MAX_EXTENSION_UPLOAD_BYTES, files: 1, fields: 4, parts: 6, fieldSize: 1024 } });

    scope.post(
      '/extensions',
      {
        schema: {
          summary: 'Upload an extension: multipart/form-data with `file` (a zip of an unpacked extension, manifest.json at its top or in its one folder) and optional `name` (unique in the project)',
          tags,
          consumes: ['multipart/form-data'],
          response: { 200: ExtensionSchema, ...errors },
        },
      },
      async (req) => {
        if (!req.isMultipart()) throw new ApiError(415, 'unsupported_media_type', 'upload the extension as multipart/form-data with a `file` part');
        let file: Buffer | null = null;
        let name: string | null = null;
        try {
          for await (const part of req.parts()) {
            if (part.type === 'file') {
              if (part.fieldname !== 'file') throw invalidInput([{ field: part.fieldname, message: 'is not a known field (the archive goes in `file`)' }]);
              file = await part.toBuffer();
            } else if (part.fieldname === 'name') {
              name = String(part.value);
            } else {
              throw invalidInput([{ field: part.fieldname, message: 'is not a known field' }]);
            }
          }
        } catch (err) {
          const code = (err as { code?: string }).code;
          if (code === 'FST_REQ_FILE_TOO_LARGE') throw new ApiError(413, 'payload_too_large', `the extension archive is larger than ${MAX_EXTENSION_UPLOAD_BYTES / 1024 / 1024} MiB`);
          if (code?.startsWith('FST_') && (err as { statusCode?: number }).statusCode === 413) throw new ApiError(413, 'payload_too_large', 'too many parts in the upload');
          throw err;
        }
        const problems: { field: string; message: string }[] = [];
        if (!file) problems.push({ field: 'file', message: 'is required (a zip of an unpacked extension)' });
        if (name !== null && !new RegExp(NAME_PATTERN).test(name)) problems.push({ field: 'name', message: 'must be 1 to 255 characters of A-Z a-z 0-9 . _ -' });
        if (problems.length) throw invalidInput(problems);
        return extensions.upload(principalOf(req), file!, name);
      },
    );

    scope.get<{ Querystring: ResourceListQuery }>(
      '/extensions',
      { schema: { summary: 'List extensions, newest first (headers X-Has-More, X-Next-Offset)', tags, querystring: ResourceListQuery, response: { 200: Type.Array(ExtensionSchema), ...errors } } },
      async (req, reply) => {
        const page = await extensions.list(principalOf(req), req.query);
        setPageHeaders(reply, req.query.offset ?? 0, page.items.length, page.hasMore);
        return page.items;
      },
    );

    scope.get<{ Params: { id_or_name: string } }>(
      '/extensions/:id_or_name/metadata',
      { schema: { summary: "An extension's metadata by id or name", tags, params: IdOrName, response: { 200: ExtensionSchema, ...errors } } },
      async (req) => extensions.get(principalOf(req), req.params.id_or_name),
    );

    scope.get<{ Params: { id_or_name: string } }>(
      '/extensions/:id_or_name',
      { schema: { summary: 'Download the extension as uploaded (application/zip)', tags, params: IdOrName, response: { 200: Type.String({ format: 'binary' }), ...errors } } },
      async (req, reply) => {
        const d = await extensions.download(principalOf(req), req.params.id_or_name);
        return reply.type('application/zip').header('content-disposition', attachment(d.filename)).send(fs.createReadStream(d.file));
      },
    );

    scope.delete<{ Params: { id_or_name: string } }>(
      '/extensions/:id_or_name',
      { schema: { summary: 'Delete an extension (running sessions keep their copy)', tags, params: IdOrName, response: { 204: Type.Null(), ...errors } } },
      async (req, reply) => {
        await extensions.delete(principalOf(req), req.params.id_or_name);
        return reply.code(204).send();
      },
    );
  });
}
