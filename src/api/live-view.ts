import fs from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { SessionTokens } from '../gateway/tokens.js';
import { NotFound, Unauthorized } from '../http/errors.js';
import { privatePage as privateHeaders } from '../http/private-page.js';
import type { SessionService } from '../sessions/session-service.js';
import { errorResponses } from './schemas.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const WEB = path.join(ROOT, 'web');
const NOVNC = path.join(ROOT, 'node_modules/@novnc/novnc');
const LIVE_CSP = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data: blob:; style-src 'self'; script-src 'self'";
const privatePage = (reply: FastifyReply) => privateHeaders(reply, { csp: LIVE_CSP, frameable: true });

/**
 * The live view page of headful sessions (`browser_live_view_url`), its status endpoint and
 * its static files (our page script and noVNC's client core). The websocket itself
 * (`/browser/live/ws`) is the gateway's live channel.
 *
 * `&readonly=1` on the URL redirects to the same page with a readonly token, so a watch-only
 * link cannot be turned back into a controlling one by editing it.
 */
export async function liveViewRoutes(app: FastifyInstance, deps: { sessions: SessionService; tokens: SessionTokens }): Promise<void> {
  const html = fs.readFileSync(path.join(WEB, 'live.html'), 'utf8');
  const config = { auth: false };
  const querystring = Type.Object({ jwt: Type.Optional(Type.String()), readonly: Type.Optional(Type.String()) });

  const check = async (jwt: string | undefined) => {
    const v = await deps.tokens.verify(jwt, 'live');
    if (!v.ok) throw new Unauthorized(v.reason);
    return v.claims;
  };

  app.get<{ Querystring: { jwt?: string; readonly?: string } }>(
    '/browser/live',
    { config, schema: { summary: 'Live view page of a headful session (?jwt=; add &readonly=1 for a watch-only view)', tags: ['live view'], security: [], querystring, response: errorResponses } },
    async (req, reply) => {
      const claims = await check(req.query.jwt);
      const live = deps.sessions.liveSession(claims.sessionId);
      if (!live) throw new NotFound('the session has ended or does not run on this node', 'session_not_found');
      if (live.record.headless) throw new NotFound('headless sessions have no live view', 'no_live_view');
      const wantsReadonly = req.query.readonly !== undefined && req.query.readonly !== '0' && req.query.readonly !== 'false';
      if (wantsReadonly && !claims.readonly) {
        const ro = await deps.tokens.sign({ sessionId: claims.sessionId, channel: 'live', readonly: true });
        return privatePage(reply).redirect(`live?jwt=${encodeURIComponent(ro)}`, 302);
      }
      return privatePage(reply).type('text/html; charset=utf-8').send(html.replace('__READONLY__', claims.readonly ? 'true' : 'false'));
    },
  );

  app.get<{ Querystring: { jwt?: string } }>(
    '/browser/live/status',
    {
      config,
      schema: {
        summary: 'Whether the session behind a live view token is still active',
        tags: ['live view'],
        security: [],
        querystring,
        response: { 200: Type.Object({ state: Type.Union([Type.Literal('active'), Type.Literal('ended')]) }), ...errorResponses },
      },
    },
    async (req, reply) => {
      const claims = await check(req.query.jwt);
      void privatePage(reply);
      return { state: deps.sessions.liveSession(claims.sessionId) ? 'active' : 'ended' };
    },
  );

  // Static files: @fastify/static only sends (path checks, types, caching headers); our own
  // routes decide what is served, need no key and do not count against the rate limit.
  await app.register(fastifyStatic, { root: WEB, serve: false });
  const assets = { auth: false, rateLimit: false as const };
  app.get<{ Params: { file: string } }>('/browser/live/assets/:file', { config: assets, schema: { hide: true } }, async (req, reply) => {
    if (!/^live\.(js|css)$/.test(req.params.file)) throw new NotFound(`no asset ${req.params.file}`);
    return reply.header('cache-control', 'no-cache').sendFile(req.params.file, WEB);
  });
  app.get<{ Params: { '*': string } }>('/browser/live/novnc/*', { config: assets, schema: { hide: true } }, async (req, reply) => {
    const file = req.params['*'];
    if (!/^(core|vendor)\/[\w/.-]+\.js$/.test(file) || file.includes('..')) throw new NotFound(`no file ${file}`);
    return reply.header('cache-control', 'public, max-age=3600').sendFile(file, NOVNC);
  });
}
