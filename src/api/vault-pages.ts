import fs from 'node:fs';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, NotFound } from '../http/errors.js';
import { privatePage as privateHeaders } from '../http/private-page.js';
import type { VaultService } from '../vaults/vault-service.js';
import { errorResponses } from './schemas.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const WEB = path.join(ROOT, 'web');

const VAULT_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; form-action 'none'; base-uri 'none'";
const privatePage = (reply: FastifyReply) => privateHeaders(reply, { csp: VAULT_CSP, frameable: false });

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** A small self-contained page for outcomes (authorization done, link unusable). */
function messagePage(title: string, text: string, css = 'vault-collect/assets/vault-collect.css'): string {
  // Served under /vault-collect and /vault-oauth alike: the stylesheet is found relative to either.
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title><link rel="stylesheet" href="__CSS__"><link rel="icon" href="data:,"></head><body><main><h1 id="title">${escapeHtml(title)}</h1><p id="message">${escapeHtml(text)}</p></main></body></html>`.replace('__CSS__', css);
}

const OAUTH_CSS = '../vault-collect/assets/vault-collect.css';

/** A browser asked (Accept: text/html): errors are a small page; anything else gets the Error body. */
function wantsHtml(req: FastifyRequest): boolean {
  return /text\/html/.test(req.headers.accept ?? '');
}

/** Sends an error as a page to a browser, or rethrows it for the one error handler (the Error body). */
function pageError(req: FastifyRequest, reply: FastifyReply, err: unknown, title: string, css?: string): FastifyReply {
  if (!(err instanceof ApiError) || !wantsHtml(req)) throw err;
  return reply.code(err.status).type('text/html; charset=utf-8').send(messagePage(title, err.message, css));
}
const Jwt = Type.Object({ jwt: Type.Optional(Type.String({ maxLength: 4096 })) });
const open = { auth: false };

/**
 * The pages a person opens from an item's `action.url`, without an API key: the signed,
 * short-lived, single-use token in the URL is the credential.
 *
 * - `GET /vault-collect?jwt=` the form for an item's values (web/vault-collect.*), which reads
 *   `GET /vault-collect/form` (the fields, never a value) and posts `POST /vault-collect/submit`;
 * - `GET /vault-oauth/start?jwt=` redirects to the wallet provider's authorization page, which
 *   returns to `GET /vault-oauth/callback`.
 */
export async function vaultPageRoutes(app: FastifyInstance, vaults: VaultService): Promise<void> {
  const html = fs.readFileSync(path.join(WEB, 'vault-collect.html'), 'utf8');
  const pageTags = ['vault pages'];

  app.get<{ Querystring: { jwt?: string } }>(
    '/vault-collect',
    { config: open, schema: { summary: 'Collection page of a vault item (from action.url; no key, the jwt is the credential)', tags: pageTags, security: [], querystring: Jwt } },
    async (req, reply) => {
      privatePage(reply);
      try {
        await vaults.collectForm(req.query.jwt);
      } catch (err) {
        return pageError(req, reply, err, 'This link cannot be used');
      }
      return reply.type('text/html; charset=utf-8').send(html);
    },
  );

  app.get<{ Querystring: { jwt?: string } }>(
    '/vault-collect/form',
    {
      config: open,
      schema: {
        summary: 'The fields the collection page asks for (never a value)',
        tags: pageTags,
        security: [],
        querystring: Jwt,
        response: {
          200: Type.Object({
            vault: Type.String(),
            item: Type.Object({ key: Type.String(), type: Type.String(), status: Type.String() }),
            fields: Type.Array(
              Type.Object({ name: Type.String(), label: Type.String(), kind: Type.String(), sensitive: Type.Boolean(), required: Type.Boolean(), has_value: Type.Boolean() }),
            ),
            expires_at: Type.String({ format: 'date-time' }),
          }),
          ...errorResponses,
        },
      },
    },
    async (req, reply) => {
      privatePage(reply);
      return vaults.collectForm(req.query.jwt);
    },
  );

  app.post<{ Querystring: { jwt?: string }; Body: { values: Record<string, string> } }>(
    '/vault-collect/submit',
    {
      config: open,
      schema: {
        summary: 'Store the values a person entered (encrypted); the link is then used up',
        tags: pageTags,
        security: [],
        querystring: Jwt,
        body: Type.Object({ values: Type.Record(Type.String(), Type.String({ maxLength: 20_000 }), { maxProperties: 64 }) }, { additionalProperties: false }),
        response: {
          200: Type.Object({ item: Type.Object({ key: Type.String(), type: Type.String() }), state: Type.Object({ status: Type.String(), status_reason: Type.String() }) }),
          ...errorResponses,
        },
      },
    },
    async (req, reply) => {
      privatePage(reply);
      return vaults.collectSubmit(req.query.jwt, req.body.values);
    },
  );

  // Two small files, read once: no static-file plugin needed.
  const assets = new Map(
    (['vault-collect.js', 'vault-collect.css'] as const).map((f) => [f, { body: fs.readFileSync(path.join(WEB, f), 'utf8'), type: f.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8' }]),
  );
  app.get<{ Params: { file: string } }>('/vault-collect/assets/:file', { config: { auth: false, rateLimit: false as const }, schema: { hide: true } }, async (req, reply) => {
    const a = assets.get(req.params.file as 'vault-collect.js');
    if (!a) throw new NotFound(`no asset ${req.params.file}`);
    return reply.header('cache-control', 'no-cache').header('x-content-type-options', 'nosniff').type(a.type).send(a.body);
  });

  app.get<{ Querystring: { jwt?: string } }>(
    '/vault-oauth/start',
    { config: open, schema: { summary: "Authorization link of a wallet (from action.url): redirects to the provider's consent page", tags: pageTags, security: [], querystring: Jwt } },
    async (req, reply) => {
      privatePage(reply);
      try {
        return reply.redirect(await vaults.oauthStart(req.query.jwt), 302);
      } catch (err) {
        return pageError(req, reply, err, 'This link cannot be used', OAUTH_CSS);
      }
    },
  );

  app.get<{ Querystring: { state?: string; code?: string; error?: string } }>(
    '/vault-oauth/callback',
    {
      config: open,
      // The query carries the authorization code: this route's requests are not logged.
      logLevel: 'warn',
      schema: {
        summary: "The wallet provider's redirect back after the owner decided",
        tags: pageTags,
        security: [],
        querystring: Type.Object({
          state: Type.Optional(Type.String({ maxLength: 4096 })),
          code: Type.Optional(Type.String({ maxLength: 4096 })),
          error: Type.Optional(Type.String({ maxLength: 256 })),
          error_description: Type.Optional(Type.String({ maxLength: 2048 })),
        }),
      },
    },
    async (req, reply) => {
      privatePage(reply);
      try {
        const r = await vaults.oauthCallback(req.query);
        const page = r.status === 'active'
          ? messagePage('Wallet connected', `Wallet "${r.key}" is authorized. You can close this page.`, OAUTH_CSS)
          : messagePage('Authorization not completed', `Wallet "${r.key}" was not authorized at the provider. Ask for a new link to try again.`, OAUTH_CSS);
        return reply.code(r.status === 'active' ? 200 : 400).type('text/html; charset=utf-8').send(page);
      } catch (err) {
        return pageError(req, reply, err, 'Authorization not completed', OAUTH_CSS);
      }
    },
  );
}
