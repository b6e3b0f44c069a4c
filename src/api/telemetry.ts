import { Type } from '@sinclair/typebox';
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CATEGORIES } from '../domain/telemetry-request.js';
import { principalOf } from '../http/auth.js';
import { Conflict, invalidInput, NotFound } from '../http/errors.js';
import { newId, nowIso } from '../domain/ids.js';
import { Nullable } from '../domain/schema-helpers.js';
import { problemsFromAjv } from '../http/validation.js';
import { isUniqueViolation } from '../store/database.js';
import type { DestinationRecord } from '../telemetry/telemetry-repo.js';
import type { SessionService } from '../sessions/session-service.js';
import type { TelemetryRepo } from '../telemetry/telemetry-repo.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import { errorResponses as errors } from './schemas.js';

const READABLE_CATEGORIES = new Set<string>([...CATEGORIES, 'monitor']);

/** An RFC 3339 timestamp or a duration like `5m`, `90s`, `2h` meaning that long ago; Unix microseconds. */
export function parseInstant(v: string, nowMs = Date.now()): number | null {
  const d = /^(\d+)(ms|s|m|h|d)$/.exec(v.trim());
  if (d) {
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[d[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
    return (nowMs - Number(d[1]) * unit) * 1000;
  }
  if (!/^\d{4}-\d{2}-\d{2}T/.test(v)) return null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t * 1000;
}

const EventsQuery = Type.Object({
  category: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  order: Type.Optional(Type.String()),
  since: Type.Optional(Type.String()),
  until: Type.Optional(Type.String()),
  offset: Type.Optional(Type.Integer({ minimum: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
});
type EventsQuery = {
  category?: string | string[];
  order?: string;
  since?: string;
  until?: string;
  offset?: number;
  limit?: number;
};

/**
 * Reading a session's telemetry (the Kernel SDK's `browsers.telemetry.events`): a bare
 * array of `{seq, event}` with X-Has-More / X-Next-Offset. The offset is a cursor over
 * sequence numbers (asc: events after it; desc: events before it). The category filter
 * is applied in the query, so pages are full (Kernel allows filtered pages to be short).
 */
export function telemetryRoutes(app: FastifyInstance, deps: { sessions: SessionService; repo: TelemetryRepo; telemetry: TelemetryService }): void {
  telemetryDestinationRoutes(app, deps.telemetry);
  telemetryStreamRoute(app, deps);
  app.get<{ Params: { id: string }; Querystring: EventsQuery }>(
    '/browsers/:id/telemetry/events',
    {
      schema: {
        summary: 'Read a page of telemetry events of a browser session (headers X-Has-More, X-Next-Offset)',
        tags: ['telemetry'],
        params: Type.Object({ id: Type.String({ minLength: 1 }) }),
        querystring: EventsQuery,
        response: { 200: Type.Array(Type.Object({ seq: Type.Integer(), event: Type.Record(Type.String(), Type.Unknown()) })), ...errors },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const problems: { field: string; message: string }[] = [];
      const categories = q.category === undefined ? null : new Set(Array.isArray(q.category) ? q.category : [q.category]);
      for (const c of categories ?? []) if (!READABLE_CATEGORIES.has(c)) problems.push({ field: 'category', message: `unknown category "${c}"` });
      const order = q.order ?? 'asc';
      if (order !== 'asc' && order !== 'desc') problems.push({ field: 'order', message: 'must be asc or desc' });
      if (order === 'desc' && q.since !== undefined) problems.push({ field: 'since', message: 'cannot be combined with order=desc' });
      const since = q.since !== undefined ? parseInstant(q.since) : undefined;
      const until = q.until !== undefined ? parseInstant(q.until) : undefined;
      if (since === null) problems.push({ field: 'since', message: 'must be an RFC 3339 timestamp or a duration like 5m' });
      if (until === null) problems.push({ field: 'until', message: 'must be an RFC 3339 timestamp or a duration like 5m' });
      if (problems.length) throw invalidInput(problems);
      const session = await deps.sessions.get(principalOf(req), req.params.id, true);
      const sessionId = session.session_id as string;
      // Events captured a moment ago may still be in the write buffer.
      await deps.telemetry.flush();
      const limit = q.limit ?? 100;
      const page = await deps.repo.events({
        sessionId,
        order: order as 'asc' | 'desc',
        limit,
        ...(categories ? { categories: [...categories] } : {}),
        ...(order === 'asc'
          ? q.offset !== undefined
            ? { after: q.offset }
            : { sinceUs: since ?? parseInstant('5m')! }
          : q.offset !== undefined && q.offset > 0
            ? { before: q.offset }
            : {}),
        ...(until != null ? { untilUs: until } : {}),
      });
      const last = page.items[page.items.length - 1];
      void reply.header('X-Has-More', page.hasMore ? 'true' : 'false');
      void reply.header('X-Next-Offset', String(page.hasMore && last ? last.seq : 0));
      return page.items;
    },
  );
}

const HeadersSchema = Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.String({ maxLength: 8192 }), { maxProperties: 32 });
const DestinationCreate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    endpoint: Type.String({ minLength: 1, maxLength: 2048 }),
    headers: Type.Optional(HeadersSchema),
  },
  { additionalProperties: false },
);
type DestinationCreate = { name?: string; endpoint: string; headers?: Record<string, string> };

/** Every field optional: `name` null clears it, `headers` replaces the whole set. */
const DestinationUpdate = Type.Object(
  {
    name: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 255 }))),
    endpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    headers: Type.Optional(HeadersSchema),
  },
  { additionalProperties: false },
);
type DestinationUpdate = { name?: string | null; endpoint?: string; headers?: Record<string, string> };

