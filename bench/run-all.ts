/**
 * Runs every benchmark in sequence (each its own process, ended by PID when over its time
 * limit), prints their JSON, and writes the figures, the targets and the machine they came
 * from into bench/RESULTS.md.
 *
 *   npm run bench                                  # all, writes bench/RESULTS.md
 *   BENCH_ONLY=create-latency,density npm run bench  # some, prints only
 *   BENCH_NOTE="quiet machine" npm run bench       # a line about the conditions, into RESULTS.md
 *
 * Knobs of the benchmarks themselves (BENCH_SESSIONS, BENCH_DENSITY...) pass through.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { machineInfo, type TargetCheck } from './lib/report.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

const BENCHES = ['cdp-relay', 'bidi-connect', 'create-latency', 'lifecycle', 'density', 'control-api'] as const;
type BenchName = (typeof BENCHES)[number];
const LIMIT_S = Number(process.env.BENCH_TIMEOUT_S ?? 420);

/** Each benchmark's own JSON shape. */
type Result = Record<string, any>;

/** The benchmark running now: told to stop (it stops its servers) when this runner is. */
let current: ChildProcess | null = null;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    if (current?.pid && current.exitCode === null) process.kill(current.pid, 'SIGTERM');
    process.exitCode = 130;
  });
}

function runOne(name: BenchName): Promise<{ result: Result | null; seconds: number; error?: string }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench', `${name}.ts`)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    current = child;
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(child.pid!, 'SIGTERM'); // the benchmark stops its servers on SIGTERM
      setTimeout(() => child.exitCode === null && child.signalCode === null && process.kill(child.pid!, 'SIGKILL'), 30_000).unref();
    }, LIMIT_S * 1000);
    child.on('close', (code) => {
      clearTimeout(timer);
      const seconds = Math.round((Date.now() - t0) / 100) / 10;
      const at = out.indexOf('{');
      try {
        if (code !== 0 || at < 0) throw new Error(timedOut ? `stopped after ${LIMIT_S} s` : `exited with ${code}`);
        resolve({ result: JSON.parse(out.slice(at)) as Result, seconds });
      } catch (err) {
        resolve({ result: null, seconds, error: String(err instanceof Error ? err.message : err) });
      }
    });
  });
}

const f = (v: unknown, unit = '') => (typeof v === 'number' ? `${v}${unit}` : '–');

