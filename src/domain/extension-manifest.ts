/**
 * Rules for an uploaded extension, pure so they are testable without archives: which
 * archive entry names are acceptable, and what manifest.json must hold.
 */

export interface ManifestSummary {
  name: string;
  version: string;
  manifestVersion: 2 | 3;
}

/**
 * Permissions an uploaded extension may not ask for, because they would reach around
 * browserd: `debugger` speaks CDP to the session's pages without passing the relay's
 * guard, `proxy` would move the session's traffic off its managed egress.
 */
export const REFUSED_PERMISSIONS = ['debugger', 'proxy'] as const;

/** Chrome's version format: one to four dot-separated integers 0..65535, no leading zeros. */
export function isExtensionVersion(v: string): boolean {
  const parts = v.split('.');
  if (parts.length < 1 || parts.length > 4) return false;
  return parts.every((p) => /^(0|[1-9]\d{0,4})$/.test(p) && Number(p) <= 65535);
}

/** manifest.json text -> its summary, or the reason it is refused. */
export function checkManifest(text: string): ManifestSummary | { error: string } {
  let m: unknown;
  try {
    m = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (err) {
    return { error: `manifest.json is not valid JSON (${(err as Error).message})` };
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return { error: 'manifest.json must hold a JSON object' };
  const o = m as Record<string, unknown>;
  if (o.manifest_version !== 2 && o.manifest_version !== 3) return { error: 'manifest.json: manifest_version must be 2 or 3' };
  // Measured: Chromium 156 loads a Manifest V2 extension without running any of it, so
  // accepting one would give a session a dead extension without a word.
  if (o.manifest_version === 2) return { error: 'manifest.json: manifest_version 2 extensions no longer run in this Chromium; port the extension to Manifest V3' };
  if (typeof o.name !== 'string' || o.name.trim() === '') return { error: 'manifest.json: name must be a non-empty string' };
  if (typeof o.version !== 'string' || !isExtensionVersion(o.version)) {
    return { error: 'manifest.json: version must be one to four dot-separated integers from 0 to 65535 (for example 1.0.2)' };
  }
  for (const key of ['permissions', 'optional_permissions'] as const) {
    const list = o[key];
    if (list === undefined) continue;
    if (!Array.isArray(list)) return { error: `manifest.json: ${key} must be an array` };
    const refused = list.filter((p) => (REFUSED_PERMISSIONS as readonly unknown[]).includes(p));
    if (refused.length) return { error: `manifest.json: the ${refused.join(', ')} permission is not allowed in browserd sessions (it would reach around the session's CDP guard or managed proxy)` };
  }
  return { name: o.name, version: o.version, manifestVersion: o.manifest_version };
}

/**
 * One archive entry name -> its normalized relative path (directories keep no trailing
 * slash), or the reason it is refused. Refuses anything that could land outside the
 * extension's directory: absolute paths, drive letters, backslashes, `..`, empty or `.`
 * segments, NUL and control characters.
 */
export function checkEntryName(raw: string): { path: string; dir: boolean } | { error: string } {
  if (raw.length === 0) return { error: 'an entry has an empty name' };
  if (raw.length > 1024) return { error: 'an entry name is longer than 1024 characters' };
  if (/[\u0000-\u001f\u007f]/.test(raw)) return { error: `entry "${printable(raw)}" has control characters in its name` };
  if (raw.includes('\\')) return { error: `entry "${raw}" has a backslash in its name` };
  if (raw.startsWith('/')) return { error: `entry "${raw}" has an absolute path` };
  if (/^[A-Za-z]:/.test(raw)) return { error: `entry "${raw}" starts with a drive letter` };
  const dir = raw.endsWith('/');
  const segs = (dir ? raw.slice(0, -1) : raw).split('/');
  for (const s of segs) {
    if (s === '..') return { error: `entry "${raw}" climbs out of the extension directory (..)` };
    if (s === '' || s === '.') return { error: `entry "${raw}" has an empty or "." path segment` };
  }
  return { path: segs.join('/'), dir };
}

function printable(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]/g, '?');
}

/**
 * Where the extension's root lies in the archive: '' when manifest.json is at the top, or
 * the one top-level directory holding it (a zipped folder). Null when there is no manifest.
 */
export function extensionRoot(paths: string[]): string | null {
  const files = paths.filter((p) => !p.startsWith('__MACOSX/'));
  if (files.includes('manifest.json')) return '';
  const tops = new Set(files.map((p) => p.split('/')[0]!));
  if (tops.size === 1) {
    const top = [...tops][0]!;
    if (files.includes(`${top}/manifest.json`)) return top;
  }
  return null;
}

/** Chrome refuses to load an extension with top-level names starting with "_" other than its own. */
export function reservedTopLevel(relPaths: string[]): string | null {
  for (const p of relPaths) {
    const top = p.split('/')[0]!;
    if (top.startsWith('_') && top !== '_locales' && top !== '_metadata') return top;
  }
  return null;
}