/** The endpoint normalized, or null when it is not an absolute http(s) URL. */
function otlpEndpoint(raw: string): string | null {
  try {
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.toString() : null;
  } catch {
    return null;
  }
}
const ENDPOINT_RULE = { field: 'endpoint', message: 'must be an absolute http or https URL' };

const DestinationSchema = Type.Object({
  id: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  endpoint: Type.String(),
  header_names: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});

/** Header values may be credentials: only their names are ever returned. */
function destinationView(d: DestinationRecord): Record<string, unknown> {
  return { id: d.id, name: d.name, endpoint: d.endpoint, header_names: d.headerNames, created_at: d.createdAt, updated_at: d.updatedAt };
}

/** OTLP/HTTP export destinations of a project: create, list, get, update, delete. */
export function telemetryDestinationRoutes(app: FastifyInstance, telemetry: TelemetryService): void {
  const repo = telemetry.destinations;
  const one = { 200: DestinationSchema, ...errors };
  const must = async (projectId: string, idOrName: string) => {
    const d = await repo.find(projectId, idOrName);
    if (!d) throw new NotFound(`telemetry destination "${idOrName}" not found`, 'telemetry_destination_not_found');
    return d;
  };
  app.post<{ Body: DestinationCreate }>(
    '/telemetry/destinations',
    { schema: { summary: 'Create an OTLP/HTTP telemetry destination', tags: ['telemetry'], body: DestinationCreate, response: one } },
    async (req) => {
      const endpoint = otlpEndpoint(req.body.endpoint);
      if (!endpoint) throw invalidInput([ENDPOINT_RULE]);
      const now = nowIso();
      const d: DestinationRecord = { id: newId(), projectId: principalOf(req).projectId, name: req.body.name ?? null, endpoint, headerNames: Object.keys(req.body.headers ?? {}).sort(), createdAt: now, updatedAt: now };
      try {
        await repo.insert(d, req.body.headers ?? {});
      } catch (err) {
        if (isUniqueViolation(err)) throw new Conflict(`a telemetry destination named "${d.name}" already exists in this project`, 'name_conflict');
        throw err;
      }
      return destinationView(d);
    },
  );
  app.get('/telemetry/destinations', { schema: { summary: 'List telemetry destinations', tags: ['telemetry'], response: { 200: Type.Array(DestinationSchema), ...errors } } }, async (req) =>
    (await repo.list(principalOf(req).projectId)).map(destinationView),
  );
  app.get<{ Params: { id_or_name: string } }>(
    '/telemetry/destinations/:id_or_name',
    { schema: { summary: 'Get a telemetry destination', tags: ['telemetry'], params: Type.Object({ id_or_name: Type.String({ minLength: 1 }) }), response: one } },
    async (req) => destinationView(await must(principalOf(req).projectId, req.params.id_or_name)),
  );
  app.patch<{ Params: { id_or_name: string }; Body: DestinationUpdate }>(
    '/telemetry/destinations/:id_or_name',
    {
      schema: {
        summary: "Update a telemetry destination (name, endpoint, headers: given headers replace the whole set); sessions exporting to it switch at once",
        tags: ['telemetry'],
        params: Type.Object({ id_or_name: Type.String({ minLength: 1 }) }),
        body: DestinationUpdate,
        response: one,
      },
      preValidation: async (req: FastifyRequest) => {
        if (req.body === undefined || req.body === null) (req as { body: unknown }).body = {};
      },
      attachValidation: true,
    },
    async (req) => {
      // Schema problems and the endpoint rule in one answer.
      const problems = req.validationError ? problemsFromAjv((req.validationError.validation ?? []) as ErrorObject[], 'body') : [];
      const body = req.body;
      let endpoint: string | undefined;
      if (typeof body.endpoint === 'string' && body.endpoint.length >= 1 && body.endpoint.length <= 2048) {
        endpoint = otlpEndpoint(body.endpoint) ?? undefined;
        if (endpoint === undefined) problems.push(ENDPOINT_RULE);
      }
      if (problems.length) throw invalidInput(problems);
      const d = await must(principalOf(req).projectId, req.params.id_or_name);
      const changes = { ...(body.name !== undefined ? { name: body.name } : {}), ...(endpoint !== undefined ? { endpoint } : {}), ...(body.headers !== undefined ? { headers: body.headers } : {}) };
      // An empty body changes nothing (as PATCH /browsers): the destination as it is.
      if (!Object.keys(changes).length) return destinationView(d);
      let updated: DestinationRecord | null;
      try {
        updated = await repo.update(d.id, changes, nowIso());
      } catch (err) {
        if (isUniqueViolation(err)) throw new Conflict(`a telemetry destination named "${body.name}" already exists in this project`, 'name_conflict');
        throw err;
      }
      if (!updated) throw new NotFound(`telemetry destination "${req.params.id_or_name}" not found`, 'telemetry_destination_not_found');
      await telemetry.destinationChanged(d.id);
      return destinationView(updated);
    },
  );
  app.delete<{ Params: { id_or_name: string } }>(
    '/telemetry/destinations/:id_or_name',
    {
      schema: { summary: 'Delete a telemetry destination (sessions bound to it keep exporting until they end)', tags: ['telemetry'], params: Type.Object({ id_or_name: Type.String({ minLength: 1 }) }), response: { 204: Type.Null(), ...errors } },
    },
    async (req, reply) => {
      await repo.delete((await must(principalOf(req).projectId, req.params.id_or_name)).id);
      return reply.code(204).send();
    },
  );
}

