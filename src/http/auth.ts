import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Accounts, Principal } from '../accounts/accounts.js';
import { NotFound, Unauthorized } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** false for routes that need no API key (health, discovery with a session token). */
    auth?: boolean;
  }
}

export const PROJECT_HEADER = 'x-kernel-project-id';

export function bearerToken(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1]! : null;
}

/**
 * Every route needs `Authorization: Bearer <key>` unless it opts out. A project-scoped key
 * acts in its project only; an organization-scoped key picks the project with
 * X-Kernel-Project-Id (id or name), else the organization's default project.
 */
export function installAuth(app: FastifyInstance, accounts: Accounts): void {
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.auth === false || !req.routeOptions.url) return;
    const key = bearerToken(req);
    if (!key) throw new Unauthorized('missing Authorization: Bearer <api key> header');
    const found = await accounts.authenticate(key);
    if (!found) throw new Unauthorized('unknown or revoked API key');
    const wanted = req.headers[PROJECT_HEADER];
    const wantedProject = typeof wanted === 'string' && wanted.trim() ? wanted.trim() : null;
    let projectId: string;
    if (found.keyProjectId) {
      if (wantedProject && wantedProject !== found.keyProjectId) {
        const p = await accounts.findProject(found.organization.id, wantedProject);
        if (!p || p.id !== found.keyProjectId) throw new NotFound(`project "${wantedProject}" not found`);
      }
      projectId = found.keyProjectId;
    } else if (wantedProject) {
      const p = await accounts.findProject(found.organization.id, wantedProject);
      if (!p) throw new NotFound(`project "${wantedProject}" not found`);
      projectId = p.id;
    } else {
      projectId = (await accounts.defaultProject(found.organization.id)).id;
    }
    req.principal = { keyId: found.keyId, organization: found.organization, projectId, keyProjectId: found.keyProjectId };
  });
}

export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) throw new Unauthorized();
  return req.principal;
}
