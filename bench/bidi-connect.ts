/**
 * WebDriver BiDi connect cost: browserd's in-process chromium-bidi mapper against
 * ChromeDriver attached to the same kind of Chromium with goog:chromeOptions.debuggerAddress.
 *
 *   npm run bench:bidi     (builds first)
 *   BIDI_BENCH_N=20 BIDI_BENCH_MEM_N=100 CHROMEDRIVER=/usr/bin/chromedriver npm run bench:bidi
 *
 * Prints one JSON document. Times are milliseconds, memory MiB. Results: docs/bidi.md.
 *
 * - mapper: for each of N sequential connections, the websocket upgrade (token check + CDP
 *   connection to Chromium) and the time from the open websocket to the reply of
 *   session.new (what a BiDi client waits for before its first real command). Then M
 *   connections are held open at once: the server's RSS delta and Chromium's PSS delta,
 *   divided by M, are what one open BiDi connection costs.
 * - chromedriver: for each of N sequential connections, start chromedriver on a free port,
 *   POST /session with debuggerAddress and webSocketUrl:true, open the BiDi websocket it
 *   returns and time until it answers session.status; sample chromedriver's RSS/PSS and
 *   Chromium's PSS delta (the mapper target) while it is open; then DELETE the session and
 *   kill chromedriver by PID.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { startServer, type TestServer } from '../test/helpers/server.js';
import { mib, MiB, pssBytes, rssBytes, serverBrowsers, sleep, summary, treePss } from './lib/proc.js';
import { onCleanup } from './lib/report.js';

const N = Number(process.env.BIDI_BENCH_N ?? 20);
/** Connections held open at once to measure memory per connection (RSS is too coarse for a few). */
const M = Number(process.env.BIDI_BENCH_MEM_N ?? 100);
const CHROMEDRIVER = process.env.CHROMEDRIVER ?? '/usr/bin/chromedriver';

// ---- measuring ----------------------------------------------------------------------

/** PSS of the session's Chromium: its browser process and every descendant (bench/lib/proc.ts). */
function chromiumPss(server: TestServer, sessionId: string): number {
  const main = serverBrowsers(server.dataDir).find((b) => b.sessionId === sessionId);
  return main ? treePss(main.pid).bytes : 0;
}

// ---- a minimal BiDi client over ws ----------------------------------------------------

interface BidiSocket {
  ws: WebSocket;
  command(method: string, params?: object): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

function openBidi(url: string): Promise<BidiSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    let nextId = 1;
    const waiting = new Map<number, (m: Record<string, unknown>) => void>();
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString()) as Record<string, unknown>;
      if (typeof m.id === 'number') waiting.get(m.id)?.(m);
    });
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('open', () =>
      resolve({
        ws,
        command(method, params = {}) {
          const id = nextId++;
          return new Promise((res, rej) => {
            const timer = setTimeout(() => rej(new Error(`${method}: no answer in 30 s`)), 30_000);
            waiting.set(id, (m) => {
              clearTimeout(timer);
              waiting.delete(id);
              if (m.type === 'error') rej(new Error(`${method}: ${String(m.error)} ${String(m.message)}`));
              else res(m);
            });
            ws.send(JSON.stringify({ id, method, params }));
          });
        },
        close: () =>
          new Promise<void>((res) => {
            if (ws.readyState === WebSocket.CLOSED) return res();
            ws.once('close', () => res());
            ws.close();
          }),
      }),
    );
  });
}

// ---- browserd ------------------------------------------------------------------------

async function createSession(server: TestServer): Promise<{ id: string; webdriver: string }> {
  const res = await fetch(`${server.url}/browsers`, { method: 'POST', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify({ headless: true, timeout_seconds: 3600 }) });
  if (res.status !== 200) throw new Error(`POST /browsers: ${res.status} ${await res.text()}`);
  const b = (await res.json()) as { session_id: string; webdriver_ws_url: string };
  return { id: b.session_id, webdriver: b.webdriver_ws_url };
}

async function deleteSession(server: TestServer, id: string): Promise<void> {
  await fetch(`${server.url}/browsers/${id}`, { method: 'DELETE', headers: server.headers() });
}

function chromiumPort(server: TestServer, sessionId: string): number {
  const file = path.join(server.dataDir, 'runtime', sessionId, 'profile', 'DevToolsActivePort');
  return Number(fs.readFileSync(file, 'utf8').split('\n')[0]);
}

