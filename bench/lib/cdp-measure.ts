/**
 * Measuring CDP round trips and pipelined throughput of Runtime.evaluate on one page of a
 * browser, shared by the relay benchmarks.
 */
import WebSocket from 'ws';

export const ROUNDS = Number(process.env.ROUNDS ?? 1000);
export const PIPELINE = Number(process.env.PIPELINE ?? 10000);
const WARMUP = 100;

export function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** The first page target of the browser behind `url`. */
export async function firstPage(url: string): Promise<string> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('error', rej);
  });
  const infos = await new Promise<{ type: string; targetId: string }[]>((res) => {
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString()) as { id?: number; result?: { targetInfos: { type: string; targetId: string }[] } };
      if (m.id === 1) res(m.result!.targetInfos);
    });
    ws.send(JSON.stringify({ id: 1, method: 'Target.getTargets' }));
  });
  ws.close();
  return infos.find((t) => t.type === 'page')!.targetId;
}

/** Sequential round trips, then a pipelined burst, of Runtime.evaluate on one connection. */
export async function measure(url: string, targetId: string): Promise<Record<string, number>> {
  const conn = await attach(url, targetId);
  const evalParams = { expression: '1+1', returnByValue: true };
  for (let i = 0; i < WARMUP; i++) await conn.call('Runtime.evaluate', evalParams);
  const rtts: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = process.hrtime.bigint();
    await conn.call('Runtime.evaluate', evalParams);
    rtts.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  rtts.sort((a, b) => a - b);
  const t0 = process.hrtime.bigint();
  await conn.burst('Runtime.evaluate', evalParams, PIPELINE);
  const burstMs = Number(process.hrtime.bigint() - t0) / 1e6;
  conn.close();
  return {
    rtt_p50_us: Math.round(quantile(rtts, 0.5)),
    rtt_p99_us: Math.round(quantile(rtts, 0.99)),
    rtt_mean_us: Math.round(rtts.reduce((a, b) => a + b, 0) / rtts.length),
    pipelined_ms: Math.round(burstMs),
    pipelined_per_s: Math.round(PIPELINE / (burstMs / 1000)),
  };
}

/** One connection attached (flat) to a page, with call() and burst(). */
export async function attach(url: string, targetId: string) {
  const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
  await new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('error', rej);
  });
  let id = 0;
  const waiting = new Map<number, (r: { result?: { sessionId?: string } }) => void>();
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as { id?: number; result?: { sessionId?: string } };
    if (typeof m.id === 'number') {
      const w = waiting.get(m.id);
      waiting.delete(m.id);
      w?.(m);
    }
  });
  const raw = (method: string, params: object, sessionId?: string) =>
    new Promise<{ result?: { sessionId?: string } }>((res) => {
      const my = ++id;
      waiting.set(my, res);
      ws.send(JSON.stringify({ id: my, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  const att = await raw('Target.attachToTarget', { targetId, flatten: true });
  const sid = att.result!.sessionId!;
  return {
    call: (method: string, params: object) => raw(method, params, sid),
    async burst(method: string, params: object, n: number) {
      let last!: Promise<unknown>;
      for (let i = 0; i < n; i++) last = raw(method, params, sid);
      await last;
    },
    close: () => ws.close(),
  };
}
