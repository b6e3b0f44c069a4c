import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../api/schemas.js';
import { ApiError, NotFound, Unauthorized } from '../http/errors.js';
import type { BrowserRuntime } from '../runtime/browser-runtime.js';
import type { SessionService } from '../sessions/session-service.js';
import type { SessionTokens } from './tokens.js';

/**
 * CDP discovery (`/json/version`) for clients that want an HTTP endpoint first
 * (Puppeteer's browserURL, Playwright's connectOverCDP with an http URL). The answer is
 * Chromium's own, with webSocketDebuggerUrl pointing back at our gateway.
 *
 * Clients build the discovery URL by appending `/json/version` to whatever they were
 * given, so `http://host/browser/cdp?jwt=T` becomes `...?jwt=T/json/version/`: a token
 * that ends that way is read the same as `/browser/cdp/json/version?jwt=T`.
 */
export function cdpDiscoveryRoutes(app: FastifyInstance, deps: { sessions: SessionService; tokens: SessionTokens; runtime: BrowserRuntime }): void {
  const handler = async (req: FastifyRequest<{ Querystring: { jwt?: string } }>, reply: FastifyReply, suffixOk: boolean) => {
    let token = req.query.jwt ?? '';
    const suffix = /\/json\/version\/?$/.exec(token);
    if (suffix) token = token.slice(0, suffix.index);
    else if (!suffixOk) throw new NotFound('no route for GET /browser/cdp (connect with a websocket, or GET /browser/cdp/json/version)');
    const check = await deps.tokens.verify(token, 'cdp');
    if (!check.ok) throw new Unauthorized(check.reason);
    const live = deps.sessions.liveSession(check.claims.sessionId);
    if (!live) throw new NotFound('the session has ended or does not run on this node', 'session_not_found');
    const v = await deps.runtime.version(live.handle);
    const { cdp } = await deps.sessions.urls(live.record);
    return reply.send({ ...v, webSocketDebuggerUrl: cdp });
  };
  const config = { auth: false };
  const querystring = Type.Object({ jwt: Type.Optional(Type.String({ description: 'the session token from the connection URL (missing or invalid: 401)' })) });
  const version = Type.Object({ Browser: Type.String(), 'Protocol-Version': Type.String(), 'User-Agent': Type.String(), webSocketDebuggerUrl: Type.String() }, { additionalProperties: true });
  const schema = (summary: string) => ({ summary, tags: ['gateway'], security: [], querystring, response: { 200: version, ...errorResponses } });
  app.get(
    '/browser/cdp',
    { config, schema: schema('CDP websocket of a session (upgrade with ?jwt=); a plain GET answers discovery only when the jwt ends in /json/version') },
    (req, reply) => handler(req as never, reply, false),
  );
  app.get('/browser/cdp/json/version', { config, schema: schema('CDP discovery: the browser version with webSocketDebuggerUrl pointing at the gateway') }, (req, reply) =>
    handler(req as never, reply, true),
  );
  app.get('/browser/cdp/json/version/', { config, schema: { ...schema('CDP discovery (trailing slash form)'), hide: true } }, (req, reply) => handler(req as never, reply, true));
  // The BiDi endpoint is a websocket only (a client connects to webdriver_ws_url); a plain
  // GET is listed here for the OpenAPI document and says how to use it.
  app.get(
    '/browser/bidi',
    { config, schema: { summary: 'WebDriver BiDi websocket of a session (upgrade with ?jwt=); a plain GET answers 426', tags: ['gateway'], security: [], querystring, response: errorResponses } },
    async () => {
      throw new ApiError(426, 'upgrade_required', '/browser/bidi is a WebDriver BiDi websocket: connect to webdriver_ws_url with a websocket client', undefined, { upgrade: 'websocket' });
    },
  );
}
