/**
 * CDP relay benchmark: round-trip latency and pipelined throughput of Runtime.evaluate
 * through browserd's gateway (cdp_ws_url) against a direct connection to the same
 * Chromium (its own loopback port, read from the session's DevToolsActivePort), in one run.
 *
 *   npm run bench:cdp            # prints one JSON object
 *   ROUNDS=2000 PIPELINE=20000 npm run bench:cdp
 */
import fs from 'node:fs';
import path from 'node:path';
import { firstPage, measure, PIPELINE, ROUNDS } from './lib/cdp-measure.js';
import { startServer } from '../test/helpers/server.js';
import { onCleanup, ratio, runBench, target } from './lib/report.js';

async function main(): Promise<Record<string, unknown>> {
  const server = await startServer({ env: { BROWSERD_RATE_LIMIT: '0', BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' } });
  onCleanup(() => server.stop());
  try {
    const res = await fetch(`${server.url}/browsers`, {
      method: 'POST',
      headers: server.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify({ headless: true, timeout_seconds: 600 }),
    });
    const b = (await res.json()) as { session_id: string; cdp_ws_url: string };
    const [port, wsPath] = fs.readFileSync(path.join(server.dataDir, 'runtime', b.session_id, 'profile', 'DevToolsActivePort'), 'utf8').split('\n');
    const direct = `ws://127.0.0.1:${port}${wsPath}`;
    const page = await firstPage(direct);
    // Direct before and after the gateway, so neither side always runs on a colder browser.
    const directFirst = await measure(direct, page);
    const gateway = await measure(b.cdp_ws_url, page);
    const directAgain = await measure(direct, page);
    const best = (a: Record<string, number>, c: Record<string, number>) => (a.rtt_p50_us! <= c.rtt_p50_us! ? a : c);
    const baseline = best(directFirst, directAgain);
    return {
      bench: 'cdp-relay',
      rounds: ROUNDS,
      pipelined: PIPELINE,
      direct: baseline,
      gateway,
      overhead: {
        rtt_p50_us: gateway.rtt_p50_us! - baseline.rtt_p50_us!,
        rtt_p99_us: gateway.rtt_p99_us! - baseline.rtt_p99_us!,
        throughput_ratio: Number((gateway.pipelined_per_s! / baseline.pipelined_per_s!).toFixed(3)),
      },
      targets: [
        target('relay round trip p50 / direct', ratio(gateway.rtt_p50_us!, baseline.rtt_p50_us!), '<=', 1.1),
        target('relay pipelined throughput / direct', ratio(gateway.pipelined_per_s!, baseline.pipelined_per_s!), '>=', 0.9),
      ],
    };
  } finally {
    await server.stop();
  }
}

runBench(main);
