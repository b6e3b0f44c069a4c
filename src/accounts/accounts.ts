import type { Db } from '../store/database.js';
import { isUniqueViolation } from '../store/database.js';
import { newId, nowIso } from '../domain/ids.js';
import { Conflict, NotFound } from '../http/errors.js';
import { generateApiKey, hashApiKey, keyPrefix } from './api-key-secret.js';
import type { Plan } from './plans.js';

export const DEFAULT_ORG_NAME = 'default';
export const DEFAULT_PROJECT_NAME = 'default';

export interface Organization {
  id: string;
  name: string;
  plan: Plan;
  created_at: string;
}

export interface Project {
  id: string;
  organization_id: string;
  name: string;
  is_default: boolean;
  created_at: string;
}

export interface ApiKeyInfo {
  id: string;
  organization_id: string;
  project_id: string | null;
  name: string;
  key_prefix: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

/** Who is calling: the key's organization and the project the request acts in. */
export interface Principal {
  keyId: string;
  organization: Organization;
  /** The project this request acts in. */
  projectId: string;
  /** Set when the key itself is bound to one project. */
  keyProjectId: string | null;
}

/** Organizations, projects and API keys. Keys are stored as hashes only; the plain key is returned once. */
export class Accounts {
  constructor(private readonly db: Db) {}

  async createOrganization(name: string, plan: Plan): Promise<{ organization: Organization; defaultProject: Project }> {
    const org: Organization = { id: newId(), name, plan, created_at: nowIso() };
    const project: Project = { id: newId(), organization_id: org.id, name: DEFAULT_PROJECT_NAME, is_default: true, created_at: org.created_at };
    try {
      await this.db.transaction().execute(async (tx) => {
        await tx.insertInto('organizations').values(org).execute();
        await tx.insertInto('projects').values({ ...project, is_default: 1 }).execute();
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`organization "${name}" already exists`);
      throw err;
    }
    return { organization: org, defaultProject: project };
  }

  /** The default organization and its default project, created on first use. */
  async ensureDefaultOrganization(): Promise<Organization> {
    const existing = await this.findOrganization(DEFAULT_ORG_NAME);
    if (existing) return existing;
    try {
      return (await this.createOrganization(DEFAULT_ORG_NAME, 'free')).organization;
    } catch (err) {
      // Another node created it at the same moment.
      if (err instanceof Conflict) return (await this.findOrganization(DEFAULT_ORG_NAME))!;
      throw err;
    }
  }

  async findOrganization(idOrName: string): Promise<Organization | null> {
    const row = await this.db
      .selectFrom('organizations')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', idOrName), eb('name', '=', idOrName)]))
      .executeTakeFirst();
    return row ? { ...row, plan: row.plan as Plan } : null;
  }

  async listOrganizations(): Promise<Organization[]> {
    const rows = await this.db.selectFrom('organizations').selectAll().orderBy('created_at').execute();
    return rows.map((r) => ({ ...r, plan: r.plan as Plan }));
  }

  async setPlan(orgIdOrName: string, plan: Plan): Promise<Organization> {
    const org = await this.findOrganization(orgIdOrName);
    if (!org) throw new NotFound(`organization "${orgIdOrName}" not found`);
    await this.db.updateTable('organizations').set({ plan }).where('id', '=', org.id).execute();
    return { ...org, plan };
  }

  async createProject(orgIdOrName: string, name: string): Promise<Project> {
    const org = await this.findOrganization(orgIdOrName);
    if (!org) throw new NotFound(`organization "${orgIdOrName}" not found`);
    const project: Project = { id: newId(), organization_id: org.id, name, is_default: false, created_at: nowIso() };
    try {
      await this.db.insertInto('projects').values({ ...project, is_default: 0 }).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`project "${name}" already exists in organization "${org.name}"`);
      throw err;
    }
    return project;
  }

  async listProjects(orgId: string): Promise<Project[]> {
    const rows = await this.db.selectFrom('projects').selectAll().where('organization_id', '=', orgId).orderBy('created_at').execute();
    return rows.map((r) => ({ ...r, is_default: r.is_default === 1 }));
  }

