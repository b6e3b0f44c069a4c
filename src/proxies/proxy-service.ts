import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import { newId, nowIso } from '../domain/ids.js';
import { checkProxyCreate, type ProxyCheckRequest, type ProxyCreateRequest, type ProxyProtocol } from '../domain/proxy-request.js';
import type { RecordedProxy, RequestedProxy } from '../domain/proxy-selection.js';
import type { ResourceListQuery } from '../domain/resource-requests.js';
import { ApiError, NotFound, invalidInput } from '../http/errors.js';
import type { KeyEncryptionKey } from '../vaults/kek.js';
import { openSecret, sealSecret, type SealedSecret } from '../vaults/envelope.js';
import type { Upstream } from './egress-bridge.js';
import { checkProxy, type CheckResult } from './proxy-check.js';
import type { ProxyRepo, ProxyRow } from './proxy-repo.js';

export interface ProxyView {
  id: string;
  type: string;
  name?: string;
  protocol: ProxyProtocol;
  config: { host: string; port: number; username?: string; has_password: boolean };
  bypass_hosts?: string[];
  status?: 'available' | 'unavailable';
  last_checked?: string;
  created_at: string;
}

/** The password is never part of a view: only whether there is one. */
export function proxyView(r: ProxyRow): ProxyView {
  const v: ProxyView = {
    id: r.id,
    type: r.type,
    protocol: r.protocol as ProxyProtocol,
    config: { host: r.host, port: r.port, ...(r.username !== null ? { username: r.username } : {}), has_password: r.password_sealed !== null },
    created_at: r.created_at,
  };
  if (r.name !== null) v.name = r.name;
  const bypass = JSON.parse(r.bypass_hosts) as string[];
  if (bypass.length) v.bypass_hosts = bypass;
  if (r.status) v.status = r.status as 'available' | 'unavailable';
  if (r.last_checked) v.last_checked = r.last_checked;
  return v;
}

/** Both layers of a password's encryption are bound to its proxy: a sealed value moved to another row does not open. */
function passwordContext(proxyId: string): string {
  return `browserd/proxy-password/${proxyId}`;
}

/** An upstream URL with credentials; SOCKS5 as socks5h so the proxy, not browserd, resolves names. */
export function upstreamUrl(protocol: ProxyProtocol, host: string, port: number, username: string | null, password: string | null): string {
  const scheme = protocol === 'socks5' ? 'socks5h' : protocol;
  const h = host.includes(':') ? `[${host}]` : host;
  const auth = username !== null ? `${encodeURIComponent(username)}${password !== null ? `:${encodeURIComponent(password)}` : ''}@` : '';
  return `${scheme}://${auth}${h}:${port}`;
}

/**
 * Proxies of a project: the caller's own proxies (`custom`), reached over HTTP, HTTPS or
 * SOCKS5 with optional credentials. Passwords are sealed with AES-256-GCM under a data key
 * wrapped by browserd's key-encryption key (the vaults' KEK) and never returned.
 */
export class ProxyService {
  constructor(private readonly deps: { repo: ProxyRepo; kek: KeyEncryptionKey; log: Logger }) {}

