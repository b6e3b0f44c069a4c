/**
 * Density: idle headless sessions held at once on one node, what each costs in memory, and
 * what launching one more costs while they are held.
 *
 *   npm run bench:density
 *   BENCH_DENSITY=20 npm run bench:density
 *
 * - N sessions (default 100; BROWSERD_MAX_SESSIONS raised to fit, warm pool off so every
 *   browser is a session's) are created one after the other and left idle on about:blank.
 * - Memory per session: PSS (shared pages divided among the processes sharing them; RSS would
 *   count Chromium's 300 MB binary once per process) summed over every process of each
 *   session's browser (the browser process and its descendants: zygotes, renderers, GPU and
 *   utility processes), once the machine is quiet.
 * - browserd's own memory per session: (server anonymous RSS with N held − with none) / N,
 *   each after a full garbage collection in the server (over its inspector), where "none" is
 *   the larger of before and after; RSS and PSS too (they drop when the kernel evicts the
 *   server's code pages).
 * - Launch latency: the median of BENCH_PROBES creates (each deleted again) with no session
 *   held, and again with N held. Baseline for the N+1th launch: the first.
 * - The machine must have room: with less than N × 200 MiB + 2 GiB available, N is lowered,
 *   and filling stops when less than 1.5 GiB stays available (the result says so).
 */
import Kernel from '@onkernel/sdk';
import { performance } from 'node:perf_hooks';
import { childrenMap, median, memAvailable, MiB, mib, pssBytes, rssAnonBytes, rssBytes, serverBrowsers, sleep, summary, treePss, waitQuiet } from './lib/proc.js';
import { ratio, runBench, target } from './lib/report.js';
import { benchServer, collectGarbage, type TestServer } from './lib/server.js';

const WANTED = Number(process.env.BENCH_DENSITY ?? 100);
const PROBES = Number(process.env.BENCH_PROBES ?? 3);
/** Measured here: about 190 MiB PSS per idle headless session, plus headroom. */
const PER_SESSION_ROOM = 200 * MiB;
/** Filling stops early when the machine's available memory falls below this (other work shares it). */
const FLOOR = 1536 * MiB;

/** The server's RSS, anonymous RSS and PSS after a full garbage collection: the median of 5 samples over 2 s. */
async function serverMemory(server: TestServer): Promise<{ rss: number; anon: number; pss: number }> {
  const pid = server.proc.pid!;
  await collectGarbage(server);
  await sleep(200);
  const rss: number[] = [];
  const anon: number[] = [];
  const pss: number[] = [];
  for (let i = 0; i < 5; i++) {
    if (i) await sleep(500);
    rss.push(rssBytes(pid));
    anon.push(rssAnonBytes(pid));
    pss.push(pssBytes(pid));
  }
  return { rss: median(rss), anon: median(anon), pss: median(pss) };
}

