/**
 * The server under test for the benchmarks: the real built server (test/helpers/server.ts)
 * with its own temporary data directory, no rate limit, stopped when the benchmark ends
 * (also on ^C), and a way to wait for its warm pool.
 */
import WebSocket from 'ws';
import { startServer, type TestServer } from '../../test/helpers/server.js';
import { browserListening, serverBrowsers, sleep, waitQuiet } from './proc.js';
import { onCleanup } from './report.js';

export type { TestServer };

/** `inspect`: the server opens Node's inspector on a loopback port, for collectGarbage(). */
export async function benchServer(env: Record<string, string> = {}, opts: { inspect?: boolean } = {}): Promise<TestServer> {
  const server = await startServer({ env: { BROWSERD_RATE_LIMIT: '0', ...(opts.inspect ? { NODE_OPTIONS: '--inspect=127.0.0.1:0' } : {}), ...env } });
  onCleanup(() => server.stop());
  // The helper parses and keeps every log line for tests' assertions; a benchmark sending
  // thousands of requests would pay for that on the same cores. The server still logs as
  // configured; its output is read and dropped.
  server.proc.stdout!.removeAllListeners('data');
  server.proc.stderr!.removeAllListeners('data');
  server.proc.stdout!.resume();
  server.proc.stderr!.resume();
  return server;
}

/** The warm headless browsers the server says it holds (GET /readyz `warm`), or null when it does not say (no warm pool). */
export async function readyWarm(server: TestServer): Promise<number | null> {
  try {
    const body = (await (await fetch(`${server.url}/readyz`)).json()) as { warm?: { headless?: number } };
    return typeof body.warm?.headless === 'number' ? body.warm.headless : null;
  } catch {
    return null;
  }
}

/**
 * Waits until the server's warm pool holds `size` headless browsers (as /readyz reports it;
 * for a server that does not report it: every browser process of the server minus the
 * `inUse` session ids, all listening), and then until its browsers are quiet (a fresh
 * Chromium keeps a core busy for about a second after it listens).
 * False when the pool is not full within `timeoutMs` (on a saturated CPU the pool waits up to
 * 10 s before each refill launch).
 */
export async function waitWarmPool(server: TestServer, size: number, inUse: Set<string> = new Set(), timeoutMs = 40_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const said = await readyWarm(server);
    const pool = serverBrowsers(server.dataDir).filter((b) => !inUse.has(b.sessionId));
    if (said === null ? pool.length >= size && pool.every(browserListening) : said >= size) {
      await waitQuiet(() => serverBrowsers(server.dataDir).map((b) => b.pid), { timeoutMs: 2500 });
      return true;
    }
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

/**
 * A full garbage collection in the server (over its inspector: benchServer(…, {inspect: true})),
 * so its memory is compared with live objects only, not with whatever garbage the heap held.
 */
export async function collectGarbage(server: TestServer): Promise<void> {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(server.output())?.[1];
  if (!url) throw new Error('the server was not started with its inspector');
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('error', rej);
  });
  await new Promise<void>((res) => {
    ws.on('message', (d) => {
      if ((JSON.parse(d.toString()) as { id?: number }).id === 1) res();
    });
    ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }));
  });
  ws.close();
}
