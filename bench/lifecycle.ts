/**
 * Agent lifecycle: create (Kernel SDK) → Playwright `connectOverCDP(cdp_ws_url)` → load a
 * page served locally → close and delete, with a warm start, against Playwright launching
 * Chromium itself (`chromium.launch` → `newPage` → `goto` → `close`), alternated in one run.
 *
 *   npm run bench:lifecycle
 *   BENCH_LIFECYCLES=10 npm run bench:lifecycle
 *
 * Playwright's own launch runs as root here with its default --no-sandbox (browserd's
 * browsers keep Chromium's sandbox on, as the session user), plus the closed-network flags
 * browserd also gives Chromium. Before each browserd round the bench waits for the warm pool
 * to be full and quiet again, as an agent arriving at a node that is not launching would find it.
 */
import Kernel from '@onkernel/sdk';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { startSite } from '../test/helpers/server.js';
import { CHROMIUM } from './lib/direct-launch.js';
import { serverBrowsers, sleep, summary } from './lib/proc.js';
import { onCleanup, ratio, runBench, target } from './lib/report.js';
import { benchServer, readyWarm, waitWarmPool } from './lib/server.js';

const N = Number(process.env.BENCH_LIFECYCLES ?? 12);
const WARM_POOL = Number(process.env.BENCH_WARM_POOL ?? 2);
/** The flags browserd needs on this machine's closed network (src/runtime/chromium-args.ts). */
const CLOSED_NETWORK = ['--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'];

async function main(): Promise<Record<string, unknown>> {
  const site = await startSite('<title>lifecycle</title><h1 id="h">hello</h1><script>document.body.dataset.ok = "1"</script>');
  onCleanup(() => site.close());
  const server = await benchServer({ BROWSERD_WARM_HEADLESS: String(WARM_POOL), BROWSERD_WARM_HEADFUL: '0', BROWSERD_WARM_REFILL_GAP_MS: '250' });
  const sdk = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });

  const browserd = { total: [] as number[], create: [] as number[], connect: [] as number[], load: [] as number[], close_delete: [] as number[] };
  const playwright = { total: [] as number[], launch: [] as number[], new_page: [] as number[], load: [] as number[], close: [] as number[] };

  let servedWarm = 0;
  const oneBrowserd = async (record: boolean) => {
    const warmIds = new Set(serverBrowsers(server.dataDir).map((x) => x.sessionId));
    const t0 = performance.now();
    const b = await sdk.browsers.create({ headless: true });
    const t1 = performance.now();
    if (record && warmIds.has(b.session_id)) servedWarm++;
    const browser = await chromium.connectOverCDP(b.cdp_ws_url);
    const context = browser.contexts()[0]!;
    const page = context.pages()[0] ?? (await context.newPage());
    const t2 = performance.now();
    await page.goto(site.url);
    if ((await page.textContent('#h')) !== 'hello') throw new Error('browserd: the page did not load');
    const t3 = performance.now();
    await browser.close();
    await sdk.browsers.deleteByID(b.session_id);
    const t4 = performance.now();
    if (!record) return;
    browserd.total.push(t4 - t0);
    browserd.create.push(t1 - t0);
    browserd.connect.push(t2 - t1);
    browserd.load.push(t3 - t2);
    browserd.close_delete.push(t4 - t3);
  };
  const onePlaywright = async (record: boolean) => {
    const t0 = performance.now();
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CLOSED_NETWORK, headless: true });
    const t1 = performance.now();
    const page = await browser.newPage();
    const t2 = performance.now();
    await page.goto(site.url);
    if ((await page.textContent('#h')) !== 'hello') throw new Error('playwright: the page did not load');
    const t3 = performance.now();
    await browser.close();
    const t4 = performance.now();
    if (!record) return;
    playwright.total.push(t4 - t0);
    playwright.launch.push(t1 - t0);
    playwright.new_page.push(t2 - t1);
    playwright.load.push(t3 - t2);
    playwright.close.push(t4 - t3);
  };

  const poolPresent = (await readyWarm(server)) !== null;
  if (poolPresent) await waitWarmPool(server, WARM_POOL, new Set(), 90_000);
  // One of each first, not counted: Playwright's driver code and the server's paths loaded.
  await onePlaywright(false);
  await sleep(300);
  if (poolPresent) await waitWarmPool(server, WARM_POOL);
  await oneBrowserd(false);
  let notRefilled = 0;
  for (let i = 0; i < N; i++) {
    if (poolPresent && !(await waitWarmPool(server, WARM_POOL))) notRefilled++;
    await oneBrowserd(true);
    // Playwright's browser is closed, but the pool refills now: wait for that first, so the
    // baseline does not share the cores with a launch either.
    if (poolPresent && !(await waitWarmPool(server, WARM_POOL))) notRefilled++;
    await onePlaywright(true);
  }

  const sum = (o: Record<string, number[]>) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, summary(v)]));
  const b = sum(browserd);
  const p = sum(playwright);
  return {
    bench: 'lifecycle',
    rounds: N,
    unit: 'ms',
    page: 'a small HTML page from a loopback http server',
    browserd_warm: b,
    playwright_launch: p,
    warm_pool: poolPresent ? { size: WARM_POOL, rounds_served_warm: servedWarm, rounds_without_a_full_pool: notRefilled } : { size: WARM_POOL, present: false, note: 'the server reports no warm pool (/readyz without warm): every create launched a browser' },
    browserd_over_playwright: { p50: ratio(b.total!.p50, p.total!.p50), p99: ratio(b.total!.p99, p.total!.p99) },
    targets: [target('lifecycle p50 with a warm start', b.total!.p50, '<=', 150, ' ms')],
  };
}

runBench(main);
