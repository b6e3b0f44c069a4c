import fs from 'node:fs';

/**
 * Every process a session starts carries two environment variables: the node's runtime
 * directory and the session id. /proc/<pid>/environ then tells which processes belong to
 * which session, even for processes whose PID the store never heard of (a crash between
 * spawn and the store write) or children that Chromium forked. This is how nothing is
 * left behind that the store does not know about.
 */
export const MARK_RUNTIME = 'BROWSERD_RUNTIME_DIR';
export const MARK_SESSION = 'BROWSERD_SESSION_ID';

export interface MarkedProcess {
  pid: number;
  sessionId: string;
}

function readEnviron(pid: number): Map<string, string> | null {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
    const out = new Map<string, string>();
    for (const kv of raw.split('\0')) {
      const i = kv.indexOf('=');
      if (i > 0) out.set(kv.slice(0, i), kv.slice(i + 1));
    }
    return out;
  } catch {
    return null;
  }
}

/** True while the process exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Processes started for sessions of the node whose runtime directory is `runtimeDir`. */
export function listMarkedProcesses(runtimeDir: string): MarkedProcess[] {
  const out: MarkedProcess[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const env = readEnviron(pid);
    if (!env || env.get(MARK_RUNTIME) !== runtimeDir) continue;
    const sessionId = env.get(MARK_SESSION);
    if (sessionId && isAlive(pid)) out.push({ pid, sessionId });
  }
  return out;
}

/** True when `pid` is alive and was started for `sessionId` (guards against PID reuse). */
export function belongsTo(pid: number, runtimeDir: string, sessionId: string): boolean {
  const env = readEnviron(pid);
  return !!env && env.get(MARK_RUNTIME) === runtimeDir && env.get(MARK_SESSION) === sessionId && isAlive(pid);
}

export function signal(pid: number, sig: NodeJS.Signals, group = false): void {
  try {
    process.kill(group ? -pid : pid, sig);
  } catch {
    /* already gone */
  }
}

export async function waitForExit(pids: number[], timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (pids.every((p) => !isAlive(p))) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return pids.every((p) => !isAlive(p));
}

/** SIGTERM the process group, then SIGKILL what is left after the grace period. */
export async function terminateGroup(pid: number, graceMs: number): Promise<void> {
  if (!isAlive(pid)) return;
  signal(pid, 'SIGTERM', true);
  signal(pid, 'SIGTERM');
  if (await waitForExit([pid], graceMs)) return;
  signal(pid, 'SIGKILL', true);
  signal(pid, 'SIGKILL');
  await waitForExit([pid], 2000);
}
