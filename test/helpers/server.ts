import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import Database from 'better-sqlite3';

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BIN = path.join(ROOT, 'bin/browserd.js');

export interface TestServer {
  url: string;
  apiKey: string;
  dataDir: string;
  proc: ChildProcess;
  /** Everything the server printed (stdout and stderr), for assertions on logs. */
  output: () => string;
  /** Graceful stop (SIGTERM): the server ends its sessions. */
  stop(): Promise<void>;
  /** kill -9 of the server process only; its browsers stay behind for the next start to reconcile. */
  kill9(): Promise<void>;
  /** Bearer headers for fetch. */
  headers(extra?: Record<string, string>): Record<string, string>;
}

/** A fresh data directory; mkdtemp makes it 0700, the server makes it traversable for the session user. */
export function tempDataDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-test-'));
}

/**
 * Starts the real server (the built CLI, `browserd serve`) on a free port and waits until
 * it listens. The caller must stop() it; the data directory is removed by stop() unless
 * `keepDataDir` was set (restart tests reuse it).
 */
export async function startServer(opts: { env?: Record<string, string>; dataDir?: string; apiKey?: string; keepDataDir?: boolean } = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? tempDataDir();
  const apiKey = opts.apiKey ?? `test-${crypto.randomBytes(16).toString('hex')}`;
  const proc = spawn(process.execPath, [BIN, 'serve'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      BROWSERD_HOST: '127.0.0.1',
      BROWSERD_PORT: '0',
      BROWSERD_DATA_DIR: dataDir,
      BROWSERD_API_KEY: apiKey,
      BROWSERD_LOG_LEVEL: 'info',
      // No warm browsers unless a test asks for them (test/e2e/warm-start.test.ts): the suite would launch extras everywhere.
      BROWSERD_WARM_HEADLESS: '0',
      BROWSERD_WARM_HEADFUL: '0',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stderr!.on('data', (d) => (out += d));
  const lines = readline.createInterface({ input: proc.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in 30 s:\n${out}`)), 30_000);
    lines.on('line', (l) => {
      out += `${l}\n`;
      try {
        const rec = JSON.parse(l) as { msg?: string; url?: string };
        if (rec.msg === 'browserd listening' && rec.url) {
          clearTimeout(timer);
          resolve(rec.url);
        }
      } catch {
        /* not JSON */
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const cleanup = () => {
    if (!opts.keepDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  return {
    url,
    apiKey,
    dataDir,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await exited;
      }
      cleanup();
    },
    async kill9() {
      proc.kill('SIGKILL');
      await exited;
    },
    headers(extra = {}) {
      return { authorization: `Bearer ${apiKey}`, ...extra };
    },
  };
}

/** Processes (pid, session id) started for sessions of the server using `dataDir`. */
export function sessionProcesses(dataDir: string): { pid: number; sessionId: string; cmd: string }[] {
  const runtimeDir = path.join(dataDir, 'runtime');
  const out: { pid: number; sessionId: string; cmd: string }[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const env = fs.readFileSync(`/proc/${e}/environ`, 'latin1').split('\0');
      if (!env.includes(`BROWSERD_RUNTIME_DIR=${runtimeDir}`)) continue;
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'latin1');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const sid = env.find((kv) => kv.startsWith('BROWSERD_SESSION_ID='))?.slice('BROWSERD_SESSION_ID='.length) ?? '';
      out.push({ pid: Number(e), sessionId: sid, cmd: fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' ').slice(0, 120) });
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes (no timing assertions, only a bound). */
export async function eventually<T>(fn: () => T | Promise<T>, timeoutMs = 20_000, stepMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  do {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, stepMs));
  } while (Date.now() < deadline);
  return last;
}

/** A local HTTP site for browsers to load: `/` answers a page with the given title. */
export async function startSite(html = '<title>browserd test page</title><h1 id="h">hello</h1>'): Promise<{ url: string; close(): Promise<void> }> {
  const http = await import('node:http');
  const srv = http.createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(html);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise<void>((r) => srv.close(() => r())),
  };
}

/** Runs `browserd <args>` (the CLI) on the store in `dataDir`; resolves with its exit code and output. */
export function runCli(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, BROWSERD_DATA_DIR: dataDir, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout!.on('data', (d) => (stdout += d));
    p.stderr!.on('data', (d) => (stderr += d));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs `browserd <args>` on the store in `dataDir` and parses its JSON output; fails when the CLI does. */
export async function cliJson<T = Record<string, unknown>>(dataDir: string, ...args: string[]): Promise<T> {
  const r = await runCli(dataDir, args);
  if (r.code !== 0) throw new Error(`browserd ${args.join(' ')} exited with ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/** The server's JWT signing key, read from its SQLite store, to mint tokens the server accepts. */
export function signingKey(dataDir: string): Uint8Array {
  const db = new Database(path.join(dataDir, 'browserd.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare("SELECT value FROM settings WHERE key = 'jwt_signing_key'").get() as { value: string } | undefined;
    if (!row) throw new Error('no jwt_signing_key in the store');
    return Buffer.from(row.value, 'base64');
  } finally {
    db.close();
  }
}