/** Headline figures per benchmark: [measure, browserd, baseline, browserd / baseline]. */
function figures(name: BenchName, r: Result): string[][] {
  switch (name) {
    case 'cdp-relay':
      return [
        ['CDP round trip p50', f(r.gateway.rtt_p50_us, ' µs'), f(r.direct.rtt_p50_us, ' µs'), f(Math.round((r.gateway.rtt_p50_us / r.direct.rtt_p50_us) * 100) / 100)],
        ['CDP round trip p99', f(r.gateway.rtt_p99_us, ' µs'), f(r.direct.rtt_p99_us, ' µs'), f(Math.round((r.gateway.rtt_p99_us / r.direct.rtt_p99_us) * 100) / 100)],
        ['CDP pipelined Runtime.evaluate', f(r.gateway.pipelined_per_s, ' /s'), f(r.direct.pipelined_per_s, ' /s'), f(r.overhead.throughput_ratio)],
      ];
    case 'bidi-connect':
      return [
        ['BiDi connect p50 (browserd: upgrade → session.new answered; ChromeDriver: spawn → POST /session → session.status answered)', f(r.in_process_mapper?.total_ms?.p50, ' ms'), f(r.chromedriver_debugger_address?.total_ms?.p50, ' ms'), f(Math.round((r.in_process_mapper?.total_ms?.p50 / r.chromedriver_debugger_address?.total_ms?.p50) * 1000) / 1000)],
      ];
    case 'create-latency':
      return [
        ['cold create p50 (vs direct launch to listening)', f(r.cold_create.p50, ' ms'), f(r.direct_launch_to_listening.p50, ' ms'), f(r.cold_over_direct_listening.p50)],
        ['cold create p99 (vs direct launch to listening)', f(r.cold_create.p99, ' ms'), f(r.direct_launch_to_listening.p99, ' ms'), f(r.cold_over_direct_listening.p99)],
        ['cold create p50 (vs direct launch to /json/version)', f(r.cold_create.p50, ' ms'), f(r.direct_launch_to_json_version.p50, ' ms'), f(r.cold_over_direct_json_version.p50)],
        ['warm create p50', f(r.warm_create.p50, ' ms'), 'Kernel: 30 ms', '–'],
        ['warm create p99', f(r.warm_create.p99, ' ms'), 'Kernel: 105 ms', '–'],
      ];
    case 'lifecycle':
      return [
        ['lifecycle p50 (create → connect → load → delete)', f(r.browserd_warm.total.p50, ' ms'), f(r.playwright_launch.total.p50, ' ms'), f(r.browserd_over_playwright.p50)],
        ['lifecycle p99', f(r.browserd_warm.total.p99, ' ms'), f(r.playwright_launch.total.p99, ' ms'), f(r.browserd_over_playwright.p99)],
      ];
    case 'density':
      return [
        ['idle headless sessions held', f(r.sessions_held), '–', '–'],
        ['PSS per idle session (mean)', f(r.session_pss_mib.mean, ' MiB'), '–', '–'],
        ["browserd's own memory per session (anonymous RSS)", f(r.browserd_server.anon_per_session_mb ?? r.browserd_server.rss_per_session_mb, ' MB'), '–', '–'],
        ['launch with all held (vs the first)', f(r.launch_ms.with_all_held, ' ms'), f(r.launch_ms.first, ' ms'), f(r.next_over_first)],
      ];
    case 'control-api':
      return [
        ['POST /browsers validation (400)', f(r.post_browsers_validation_400.per_s, ' req/s'), `${f(r.baseline_healthz.per_s, ' req/s')} (/healthz)`, f(r.post_browsers_validation_400.over_baseline)],
        [`GET vault items (${r.vault_items_list.items} items)`, f(r.vault_items_list.per_s, ' req/s'), `${f(r.baseline_healthz.per_s, ' req/s')} (/healthz)`, f(r.vault_items_list.over_baseline)],
        [`GET /vaults page by page (${r.vaults_listed_page_by_page.vaults} vaults, pages of ${r.vaults_listed_page_by_page.page_size})`, f(r.vaults_listed_page_by_page.per_s, ' req/s'), `${f(r.baseline_healthz.per_s, ' req/s')} (/healthz)`, f(r.vaults_listed_page_by_page.over_baseline)],
      ];
  }
}

async function main(): Promise<void> {
  const only = (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const o of only) if (!(BENCHES as readonly string[]).includes(o)) throw new Error(`BENCH_ONLY: no benchmark "${o}" (${BENCHES.join(', ')})`);
  const chosen = BENCHES.filter((b) => !only.length || only.includes(b));
  const started = new Date();
  const machine = machineInfo();
  const results: { name: BenchName; result: Result | null; seconds: number; error?: string }[] = [];
  for (const name of chosen) {
    if (process.exitCode === 130) break;
    process.stderr.write(`== ${name}\n`);
    const r = await runOne(name);
    results.push({ name, ...r });
    process.stdout.write(`${JSON.stringify({ bench: name, seconds: r.seconds, ...(r.error ? { error: r.error } : {}), result: r.result })}\n`);
  }
  const totalS = Math.round((Date.now() - started.getTime()) / 1000);
  const failed = results.filter((r) => !r.result);
  process.stderr.write(`== ${results.length} benchmarks in ${totalS} s${failed.length ? `; failed: ${failed.map((r) => r.name).join(', ')}` : ''}\n`);
  if (only.length && process.env.BENCH_WRITE !== '1') return;
  writeResults({ results, started, totalS, machine, loadEnd: os.loadavg() });
  if (failed.length) process.exitCode = 1;
}

