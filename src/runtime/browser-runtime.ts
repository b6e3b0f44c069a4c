import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { proxyPolicy, sessionPolicy } from '../domain/chrome-policy.js';
import { CdpClient } from './cdp-client.js';
import { chownTree, copyTree } from './tree-copy.js';
import { stealthFingerprintOf } from '../stealth/chromium-version.js';
import { chromiumArgs } from './chromium-args.js';
import { ensureX11SocketDir, removeStaleDisplayLocks, startDisplay, type DisplayHandle } from './display.js';
import { SYSTEM_POLICY_DIR, wrapLaunch } from './launch-wrapper.js';
import type { MemoryCgroups } from './memory-cgroup.js';
import { belongsTo, isAlive, listMarkedProcesses, signal, terminateGroup, waitForExit } from './processes.js';
import { startVnc, type VncHandle } from './vnc.js';
import type { SandboxUser } from './sandbox-user.js';
import { sessionEnv } from './session-env.js';

export interface LaunchSpec {
  sessionId: string;
  headless: boolean;
  kioskMode: boolean;
  width: number;
  height: number;
  /** Frames per second the live view may send (headful only). */
  refreshRate: number;
  startUrl: string | null;
  /** Enterprise policies for this session only (validated by the caller). */
  chromePolicy: Record<string, unknown> | null;
  /** Memory limit for all the session's processes together; null: not limited. */
  memoryBytes: number | null;
  /** Stored profile state copied into the user-data-dir before launch (absent or null: start fresh). */
  profileDir?: string | null;
  /** Unpacked extensions, copied into the session directory and loaded with --load-extension. */
  extensions?: { id: string; dir: string }[];
  /** Egress: the proxy Chromium uses (browserd's local bridge) and the hosts that bypass it. */
  proxy?: { server: string; bypassList: string } | null;
  /** Stealth mode: regular Chrome's user agent, languages and WebGL flags (docs/stealth.md). */
  stealth?: boolean;
}

/** How a session ends: `graceful` asks Chromium to close (state flushed to disk) before signals; `beforeRemove` runs once every process has exited, before the session's files are removed. */
export interface StopOptions {
  graceful?: boolean;
  beforeRemove?: (sessionDir: string) => Promise<void>;
}

/** Everything needed to find a session's processes again, also after a server restart (stored as JSON). */
export interface RuntimeHandle {
  dir: string;
  chromium: { pid: number; port: number; wsPath: string };
  display: DisplayHandle | null;
  /** The live view's VNC server (headful sessions). */
  vnc?: VncHandle | null;
}

export interface BrowserVersion {
  Browser: string;
  'Protocol-Version': string;
  'User-Agent': string;
  'V8-Version'?: string;
  'WebKit-Version'?: string;
  webSocketDebuggerUrl: string;
}

/**
 * Launches and ends the real processes of sessions: one Chromium each, plus an Xvfb
 * display for headful ones. Processes are started in their own process group, detached
 * and with output to files in the session directory (never pipes to this process), so
 * they survive a crash of the server and can be re-adopted.
 */
export class BrowserRuntime {
  readonly runtimeDir: string;
  /**
   * Parent of the sessions' TMPDIRs. Kept short and out of the data dir on purpose:
   * Chromium puts a Unix socket in its temp dir, and socket paths are limited to 108
   * bytes, which a long data dir path would exceed. Named after this node's runtime dir
   * so several nodes on one machine never touch each other's.
   */
  readonly tmpRoot: string;

  constructor(
    private readonly opts: { chromiumPath: string; dataDir: string; user: SandboxUser | null; cgroups: MemoryCgroups | null; log: Logger },
  ) {
    this.runtimeDir = path.join(opts.dataDir, 'runtime');
    this.tmpRoot = path.join('/tmp', `browserd-${crypto.createHash('sha256').update(this.runtimeDir).digest('hex').slice(0, 10)}`);
  }

