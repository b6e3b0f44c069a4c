import fs from 'node:fs';
import path from 'node:path';
import yauzl from 'yauzl';
import { checkEntryName, checkManifest, extensionRoot, reservedTopLevel, type ManifestSummary } from '../domain/extension-manifest.js';

/** Bounds on what one upload may unpack to (declared sizes are checked, then enforced while inflating). */
export const MAX_ENTRIES = 5000;
export const MAX_UNPACKED_BYTES = 256 * 1024 * 1024;

export class ArchiveError extends Error {}

interface Entry {
  path: string;
  dir: boolean;
  zipEntry: yauzl.Entry;
}

function open(buf: Buffer): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    // Names are decoded here (not by yauzl) so that checkEntryName alone decides, and says why.
    yauzl.fromBuffer(buf, { lazyEntries: true, validateEntrySizes: true, decodeStrings: false }, (err, zip) => {
      if (err || !zip) reject(new ArchiveError(`not a readable zip archive (${err?.message ?? 'unknown error'})`));
      else resolve(zip);
    });
  });
}

function entries(zip: yauzl.ZipFile): Promise<Entry[]> {
  return new Promise((resolve, reject) => {
    const out: Entry[] = [];
    let total = 0;
    zip.on('error', (err: Error) => reject(new ArchiveError(`not a readable zip archive (${err.message})`)));
    zip.on('end', () => resolve(out));
    zip.on('entry', (e: yauzl.Entry) => {
      const raw = e.fileName as unknown as Buffer;
      // Bit 11: the name is UTF-8; otherwise CP437, read as Latin-1 (same for ASCII names).
      e.fileName = raw.toString((e.generalPurposeBitFlag & 0x800) !== 0 ? 'utf8' : 'latin1');
      const name = checkEntryName(e.fileName);
      if ('error' in name) return reject(new ArchiveError(name.error));
      const mode = (e.externalFileAttributes >>> 16) & 0o170000;
      if (mode === 0o120000) return reject(new ArchiveError(`entry "${e.fileName}" is a symbolic link`));
      if (mode !== 0 && mode !== 0o100000 && mode !== 0o040000) return reject(new ArchiveError(`entry "${e.fileName}" is not a regular file or directory`));
      if (out.length >= MAX_ENTRIES) return reject(new ArchiveError(`the archive has more than ${MAX_ENTRIES} entries`));
      total += e.uncompressedSize;
      if (total > MAX_UNPACKED_BYTES) return reject(new ArchiveError(`the archive unpacks to more than ${MAX_UNPACKED_BYTES / 1024 / 1024} MiB`));
      out.push({ path: name.path, dir: name.dir, zipEntry: e });
      zip.readEntry();
    });
    zip.readEntry();
  });
}

function readEntry(zip: yauzl.ZipFile, e: yauzl.Entry): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(e, (err, stream) => {
      if (err || !stream) return reject(new ArchiveError(`entry "${e.fileName}" cannot be read (${err?.message ?? 'unknown error'})`));
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (e2: Error) => reject(new ArchiveError(`entry "${e.fileName}" is damaged (${e2.message})`)));
      stream.on('end', () => resolve(Buffer.concat(chunks)));
    });
  });
}

/**
 * Validates a zip of an unpacked extension and writes its files under `dest` (which must
 * not exist). The extension may sit at the top of the archive or inside one top-level
 * folder. Throws ArchiveError with the reason when the archive or its manifest is refused.
 */
export async function unpackExtension(buf: Buffer, dest: string): Promise<ManifestSummary> {
  const zip = await open(buf);
  let created = false;
  try {
    const all = (await entries(zip)).filter((e) => !e.path.startsWith('__MACOSX/') && e.path !== '__MACOSX');
    const root = extensionRoot(all.filter((e) => !e.dir).map((e) => e.path));
    if (root === null) throw new ArchiveError('no manifest.json at the top of the archive (or inside its one top-level folder)');
    const strip = root ? `${root}/` : '';
    const files = all.filter((e) => e.path.startsWith(strip) && e.path !== root).map((e) => ({ ...e, rel: e.path.slice(strip.length) }));
    const reserved = reservedTopLevel(files.map((f) => f.rel));
    if (reserved) throw new ArchiveError(`"${reserved}": names starting with "_" are reserved by Chrome (only _locales and _metadata are allowed)`);
    const manifestEntry = files.find((f) => f.rel === 'manifest.json' && !f.dir)!;
    const manifest = checkManifest((await readEntry(zip, manifestEntry.zipEntry)).toString('utf8'));
    if ('error' in manifest) throw new ArchiveError(manifest.error);

    fs.mkdirSync(dest, { mode: 0o700 });
    created = true;
    for (const f of files) {
      const target = path.join(dest, f.rel);
      // checkEntryName already refused "..", absolute paths and backslashes; this is the last word.
      if (!target.startsWith(`${dest}${path.sep}`)) throw new ArchiveError(`entry "${f.path}" would land outside the extension directory`);
      if (f.dir) {
        fs.mkdirSync(target, { recursive: true, mode: 0o700 });
        continue;
      }
      fs.mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
      if (fs.existsSync(target)) throw new ArchiveError(`entry "${f.path}" appears twice`);
      fs.writeFileSync(target, await readEntry(zip, f.zipEntry), { mode: 0o600, flag: 'wx' });
    }
    return manifest;
  } catch (err) {
    if (created) fs.rmSync(dest, { recursive: true, force: true });
    throw err;
  } finally {
    zip.close();
  }
}
