/**
 * Cost of control telemetry on the CDP relay: pipelined throughput and round trips of
 * Runtime.evaluate through the gateway of one session, with control capture on (every
 * command becomes a cdp_command event) and off (PATCH), on the same server and browser.
 *
 * Robust to a noisy machine: PAIRS interleaved pairs of runs (the order inside a pair
 * alternates, off-on then on-off, so a drift in load does not favour one side), each pair
 * gives an on/off ratio; the result is the median of those ratios (and the ratio of the
 * median throughputs as a cross-check). Load averages before and after are printed, and
 * the server process's CPU time per relayed command on each side (all its threads, so the
 * event writer's too), which other load on the machine hardly moves.
 *
 *   npm run bench:telemetry            # prints one JSON object
 *   PAIRS=15 PIPELINE=5000 ROUNDS=300 npm run bench:telemetry
 */
import fs from 'node:fs';
import os from 'node:os';
import { firstPage, measure, PIPELINE, quantile, ROUNDS } from './lib/cdp-measure.js';
import { startServer } from '../test/helpers/server.js';
import { onCleanup, runBench } from './lib/report.js';

const PAIRS = Number(process.env.PAIRS ?? 10);
/** Commands one measure() sends (warm-up, round trips, burst). */
const COMMANDS = 100 + ROUNDS + PIPELINE;

/** CPU time (user + system, all threads) a process has used, in ms (/proc, 10 ms ticks). */
function cpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

function median(xs: number[]): number {
  return quantile([...xs].sort((a, b) => a - b), 0.5);
}

async function main(): Promise<Record<string, unknown>> {
  const loadBefore = os.loadavg().map((x) => Number(x.toFixed(2)));
  const server = await startServer({ env: { BROWSERD_RATE_LIMIT: '0', BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' } });
  onCleanup(() => server.stop());
  try {
    const res = await fetch(`${server.url}/browsers`, {
      method: 'POST',
      headers: server.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify({ headless: true, timeout_seconds: 3600, telemetry: { enabled: true } }),
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
    const run = async (enabled: boolean) => {
      await control(enabled);
      const cpu0 = cpuMs(server.proc.pid!);
      const m = await measure(b.cdp_ws_url, page);
      // The server's own CPU per relayed command (relay, capture, event writer thread): far less sensitive to other load than throughput.
      m.server_cpu_us_per_command = Math.round(((cpuMs(server.proc.pid!) - cpu0) * 1000) / COMMANDS);
      return m;
    };
    // One unrecorded run of each: the browser and the relay warm up.
    await run(false);
    await run(true);
    const pairs: { off: Record<string, number>; on: Record<string, number> }[] = [];
    for (let i = 0; i < PAIRS; i++) {
      const order = i % 2 === 0 ? [false, true] : [true, false];
      const pair: Partial<{ off: Record<string, number>; on: Record<string, number> }> = {};
      for (const enabled of order) pair[enabled ? 'on' : 'off'] = await run(enabled);
      pairs.push(pair as { off: Record<string, number>; on: Record<string, number> });
    }
    const tput = (side: 'on' | 'off') => pairs.map((p) => p[side].pipelined_per_s!);
    const rtt = (side: 'on' | 'off') => pairs.map((p) => p[side].rtt_p50_us!);
    const ratios = pairs.map((p) => p.on.pipelined_per_s! / p.off.pipelined_per_s!);
    return {
      bench: 'cdp-relay-telemetry',
      pairs: PAIRS,
      rounds: ROUNDS,
      pipelined: PIPELINE,
      load_avg_before: loadBefore,
      load_avg_after: os.loadavg().map((x) => Number(x.toFixed(2))),
      control_off: { pipelined_per_s_median: median(tput('off')), rtt_p50_us_median: median(rtt('off')) },
      control_on: { pipelined_per_s_median: median(tput('on')), rtt_p50_us_median: median(rtt('on')) },
      pair_ratios: ratios.map((r) => Number(r.toFixed(3))),
      throughput_ratio_on_vs_off: Number(median(ratios).toFixed(3)),
      throughput_ratio_of_medians: Number((median(tput('on')) / median(tput('off'))).toFixed(3)),
      rtt_p50_overhead_us: median(rtt('on')) - median(rtt('off')),
      server_cpu_us_per_command: { off: median(pairs.map((p) => p.off.server_cpu_us_per_command!)), on: median(pairs.map((p) => p.on.server_cpu_us_per_command!)) },
    };
  } finally {
    await server.stop();
  }
}

runBench(main);
