import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { sessionEnv } from './session-env.js';
import { isAlive, terminateGroup } from './processes.js';

export interface DisplayHandle {
  pid: number;
  number: number;
}

/**
 * One Xvfb per headful session. `-displayfd` lets Xvfb pick a free display number
 * itself (no race between two launches); `-extension GLX` cuts its memory from about
 * 72 MB to about 15 MB here, and headful Chromium with the GPU off does not need GLX.
 */
export async function startDisplay(opts: {
  runtimeDir: string;
  sessionId: string;
  sessionDir: string;
  tmpDir: string;
  width: number;
  height: number;
  /** Turns the Xvfb command into the command to spawn (privilege drop, cgroup). */
  wrap: (program: string[]) => string[];
}): Promise<DisplayHandle> {
  const log = fs.openSync(path.join(opts.sessionDir, 'xvfb.log'), 'a');
  const argv = opts.wrap([
    'Xvfb',
    '-displayfd',
    '3',
    '-screen',
    '0',
    `${opts.width}x${opts.height}x24`,
    '-nolisten',
    'tcp',
    '-extension',
    'GLX',
    '-nocursor',
  ]);
  const child = spawn(argv[0]!, argv.slice(1), {
    detached: true,
    env: sessionEnv({ runtimeDir: opts.runtimeDir, sessionId: opts.sessionId, sessionDir: opts.sessionDir, tmpDir: opts.tmpDir }),
    stdio: ['ignore', log, log, 'pipe'],
  });
  fs.closeSync(log);
  const fd3 = child.stdio[3] as NodeJS.ReadableStream;
  try {
    const number = await new Promise<number>((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error('Xvfb did not report a display within 10 s')), 10_000);
      fd3.on('data', (d: Buffer) => {
        buf += d.toString();
        const m = /^(\d+)\n/.exec(buf);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`Xvfb exited with code ${code} before reporting a display`));
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    (fd3 as unknown as { destroy(): void }).destroy();
    child.unref();
    return { pid: child.pid!, number };
  } catch (err) {
    if (child.pid) await terminateGroup(child.pid, 1000);
    throw err;
  }
}

export function displayAlive(d: DisplayHandle): boolean {
  return isAlive(d.pid);
}

/**
 * X's socket directory must exist, owned by root and world-writable with the sticky bit,
 * before an unprivileged Xvfb starts (containers often lack it).
 */
export function ensureX11SocketDir(): void {
  if (process.getuid?.() !== 0) return;
  fs.mkdirSync('/tmp/.X11-unix', { recursive: true });
  fs.chownSync('/tmp/.X11-unix', 0, 0);
  fs.chmodSync('/tmp/.X11-unix', 0o1777);
}

/**
 * Xvfb removes its lock file and socket on SIGTERM but not when it is SIGKILLed. Removes
 * the lock file and socket of every display whose lock names a process that is gone and
 * that belonged to `uid` (our sessions' account), so display numbers do not leak.
 */
export function removeStaleDisplayLocks(uid: number): number {
  let removed = 0;
  for (const name of fs.readdirSync('/tmp')) {
    const m = /^\.X(\d+)-lock$/.exec(name);
    if (!m) continue;
    const lock = path.join('/tmp', name);
    try {
      if (fs.statSync(lock).uid !== uid) continue;
      const pid = Number(fs.readFileSync(lock, 'utf8').trim());
      if (pid > 0 && isAlive(pid)) continue;
      fs.rmSync(lock, { force: true });
      fs.rmSync(`/tmp/.X11-unix/X${m[1]}`, { force: true });
      removed++;
    } catch {
      /* raced with Xvfb itself */
    }
  }
  return removed;
}
