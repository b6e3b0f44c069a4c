import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import * as tar from 'tar';
import { copyTree, safeReaddir } from '../runtime/tree-copy.js';

/**
 * The stored browser state of profiles, under `<data dir>/profiles/<id>/`: each save is a
 * complete copy of Chromium's user-data-dir (minus caches, locks and crash data) in its own
 * directory `v-<time>-<random>`, and the symlink `current` names the one in force. A save
 * writes the new copy beside the old one and then replaces `current` with rename(2), which
 * is atomic: a reader (a session starting, a download) sees the old state or the new one,
 * never half of each, and a crash mid-save leaves the previous state in force.
 */

/** Directory names never kept, wherever they are: caches Chromium rebuilds, crash data. */
const SKIPPED_DIRS = new Set([
  'Cache',
  'Code Cache',
  'GPUCache',
  'ShaderCache',
  'GrShaderCache',
  'GraphiteDawnCache',
  'DawnCache',
  'DawnGraphiteCache',
  'DawnWebGPUCache',
  'CacheStorage',
  'ScriptCache',
  'Crashpad',
  'Crash Reports',
  'BrowserMetrics',
  'component_crx_cache',
  'extensions_crx_cache',
  'blob_storage',
  'Safe Browsing',
]);

/** Files at the top of the user-data-dir that belong to one running browser only. */
const SKIPPED_TOP_FILES = /^(Singleton(Lock|Socket|Cookie)|DevToolsActivePort|BrowserMetrics.*|\.org\.chromium\..*)$/;

/** Old versions are removed once no reader can still be copying them. */
const OLD_VERSION_GRACE_MS = 10 * 60 * 1000;

export class ProfileFiles {
  readonly root: string;

  constructor(dataDir: string) {
    this.root = path.join(dataDir, 'profiles');
  }

  prepare(): void {
    fs.mkdirSync(this.root, { recursive: true, mode: 0o700 });
    fs.chmodSync(this.root, 0o700);
  }

  dir(profileId: string): string {
    return path.join(this.root, profileId);
  }

  create(profileId: string): void {
    fs.mkdirSync(this.dir(profileId), { recursive: true, mode: 0o700 });
  }

  remove(profileId: string): void {
    fs.rmSync(this.dir(profileId), { recursive: true, force: true });
  }

  /** The directory holding the profile's current state, or null while nothing was saved. */
  current(profileId: string): string | null {
    try {
      return fs.realpathSync(path.join(this.dir(profileId), 'current'));
    } catch {
      return null;
    }
  }

  /**
   * Writes a session's user-data-dir back as the profile's new state (Chromium must have
   * exited). The session user owned that directory, so it is read defensively: only regular
   * files and directories are copied, symlinks and anything else are skipped, files are
   * opened without following links, and every directory is checked to lie inside the source.
   */
  save(profileId: string, userDataDir: string): void {
    const dir = this.dir(profileId);
    if (!fs.existsSync(dir)) throw new Error(`profile ${profileId} has no storage directory (deleted?)`);
    const rand = crypto.randomBytes(4).toString('hex');
    const tmp = path.join(dir, `.tmp-${rand}`);
    const version = `v-${Date.now()}-${rand}`;
    try {
      fs.mkdirSync(tmp, { mode: 0o700 });
      const rootReal = fs.realpathSync(userDataDir);
      copyTree(userDataDir, tmp, (rel, isDir) => keep(rel, isDir), rootReal);
      fs.renameSync(tmp, path.join(dir, version));
      const link = path.join(dir, `.current-${rand}`);
      fs.symlinkSync(version, link);
      fs.renameSync(link, path.join(dir, 'current'));
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    this.collect(profileId);
  }

  /** Removes versions that are no longer current (after a grace period for readers) and stray temp dirs. */
  collect(profileId: string, nowMs = Date.now()): void {
    const dir = this.dir(profileId);
    const cur = this.current(profileId);
    for (const name of safeReaddir(dir)) {
      const p = path.join(dir, name);
      if (name === 'current' || p === cur) continue;
      if (!/^(v-|\.tmp-|\.current-)/.test(name)) continue;
      try {
        if (nowMs - fs.lstatSync(p).mtimeMs >= OLD_VERSION_GRACE_MS) fs.rmSync(p, { recursive: true, force: true });
      } catch {
        /* gone */
      }
    }
  }

  /** A tar (gzip-compressed unless `gzip` is false) of the current state, paths relative to the user-data-dir. */
  archive(profileId: string, gzip: boolean): Readable {
    const src = this.current(profileId);
    const entries = src ? safeReaddir(src).sort() : [];
    if (!src || entries.length === 0) {
      // An empty archive: two zero blocks.
      const empty = Buffer.alloc(1024);
      return Readable.from([gzip ? zlib.gzipSync(empty) : empty]);
    }
    return tar.c({ cwd: src, gzip, portable: true, follow: false }, entries) as unknown as Readable;
  }
}

function keep(rel: string, isDir: boolean): boolean {
  const parts = rel.split(path.sep);
  const base = parts[parts.length - 1]!;
  if (isDir && SKIPPED_DIRS.has(base)) return false;
  if (!isDir && parts.length === 1 && SKIPPED_TOP_FILES.test(base)) return false;
  return true;
}