const KEEPALIVE_MS = 15_000;

/**
 * The live stream (the SDK's `browsers.telemetry.stream`): server-sent events, one
 * `{seq, event}` per `data:` frame with `id: <seq>`, no `event:` field, a keepalive comment
 * every 15 s. Fresh connections see new events only; `replay=all` starts from the oldest
 * retained event and `Last-Event-ID` resumes after that seq (it wins over replay). The
 * stream ends when the session ends (at once for an ended session, after any replay).
 */
export function telemetryStreamRoute(app: FastifyInstance, deps: { sessions: SessionService; repo: TelemetryRepo; telemetry: TelemetryService }): void {
  app.get<{ Params: { id: string }; Querystring: { replay?: string } }>(
    '/browsers/:id/telemetry/stream',
    {
      schema: {
        summary: 'Stream telemetry events of a browser session (server-sent events)',
        tags: ['telemetry'],
        params: Type.Object({ id: Type.String({ minLength: 1 }) }),
        querystring: Type.Object({ replay: Type.Optional(Type.String()) }),
      },
    },
    async (req, reply) => {
      const session = await deps.sessions.get(principalOf(req), req.params.id, true);
      const sessionId = session.session_id as string;
      const lastId = Number(req.headers['last-event-id']);
      const from = Number.isInteger(lastId) && lastId >= 0 ? lastId : req.query.replay === 'all' ? 0 : null;
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
      raw.write(': stream open\n\n');
      let sent = 0;
      let replaying = true;
      const held: { seq: number; event: unknown }[] = [];
      const send = (seq: number, event: unknown) => {
        if (seq <= sent) return;
        sent = seq;
        raw.write(`id: ${seq}\ndata: ${JSON.stringify({ seq, event })}\n\n`);
      };
      const off = deps.telemetry.subscribe((sid, seq, event) => {
        if (sid !== sessionId) return;
        if (replaying) held.push({ seq, event });
        else send(seq, event);
      });
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        off();
        offEnd();
        clearInterval(keepalive);
        raw.end();
      };
      const offEnd = deps.telemetry.onSessionEnd(sessionId, () => setImmediate(end));
      const keepalive = setInterval(() => raw.write(': keepalive\n\n'), KEEPALIVE_MS);
      keepalive.unref();
      req.raw.on('close', end);
      try {
        if (from !== null) {
          await deps.telemetry.flush();
          let after = from;
          for (;;) {
            const page = await deps.repo.events({ sessionId, order: 'asc', after, limit: 500 });
            for (const e of page.items) send(e.seq, e.event);
            if (!page.hasMore || !page.items.length) break;
            after = page.items[page.items.length - 1]!.seq;
          }
        }
        // Without a replay only events captured after the stream opened are sent (those held meanwhile).
      } finally {
        replaying = false;
        for (const h of held) send(h.seq, h.event);
        held.length = 0;
      }
      if (!deps.telemetry.following(sessionId)) end();
    },
  );
}
