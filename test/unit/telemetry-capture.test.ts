import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  bodyKind,
  consoleEvent,
  exceptionEvent,
  interactionEvent,
  loadingFailedEvent,
  looksBinary,
  postDataOf,
  REDACTED,
  redactHeaders,
  remoteObjectText,
  requestEvent,
  responseBody,
  responseEvent,
  sdkTargetType,
  STRUCTURED_BODY_LIMIT,
  TEXT_BODY_LIMIT,
  timelineEvent,
  truncateUtf8,
} from '../../src/telemetry/capture-rules.js';

describe('network bodies: kind by MIME type', () => {
  test('JSON, XML and form data are structured (8 KB)', () => {
    for (const m of ['application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'application/problem+json', 'application/ld+json', 'application/x-ndjson', 'text/json', 'application/xml', 'text/xml', 'image/svg+xml', 'application/atom+xml', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      assert.equal(bodyKind(m), 'structured', m);
    }
    assert.equal(STRUCTURED_BODY_LIMIT, 8192);
  });
  test('other text is text (4 KB)', () => {
    for (const m of ['text/plain', 'text/html; charset=utf-8', 'text/css', 'text/csv', 'text/javascript', 'application/javascript', 'application/x-javascript', 'application/ecmascript', 'application/graphql', 'application/yaml']) {
      assert.equal(bodyKind(m), 'text', m);
    }
    assert.equal(TEXT_BODY_LIMIT, 4096);
  });
  test('everything else, including no type, is binary', () => {
    for (const m of ['image/png', 'image/jpeg', 'font/woff2', 'application/octet-stream', 'application/pdf', 'application/wasm', 'video/mp4', 'audio/mpeg', 'application/zip', '', undefined, null]) {
      assert.equal(bodyKind(m), 'binary', String(m));
    }
  });
});

describe('network bodies: truncation', () => {
  test('cuts at the byte limit, never inside a character', () => {
    assert.deepEqual(truncateUtf8('abc', 3), { text: 'abc', truncated: false, bytes: 3 });
    assert.deepEqual(truncateUtf8('abcd', 3), { text: 'abc', truncated: true, bytes: 4 });
    // "é" is two bytes: a cut after 3 bytes of "aéé" keeps "aé".
    assert.deepEqual(truncateUtf8('aéé', 3), { text: 'aé', truncated: true, bytes: 5 });
    assert.deepEqual(truncateUtf8('aéé', 4), { text: 'aé', truncated: true, bytes: 5 });
    // A four-byte character at the edge is dropped whole.
    assert.equal(truncateUtf8('ab😀', 5).text, 'ab');
  });
  test('a JSON body keeps 8192 bytes, a text body 4096, the event says truncated', () => {
    const big = 'x'.repeat(20_000);
    const json = responseBody('application/json', big, false);
    assert.equal(Buffer.byteLength(json.body!), 8192);
    assert.equal(json.truncated, true);
    assert.equal(json.bytes, 20_000);
    const text = responseBody('text/plain', big, false);
    assert.equal(Buffer.byteLength(text.body!), 4096);
    assert.equal(text.truncated, true);
    const small = responseBody('text/html', '<p>hi</p>', false);
    assert.deepEqual(small, { body: '<p>hi</p>', truncated: false, bytes: 9 });
  });
  test('base64 text is decoded; base64 or text content that is binary is excluded', () => {
    assert.equal(responseBody('application/json', Buffer.from('{"a":1}').toString('base64'), true).body, '{"a":1}');
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
    assert.deepEqual(responseBody('text/plain', png.toString('base64'), true), { truncated: false, bytes: 12 });
    assert.deepEqual(responseBody('text/plain', 'a\u0000b', false), { truncated: false, bytes: 3 });
    assert.equal(responseBody('image/png', png.toString('base64'), true).body, undefined);
  });
  test('binary detection: NUL bytes or invalid UTF-8', () => {
    assert.equal(looksBinary(Buffer.from('plain text é')), false);
    assert.equal(looksBinary(Buffer.from([0x61, 0x00])), true);
    assert.equal(looksBinary(Buffer.from([0xc3, 0x28])), true);
  });
});

describe('network events', () => {
  test('network_request: post data as sent, credentials redacted, redirects said', () => {
    const e = requestEvent({
      requestId: 'r1',
      loaderId: 'L',
      frameId: 'F',
      documentURL: 'http://a/',
      type: 'Fetch',
      initiator: { type: 'script' },
      request: { url: 'http://a/x', method: 'POST', headers: { Authorization: 'Bearer s3cret', Cookie: 'sid=1', 'Content-Type': 'application/json' }, postData: '{"q": "as is"}' },
    });
    assert.equal(e.type, 'network_request');
    assert.deepEqual(e.data, {
      request_id: 'r1', url: 'http://a/x', method: 'POST', frame_id: 'F', loader_id: 'L', document_url: 'http://a/', resource_type: 'Fetch', initiator_type: 'script',
      headers: { Authorization: REDACTED, Cookie: REDACTED, 'Content-Type': 'application/json' }, post_data: '{"q": "as is"}',
    });
    const r = requestEvent({ requestId: 'r2', request: { url: 'http://b/', method: 'GET' }, redirectResponse: { url: 'http://a/' } });
    assert.equal(r.data.is_redirect, true);
    assert.equal(r.data.redirect_url, 'http://a/');
    assert.equal(r.data.post_data, undefined);
  });
  test('post data from entries when not inline', () => {
    assert.equal(postDataOf({ postDataEntries: [{ bytes: Buffer.from('a=1&').toString('base64') }, { bytes: Buffer.from('b=2').toString('base64') }] }), 'a=1&b=2');
    assert.equal(postDataOf({}), undefined);
    assert.equal(postDataOf({ postData: '' }), '');
  });
  test('redactHeaders leaves other headers as they are', () => {
    assert.deepEqual(redactHeaders({ 'set-cookie': 'a', 'Proxy-Authorization': 'b', 'x-api-key': 'k', accept: '*/*' }), { 'set-cookie': REDACTED, 'Proxy-Authorization': REDACTED, 'x-api-key': REDACTED, accept: '*/*' });
    assert.equal(redactHeaders(undefined), undefined);
  });
  test('network_response: status, type, timing, body, truncated flag', () => {
    const e = responseEvent(
      { requestId: 'r1', url: 'http://a/x', method: 'GET', startedS: 100.5 },
      { url: 'http://a/x', status: 200, statusText: 'OK', mimeType: 'application/json', headers: { 'Set-Cookie': 'x' }, resourceType: 'Fetch' },
      { timestamp: 100.75, encodedDataLength: 321 },
      responseBody('application/json', 'y'.repeat(9000), false),
    );
    assert.equal(e.type, 'network_response');
    assert.equal(e.truncated, true);
    assert.equal(e.data.status, 200);
    assert.equal(e.data.method, 'GET');
    assert.equal(e.data.duration_ms, 250);
    assert.equal(e.data.encoded_data_length, 321);
    assert.equal(e.data.body_bytes, 9000);
    assert.equal((e.data.body as string).length, 8192);
    assert.deepEqual(e.data.headers, { 'Set-Cookie': REDACTED });
    const img = responseEvent({ requestId: 'r2' }, { status: 200, mimeType: 'image/png' }, {}, { truncated: false });
    assert.equal(img.data.body, undefined);
    assert.equal(img.data.body_excluded, 'binary_type');
    assert.equal(img.truncated, undefined);
    const bin = responseEvent({ requestId: 'r3' }, { status: 200, mimeType: 'text/plain' }, {}, { truncated: false, bytes: 4 });
    assert.equal(bin.data.body_excluded, 'binary_content');
    const noBody = responseEvent({ requestId: 'r4' }, { status: 204, mimeType: 'text/plain' }, {});
    assert.equal('body' in noBody.data || 'body_excluded' in noBody.data, false);
  });
  test('network_loading_failed names the request when it was seen', () => {
    assert.deepEqual(loadingFailedEvent({ requestId: 'r', errorText: 'net::ERR_FAILED', canceled: true, type: 'XHR' }, { url: 'http://a/', method: 'GET' }).data, {
      request_id: 'r', error_text: 'net::ERR_FAILED', canceled: true, resource_type: 'XHR', url: 'http://a/', method: 'GET',
    });
  });
});

describe('console events', () => {
  test('remote objects print like the console', () => {
    assert.equal(remoteObjectText({ type: 'string', value: 'hi' }), 'hi');
    assert.equal(remoteObjectText({ type: 'number', value: 3, description: '3' }), '3');
    assert.equal(remoteObjectText({ type: 'number', unserializableValue: 'NaN' }), 'NaN');
    assert.equal(remoteObjectText({ type: 'undefined' }), 'undefined');
    assert.equal(remoteObjectText({ type: 'object', subtype: 'null', value: null }), 'null');
    assert.equal(remoteObjectText({ type: 'boolean', value: false }), 'false');
    assert.equal(remoteObjectText({ type: 'object', className: 'Object', description: 'Object', preview: { properties: [{ name: 'a', value: '1' }] } }), '{a: 1}');
    assert.equal(remoteObjectText({ type: 'object', subtype: 'array', description: 'Array(2)', preview: { properties: [{ name: '0', value: '1' }, { name: '1', value: '2' }], overflow: true } }), '[1, 2, …]');
    assert.equal(remoteObjectText({ type: 'function', description: 'function f() {}' }), 'function f() {}');
  });
  test('console.error is console_error, every other level console_log', () => {
    const err = consoleEvent({ type: 'error', args: [{ type: 'string', value: 'bad' }, { type: 'number', value: 2 }] });
    assert.deepEqual(err, { type: 'console_error', data: { level: 'error', args: ['bad', '2'], text: 'bad' } });
    for (const level of ['log', 'warning', 'info', 'debug']) assert.equal(consoleEvent({ type: level, args: [] }).type, 'console_log');
    assert.equal(consoleEvent({ type: 'warning', args: [{ type: 'string', value: 'w' }] }).data.level, 'warning');
    const long = consoleEvent({ type: 'log', args: [{ type: 'string', value: 'z'.repeat(10_000) }] });
    assert.equal(long.truncated, true);
    assert.equal((long.data.text as string).length, 4096);
  });
  test('an uncaught exception reads like the console: "Uncaught Error: boom"', () => {
    const e = exceptionEvent({ exceptionDetails: { text: 'Uncaught', lineNumber: 3, columnNumber: 9, url: 'http://a/s.js', exception: { type: 'object', subtype: 'error', description: 'Error: boom\n    at f (http://a/s.js:4:10)' } } });
    assert.deepEqual(e, { type: 'console_error', data: { text: 'Uncaught Error: boom', line: 3, column: 9, source_url: 'http://a/s.js' } });
    assert.equal(exceptionEvent({ exceptionDetails: { text: 'Uncaught (in promise)', exception: { type: 'string', value: 'x' } } }).data.text, 'Uncaught (in promise) x');
    assert.equal(exceptionEvent({}).data.text, 'Uncaught');
  });
  test('target types map to the SDK values', () => {
    assert.equal(sdkTargetType('page'), 'page');
    assert.equal(sdkTargetType('service_worker'), 'service_worker');
    assert.equal(sdkTargetType('iframe'), 'other');
    assert.equal(sdkTargetType('worker'), 'other');
  });
});

describe('page timeline events', () => {
  test('layout shifts and LCP in the SDK shape (ms)', () => {
    const ls = timelineEvent({ event: { frameId: 'F', type: 'layout-shift', time: 1.25, duration: 0, layoutShiftDetails: { value: 0.12, hadRecentInput: false, lastInputTime: 0, sources: [] } } });
    assert.deepEqual(ls, { type: 'page_layout_shift', data: { source_frame_id: 'F', time: 1250, duration: 0, layout_shift_details: { value: 0.12, had_recent_input: false } } });
    const lcp = timelineEvent({ event: { frameId: 'F', type: 'largest-contentful-paint', time: 0.5, lcpDetails: { renderTime: 0.5, loadTime: 0, size: 1234, elementId: 'hero', url: 'http://a/i.png', nodeId: 7 } } });
    assert.deepEqual(lcp, { type: 'page_lcp', data: { source_frame_id: 'F', time: 500, lcp_details: { render_time: 500, load_time: 0, size: 1234, element_id: 'hero', url: 'http://a/i.png', node_id: 7 } } });
    assert.equal(timelineEvent({ event: { type: 'paint' } }), null);
    assert.equal(timelineEvent({}), null);
  });
});

describe('interaction events', () => {
  test('click, key and scroll in the SDK shape', () => {
    assert.deepEqual(interactionEvent(JSON.stringify({ t: 'click', x: 10.123, y: 20, selector: '#b', tag: 'BUTTON', text: 'Go', url: 'http://a/' })), {
      type: 'interaction_click', data: { x: 10.12, y: 20, selector: '#b', tag: 'BUTTON', text: 'Go', url: 'http://a/' },
    });
    assert.deepEqual(interactionEvent(JSON.stringify({ t: 'key', key: 'a', masked: false, selector: '#q', tag: 'INPUT' })), { type: 'interaction_key', data: { key: 'a', selector: '#q', tag: 'INPUT' } });
    assert.deepEqual(interactionEvent(JSON.stringify({ t: 'scroll', fx: 0, fy: 0, tx: 0, ty: 500, selector: 'document' })), {
      type: 'interaction_scroll_settled', data: { from_x: 0, from_y: 0, to_x: 0, to_y: 500, target_selector: 'document' },
    });
  });
  test('a masked key (password field) never carries its value', () => {
    const e = interactionEvent(JSON.stringify({ t: 'key', key: 'p', masked: true, selector: '#pw', tag: 'INPUT' }))!;
    assert.deepEqual(e.data, { masked: true, selector: '#pw', tag: 'INPUT' });
  });
  test('anything else from the page is ignored; strings are bounded', () => {
    assert.equal(interactionEvent('not json'), null);
    assert.equal(interactionEvent('"str"'), null);
    assert.equal(interactionEvent('null'), null);
    assert.equal(interactionEvent(JSON.stringify({ t: 'other' })), null);
    const e = interactionEvent(JSON.stringify({ t: 'click', x: 'nope', text: 'w'.repeat(1000), tag: { a: 1 } }))!;
    assert.equal(e.data.x, undefined);
    assert.equal(e.data.tag, undefined);
    assert.equal((e.data.text as string).length, 200);
  });
});