/** Every target Chromium reports to a CDP client (Target.getTargets): what Playwright or Puppeteer would see. */
async function targets(port: number): Promise<{ type: string; title: string }[]> {
  const { webSocketDebuggerUrl } = (await (await fetch(`http://127.0.0.1:${port}/json/version`)).json()) as { webSocketDebuggerUrl: string };
  const ws = new WebSocket(webSocketDebuggerUrl);
  await new Promise((r, j) => {
    ws.once('open', r);
    ws.once('error', j);
  });
  ws.send(JSON.stringify({ id: 1, method: 'Target.getTargets', params: {} }));
  const reply = await new Promise<{ result: { targetInfos: { type: string; title: string }[] } }>((r) => ws.once('message', (d) => r(JSON.parse(d.toString()))));
  ws.close();
  return reply.result.targetInfos;
}

async function benchMapper(server: TestServer) {
  const session = await createSession(server);
  const cport = chromiumPort(server, session.id);
  const serverPid = server.proc.pid!;
  await sleep(1500);
  // The first connection loads chromium-bidi into the server (once per server process).
  const rssBeforeFirst = rssBytes(serverPid);
  const warm = await openBidi(session.webdriver);
  await warm.command('session.new', { capabilities: {} });
  await warm.close();
  await sleep(1500);
  const rssAfterFirst = rssBytes(serverPid);

  // Timings: N sequential connections, each open until the end.
  const upgrade: number[] = [];
  const toSessionNew: number[] = [];
  const total: number[] = [];
  let open: BidiSocket[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    const c = await openBidi(session.webdriver);
    const t1 = performance.now();
    await c.command('session.new', { capabilities: {} });
    const t2 = performance.now();
    upgrade.push(t1 - t0);
    toSessionNew.push(t2 - t1);
    total.push(t2 - t0);
    open.push(c);
  }
  await Promise.all(open.map((c) => c.close()));
  open = [];

  // Memory: M connections open at once (RSS moves in steps of V8 heap pages: a few
  // connections are below its resolution), each with a session and one command answered.
  await sleep(1500);
  const rssBase = rssBytes(serverPid);
  const chromiumBase = chromiumPss(server, session.id);
  const targetsBefore = (await targets(cport)).length;
  for (let i = 0; i < M; i++) {
    const c = await openBidi(session.webdriver);
    await c.command('session.new', { capabilities: {} });
    open.push(c);
  }
  await Promise.all(open.map((c) => c.command('browsingContext.getTree', {})));
  await sleep(1500);
  const rssOpen = rssBytes(serverPid);
  const chromiumOpen = chromiumPss(server, session.id);
  const targetsOpen = (await targets(cport)).length;
  await Promise.all(open.map((c) => c.close()));
  await deleteSession(server, session.id);
  const perConn = (bytes: number) => Math.round((bytes / M / MiB) * 1000) / 1000;
  return {
    connections: N,
    ws_open_to_session_new_reply_ms: summary(toSessionNew),
    upgrade_ms: summary(upgrade),
    total_ms: summary(total),
    server_rss_first_connection_mib: mib(rssAfterFirst - rssBeforeFirst),
    memory_connections_open: M,
    server_rss_mib: { before: mib(rssBase), with_all_open: mib(rssOpen) },
    server_rss_per_open_connection_mib: perConn(rssOpen - rssBase),
    chromium_pss_per_open_connection_mib: perConn(chromiumOpen - chromiumBase),
    extra_targets_seen_by_cdp_clients: targetsOpen - targetsBefore,
    extra_processes_per_connection: 0,
  };
}

// ---- ChromeDriver --------------------------------------------------------------------

/** The chromedriver currently running, ended by PID if the benchmark is interrupted. */
let runningDriver: ChildProcess | null = null;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function waitReady(port: number, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`chromedriver exited with ${proc.exitCode}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/status`);
      const body = (await r.json()) as { value?: { ready?: boolean } };
      if (body.value?.ready) return;
    } catch {
      /* not listening yet */
    }
    await sleep(5);
  }
  throw new Error('chromedriver did not become ready in 20 s');
}

async function stopByPid(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  process.kill(proc.pid!, 'SIGTERM');
  const timer = setTimeout(() => {
    if (proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid!, 'SIGKILL');
  }, 2000);
  await exited;
  clearTimeout(timer);
}

