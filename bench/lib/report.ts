import { execFileSync } from 'node:child_process';
import os from 'node:os';

/** The machine a result comes from (also written into bench/RESULTS.md). */
export function machineInfo(): Record<string, unknown> {
  let chromium = 'unknown';
  try {
    chromium = execFileSync('/usr/lib/chromium/chromium', ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
  } catch {
    /* not installed */
  }
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cpus: os.cpus().length,
    memory_gib: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    chromium,
    load_average: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

const cleanups: (() => Promise<void> | void)[] = [];

/**
 * Registers something to undo when the benchmark ends, also when it is stopped with ^C or
 * SIGTERM (a server left running would keep its browsers). Run in reverse order.
 */
export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

async function runCleanups(): Promise<void> {
  while (cleanups.length) {
    const fn = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`cleanup failed: ${String(err)}\n`);
    }
  }
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    void runCleanups().finally(() => process.exit(130));
  });
}

/** Runs a benchmark's main and prints its result as one JSON object, with the machine it ran on; exits 1 on failure. Registered cleanups run either way. */
export function runBench(main: () => Promise<Record<string, unknown>>): void {
  const started = Date.now();
  main()
    .then(
      async (result) => {
        await runCleanups();
        process.stdout.write(`${JSON.stringify({ ...result, duration_s: Math.round((Date.now() - started) / 100) / 10, machine: machineInfo() }, null, 2)}\n`);
      },
      async (err) => {
        await runCleanups();
        process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
        process.exit(1);
      },
    );
}

export interface TargetCheck {
  target: string;
  measured: string;
  pass: boolean;
  /** How far off a missed target is (measured / limit), for the closing note. */
  ratio_to_limit?: number;
}

/** A "value ≤ limit" (or ≥) check with both numbers spelled out. */
export function target(name: string, value: number, op: '<=' | '>=', limit: number, unit = ''): TargetCheck & { name: string } {
  const pass = Number.isFinite(value) && (op === '<=' ? value <= limit : value >= limit);
  const fmt = (v: number) => `${Math.round(v * 1000) / 1000}${unit}`;
  return { name, target: `${op === '<=' ? '≤' : '≥'} ${fmt(limit)}`, measured: fmt(value), pass, ratio_to_limit: Math.round((value / limit) * 1000) / 1000 };
}

export const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;
