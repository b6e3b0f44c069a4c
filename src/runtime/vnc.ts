import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { isAlive, terminateGroup } from './processes.js';
import { sessionEnv } from './session-env.js';

export interface VncHandle {
  pid: number;
  /** Loopback TCP port of the VNC server; only the gateway is told it. */
  port: number;
}

/**
 * x11vnc on a session's display, for the live view, listening on loopback only
 * (`-localhost -noipv6`). x11vnc picks a free port itself (`-autoport`) and prints
 * `PORT=n`, which we read from its log. (Its `-unixsock` mode would be better, but stock
 * libvncserver drops Unix-socket clients right after the version string.) `-wait` and
 * `-defer` cap the frames it produces at the viewport's refresh rate.
 * `X11VNC_AVOID_WINDOWS=never`: x11vnc otherwise waits 10 to 45 s after its first client
 * (in case a display manager would kill it) before creating the window that owns the
 * clipboard, so text sent from the viewer's clipboard in that time never reached the page.
 */
export async function startVnc(opts: {
  runtimeDir: string;
  sessionId: string;
  sessionDir: string;
  tmpDir: string;
  display: number;
  refreshRate: number;
  wrap: (program: string[]) => string[];
}): Promise<VncHandle> {
  const logPath = path.join(opts.sessionDir, 'x11vnc.log');
  const frameMs = String(Math.max(5, Math.round(1000 / Math.max(1, opts.refreshRate))));
  const argv = opts.wrap([
    'x11vnc',
    '-display', `:${opts.display}`,
    '-autoport', '5900',
    '-localhost',
    '-noipv6',
    '-nopw',
    '-forever',
    '-shared',
    '-norc',
    '-quiet',
    '-xkb',
    '-wait', frameMs,
    '-defer', frameMs,
    '-env', 'X11VNC_AVOID_WINDOWS=never',
  ]);
  const log = fs.openSync(logPath, 'a');
  const child = spawn(argv[0]!, argv.slice(1), {
    detached: true,
    env: sessionEnv({ runtimeDir: opts.runtimeDir, sessionId: opts.sessionId, sessionDir: opts.sessionDir, tmpDir: opts.tmpDir, display: opts.display }),
    stdio: ['ignore', log, log],
  });
  fs.closeSync(log);
  child.on('error', () => undefined);
  child.unref();
  const pid = child.pid;
  if (!pid) throw new Error('could not start x11vnc');
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const m = /^PORT=(\d+)$/m.exec(fs.readFileSync(logPath, 'utf8'));
    if (m) return { pid, port: Number(m[1]) };
    if (!isAlive(pid)) throw new Error('x11vnc exited during start-up');
    await new Promise((r) => setTimeout(r, 25));
  }
  await terminateGroup(pid, 1000);
  throw new Error('x11vnc did not report its port within 10 s');
}
