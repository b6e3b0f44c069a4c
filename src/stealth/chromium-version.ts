import { execFileSync } from 'node:child_process';
import { parseChromiumVersion, stealthFingerprint, type StealthFingerprint } from './fingerprint.js';

const cache = new Map<string, string>();

/** The installed Chromium's full version (`chromium --version`), read once per binary. */
export function installedChromiumVersion(chromiumPath: string): string {
  let v = cache.get(chromiumPath);
  if (!v) {
    v = parseChromiumVersion(execFileSync(chromiumPath, ['--version'], { encoding: 'utf8', timeout: 15_000 }));
    cache.set(chromiumPath, v);
  }
  return v;
}

/** The fingerprint stealth sessions of this Chromium present (flags and CDP overrides agree on it). */
export function stealthFingerprintOf(chromiumPath: string): StealthFingerprint {
  return stealthFingerprint(installedChromiumVersion(chromiumPath));
}
