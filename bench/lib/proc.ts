/**
 * What the benchmarks read about processes from /proc: memory (RSS, PSS), CPU time, the
 * descendants of a process, a server's browser processes; plus small statistics helpers.
 */
import fs from 'node:fs';

export const MiB = 1024 * 1024;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Anonymous resident memory (heap, stacks, buffers): unlike RSS, not lowered when the kernel evicts a process's file-backed pages under memory pressure. */
export function rssAnonBytes(pid: number): number {
  try {
    const m = /RssAnon:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Proportional set size: shared pages divided among the processes sharing them (RSS would count Chromium's libraries once per process). */
export function pssBytes(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

function statFields(pid: number): string[] | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** parent pid -> child pids, over every process of the machine (one /proc walk). */
export function childrenMap(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const f = statFields(Number(e));
    if (!f || f[0] === 'Z') continue;
    const ppid = Number(f[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(e)]);
  }
  return children;
}

/**
 * A process and all its descendants. Chromium's zygote children (renderers) do not carry the
 * session's environment mark, so the tree, not the mark, finds every process of a browser.
 */
export function processTree(root: number, children = childrenMap()): number[] {
  const out: number[] = [];
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    out.push(pid);
    todo.push(...(children.get(pid) ?? []));
  }
  return out;
}

export function treePss(root: number, children = childrenMap()): { bytes: number; processes: number } {
  const pids = processTree(root, children);
  return { bytes: pids.reduce((s, p) => s + pssBytes(p), 0), processes: pids.length };
}

/** User + system CPU time of the processes, in clock ticks (1/100 s here). */
export function cpuTicks(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    const f = statFields(pid);
    if (f) sum += Number(f[11]) + Number(f[12]);
  }
  return sum;
}

export interface BrowserProcess {
  pid: number;
  sessionId: string;
  userDataDir: string;
}

/**
 * The Chromium browser processes (not their helpers) started by the server whose data
 * directory is `dataDir`: found by the environment mark every session process carries.
 */
export function serverBrowsers(dataDir: string): BrowserProcess[] {
  const mark = `BROWSERD_RUNTIME_DIR=${dataDir.replace(/\/$/, '')}/runtime`;
  const out: BrowserProcess[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
      if (!/chrom(e|ium)$/.test(argv[0] ?? '') || !argv.includes('--remote-debugging-port=0') || argv.some((a) => a.startsWith('--type='))) continue;
      const env = fs.readFileSync(`/proc/${e}/environ`, 'latin1').split('\0');
      if (!env.includes(mark)) continue;
      if (statFields(Number(e))?.[0] === 'Z') continue;
      out.push({
        pid: Number(e),
        sessionId: env.find((kv) => kv.startsWith('BROWSERD_SESSION_ID='))?.slice('BROWSERD_SESSION_ID='.length) ?? '',
        userDataDir: argv.find((a) => a.startsWith('--user-data-dir='))?.slice('--user-data-dir='.length) ?? '',
      });
    } catch {
      /* gone, or not ours to read */
    }
  }
  return out;
}

/** True once the browser wrote DevToolsActivePort (it listens). */
export function browserListening(b: BrowserProcess): boolean {
  try {
    return Number(fs.readFileSync(`${b.userDataDir}/DevToolsActivePort`, 'utf8').split('\n')[0]) > 0;
  } catch {
    return false;
  }
}

/**
 * Waits until the processes of the given trees use less than `maxTicks` of CPU per 100 ms
 * (a launched Chromium keeps a core busy for about a second after it listens), or until `timeoutMs`.
 * Returns how long it waited.
 */
export async function waitQuiet(roots: () => number[], opts: { maxTicks?: number; timeoutMs?: number } = {}): Promise<number> {
  const t0 = Date.now();
  const maxTicks = opts.maxTicks ?? 2;
  const deadline = t0 + (opts.timeoutMs ?? 5000);
  let quietRounds = 0;
  while (Date.now() < deadline) {
    const children = childrenMap();
    const pids = roots().flatMap((r) => processTree(r, children));
    const before = cpuTicks(pids);
    await sleep(100);
    quietRounds = cpuTicks(pids) - before <= maxTicks ? quietRounds + 1 : 0;
    if (quietRounds >= 2) break;
  }
  return Date.now() - t0;
}

/** MemAvailable of the machine, bytes. */
export function memAvailable(): number {
  const m = /MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

// ---- statistics ----------------------------------------------------------------------

/** Nearest-rank percentile (p in 0..100) of an ascending array. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export interface Summary {
  n: number;
  p50: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

/** n, p50, p99, min, max, mean, rounded to `digits` decimals. */
export function summary(xs: number[], digits = 1): Summary {
  const s = [...xs].sort((a, b) => a - b);
  const f = 10 ** digits;
  const r = (v: number) => Math.round(v * f) / f;
  return { n: s.length, p50: r(percentile(s, 50)), p99: r(percentile(s, 99)), min: r(s[0] ?? NaN), max: r(s[s.length - 1] ?? NaN), mean: r(s.reduce((a, b) => a + b, 0) / (s.length || 1)) };
}

export const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;

export function median(xs: number[]): number {
  return percentile([...xs].sort((a, b) => a - b), 50);
}
