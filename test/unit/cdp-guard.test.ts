import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BLOCKED_CDP_METHODS, inspectCommand, mightBeRefused, refusalReply, refusedCommand } from '../../src/gateway/cdp-guard.js';

const BLOCKED = ['Extensions.loadUnpacked', 'Extensions.uninstall', 'Browser.crash', 'Browser.crashGpuProcess', 'Target.setRemoteLocations', 'Target.exposeDevToolsProtocol'];

describe('blocked CDP methods', () => {
  test('the list is the documented one', () => {
    assert.deepEqual([...BLOCKED_CDP_METHODS].sort(), [...BLOCKED].sort());
  });

  for (const method of BLOCKED) {
    test(`${method} without sessionId is refused; the reply keeps the id`, () => {
      const frame = JSON.stringify({ id: 41, method, params: { path: '/etc' } });
      const r = refusedCommand(frame);
      assert.deepEqual(r, { id: 41, method });
      const reply = JSON.parse(refusalReply(r!)) as Record<string, unknown>;
      assert.deepEqual(reply, { id: 41, error: { code: -32000, message: `${method} is not allowed through browserd` } });
      assert.ok(!('sessionId' in reply));
      assert.ok(!('result' in reply));
    });
    test(`${method} with a sessionId is refused; the reply keeps id and sessionId`, () => {
      const frame = JSON.stringify({ id: 7, sessionId: 'ABCDEF0123', method, params: {} });
      const r = refusedCommand(frame);
      assert.deepEqual(r, { id: 7, sessionId: 'ABCDEF0123', method });
      const reply = JSON.parse(refusalReply(r!)) as Record<string, unknown>;
      assert.deepEqual(reply, { id: 7, sessionId: 'ABCDEF0123', error: { code: -32000, message: `${method} is not allowed through browserd` } });
    });
  }

  test('whitespace and key order in the frame do not let a blocked method through', () => {
    const frame = '{ "params" : {"path":"/x"}, "sessionId":"S1",\n "method" : "Extensions.loadUnpacked", "id" : 3 }';
    assert.deepEqual(refusedCommand(frame), { id: 3, sessionId: 'S1', method: 'Extensions.loadUnpacked' });
  });
  test('a blocked method spelled with JSON \\u escapes is still refused (Chromium would decode it)', () => {
    const frames = [
      '{"id":12,"method":"Extensions.loadUnpacke\\u0064","params":{"path":"/tmp/x"}}',
      '{"id":13,"sessionId":"S2","method":"\\u0042rowser.crash"}',
      '{"id":14,"method":"Target.setRemoteLocation\\u0073","params":{"locations":[]}}',
    ];
    assert.deepEqual(refusedCommand(frames[0]!), { id: 12, method: 'Extensions.loadUnpacked' });
    assert.deepEqual(refusedCommand(frames[1]!), { id: 13, sessionId: 'S2', method: 'Browser.crash' });
    assert.deepEqual(refusedCommand(frames[2]!), { id: 14, method: 'Target.setRemoteLocations' });
    for (const f of frames) assert.equal(mightBeRefused(f), true);
  });
  test('an ordinary frame with \\u escapes is relayed', () => {
    assert.equal(refusedCommand('{"id":15,"method":"Runtime.evaluate","params":{"expression":"\\u0031+1"}}'), null);
  });
  test('a blocked method given as a Buffer frame is spotted by the pre-check', () => {
    assert.equal(mightBeRefused(Buffer.from(JSON.stringify({ id: 1, method: 'Browser.crash' }))), true);
  });
});

describe('ordinary frames are relayed', () => {
  const ordinary = [
    { id: 1, method: 'Page.navigate', params: { url: 'https://example.com' } },
    { id: 2, sessionId: 'S', method: 'Runtime.evaluate', params: { expression: 'console.log("hi")' } },
    { id: 3, method: 'Target.getTargets' },
    { id: 4, method: 'Browser.getVersion' },
    { id: 5, method: 'Target.setDiscoverTargets', params: { discover: true } },
    { id: 6, method: 'Browser.close' },
  ];
  for (const msg of ordinary) {
    test(msg.method, () => {
      const frame = JSON.stringify(msg);
      assert.equal(refusedCommand(frame), null);
      // Page.navigate has a parameter rule (file: URLs), so it is parsed; the others never are.
      assert.equal(mightBeRefused(frame), msg.method === 'Page.navigate');
    });
  }
  test('an expression that merely mentions a blocked method is relayed', () => {
    const frame = JSON.stringify({
      id: 9,
      sessionId: 'S',
      method: 'Runtime.evaluate',
      params: { expression: 'const m = "Extensions.loadUnpacked"; m.length' },
    });
    assert.equal(refusedCommand(frame), null);
    const unquoted = JSON.stringify({ id: 11, method: 'Runtime.evaluate', params: { expression: 'chrome.Extensions.loadUnpacked' } });
    assert.equal(refusedCommand(unquoted), null);
  });
  test('a blocked name inside params.method (not the command) is relayed', () => {
    const frame = JSON.stringify({ id: 10, method: 'Page.addScriptToEvaluateOnNewDocument', params: { method: 'Browser.crash' } });
    // The cheap pre-check sees the quoted name; the parsed method decides.
    assert.equal(mightBeRefused(frame), true);
    assert.equal(refusedCommand(frame), null);
  });
  test('method names are matched exactly, not by prefix or case', () => {
    for (const method of ['Browser.crashX', 'browser.crash', 'Extensions.loadUnpacked2', 'Extensions']) {
      assert.equal(refusedCommand(JSON.stringify({ id: 1, method })), null, method);
    }
  });
  test('an event or a response from the browser is not a command to refuse', () => {
    assert.equal(refusedCommand(JSON.stringify({ id: 1, result: { note: '"Browser.crash"' } })), null);
  });
  test('a frame that is not JSON is relayed unchanged (the browser answers it)', () => {
    assert.equal(refusedCommand('{"method":"Browser.crash", broken'), null);
    assert.equal(refusedCommand('hello'), null);
  });
});

