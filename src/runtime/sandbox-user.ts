import { execFileSync } from 'node:child_process';

export interface SandboxUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * The unprivileged account that runs each session's processes. Chromium must never run
 * as root nor with --no-sandbox: as root we drop to this account (setpriv) and keep
 * Chromium's own sandbox on. When browserd itself runs unprivileged, its own account is used.
 */
export function resolveSandboxUser(name: string): SandboxUser | null {
  if (process.getuid?.() !== 0) return null;
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
    if (!Number.isInteger(uid) || uid === 0) throw new Error('uid 0');
    return { name, uid, gid };
  } catch {
    throw new Error(
      `browserd runs as root but the unprivileged session user "${name}" does not exist or is root; ` +
        `create it with: useradd --system --no-create-home --shell /usr/sbin/nologin ${name} (scripts/setup.sh does this)`,
    );
  }
}

/** argv prefix that runs a command as the sandbox user, or nothing when already unprivileged. */
export function dropPrivilegesArgv(user: SandboxUser | null): string[] {
  if (!user) return [];
  return ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--'];
}
