import { dropPrivilegesArgv, type SandboxUser } from './sandbox-user.js';

/**
 * The small shell step between browserd and a session process, run as root: join the
 * session's memory cgroup, give the process its own mount namespace with the session's
 * policy directory bound over /etc/chromium/policies, then drop to the session user and
 * exec the program. Every step execs, so the PID browserd gets is the program's own.
 */
const SCRIPT = [
  'set -e',
  'procs="$1"; policies="$2"; shift 2',
  '[ "$procs" = - ] || echo $$ > "$procs"',
  '[ "$policies" = - ] || mount --bind "$policies" /etc/chromium/policies',
  'exec "$@"',
].join('\n');

export const SYSTEM_POLICY_DIR = '/etc/chromium/policies';

export function wrapLaunch(program: string[], opts: { user: SandboxUser | null; cgroupProcs: string | null; policyDir: string | null }): string[] {
  const dropped = [...dropPrivilegesArgv(opts.user), ...program];
  if (!opts.user) return dropped; // unprivileged browserd: no cgroups, no mount namespaces
  const shell = ['/bin/sh', '-c', SCRIPT, 'browserd-launch', opts.cgroupProcs ?? '-', opts.policyDir ?? '-', ...dropped];
  return opts.policyDir ? ['unshare', '--mount', '--propagation', 'private', '--', ...shell] : shell;
}