describe('refusal without a numeric id', () => {
  test('a missing id is answered with id 0', () => {
    assert.deepEqual(refusedCommand(JSON.stringify({ method: 'Browser.crash' })), { id: 0, method: 'Browser.crash' });
  });
  test('a non-string sessionId is dropped from the reply', () => {
    const r = refusedCommand(JSON.stringify({ id: 2, sessionId: 5, method: 'Browser.crash' }));
    assert.deepEqual(r, { id: 2, method: 'Browser.crash' });
    assert.ok(!('sessionId' in (JSON.parse(refusalReply(r!)) as object)));
  });
});

describe('parameters that reach outside the session', () => {
  const dir = '/data/runtime/s1';
  const frame = (method: string, params: Record<string, unknown>) => JSON.stringify({ id: 9, method, params });
  const refused = [
    ['Page.navigate', { url: 'file:///etc/passwd' }],
    ['Page.navigate', { url: ' FILE:///etc/passwd' }],
    ['Page.navigate', { url: 'view-source:file:///etc/passwd' }],
    ['Page.navigate', { url: 'view-source:view-source:file:///x' }],
    ['Target.createTarget', { url: 'file:///' }],
    ['DOM.setFileInputFiles', { files: ['/etc/passwd'] }],
    ['DOM.setFileInputFiles', { files: [`${dir}/ok.txt`, '/data/runtime/s2/secret'] }],
    ['DOM.setFileInputFiles', { files: [`${dir}/../s2/secret`] }],
    ['Target.createBrowserContext', { proxyServer: 'http://1.2.3.4:8080' }],
    ['Target.createBrowserContext', { proxyBypassList: '<-loopback>' }],
    ['Input.dispatchDragEvent', { type: 'drop', x: 1, y: 1, data: { items: [], files: ['/etc/passwd'], dragOperationsMask: 1 } }],
    ['PWA.launchFilesInApp', { manifestId: 'm', files: ['/etc/passwd'] }],
    ['PWA.install', { manifestId: 'm', installUrlOrBundleUrl: '/data/runtime/s2/app.wbn' }],
    ['PWA.install', { manifestId: 'm', installUrlOrBundleUrl: 'file:///etc/app.wbn' }],
    ['Network.loadNetworkResource', { frameId: 'F', url: 'file:///etc/passwd', options: { disableCache: true, includeCredentials: false } }],
  ] as const;
  for (const [method, params] of refused) {
    test(`refuses ${method} ${JSON.stringify(params)}`, () => {
      const r = refusedCommand(frame(method, params), dir);
      assert.ok(r, 'refused');
      assert.equal(r.method, method);
      assert.ok(r.reason && r.reason.length > 10);
      assert.match(String((JSON.parse(refusalReply(r)) as { error: { message: string } }).error.message), new RegExp(`^${method.replace('.', '\\.')} is not allowed through browserd: `));
    });
  }
  const relayed = [
    ['Page.navigate', { url: 'https://example.com/file:///x' }],
    ['Page.navigate', { url: 'http://127.0.0.1:8080/' }],
    ['Target.createTarget', { url: 'about:blank' }],
    ['DOM.setFileInputFiles', { files: [`${dir}/upload.txt`, `${dir}/sub/b.png`] }],
    ['Page.setDownloadBehavior', { behavior: 'allow', downloadPath: `${dir}/Downloads` }],
    ['Browser.setDownloadBehavior', { behavior: 'deny' }],
    ['Target.createBrowserContext', { disposeOnDetach: true }],
    ['Input.dispatchDragEvent', { type: 'drop', x: 1, y: 1, data: { items: [{ mimeType: 'text/plain', data: 'x' }], dragOperationsMask: 1 } }],
    ['Input.dispatchDragEvent', { type: 'drop', x: 1, y: 1, data: { items: [], files: [`${dir}/upload.txt`], dragOperationsMask: 1 } }],
    ['PWA.install', { manifestId: 'm', installUrlOrBundleUrl: 'https://app.example/' }],
    ['Network.loadNetworkResource', { frameId: 'F', url: 'https://example.com/app.js.map', options: { disableCache: true, includeCredentials: false } }],
  ] as const;
  for (const [method, params] of relayed) {
    test(`relays ${method} ${JSON.stringify(params)}`, () => assert.equal(refusedCommand(frame(method, params), dir), null));
  }
  for (const [method, downloadPath] of [['Page.setDownloadBehavior', '/tmp'], ['Browser.setDownloadBehavior', `${dir}-evil`], ['Browser.setDownloadBehavior', `${dir}/../s2`]] as const) {
    test(`${method} to ${downloadPath} is kept but moved into the session's downloads directory`, () => {
      const v = inspectCommand(JSON.stringify({ id: 4, sessionId: 'S', method, params: { behavior: 'allowAndName', downloadPath, eventsEnabled: true } }), dir);
      assert.ok(v && 'rewritten' in v);
      assert.deepEqual(JSON.parse(v.rewritten), { id: 4, sessionId: 'S', method, params: { behavior: 'allowAndName', downloadPath: `${dir}/downloads`, eventsEnabled: true } });
      assert.equal(refusedCommand(JSON.stringify({ id: 4, method, params: { downloadPath } }), dir), null);
    });
  }
  test('without a known session directory every file path is refused', () => {
    assert.ok(refusedCommand(frame('DOM.setFileInputFiles', { files: [`${dir}/upload.txt`] })));
  });
});
