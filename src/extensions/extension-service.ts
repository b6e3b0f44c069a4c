import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Principal } from '../accounts/accounts.js';
import { newId, nowIso } from '../domain/ids.js';
import type { ResourceListQuery } from '../domain/resource-requests.js';
import { ApiError, NotFound, invalidInput } from '../http/errors.js';
import { ArchiveError, unpackExtension } from './extension-archive.js';
import type { ExtensionRepo, ExtensionRow } from './extension-repo.js';

/** The Kernel SDK's extension shape. */
export interface ExtensionView {
  id: string;
  name: string | null;
  created_at: string;
  size_bytes: number;
  checksum: string;
  last_used_at: string | null;
}

export function extensionView(r: ExtensionRow): ExtensionView {
  return { id: r.id, name: r.name, created_at: r.created_at, size_bytes: r.size_bytes, checksum: r.checksum, last_used_at: r.last_used_at };
}

/**
 * Uploaded extensions: a validated zip of an unpacked extension, kept as uploaded (for the
 * download and its checksum) and unpacked (what sessions load), under
 * `<data dir>/extensions/<id>/{archive.zip,unpacked/}`.
 */
export class ExtensionService {
  readonly root: string;

  constructor(private readonly deps: { repo: ExtensionRepo; dataDir: string; log: Logger }) {
    this.root = path.join(deps.dataDir, 'extensions');
  }

  prepare(): void {
    fs.mkdirSync(this.root, { recursive: true, mode: 0o700 });
    fs.chmodSync(this.root, 0o700);
  }

  private dir(id: string): string {
    return path.join(this.root, id);
  }

  unpackedDir(id: string): string {
    return path.join(this.dir(id), 'unpacked');
  }

  async upload(p: Principal, file: Buffer, name: string | null): Promise<ExtensionView> {
    const id = newId();
    const dir = this.dir(id);
    fs.mkdirSync(dir, { mode: 0o700 });
    try {
      let manifest;
      try {
        manifest = await unpackExtension(file, this.unpackedDir(id));
      } catch (err) {
        if (err instanceof ArchiveError) throw invalidInput([{ field: 'file', message: err.message }]);
        throw err;
      }
      fs.writeFileSync(path.join(dir, 'archive.zip'), file, { mode: 0o600 });
      const row: ExtensionRow = {
        id,
        project_id: p.projectId,
        name,
        size_bytes: file.length,
        checksum: crypto.createHash('sha256').update(file).digest('hex'),
        manifest_name: manifest.name,
        manifest_version: manifest.manifestVersion,
        version: manifest.version,
        created_at: nowIso(),
        last_used_at: null,
      };
      await this.deps.repo.insert(row);
      return extensionView(row);
    } catch (err) {
      fs.rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  async get(p: Principal, idOrName: string): Promise<ExtensionView> {
    return extensionView(await this.mustFind(p.projectId, idOrName));
  }

  async list(p: Principal, q: ResourceListQuery): Promise<{ items: ExtensionView[]; hasMore: boolean }> {
    const page = await this.deps.repo.list({ projectId: p.projectId, offset: q.offset ?? 0, limit: q.limit ?? 20, name: q.name ?? null, query: q.query?.trim() || null });
    return { items: page.items.map(extensionView), hasMore: page.hasMore };
  }

  /** Sessions already running keep their own copy; only new sessions stop finding it. */
  async delete(p: Principal, idOrName: string): Promise<void> {
    const row = await this.mustFind(p.projectId, idOrName);
    await this.deps.repo.delete(row.id);
    fs.rmSync(this.dir(row.id), { recursive: true, force: true });
  }

  async download(p: Principal, idOrName: string): Promise<{ file: string; filename: string }> {
    const row = await this.mustFind(p.projectId, idOrName);
    return { file: path.join(this.dir(row.id), 'archive.zip'), filename: `${row.name ?? row.id}.zip` };
  }

  /**
   * The extensions a create request names, in its order: 404 `extension_not_found` naming
   * each unknown `extensions[i]`, 400 for one named twice.
   */
  async resolveForSession(projectId: string, refs: { id?: string; name?: string }[]): Promise<ExtensionRow[]> {
    const byId = await this.deps.repo.byIds(projectId, refs.flatMap((r) => (r.id !== undefined ? [r.id] : [])));
    const byName = await this.deps.repo.byNames(projectId, refs.flatMap((r) => (r.name !== undefined ? [r.name] : [])));
    const out: ExtensionRow[] = [];
    const missing: string[] = [];
    const repeated: { field: string; message: string }[] = [];
    refs.forEach((r, i) => {
      const e = r.id !== undefined ? byId.find((x) => x.id === r.id) : byName.find((x) => x.name === r.name);
      if (!e) missing.push(`extensions[${i}]: ${r.id !== undefined ? `no extension with id "${r.id}"` : `no extension named "${r.name}"`} in this project`);
      else if (out.some((x) => x.id === e.id)) repeated.push({ field: `extensions[${i}]`, message: `names extension ${e.id} again (extensions[${out.findIndex((x) => x.id === e.id)}])` });
      else out.push(e);
    });
    if (missing.length) {
      throw new ApiError(404, 'extension_not_found', missing.length === 1 ? missing[0]! : `${missing.length} extensions not found`, missing.map((m) => ({ code: 'extension_not_found', message: m })));
    }
    if (repeated.length) throw invalidInput(repeated);
    return out;
  }

  async markUsed(ids: string[]): Promise<void> {
    await this.deps.repo.touchUsed(ids, nowIso());
  }

  private async mustFind(projectId: string, idOrName: string): Promise<ExtensionRow> {
    const row = await this.deps.repo.find(projectId, idOrName);
    if (!row) throw new NotFound(`extension "${idOrName}" not found`, 'extension_not_found');
    return row;
  }
}
