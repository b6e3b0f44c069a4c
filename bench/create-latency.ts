/**
 * Create latency through the API, with the Kernel SDK (`browsers.create({headless: true})`,
 * request to answer), cold and warm, against launching Chromium directly, in one run.
 *
 *   npm run bench:create                  # prints one JSON object
 *   BENCH_SESSIONS=20 npm run bench:create
 *
 * - direct: Chromium spawned with browserd's own flags as the session user, timed until it
 *   wrote DevToolsActivePort (what browserd waits for before answering: the target's baseline)
 *   and until /json/version answers (bench/lib/direct-launch.ts), then killed.
 * - cold: a server with no warm pool (BROWSERD_WARM_HEADLESS=0). Direct and cold launches
 *   alternate, so both see the same background load; each session is deleted before the next.
 * - warm: a server with a warm pool of BENCH_WARM_POOL headless browsers. Before each create
 *   the bench waits until the pool is full again and its browsers are quiet, so every create
 *   is a warm one; only the request is timed.
 */
import Kernel from '@onkernel/sdk';
import { performance } from 'node:perf_hooks';
import { launchDirect } from './lib/direct-launch.js';
import { serverBrowsers, sleep, summary } from './lib/proc.js';
import { ratio, runBench, target } from './lib/report.js';
import { benchServer, readyWarm, waitWarmPool } from './lib/server.js';

const N = Number(process.env.BENCH_SESSIONS ?? 100);
const WARM_POOL = Number(process.env.BENCH_WARM_POOL ?? 2);

async function main(): Promise<Record<string, unknown>> {
  // ---- cold, against direct ----
  const cold = await benchServer({ BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' });
  const coldSdk = new Kernel({ apiKey: cold.apiKey, baseURL: cold.url, maxRetries: 0 });
  // Warm-up, not counted: Chromium's binary and libraries into the page cache, the server's code paths.
  for (let i = 0; i < 2; i++) {
    await (await launchDirect()).stop();
    const b = await coldSdk.browsers.create({ headless: true });
    await coldSdk.browsers.deleteByID(b.session_id);
  }
  const direct: number[] = [];
  const directListening: number[] = [];
  const coldMs: number[] = [];
  for (let i = 0; i < N; i++) {
    // The direct baseline every other round (half as many samples, interleaved with the cold creates): the run must fit in 10 minutes.
    if (i % 2 === 0) {
      const d = await launchDirect();
      direct.push(d.launchMs);
      directListening.push(d.listeningMs);
      await d.stop();
    }
    const t0 = performance.now();
    const b = await coldSdk.browsers.create({ headless: true });
    coldMs.push(performance.now() - t0);
    await coldSdk.browsers.deleteByID(b.session_id);
  }
  await cold.stop();

  // ---- warm ----
  // The pool refills with a short gap here, so the pacing below waits less (the default gap
  // spaces launches out on a busy node; it does not change what a warm create costs).
  const warm = await benchServer({ BROWSERD_WARM_HEADLESS: String(WARM_POOL), BROWSERD_WARM_HEADFUL: '0', BROWSERD_WARM_REFILL_GAP_MS: '250' });
  const warmSdk = new Kernel({ apiKey: warm.apiKey, baseURL: warm.url, maxRetries: 0 });
  const poolPresent = (await readyWarm(warm)) !== null;
  if (poolPresent) await waitWarmPool(warm, WARM_POOL, new Set(), 90_000);
  const warmMs: number[] = [];
  const deletes: Promise<unknown>[] = [];
  let poolNotRefilled = 0;
  let servedWarm = 0;
  for (let i = 0; i < N; i++) {
    if (poolPresent) {
      if (!(await waitWarmPool(warm, WARM_POOL))) poolNotRefilled++;
    } else await sleep(300);
    // Warm browsers run under the id their session will get: a create served warm answers one of these.
    const warmIds = new Set(serverBrowsers(warm.dataDir).map((x) => x.sessionId));
    const t0 = performance.now();
    const b = await warmSdk.browsers.create({ headless: true });
    warmMs.push(performance.now() - t0);
    if (warmIds.has(b.session_id)) servedWarm++;
    // Deleted while the pool refills (the next create waits for a full, quiet pool anyway).
    deletes.push(warmSdk.browsers.deleteByID(b.session_id));
  }
  await Promise.all(deletes);
  await warm.stop();

  const d = summary(directListening);
  const dv = summary(direct);
  const c = summary(coldMs);
  const w = summary(warmMs);
  return {
    bench: 'create-latency',
    sessions: N,
    unit: 'ms',
    direct_launch_to_listening: d,
    direct_launch_to_json_version: dv,
    cold_create: c,
    warm_create: w,
    warm_pool: poolPresent ? { size: WARM_POOL, creates_served_warm: servedWarm, creates_without_a_full_pool: poolNotRefilled } : { size: WARM_POOL, present: false, note: 'the server reports no warm pool (/readyz without warm): warm creates were cold' },
    // The like-for-like baseline: browserd answers a create once Chromium wrote DevToolsActivePort.
    cold_over_direct_listening: { p50: ratio(c.p50, d.p50), p99: ratio(c.p99, d.p99), mean: ratio(c.mean, d.mean) },
    cold_over_direct_json_version: { p50: ratio(c.p50, dv.p50), p99: ratio(c.p99, dv.p99), mean: ratio(c.mean, dv.mean) },
    targets: [
      target('warm POST /browsers p50', w.p50, '<=', 5, ' ms'),
      target('warm POST /browsers p99', w.p99, '<=', 20, ' ms'),
      target('cold create p50 / direct launch p50 (to listening)', ratio(c.p50, d.p50), '<=', 1.2),
      target('cold create p99 / direct launch p99 (to listening)', ratio(c.p99, d.p99), '<=', 1.2),
    ],
    baseline_reference: 'Kernel publishes 30 ms (p50) and 105 ms (p99) for a warm create',
  };
}

runBench(main);