async function benchChromedriver(server: TestServer) {
  const session = await createSession(server);
  const cport = chromiumPort(server, session.id);
  await sleep(1500);
  const key = (t: { type: string; title: string }) => `${t.type}: ${t.title}`;
  const initial = await targets(cport);
  const initialKeys = new Set(initial.map(key));

  const spawnToReady: number[] = [];
  const postSession: number[] = [];
  const wsOpenToStatus: number[] = [];
  const total: number[] = [];
  const driverRss: number[] = [];
  const driverPss: number[] = [];
  const chromiumDelta: number[] = [];
  const extraTargets = new Set<string>();
  let targetsLeft = 0;
  for (let i = 0; i < N; i++) {
    const chromiumBase = chromiumPss(server, session.id);
    const port = await freePort();
    const t0 = performance.now();
    const proc = spawn(CHROMEDRIVER, [`--port=${port}`, '--log-level=OFF'], { stdio: 'ignore' });
    runningDriver = proc;
    try {
      await waitReady(port, proc);
      const t1 = performance.now();
      const res = await fetch(`http://127.0.0.1:${port}/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ capabilities: { alwaysMatch: { browserName: 'chrome', webSocketUrl: true, 'goog:chromeOptions': { debuggerAddress: `127.0.0.1:${cport}` } } } }),
      });
      const body = (await res.json()) as { value: { sessionId: string; capabilities?: { webSocketUrl?: string } } };
      const wsUrl = body.value.capabilities?.webSocketUrl;
      if (!res.ok || !wsUrl) throw new Error(`POST /session: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      const t2 = performance.now();
      const c = await openBidi(wsUrl);
      const t3 = performance.now();
      await c.command('session.status', {});
      const t4 = performance.now();
      spawnToReady.push(t1 - t0);
      postSession.push(t2 - t1);
      wsOpenToStatus.push(t4 - t3);
      total.push(t4 - t0);
      await sleep(500);
      driverRss.push(rssBytes(proc.pid!));
      driverPss.push(pssBytes(proc.pid!));
      chromiumDelta.push(chromiumPss(server, session.id) - chromiumBase);
      for (const t of await targets(cport)) if (!initialKeys.has(key(t))) extraTargets.add(key(t));
      await c.close();
      await fetch(`http://127.0.0.1:${port}/session/${body.value.sessionId}`, { method: 'DELETE' });
    } finally {
      await stopByPid(proc);
    }
    targetsLeft = (await targets(cport)).length - initial.length;
  }
  await deleteSession(server, session.id);
  return {
    connections: N,
    ws_open_to_session_status_reply_ms: summary(wsOpenToStatus),
    spawn_to_ready_ms: summary(spawnToReady),
    post_session_ms: summary(postSession),
    total_ms: summary(total),
    chromedriver_rss_mib: summary(driverRss.map(mib)),
    chromedriver_pss_mib: summary(driverPss.map(mib)),
    chromium_pss_delta_mib: summary(chromiumDelta.map(mib)),
    extra_targets_seen_by_cdp_clients: [...extraTargets],
    targets_left_after_delete_session: targetsLeft,
    extra_processes_per_connection: 1,
  };
}

// ---- main ----------------------------------------------------------------------------

const server = await startServer({ env: { BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' } });
// A benchmark stopped with ^C or a timeout still stops its server (and with it the browsers).
onCleanup(() => server.stop());
onCleanup(() => {
  if (runningDriver?.pid && runningDriver.exitCode === null) process.kill(runningDriver.pid, 'SIGKILL');
});
try {
  const mapper = await benchMapper(server);
  const chromedriver = fs.existsSync(CHROMEDRIVER) ? await benchChromedriver(server) : { skipped: `no chromedriver at ${CHROMEDRIVER}` };
  const version = await new Promise<string>((resolve) => {
    const p = spawn(CHROMEDRIVER, ['--version']);
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('close', () => resolve(out.trim()));
    p.on('error', () => resolve('unknown'));
  });
  console.log(
    JSON.stringify(
      {
        node: process.version,
        cpus: (await import('node:os')).cpus().length,
        chromedriver: version,
        chromium_bidi: (JSON.parse(fs.readFileSync(new URL('../node_modules/chromium-bidi/package.json', import.meta.url), 'utf8')) as { version: string }).version,
        in_process_mapper: mapper,
        chromedriver_debugger_address: chromedriver,
      },
      null,
      2,
    ),
  );
} finally {
  await server.stop();
}