async function main(): Promise<Record<string, unknown>> {
  const room = memAvailable();
  const n = Math.max(1, Math.min(WANTED, Math.floor((room - 2 * 1024 * MiB) / PER_SESSION_ROOM)));
  const server = await benchServer({ BROWSERD_MAX_SESSIONS: String(n + PROBES + 2), BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' }, { inspect: true });
  const sdk = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  const held: string[] = [];
  const browsers = () => serverBrowsers(server.dataDir).map((b) => b.pid);
  const create = async () => {
    const t0 = performance.now();
    const b = await sdk.browsers.create({ headless: true, timeout_seconds: 3600 });
    return { id: b.session_id, ms: performance.now() - t0 };
  };
  const probe = async () => {
    const out: number[] = [];
    for (let i = 0; i < PROBES; i++) {
      await waitQuiet(browsers, { timeoutMs: 10_000, maxTicks: 3 + Math.ceil(held.length / 10) });
      const c = await create();
      out.push(c.ms);
      await sdk.browsers.deleteByID(c.id);
    }
    return out;
  };

  /** Ends the held sessions through the API, a few at a time. */
  const deleteAll = async () => {
    const queue = held.splice(0);
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let id = queue.shift(); id; id = queue.shift()) await sdk.browsers.deleteByID(id).catch(() => undefined);
      }),
    );
  };

  try {
    // Warm-up (not counted), then the server's memory with nothing held and the first launches.
    const w = await create();
    await sdk.browsers.deleteByID(w.id);
    await sleep(1000);
    const server0 = await serverMemory(server);
    const first = await probe();

    const launches: number[] = [];
    const t0 = Date.now();
    let stoppedEarly: string | null = null;
    // Two creates in flight (one per core): the fill is set-up, not a measure, and the run must fit in 10 minutes.
    let next = 0;
    const filler = async () => {
      while (next < n && !stoppedEarly) {
        if (memAvailable() < FLOOR) {
          stoppedEarly = `stopped at ${held.length} sessions: the machine had less than ${mib(FLOOR)} MiB available`;
          break;
        }
        next++;
        const c = await create();
        held.push(c.id);
        launches.push(c.ms);
      }
    };
    await Promise.all([filler(), filler()]);
    const fillS = (Date.now() - t0) / 1000;
    // Idle: every browser settled (idle Chromium still wakes a little, so the bar grows with N).
    const settledMs = await waitQuiet(browsers, { timeoutMs: 30_000, maxTicks: 3 + Math.ceil(held.length / 10) });
    await sleep(2000);

    const children = childrenMap();
    const mine = serverBrowsers(server.dataDir).filter((b) => held.includes(b.sessionId));
    const sessionPss = mine.map((b) => treePss(b.pid, children));
    const totalPss = sessionPss.reduce((s, x) => s + x.bytes, 0);
    const serverN = await serverMemory(server);
    const available = memAvailable();

    const nextProbe = await probe();
    const firstMs = median(first);
    const nextMs = median(nextProbe);
    const heldCount = held.length;
    // The server's memory again once every session is gone: its heap may have grown or
    // shrunk since the first sample for reasons of its own (start-up garbage collected), so
    // the cost per session is the larger of the two differences.
    await deleteAll();
    await sleep(3000);
    const serverAfter = await serverMemory(server);
    const perSession = (k: 'rss' | 'anon' | 'pss') => Math.max(serverN[k] - server0[k], serverN[k] - serverAfter[k]) / heldCount / 1e6;
    // The target is in MB (10^6 bytes), on anonymous memory: with 100 browsers held the
    // kernel evicts some of the server's file-backed pages (its code), which lowers its RSS.
    const serverPerSessionMB = perSession('anon');
    return {
      bench: 'density',
      sessions_wanted: WANTED,
      sessions_held: heldCount,
      ...(n < WANTED ? { lowered: `only ${mib(room)} MiB available at the start: aimed at ${n}` } : {}),
      ...(stoppedEarly ? { stopped_early: stoppedEarly } : {}),
      fill_seconds: Math.round(fillS * 10) / 10,
      settle_ms: settledMs,
      launch_ms_while_filling: { ...summary(launches), first: Math.round(launches[0]!), last: Math.round(launches[launches.length - 1]!) },
      session_pss_mib: { ...summary(sessionPss.map((x) => x.bytes / MiB)), total: mib(totalPss), processes_per_session: median(sessionPss.map((x) => x.processes)) },
      machine_mem_available_mib: { start: mib(room), with_all_held: mib(available) },
      browserd_server: {
        rss_mib: { none_held: mib(server0.rss), all_held: mib(serverN.rss), after_all_deleted: mib(serverAfter.rss) },
        pss_mib: { none_held: mib(server0.pss), all_held: mib(serverN.pss), after_all_deleted: mib(serverAfter.pss) },
        anon_mib: { none_held: mib(server0.anon), all_held: mib(serverN.anon), after_all_deleted: mib(serverAfter.anon) },
        anon_per_session_mb: Math.round(serverPerSessionMB * 1000) / 1000,
        rss_per_session_mb: Math.round(perSession('rss') * 1000) / 1000,
        pss_per_session_mb: Math.round(perSession('pss') * 1000) / 1000,
      },
      launch_ms: { first: Math.round(firstMs), first_probes: first.map(Math.round), with_all_held: Math.round(nextMs), with_all_held_probes: nextProbe.map(Math.round) },
      next_over_first: ratio(nextMs, firstMs),
      targets: [
        target('idle headless sessions held', heldCount, '>=', 100),
        target("browserd's own memory per session (anonymous RSS)", serverPerSessionMB, '<=', 5, ' MB'),
        target('launch with all held / first launch', ratio(nextMs, firstMs), '<=', 1.5),
      ],
    };
  } finally {
    await deleteAll();
  }
}

runBench(main);

