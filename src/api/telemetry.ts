import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { CATEGORIES } from '../domain/telemetry-request.js';
import { principalOf } from '../http/auth.js';
import { invalidInput } from '../http/errors.js';
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
