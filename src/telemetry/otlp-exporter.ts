import type { Logger } from 'pino';
import type { TelemetryEvent } from './telemetry-events.js';

export interface OtlpDestination {
  id: string;
  endpoint: string;
  headers: Record<string, string>;
}

interface Item {
  sessionId: string;
  seq: number;
  event: TelemetryEvent;
}

/** Events waiting per destination at most; beyond it the oldest are dropped and counted. */
export const EXPORT_QUEUE_LIMIT = 10_000;
const BATCH_MAX = 200;
const BATCH_MS = 200;
const RETRIES = 5;

/** `https://collector:4318` -> `https://collector:4318/v1/logs`; an endpoint already naming /v1/logs is kept. */
export function logsUrl(endpoint: string): string {
  const u = new URL(endpoint);
  if (!u.pathname.endsWith('/v1/logs')) u.pathname = `${u.pathname.replace(/\/+$/, '')}/v1/logs`;
  return u.toString();
}

const str = (key: string, v: string) => ({ key, value: { stringValue: v } });

/** One OTLP/HTTP JSON ExportLogsServiceRequest: a resource per session, a log record per event (body: the event as JSON). */
export function otlpLogsBody(items: Item[]): unknown {
  const bySession = new Map<string, Item[]>();
  for (const i of items) bySession.set(i.sessionId, [...(bySession.get(i.sessionId) ?? []), i]);
  return {
    resourceLogs: [...bySession].map(([sessionId, list]) => ({
      resource: { attributes: [str('service.name', 'browserd'), str('browser.session_id', sessionId)] },
      scopeLogs: [
        {
          scope: { name: 'browserd.telemetry' },
          logRecords: list.map((i) => ({
            timeUnixNano: String(BigInt(i.event.ts) * 1000n),
            observedTimeUnixNano: String(BigInt(Date.now()) * 1_000_000n),
            severityNumber: i.event.category === 'system' ? 17 : 9,
            severityText: i.event.category === 'system' ? 'ERROR' : 'INFO',
            eventName: i.event.type,
            body: { stringValue: JSON.stringify(i.event) },
            attributes: [
              str('event.name', i.event.type),
              str('telemetry.category', i.event.category),
              { key: 'telemetry.seq', value: { intValue: String(i.seq) } },
              str('browser.session_id', i.sessionId),
            ],
          })),
        },
      ],
    })),
  };
}

/**
 * Exports events to one OTLP/HTTP logs endpoint: queued (bounded), sent in batches in
 * capture order, retried with exponential back-off. A producer only pushes onto the
 * queue, so an endpoint that is slow or down never slows capture. Events dropped (queue
 * full, or retries exhausted) are counted and reported through `onDropped`.
 */
export class OtlpExporter {
  private queue: Item[] = [];
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private stopped = false;
  dropped = 0;

  constructor(
    private dest: OtlpDestination,
    private readonly deps: { log: Logger; onDropped(sessionIds: Set<string>, count: number): void; backoffMs?: number },
  ) {}

  /** The destination was updated: every send from now on (retries of a batch too) goes to the new endpoint with the new headers. */
  retarget(endpoint: string, headers: Record<string, string>): void {
    this.dest = { id: this.dest.id, endpoint, headers };
  }

  push(item: Item): void {
    if (this.stopped) return;
    this.queue.push(item);
    if (this.queue.length > EXPORT_QUEUE_LIMIT) this.drop(this.queue.splice(0, this.queue.length - EXPORT_QUEUE_LIMIT));
    if (this.queue.length >= BATCH_MAX) this.kick(0);
    else this.kick(BATCH_MS);
  }

  private kick(delay: number): void {
    if (this.sending) return;
    if (this.timer && delay > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.sending = this.drain().finally(() => {
        this.sending = null;
        if (this.queue.length && !this.stopped) this.kick(BATCH_MS);
      });
    }, delay);
    this.timer.unref();
  }

  private drop(items: Item[]): void {
    if (!items.length) return;
    this.dropped += items.length;
    this.deps.onDropped(new Set(items.map((i) => i.sessionId)), items.length);
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, BATCH_MAX);
      if (!(await this.send(batch))) this.drop(batch);
    }
  }

  private async send(batch: Item[]): Promise<boolean> {
    const body = JSON.stringify(otlpLogsBody(batch));
    let wait = this.deps.backoffMs ?? 500;
    for (let attempt = 0; attempt <= RETRIES; attempt++) {
      try {
        const r = await fetch(logsUrl(this.dest.endpoint), {
          method: 'POST',
          headers: { ...this.dest.headers, 'content-type': 'application/json' },
          body,
          signal: AbortSignal.timeout(10_000),
        });
        await r.arrayBuffer().catch(() => undefined);
        if (r.ok) return true;
        // Client errors other than throttling will not get better by retrying.
        if (r.status < 500 && r.status !== 429 && r.status !== 408) {
          this.deps.log.warn({ destination: this.dest.id, status: r.status }, 'telemetry export refused by the destination');
          return false;
        }
      } catch (err) {
        this.deps.log.debug({ destination: this.dest.id, err: String(err) }, 'telemetry export failed; retrying');
      }
      if (this.stopped || attempt === RETRIES) break;
      await new Promise((r) => setTimeout(r, wait).unref());
      wait = Math.min(wait * 2, 30_000);
    }
    return false;
  }

  /** Sends what is queued (one attempt round), then stops. */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.sending;
    this.stopped = true;
    const rest = this.queue.splice(0);
    if (rest.length && !(await this.send(rest))) this.drop(rest);
  }
}