  async create(p: Principal, req: ProxyCreateRequest): Promise<ProxyView> {
    const problems = checkProxyCreate(req);
    if (problems.length) throw invalidInput(problems);
    const cfg = req.config!;
    const id = newId();
    const now = nowIso();
    const sealed = cfg.password !== undefined ? await sealSecret(this.deps.kek, passwordContext(id), Buffer.from(cfg.password, 'utf8')) : null;
    const row: ProxyRow = {
      id,
      project_id: p.projectId,
      name: req.name?.trim() || null,
      type: req.type,
      protocol: req.protocol ?? 'http',
      host: cfg.host.toLowerCase(),
      port: cfg.port,
      username: cfg.username ?? null,
      password_sealed: sealed ? JSON.stringify(sealed) : null,
      bypass_hosts: JSON.stringify(req.bypass_hosts ?? []),
      status: null,
      last_checked: null,
      ip_address: null,
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    await this.deps.repo.insert(row);
    return proxyView(row);
  }

  async get(p: Principal, id: string): Promise<ProxyView> {
    return proxyView(await this.mustFind(p.projectId, id));
  }

  async list(p: Principal, q: ResourceListQuery): Promise<{ items: ProxyView[]; hasMore: boolean }> {
    const page = await this.deps.repo.list({ projectId: p.projectId, offset: q.offset ?? 0, limit: q.limit ?? 20, name: q.name ?? null, query: q.query?.trim() || null });
    return { items: page.items.map(proxyView), hasMore: page.hasMore };
  }

  /** Soft delete: sessions using the proxy keep it; new selections no longer find it. */
  async delete(p: Principal, id: string): Promise<void> {
    const row = await this.mustFind(p.projectId, id);
    await this.deps.repo.softDelete(row.id, nowIso());
  }

  /**
   * Connects through the proxy and reports the result. Without `url` the result becomes the
   * proxy's status (available/unavailable); with a `url` only last_checked moves, since a
   * failure may be the target's rather than the proxy's (as Kernel does).
   */
  async check(p: Principal, id: string, req: ProxyCheckRequest): Promise<ProxyView & { check: CheckResult }> {
    const row = await this.mustFind(p.projectId, id);
    let url: URL | null = null;
    if (req.url !== undefined) {
      try {
        url = new URL(req.url);
      } catch {
        /* below */
      }
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw invalidInput([{ field: 'url', message: 'must be an absolute http or https URL' }]);
    }
    const result = await checkProxy(await this.upstreamOf(row), url, this.deps.log);
    await this.deps.repo.setHealth(row.id, url ? null : result.ok ? 'available' : 'unavailable', nowIso());
    return { ...proxyView((await this.deps.repo.byId(row.id))!), check: result };
  }

  // ---- sessions -----------------------------------------------------------------------

  /**
   * A request's selection, names resolved: an id must be an active proxy of the project
   * (404 `proxy_not_found`, naming `field`); a name must match exactly one active proxy
   * (404 when none, 400 when several).
   */
  async resolveSelection(projectId: string, sel: RequestedProxy, field: string): Promise<RecordedProxy> {
    if ('mode' in sel) return { mode: sel.mode };
    if ('id' in sel) {
      if (!(await this.deps.repo.active(projectId, sel.id))) throw notFound(`${field}: no proxy with id "${sel.id}" in this project`);
      return { id: sel.id };
    }
    const matches = await this.deps.repo.activeByName(projectId, sel.name);
    if (matches.length === 0) throw notFound(`${field}: no proxy named "${sel.name}" in this project`);
    if (matches.length > 1) throw invalidInput([{ field, message: `"${sel.name}" matches ${matches.length} proxies of this project; select one by id` }]);
    return { id: matches[0]!.id };
  }

  /** The bridge upstream of a proxy (deleted ones too: a session keeps what it selected). */
  async upstreamById(id: string): Promise<Upstream> {
    const row = await this.deps.repo.byId(id);
    if (!row) throw new Error(`proxy ${id} does not exist`);
    return this.upstreamOf(row);
  }

  private async upstreamOf(row: ProxyRow): Promise<Upstream> {
    let password: string | null = null;
    if (row.password_sealed) {
      const buf = await openSecret(this.deps.kek, passwordContext(row.id), JSON.parse(row.password_sealed) as SealedSecret);
      password = buf.toString('utf8');
      buf.fill(0);
    }
    return {
      url: upstreamUrl(row.protocol as ProxyProtocol, row.host, row.port, row.username, password),
      bypassHosts: JSON.parse(row.bypass_hosts) as string[],
      label: `proxy ${row.id} (${row.protocol} ${row.host}:${row.port})`,
    };
  }

  private async mustFind(projectId: string, id: string): Promise<ProxyRow> {
    const row = await this.deps.repo.active(projectId, id);
    if (!row) throw new NotFound(`proxy "${id}" not found`, 'proxy_not_found');
    return row;
  }
}

function notFound(message: string): ApiError {
  return new ApiError(404, 'proxy_not_found', message, [{ code: 'proxy_not_found', message }]);
}
