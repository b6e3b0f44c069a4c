/**
 * The baseline of launch benchmarks: Chromium started directly, with the flags browserd
 * gives a plain headless session (chromiumArgs) and as the same unprivileged user (setpriv,
 * Chromium's own sandbox on), timed from spawn until its DevTools endpoint answers
 * /json/version (and, as a second figure, until it wrote DevToolsActivePort, the signal browserd
 * itself waits for). What browserd adds on top (API, store, wrapper shell, mount namespace,
 * policies, memory cgroup, egress bridge) is what the comparison shows.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromiumArgs } from '../../src/runtime/chromium-args.js';
import { dropPrivilegesArgv, resolveSandboxUser } from '../../src/runtime/sandbox-user.js';
import { sleep } from './proc.js';

export const CHROMIUM = process.env.BROWSERD_CHROMIUM_PATH ?? '/usr/lib/chromium/chromium';

const user = resolveSandboxUser(process.env.BROWSERD_SESSION_USER ?? 'browserd');

export interface DirectBrowser {
  pid: number;
  port: number;
  wsUrl: string;
  /** Milliseconds from spawn until Chromium wrote DevToolsActivePort (it listens): what browserd waits for before it answers a create. */
  listeningMs: number;
  /** Milliseconds from spawn to the first answer of /json/version (its DevTools endpoint answers, 0.1–0.3 s later). */
  launchMs: number;
  stop(): Promise<void>;
}

/** Launches one Chromium; the caller stops it (kills its process group by PID, removes its directory). */
export async function launchDirect(): Promise<DirectBrowser> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-bench-direct-'));
  const profile = path.join(dir, 'profile');
  const tmp = path.join(dir, 'tmp');
  for (const d of [profile, tmp]) fs.mkdirSync(d);
  if (user) for (const d of [dir, profile, tmp]) fs.chownSync(d, user.uid, user.gid);
  const argv = [...dropPrivilegesArgv(user), CHROMIUM, ...chromiumArgs({ userDataDir: profile, headless: true, kioskMode: false, width: 1920, height: 1080, startUrl: null })];
  const t0 = performance.now();
  const child = spawn(argv[0]!, argv.slice(1), {
    detached: true,
    stdio: 'ignore',
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: dir, TMPDIR: tmp, XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_CACHE_HOME: path.join(dir, 'cache'), LANG: 'C.UTF-8' },
  });
  child.on('error', () => undefined);
  const pid = child.pid!;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let done = false;
  const stop = async () => {
    if (done) return;
    done = true;
    try {
      process.kill(-pid, 'SIGKILL'); // its process group: the browser and its helpers
    } catch {
      /* already gone */
    }
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + 30_000;
    let listeningMs = 0;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`direct Chromium exited with ${child.exitCode} during start-up`);
      if (Date.now() > deadline) throw new Error('direct Chromium did not listen within 30 s');
      let port = 0;
      try {
        port = Number(fs.readFileSync(path.join(profile, 'DevToolsActivePort'), 'utf8').split('\n')[0]);
      } catch {
        /* not yet */
      }
      if (port > 0) {
        listeningMs ||= performance.now() - t0;
        const res = await fetch(`http://127.0.0.1:${port}/json/version`).catch(() => null);
        if (res?.ok) {
          const v = (await res.json()) as { webSocketDebuggerUrl: string };
          return { pid, port, wsUrl: v.webSocketDebuggerUrl, listeningMs, launchMs: performance.now() - t0, stop };
        }
      }
      await sleep(5);
    }
  } catch (err) {
    await stop();
    throw err;
  }
}