  async findProject(orgId: string, idOrName: string): Promise<Project | null> {
    const row = await this.db
      .selectFrom('projects')
      .selectAll()
      .where('organization_id', '=', orgId)
      .where((eb) => eb.or([eb('id', '=', idOrName), eb('name', '=', idOrName)]))
      .executeTakeFirst();
    return row ? { ...row, is_default: row.is_default === 1 } : null;
  }

  async defaultProject(orgId: string): Promise<Project> {
    const row = await this.db.selectFrom('projects').selectAll().where('organization_id', '=', orgId).where('is_default', '=', 1).executeTakeFirstOrThrow();
    return { ...row, is_default: true };
  }

  /** Creates a key; the plain key is in the result and nowhere else, ever. */
  async createKey(opts: { organizationId: string; projectId?: string | null; name?: string; plainKey?: string }): Promise<{ key: string; info: ApiKeyInfo }> {
    if (opts.projectId) {
      const p = await this.db.selectFrom('projects').select('organization_id').where('id', '=', opts.projectId).executeTakeFirst();
      if (!p || p.organization_id !== opts.organizationId) throw new NotFound(`project "${opts.projectId}" not found in the organization`);
    }
    const key = opts.plainKey ?? generateApiKey();
    const info: ApiKeyInfo = {
      id: newId(),
      organization_id: opts.organizationId,
      project_id: opts.projectId ?? null,
      name: opts.name ?? 'api key',
      key_prefix: keyPrefix(key),
      created_at: nowIso(),
      revoked_at: null,
      last_used_at: null,
    };
    try {
      await this.db.insertInto('api_keys').values({ ...info, key_hash: hashApiKey(key) }).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict('this key already exists');
      throw err;
    }
    return { key, info };
  }

  /** Makes sure a configured key exists (BROWSERD_API_KEY) as an organization-scoped key of the given organization. */
  async ensureKey(plainKey: string, organizationId: string, name: string): Promise<void> {
    const hash = hashApiKey(plainKey);
    const row = await this.db.selectFrom('api_keys').select(['id', 'revoked_at']).where('key_hash', '=', hash).executeTakeFirst();
    if (!row) {
      try {
        await this.createKey({ organizationId, name, plainKey });
      } catch (err) {
        if (!(err instanceof Conflict)) throw err; // created concurrently by another node
      }
    } else if (row.revoked_at) {
      // The operator configured it again: the configuration is the source of truth for this key.
      await this.db.updateTable('api_keys').set({ revoked_at: null }).where('id', '=', row.id).execute();
    }
  }

  /** All keys ever created, revoked ones included. */
  async countKeys(): Promise<number> {
    const r = await this.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(r.n);
  }

  async listKeys(organizationId?: string): Promise<ApiKeyInfo[]> {
    let q = this.db.selectFrom('api_keys').select(['id', 'organization_id', 'project_id', 'name', 'key_prefix', 'created_at', 'revoked_at', 'last_used_at']);
    if (organizationId) q = q.where('organization_id', '=', organizationId);
    return q.orderBy('created_at').execute();
  }

  async revokeKey(id: string): Promise<ApiKeyInfo> {
    const row = await this.db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFound(`API key "${id}" not found`);
    const revoked_at = row.revoked_at ?? nowIso();
    await this.db.updateTable('api_keys').set({ revoked_at }).where('id', '=', id).execute();
    const { key_hash: _omit, ...info } = row;
    return { ...info, revoked_at };
  }

  /** Finds the active key for a presented secret, or null. */
  async authenticate(plainKey: string): Promise<{ keyId: string; organization: Organization; keyProjectId: string | null } | null> {
    const row = await this.db
      .selectFrom('api_keys')
      .innerJoin('organizations', 'organizations.id', 'api_keys.organization_id')
      .select(['api_keys.id as key_id', 'api_keys.project_id', 'api_keys.revoked_at', 'organizations.id as org_id', 'organizations.name as org_name', 'organizations.plan', 'organizations.created_at as org_created_at'])
      .where('api_keys.key_hash', '=', hashApiKey(plainKey))
      .executeTakeFirst();
    if (!row || row.revoked_at) return null;
    return {
      keyId: row.key_id,
      keyProjectId: row.project_id,
      organization: { id: row.org_id, name: row.org_name, plan: row.plan as Plan, created_at: row.org_created_at },
    };
  }
}
