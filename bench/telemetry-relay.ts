/**
 * Cost of control telemetry on the CDP relay: pipelined throughput and round trips of
 * Runtime.evaluate through the gateway of one session, with control capture on (every
 * command becomes a cdp_command event) and off (PATCH), alternated on the same browser.
 *
 *   npm run bench:telemetry      # prints one JSON object
 */
import { firstPage, measure, PIPELINE, ROUNDS } from './lib/cdp-measure.js';
import { startServer } from '../test/helpers/server.js';
import { onCleanup, runBench } from './lib/report.js';

async function main(): Promise<Record<string, unknown>> {
  const server = await startServer({ env: { BROWSERD_RATE_LIMIT: '0', BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' } });
  onCleanup(() => server.stop());
  try {
    const res = await fetch(`${server.url}/browsers`, {
      method: 'POST',
      headers: server.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify({ headless: true, timeout_seconds: 600, telemetry: { enabled: true } }),
    });
    const b = (await res.json()) as { session_id: string; cdp_ws_url: string };
    const control = async (enabled: boolean) => {
      const r = await fetch(`${server.url}/browsers/${b.session_id}`, {
        method: 'PATCH',
        headers: server.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify({ telemetry: { browser: { control: { enabled } } } }),
      });
      if (r.status !== 200) throw new Error(`PATCH answered ${r.status}`);
    };
    const page = await firstPage(b.cdp_ws_url);
    // Off, on, off, on: the better of each pair, so neither side always runs on a colder browser.
    const runs: Record<string, Record<string, number>[]> = { off: [], on: [] };
    for (const enabled of [false, true, false, true]) {
      await control(enabled);
      runs[enabled ? 'on' : 'off']!.push(await measure(b.cdp_ws_url, page));
    }
    const best = (list: Record<string, number>[]) => list.reduce((a, c) => (c.pipelined_per_s! > a.pipelined_per_s! ? c : a));
    const off = best(runs.off!);
    const on = best(runs.on!);
    return {
      bench: 'cdp-relay-telemetry',
      rounds: ROUNDS,
      pipelined: PIPELINE,
      control_off: off,
      control_on: on,
      throughput_ratio_on_vs_off: Number((on.pipelined_per_s! / off.pipelined_per_s!).toFixed(3)),
      rtt_p50_overhead_us: on.rtt_p50_us! - off.rtt_p50_us!,
    };
  } finally {
    await server.stop();
  }
}

runBench(main);