  /** Makes the runtime directory, traversable (not listable) by the sandbox user. */
  prepare(): void {
    fs.mkdirSync(this.runtimeDir, { recursive: true });
    fs.chmodSync(this.opts.dataDir, 0o711);
    fs.chmodSync(this.runtimeDir, 0o711);
    fs.mkdirSync(this.tmpRoot, { recursive: true });
    fs.chmodSync(this.tmpRoot, 0o711);
    ensureX11SocketDir();
    // Each session binds its own policy directory over this one in its mount namespace.
    if (this.opts.user) fs.mkdirSync(SYSTEM_POLICY_DIR, { recursive: true });
    if (this.opts.user) {
      // The session user must be able to walk down to its session directory.
      for (let dir = path.dirname(this.opts.dataDir); dir !== path.dirname(dir); dir = path.dirname(dir)) {
        if ((fs.statSync(dir).mode & 0o001) === 0) {
          throw new Error(`the session user "${this.opts.user.name}" cannot traverse ${dir} (on the path to BROWSERD_DATA_DIR); allow it with chmod o+x ${dir} or choose another data dir`);
        }
      }
    }
  }

  /** True when each session gets its own /etc/chromium/policies (needs root for the mount namespace). */
  get isolatesPolicies(): boolean {
    return this.opts.user !== null;
  }

  sessionDir(sessionId: string): string {
    return path.join(this.runtimeDir, sessionId);
  }

  private tmpDir(sessionId: string): string {
    return path.join(this.tmpRoot, sessionId);
  }

  private removeFiles(sessionId: string): void {
    fs.rmSync(this.sessionDir(sessionId), { recursive: true, force: true });
    fs.rmSync(this.tmpDir(sessionId), { recursive: true, force: true });
  }