interface Run {
  results: { name: BenchName; result: Result | null; seconds: number; error?: string }[];
  started: Date;
  totalS: number;
  machine: Record<string, unknown>;
  loadEnd: number[];
}

function writeResults({ results, started, totalS, machine, loadEnd }: Run): void {
  const lines: string[] = [];
  lines.push('# Benchmark results', '');
  lines.push(`Written by \`npm run bench\` (bench/run-all.ts) on ${started.toISOString()}; ${results.length} benchmarks in ${totalS} s. What each measures: [README.md](README.md).`);
  if (process.env.BENCH_NOTE) lines.push('', `Conditions: ${process.env.BENCH_NOTE}`);
  lines.push('', '## Machine', '', '| | |', '|---|---|');
  lines.push(`| CPU | ${machine.cpu}, ${machine.cpus} cores |`, `| memory | ${machine.memory_gib} GiB |`, `| kernel | ${machine.kernel} |`, `| Node | ${machine.node} |`, `| Chromium | ${machine.chromium} |`);
  lines.push(`| load average (1, 5, 15 min) | at the start ${(machine.load_average as number[]).join(', ')}; at the end ${loadEnd.map((l) => l.toFixed(2)).join(', ')} |`);
  lines.push('', '## Targets', '', '| benchmark | target | limit | measured | |', '|---|---|---|---|---|');
  for (const r of results) {
    for (const t of (r.result?.targets ?? []) as (TargetCheck & { name: string })[]) {
      lines.push(`| ${r.name} | ${t.name} | ${t.target} | ${t.measured} | ${t.pass ? 'pass' : `**miss** (×${t.ratio_to_limit} of the limit)`} |`);
    }
  }
  lines.push('', '## Figures', '', '| benchmark | measure | browserd | baseline | browserd / baseline |', '|---|---|---|---|---|');
  for (const r of results) {
    if (!r.result) {
      lines.push(`| ${r.name} | failed: ${r.error} | | | |`);
      continue;
    }
    try {
      for (const row of figures(r.name, r.result)) lines.push(`| ${r.name} | ${row.join(' | ')} |`);
    } catch {
      lines.push(`| ${r.name} | (see the JSON below) | | | |`);
    }
  }
  lines.push('', '## Every result', '');
  for (const r of results) {
    lines.push(`### ${r.name} (${r.seconds} s)`, '', '```json', r.result ? JSON.stringify(r.result, null, 2) : JSON.stringify({ error: r.error }), '```', '');
  }
  fs.writeFileSync(path.join(ROOT, 'bench', 'RESULTS.md'), `${lines.join('\n')}\n`);
  process.stderr.write('== wrote bench/RESULTS.md\n');
}

/**
 * BENCH_RENDER=<file>: writes RESULTS.md again from the JSON lines a run printed (same
 * conditions note via BENCH_NOTE), without running anything.
 */
function render(file: string): void {
  const results = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { bench: BenchName; seconds: number; error?: string; result: Result | null })
    .map((l) => ({ name: l.bench, seconds: l.seconds, result: l.result, ...(l.error ? { error: l.error } : {}) }));
  const first = results.find((r) => r.result?.machine)?.result;
  const last = [...results].reverse().find((r) => r.result?.machine)?.result;
  const machine = (first?.machine as Record<string, unknown>) ?? machineInfo();
  const totalS = Math.round(results.reduce((s, r) => s + r.seconds, 0));
  const end = fs.statSync(file).mtime;
  writeResults({ results, started: new Date(end.getTime() - totalS * 1000), totalS, machine, loadEnd: (last?.machine?.load_average as number[]) ?? os.loadavg() });
}

(process.env.BENCH_RENDER ? Promise.resolve(render(process.env.BENCH_RENDER)) : main()).catch((err) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
