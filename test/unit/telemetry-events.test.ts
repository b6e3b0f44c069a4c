import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cdpCommandData, needsParams, peekCommand } from '../../src/telemetry/telemetry-events.js';
import { logsUrl, otlpLogsBody } from '../../src/telemetry/otlp-exporter.js';

describe('cdp_command data', () => {
  test('peekCommand reads id, method and sessionId from the ends of a frame', () => {
    const long = 'x'.repeat(5000);
    const f = Buffer.from(JSON.stringify({ id: 42, method: 'Runtime.evaluate', params: { expression: long }, sessionId: 'ABC' }));
    assert.deepEqual(peekCommand(f), { id: 42, method: 'Runtime.evaluate', sessionId: 'ABC' });
    assert.deepEqual(peekCommand(Buffer.from('{"id":1,"method":"Target.getTargets"}')), { id: 1, method: 'Target.getTargets' });
    assert.equal(peekCommand(Buffer.from('{"id":1}')), null);
    assert.equal(peekCommand(Buffer.from('not json')), null);
  });

  test('typed text, scripts and query strings never reach the event', () => {
    const insert = cdpCommandData({ id: 1, method: 'Input.insertText', params: { text: 'hunter2' } }, 60);
    assert.deepEqual(insert, { method: 'Input.insertText', frame_bytes: 60, id: 1, text_length: 7 });
    const key = cdpCommandData({ id: 2, method: 'Input.dispatchKeyEvent', params: { type: 'keyDown', text: 'p', key: 'p' } }, 80);
    assert.deepEqual(key, { method: 'Input.dispatchKeyEvent', frame_bytes: 80, id: 2, params: { type: 'keyDown' }, text_length: 1 });
    const nav = cdpCommandData({ id: 3, method: 'Page.navigate', params: { url: 'https://u:p@example.com/a?token=s#f' }, sessionId: 'S' }, 90);
    assert.deepEqual(nav, { method: 'Page.navigate', frame_bytes: 90, id: 3, cdp_session_id: 'S', params: { url: 'https://example.com/a' } });
    const evaluate = cdpCommandData({ id: 4, method: 'Runtime.evaluate', params: { expression: 'secret()' } }, 70);
    assert.deepEqual(evaluate, { method: 'Runtime.evaluate', frame_bytes: 70, id: 4 });
    const mouse = cdpCommandData({ id: 5, method: 'Input.dispatchMouseEvent', params: { type: 'mousePressed', x: 1, y: 2 } }, 70);
    assert.deepEqual(mouse.params, { type: 'mousePressed', x: 1, y: 2 });
    assert.equal(needsParams('Runtime.evaluate'), false);
    assert.equal(needsParams('Page.navigate'), true);
  });
});

describe('OTLP logs body', () => {
  test('one resource per session, a record per event in order, attributes and nanosecond times', () => {
    const ev = (type: string, ts: number) => ({ category: 'connection' as const, type, ts, source: { kind: 'kernel_api' as const } });
    const body = otlpLogsBody([
      { sessionId: 'a', seq: 1, event: ev('cdp_connect', 1_700_000_000_000_000) },
      { sessionId: 'b', seq: 1, event: ev('cdp_connect', 1_700_000_000_000_001) },
      { sessionId: 'a', seq: 2, event: ev('cdp_disconnect', 1_700_000_000_000_002) },
    ]) as { resourceLogs: { resource: { attributes: { key: string; value: { stringValue: string } }[] }; scopeLogs: { logRecords: { timeUnixNano: string; eventName: string }[] }[] }[] };
    assert.equal(body.resourceLogs.length, 2);
    const a = body.resourceLogs[0]!;
    assert.equal(a.resource.attributes.find((x) => x.key === 'browser.session_id')!.value.stringValue, 'a');
    assert.deepEqual(a.scopeLogs[0]!.logRecords.map((r) => r.eventName), ['cdp_connect', 'cdp_disconnect']);
    assert.equal(a.scopeLogs[0]!.logRecords[0]!.timeUnixNano, '1700000000000000000');
  });

  test('logsUrl appends /v1/logs unless the endpoint names it', () => {
    assert.equal(logsUrl('http://h:4318'), 'http://h:4318/v1/logs');
    assert.equal(logsUrl('http://h:4318/otlp/'), 'http://h:4318/otlp/v1/logs');
    assert.equal(logsUrl('http://h/v1/logs'), 'http://h/v1/logs');
  });
});
