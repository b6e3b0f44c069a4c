import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import pino from 'pino';
import { OtlpExporter } from '../../src/telemetry/otlp-exporter.js';

/** A local OTLP receiver answering every request with `status`; records the api-key header and the seqs received. */
async function receiver(status: number): Promise<{ url: string; got: { key: string; seqs: string[] }[]; close(): Promise<void> }> {
  const got: { key: string; seqs: string[] }[] = [];
  const srv = http.createServer((req, res) => {
    let data = '';
    req.on('data', (d) => (data += d));
    req.on('end', () => {
      const body = JSON.parse(data) as { resourceLogs: { scopeLogs: { logRecords: { attributes: { key: string; value: { intValue?: string } }[] }[] }[] }[] };
      const seqs = body.resourceLogs.flatMap((rl) => rl.scopeLogs.flatMap((sl) => sl.logRecords.map((lr) => lr.attributes.find((a) => a.key === 'telemetry.seq')!.value.intValue!)));
      got.push({ key: String(req.headers['x-api-key']), seqs });
      res.writeHead(status).end('{}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, got, close: () => new Promise((r) => srv.close(() => r())) };
}

test('retarget: a batch being retried against a failing endpoint is delivered to the new endpoint with the new headers', async () => {
  const down = await receiver(503);
  const up = await receiver(200);
  const dropped: number[] = [];
  const exporter = new OtlpExporter({ id: 'd1', endpoint: down.url, headers: { 'x-api-key': 'old-key' } }, { log: pino({ level: 'silent' }), backoffMs: 200, onDropped: (_s, n) => dropped.push(n) });
  try {
    exporter.push({ sessionId: 's1', seq: 1, event: { category: 'control', type: 'cdp_command', ts: 1_000_000, source: { kind: 'kernel_api' } } as never });
    // The first attempt reaches the failing endpoint; the batch then waits for its retry.
    for (let i = 0; i < 100 && !down.got.length; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(down.got.length >= 1, true, 'the old endpoint was tried');
    exporter.retarget(up.url, { 'x-api-key': 'new-key' });
    for (let i = 0; i < 100 && !up.got.length; i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(up.got, [{ key: 'new-key', seqs: ['1'] }]);
    assert.ok(down.got.every((g) => g.key === 'old-key'));
    // Later events go to the new endpoint only.
    const before = down.got.length;
    exporter.push({ sessionId: 's1', seq: 2, event: { category: 'control', type: 'cdp_command', ts: 1_000_001, source: { kind: 'kernel_api' } } as never });
    await exporter.stop();
    assert.deepEqual(up.got[up.got.length - 1], { key: 'new-key', seqs: ['2'] });
    assert.equal(down.got.length, before);
    assert.deepEqual(dropped, []);
  } finally {
    await exporter.stop();
    await down.close();
    await up.close();
  }
});
