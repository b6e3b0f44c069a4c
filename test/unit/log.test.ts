import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { redactUrl } from '../../src/log.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

describe('redactUrl', () => {
  const cases: [string, string][] = [
    ['/browser/cdp?jwt=eyJhbGciOi.eyJzdWIi.c2ln', '/browser/cdp?jwt=[redacted]'],
    ['/browser/cdp?x=1&jwt=eyJ.a.b&y=2', '/browser/cdp?x=1&jwt=[redacted]&y=2'],
    ['/browser/cdp?JWT=abc', '/browser/cdp?JWT=[redacted]'],
    ['/browser/cdp?jwt=abc/json/version/', '/browser/cdp?jwt=[redacted]'],
    ['ws://h:1/browser/bidi?jwt=a.b.c', 'ws://h:1/browser/bidi?jwt=[redacted]'],
    ['/a?jwt=one&jwt=two', '/a?jwt=[redacted]&jwt=[redacted]'],
    ['/browser/cdp?jwt=', '/browser/cdp?jwt=[redacted]'],
  ];
  for (const [input, want] of cases) {
    test(`${input} -> ${want}`, () => assert.equal(redactUrl(input), want));
  }
  test('the token value is gone from every redacted URL', () => {
    const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzIn0.sig-nature_x';
    for (const u of [`/browser/cdp?jwt=${token}`, `/browser/live?a=b&jwt=${token}#frag`, `/x?jwt=${token}&jwt=${token}`]) {
      assert.ok(!redactUrl(u).includes(token), u);
      assert.ok(!redactUrl(u).includes('eyJ'), u);
    }
  });
  test('URLs without a jwt parameter are unchanged', () => {
    for (const u of ['/browsers', '/browsers?limit=5&offset=0', '/a?xjwt=1', '/jwt=abc', '/browser/cdp?notjwt=abc']) {
      assert.equal(redactUrl(u), u);
    }
  });
});

describe('createLogger', () => {
  test('request records carry method, redacted URL and address, never headers; nested secrets are censored', () => {
    const script = `
      import { createLogger } from ${JSON.stringify(path.join(ROOT, 'src/log.ts'))};
      const log = createLogger('info');
      log.info({ req: { method: 'GET', url: '/browser/cdp?jwt=TOKENVALUE1&x=1', ip: '10.1.2.3', headers: { authorization: 'Bearer SECRETKEY1' } } }, 'request');
      log.info({ cfg: { apiKey: 'SECRETKEY2', api_key: 'SECRETKEY3' }, conn: { jwt: 'TOKENVALUE2' }, headers: { authorization: 'Bearer SECRETKEY4' } }, 'other');
      log.debug({ note: 'below the level' }, 'hidden');
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 2, 'the debug record is below the level');
    const [reqRec, other] = lines as [Record<string, unknown>, Record<string, unknown>];
    assert.equal(reqRec.service, 'browserd');
    assert.deepEqual(reqRec.req, { method: 'GET', url: '/browser/cdp?jwt=[redacted]&x=1', remote: '10.1.2.3' });
    assert.deepEqual(other.cfg, { apiKey: '[redacted]', api_key: '[redacted]' });
    assert.deepEqual(other.conn, { jwt: '[redacted]' });
    assert.deepEqual(other.headers, { authorization: '[redacted]' });
    for (const secret of ['TOKENVALUE1', 'TOKENVALUE2', 'SECRETKEY1', 'SECRETKEY2', 'SECRETKEY3', 'SECRETKEY4']) {
      assert.ok(!r.stdout.includes(secret), `${secret} reached the log`);
    }
  });
});