  async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
    const dir = this.sessionDir(spec.sessionId);
    const tmpDir = this.tmpDir(spec.sessionId);
    this.removeFiles(spec.sessionId);
    for (const d of [dir, ...['config', 'cache', 'profile', 'downloads'].map((sub) => path.join(dir, sub)), tmpDir]) {
      fs.mkdirSync(d, { recursive: true, mode: 0o700 });
      if (this.opts.user) fs.chownSync(d, this.opts.user.uid, this.opts.user.gid);
    }
    const extensionDirs = this.copySessionFiles(dir, spec);
    let display: DisplayHandle | null = null;
    let vnc: VncHandle | null = null;
    let chromiumPid: number | undefined;
    try {
      const cgroupProcs = this.opts.cgroups && spec.memoryBytes ? this.opts.cgroups.create(spec.sessionId, spec.memoryBytes) : null;
      const policyDir = this.writePolicies(dir, spec.chromePolicy, spec.proxy ?? null);
      const user = this.opts.user;
      if (!spec.headless) {
        display = await startDisplay({
          runtimeDir: this.runtimeDir,
          sessionId: spec.sessionId,
          sessionDir: dir,
          tmpDir,
          width: spec.width,
          height: spec.height,
          wrap: (program) => wrapLaunch(program, { user, cgroupProcs, policyDir: null }),
        });
        vnc = await startVnc({
          runtimeDir: this.runtimeDir,
          sessionId: spec.sessionId,
          sessionDir: dir,
          tmpDir,
          display: display.number,
          refreshRate: spec.refreshRate,
          wrap: (program) => wrapLaunch(program, { user, cgroupProcs, policyDir: null }),
        });
      }
      const argv = wrapLaunch(
        [
          this.opts.chromiumPath,
          ...chromiumArgs({
            userDataDir: path.join(dir, 'profile'),
            headless: spec.headless,
            kioskMode: spec.kioskMode,
            width: spec.width,
            height: spec.height,
            startUrl: spec.startUrl,
            extensionDirs,
            proxy: spec.proxy ?? null,
            stealth: spec.stealth ? this.stealthFlags() : null,
          }),
        ],
        { user, cgroupProcs, policyDir },
      );
      const logPath = path.join(dir, 'chromium.log');
      const log = fs.openSync(logPath, 'a');
      const child = spawn(argv[0]!, argv.slice(1), {
        detached: true,
        env: sessionEnv({ runtimeDir: this.runtimeDir, sessionId: spec.sessionId, sessionDir: dir, tmpDir, display: display?.number }),
        stdio: ['ignore', log, log],
      });
      fs.closeSync(log);
      child.on('error', () => undefined);
      child.unref();
      chromiumPid = child.pid;
      if (!chromiumPid) throw new Error(`could not start ${this.opts.chromiumPath}`);
      const { port, wsPath } = await this.waitForDevTools(path.join(dir, 'profile', 'DevToolsActivePort'), chromiumPid, logPath);
      return { dir, chromium: { pid: chromiumPid, port, wsPath }, display, vnc };
    } catch (err) {
      if (chromiumPid) await terminateGroup(chromiumPid, 1000);
      if (vnc) await terminateGroup(vnc.pid, 1000);
      if (display) await terminateGroup(display.pid, 1000);
      await this.killLeftovers(spec.sessionId);
      await this.opts.cgroups?.remove(spec.sessionId);
      this.removeFiles(spec.sessionId);
      throw err;
    }
  }

  /** What the stealth flags say, from the installed Chromium's version (read once). */
  private stealthFlags(): { userAgent: string; locale: string; acceptLanguages: string[] } {
    const fp = stealthFingerprintOf(this.opts.chromiumPath);
    return { userAgent: fp.userAgent, locale: fp.locale, acceptLanguages: fp.languages };
  }

  /**
   * The session's own /etc/chromium/policies, bound over the system one in its mount
   * namespace (root only). Root-owned and read-only for the session user. Every session
   * gets one (browserd's base rules at least), so no session sees another's policies or the host's.
   */
  private writePolicies(dir: string, policy: Record<string, unknown> | null, proxy: LaunchSpec['proxy']): string | null {
    if (!this.opts.user) return null;
    const managed = path.join(dir, 'policies', 'managed');
    fs.mkdirSync(managed, { recursive: true, mode: 0o755 });
    fs.chmodSync(path.join(dir, 'policies'), 0o755);
    fs.chmodSync(managed, 0o755);
    fs.writeFileSync(path.join(managed, 'browserd.json'), JSON.stringify({ ...sessionPolicy(policy), ...(proxy ? proxyPolicy(proxy) : {}) }), { mode: 0o644 });
    return path.join(dir, 'policies');
  }

  /**
   * Puts what the session starts with into its directory, owned by the session user: the
   * profile's stored state in the user-data-dir, each extension under extensions/<id>.
   * Returns the extension directories to load.
   */
  private copySessionFiles(dir: string, spec: LaunchSpec): string[] {
    const owner = this.opts.user;
    if (spec.profileDir) {
      const userDataDir = path.join(dir, 'profile');
      copyTree(spec.profileDir, userDataDir, () => true);
      if (owner) chownTree(userDataDir, owner.uid, owner.gid);
    }
    const out: string[] = [];
    if (spec.extensions?.length) {
      const root = path.join(dir, 'extensions');
      fs.mkdirSync(root, { mode: 0o700 });
      for (const e of spec.extensions) {
        const target = path.join(root, e.id);
        fs.mkdirSync(target, { mode: 0o700 });
        copyTree(e.dir, target, () => true);
        out.push(target);
      }
      if (owner) chownTree(root, owner.uid, owner.gid);
    }
    return out;
  }

  /** Chromium writes its port and browser target path to DevToolsActivePort once it listens. */
  private async waitForDevTools(file: string, pid: number, logPath: string): Promise<{ port: number; wsPath: string }> {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      try {
        const [portLine, wsPath] = fs.readFileSync(file, 'utf8').split('\n');
        const port = Number(portLine);
        if (port > 0 && wsPath?.startsWith('/devtools/browser/')) return { port, wsPath };
      } catch {
        /* not written yet */
      }
      if (!isAlive(pid)) {
        const tail = safeTail(logPath);
        throw new Error(`Chromium exited during start-up${tail ? `: ${tail}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('Chromium did not open its DevTools port within 30 s');
  }

  /** True when the session's processes are all alive and Chromium answers on its port. */
  async probe(h: RuntimeHandle, sessionId: string): Promise<boolean> {
    if (!belongsTo(h.chromium.pid, this.runtimeDir, sessionId)) return false;
    if (h.display && !belongsTo(h.display.pid, this.runtimeDir, sessionId)) return false;
    if (h.vnc && !belongsTo(h.vnc.pid, this.runtimeDir, sessionId)) return false;
    try {
      const v = await this.version(h);
      return new URL(v.webSocketDebuggerUrl).pathname === h.chromium.wsPath;
    } catch {
      return false;
    }
  }

  /** Sets a running session's memory limit (a warm browser handed out to a request that asks for more). False: limits are not enforced. */
  setMemoryLimit(sessionId: string, bytes: number): boolean {
    if (!this.opts.cgroups) return false;
    this.opts.cgroups.create(sessionId, bytes);
    return true;
  }

  isRunning(h: RuntimeHandle): boolean {
    return isAlive(h.chromium.pid) && (!h.display || isAlive(h.display.pid)) && (!h.vnc || isAlive(h.vnc.pid));
  }

  async version(h: RuntimeHandle): Promise<BrowserVersion> {
    const res = await fetch(`http://127.0.0.1:${h.chromium.port}/json/version`, { signal: AbortSignal.timeout(3000) });
    if (!res.ok) throw new Error(`Chromium answered ${res.status}`);
    return (await res.json()) as BrowserVersion;
  }

  /**
   * Ends a session's processes by PID (Chromium first, then its display), then anything
   * else still carrying the session's mark, then removes its temporary files.
   */
  async stop(sessionId: string, h: RuntimeHandle | null, opts: StopOptions = {}): Promise<void> {
    if (h && opts.graceful && belongsTo(h.chromium.pid, this.runtimeDir, sessionId)) await this.closeGracefully(h);
    if (h) {
      if (belongsTo(h.chromium.pid, this.runtimeDir, sessionId)) await terminateGroup(h.chromium.pid, 3000);
      if (h.vnc && belongsTo(h.vnc.pid, this.runtimeDir, sessionId)) await terminateGroup(h.vnc.pid, 2000);
      if (h.display && belongsTo(h.display.pid, this.runtimeDir, sessionId)) await terminateGroup(h.display.pid, 2000);
    }
    await this.killLeftovers(sessionId);
    this.removeStaleLocks();
    await this.opts.cgroups?.remove(sessionId);
    try {
      if (opts.beforeRemove && fs.existsSync(this.sessionDir(sessionId))) await opts.beforeRemove(this.sessionDir(sessionId));
    } finally {
      this.removeFiles(sessionId);
    }
  }

  /**
   * Asks Chromium to close (Browser.close), which writes cookies, local storage and
   * IndexedDB to disk, and waits for it to exit. Signals alone may cut a write short.
   */
  private async closeGracefully(h: RuntimeHandle): Promise<void> {
    try {
      const cdp = await CdpClient.connect(`ws://127.0.0.1:${h.chromium.port}${h.chromium.wsPath}`, 3000);
      try {
        await cdp.send('Browser.close', {}, undefined, 5000).catch(() => undefined);
      } finally {
        cdp.close();
      }
      await waitForExit([h.chromium.pid], 10_000);
    } catch (err) {
      this.opts.log.warn({ pid: h.chromium.pid, err: String(err) }, 'graceful browser close failed; ending it with signals');
    }
  }

  /** At server stop: removes the temp root and the node's cgroup when no session (re-adoptable after a crash) uses them. */
  close(): void {
    try {
      fs.rmdirSync(this.tmpRoot);
    } catch {
      /* sessions still use it, or already gone */
    }
    this.opts.cgroups?.close();
  }

  private removeStaleLocks(): void {
    removeStaleDisplayLocks(this.opts.user?.uid ?? process.getuid?.() ?? -1);
  }

  private async killLeftovers(sessionId: string): Promise<void> {
    const left = listMarkedProcesses(this.runtimeDir).filter((p) => p.sessionId === sessionId).map((p) => p.pid);
    if (!left.length) return;
    for (const pid of left) signal(pid, 'SIGKILL');
    await waitForExit(left, 3000);
  }

  /**
   * Start-up sweep: ends every marked process and removes every session directory whose
   * session is not in `keep`. Returns what it removed, for the log.
   */
  async sweep(keep: Set<string>): Promise<{ processes: number; dirs: number }> {
    const stray = listMarkedProcesses(this.runtimeDir).filter((p) => !keep.has(p.sessionId));
    for (const p of stray) signal(p.pid, 'SIGKILL');
    await waitForExit(
      stray.map((p) => p.pid),
      3000,
    );
    this.removeStaleLocks();
    await this.opts.cgroups?.sweep(keep);
    let dirs = 0;
    for (const root of [this.runtimeDir, this.tmpRoot]) {
      if (!fs.existsSync(root)) continue;
      for (const name of fs.readdirSync(root)) {
        if (keep.has(name)) continue;
        fs.rmSync(path.join(root, name), { recursive: true, force: true });
        if (root === this.runtimeDir) dirs++;
      }
    }
    return { processes: stray.length, dirs };
  }
}

function safeTail(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').trim().split('\n').slice(-3).join(' | ').slice(0, 500);
  } catch {
    return '';
  }
}
