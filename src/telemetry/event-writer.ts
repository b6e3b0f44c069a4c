import { Worker } from 'node:worker_threads';

export type EventRow = [sessionId: string, seq: number, ts: number, category: string, type: string, event: string];

/** Hands batches of event rows to the SQLite writer thread (event-writer-worker.ts); each write resolves once committed. */
export class SqliteEventWriter {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve(): void; reject(err: Error): void }>();
  private next = 0;
  private failed: Error | null = null;

  constructor(file: string) {
    // Run from source (tests under tsx), the thread loads the .ts module through tsx's loader, registered in the thread.
    if (import.meta.url.endsWith('.ts')) {
      const source = new URL('./event-writer-worker.ts', import.meta.url).href;
      this.worker = new Worker(`import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(source)}); })`, { eval: true, workerData: { file } });
    } else this.worker = new Worker(new URL('./event-writer-worker.js', import.meta.url), { workerData: { file } });
    this.worker.unref();
    this.worker.on('message', (m: { id: number; error?: string }) => {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.error) w?.reject(new Error(m.error));
      else w?.resolve();
    });
    const fail = (err: Error) => {
      this.failed = err;
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', () => fail(new Error('the telemetry writer thread exited')));
  }

  /** The writer thread died (the caller then writes through its own connection). */
  get broken(): boolean {
    return this.failed !== null;
  }

  private call(msg: { rows?: EventRow[]; close?: boolean }): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    const id = ++this.next;
    return new Promise<void>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ id, ...msg });
    });
  }

  write(rows: EventRow[]): Promise<void> {
    return rows.length ? this.call({ rows }) : Promise.resolve();
  }

  async close(): Promise<void> {
    if (!this.failed) await this.call({ close: true }).catch(() => undefined);
    await this.worker.terminate();
  }
}
