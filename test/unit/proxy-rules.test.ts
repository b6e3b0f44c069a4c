import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkProxyCreate, isBypassHost, isHostOrIp, type ProxyCreateRequest } from '../../src/domain/proxy-request.js';
import { checkUpdateProxy, egressOf, proxyFields, requestedOnCreate, requestedOnUpdate } from '../../src/domain/proxy-selection.js';
import { checkCreateRules } from '../../src/domain/browser-rules.js';
import { chromiumBypassList, matchesBypassHost } from '../../src/domain/proxy-bypass.js';
import { upstreamUrl } from '../../src/proxies/proxy-service.js';

describe('Proxy selection on create', () => {
  test('proxy: exactly one of mode, id, name; an empty object is invalid', () => {
    for (const proxy of [{}, { mode: 'direct' as const, id: 'p' }, { id: 'p', name: 'n' }]) {
      assert.ok(checkCreateRules({ proxy }).some((p) => p.field === 'proxy' && /exactly one of mode, id, name/.test(p.message)), JSON.stringify(proxy));
    }
    for (const proxy of [{ mode: 'direct' as const }, { mode: 'default' as const }, { id: 'p' }, { name: 'n' }]) {
      assert.deepEqual(checkCreateRules({ proxy }).filter((p) => p.field.startsWith('proxy')), [], JSON.stringify(proxy));
    }
  });
  test('proxy together with proxy_id is invalid (named on proxy_id); either alone is fine', () => {
    assert.ok(checkCreateRules({ proxy: { mode: 'direct' }, proxy_id: 'p' }).some((p) => p.field === 'proxy_id' && /cannot be combined with proxy/.test(p.message)));
    assert.deepEqual(checkCreateRules({ proxy_id: 'p' }), []);
  });
  test('what was asked: proxy first, else the deprecated proxy_id (same as id), else nothing (rule 1)', () => {
    assert.deepEqual(requestedOnCreate({ proxy: { mode: 'direct' } }), { mode: 'direct' });
    assert.deepEqual(requestedOnCreate({ proxy: { id: 'p1' } }), { id: 'p1', via: 'proxy' });
    assert.deepEqual(requestedOnCreate({ proxy: { name: 'mine' } }), { name: 'mine' });
    assert.deepEqual(requestedOnCreate({ proxy_id: 'p1' }), { id: 'p1', via: 'proxy_id' });
    assert.equal(requestedOnCreate({}), null);
  });
});

describe('Proxy selection on update', () => {
  test('rule 2: nothing given leaves the proxy unchanged', () => {
    assert.equal(requestedOnUpdate({}), null);
  });
  test('proxy selections; proxy_id selects, "" or null removes (back to default); disable_default_proxy is mode direct/default', () => {
    assert.deepEqual(requestedOnUpdate({ proxy: { id: 'p' } }), { id: 'p', via: 'proxy' });
    assert.deepEqual(requestedOnUpdate({ proxy: { mode: 'default' } }), { mode: 'default' });
    assert.deepEqual(requestedOnUpdate({ proxy_id: 'p' }), { id: 'p', via: 'proxy_id' });
    assert.deepEqual(requestedOnUpdate({ proxy_id: '' }), { mode: 'default' });
    assert.deepEqual(requestedOnUpdate({ proxy_id: null }), { mode: 'default' });
    assert.deepEqual(requestedOnUpdate({ disable_default_proxy: true }), { mode: 'direct' });
    assert.deepEqual(requestedOnUpdate({ disable_default_proxy: false }), { mode: 'default' });
  });
  test('at most one of proxy, proxy_id, disable_default_proxy; an empty or double selection is invalid', () => {
    assert.deepEqual(checkUpdateProxy({ proxy: { mode: 'direct' }, proxy_id: 'x' }), [{ field: 'proxy_id', message: 'cannot be combined with proxy' }]);
    assert.deepEqual(checkUpdateProxy({ proxy_id: 'x', disable_default_proxy: true }), [{ field: 'disable_default_proxy', message: 'cannot be combined with proxy_id' }]);
    assert.match(checkUpdateProxy({ proxy: {} })[0]!.message, /exactly one of mode, id, name/);
    assert.match(checkUpdateProxy({ proxy: { id: 'a', name: 'b' } })[0]!.message, /exactly one/);
    assert.deepEqual(checkUpdateProxy({ proxy: { name: 'b' } }), []);
    assert.deepEqual(checkUpdateProxy({}), []);
  });
});

describe('egress (rules 1 and 3)', () => {
  test('omitted or default: stealth sessions use the default stealth proxy, others go direct', () => {
    assert.deepEqual(egressOf(undefined, true), { kind: 'stealth_default' });
    assert.deepEqual(egressOf(undefined, false), { kind: 'direct' });
    assert.deepEqual(egressOf({ mode: 'default' }, true), { kind: 'stealth_default' });
    assert.deepEqual(egressOf({ mode: 'default' }, false), { kind: 'direct' });
  });
  test('direct is direct regardless of stealth; a selected proxy is that proxy regardless of stealth', () => {
    assert.deepEqual(egressOf({ mode: 'direct' }, true), { kind: 'direct' });
    assert.deepEqual(egressOf({ id: 'p' }, true), { kind: 'proxy', id: 'p' });
    assert.deepEqual(egressOf({ id: 'p' }, false), { kind: 'proxy', id: 'p' });
  });
  test('the response: selected proxies by id (and the deprecated proxy_id), modes as given, nothing when never selected', () => {
    assert.deepEqual(proxyFields({ id: 'p' }), { proxy: { id: 'p' }, proxy_id: 'p' });
    assert.deepEqual(proxyFields({ mode: 'direct' }), { proxy: { mode: 'direct' } });
    assert.deepEqual(proxyFields(undefined), {});
  });
});

describe('proxy create rules', () => {
  const base: ProxyCreateRequest = { type: 'custom', config: { host: 'proxy.example', port: 8080 } };
  test('custom with a host name or IP is fine', () => {
    assert.deepEqual(checkProxyCreate(base), []);
    assert.deepEqual(checkProxyCreate({ ...base, config: { host: '10.0.0.1', port: 1, username: 'u', password: 'p' } }), []);
    assert.deepEqual(checkProxyCreate({ ...base, config: { host: '::1', port: 1 } }), []);
  });
  test('provider types are refused, config is required, hosts are names or addresses, a password needs a user', () => {
    assert.equal(checkProxyCreate({ type: 'datacenter' })[0]!.field, 'type');
    assert.equal(checkProxyCreate({ type: 'custom' })[0]!.field, 'config');
    for (const host of ['http://x', 'x:80', 'a b', 'x/y', '-x.example', '1.2.3']) assert.equal(isHostOrIp(host), false, host);
    assert.equal(checkProxyCreate({ ...base, config: { host: 'x', port: 1, password: 'p' } })[0]!.field, 'config.password');
  });
  test('bypass_hosts: names, *.suffix, .suffix, addresses', () => {
    for (const h of ['intranet', 'a.example', '*.corp.example', '.corp.example', '10.1.2.3', '::1']) assert.equal(isBypassHost(h), true, h);
    for (const h of ['*', '*.', 'a b', 'http://x']) assert.equal(isBypassHost(h), false, h);
  });
  test("a proxy's bypass_hosts: exact names, names under a suffix (not the suffix itself), equal addresses", () => {
    const list = ['intranet', '*.corp.example', '.lab.example', '10.1.2.3', '::1'];
    for (const h of ['intranet', 'INTRANET', 'a.corp.example', 'x.y.lab.example', '10.1.2.3', '[::1]', '0:0:0:0:0:0:0:1']) assert.equal(matchesBypassHost(list, h), true, h);
    for (const h of ['intranet.example', 'corp.example', 'lab.example', 'xcorp.example', '10.1.2.4', 'example.com']) assert.equal(matchesBypassHost(list, h), false, h);
  });
});

describe('upstream URLs', () => {
  test('credentials are URL-encoded; socks5 becomes socks5h so the proxy resolves names; IPv6 hosts are bracketed', () => {
    assert.equal(upstreamUrl('http', 'p.example', 3128, 'al ice', 'p@ss:/w'), 'http://al%20ice:p%40ss%3A%2Fw@p.example:3128');
    assert.equal(upstreamUrl('socks5', '10.0.0.1', 1080, 'u', null), 'socks5h://u@10.0.0.1:1080');
    assert.equal(upstreamUrl('https', '::1', 443, null, null), 'https://[::1]:443');
  });
});

describe('private_hosts -> --proxy-bypass-list', () => {
  const list = (hosts: string[] | undefined) => chromiumBypassList(hosts).split(';');
  test('rule 1: omitted, the five default private ranges go direct; loopback follows the egress (<-loopback>)', () => {
    assert.deepEqual(list(undefined), ['<-loopback>', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7']);
  });
  test('rule 2: a list replaces the defaults with exactly its entries; an empty list bypasses nothing', () => {
    assert.deepEqual(list(['10.1.0.0/16']), ['<-loopback>', '10.1.0.0/16']);
    assert.deepEqual(list([]), ['<-loopback>']);
  });
  test('rules 3, 6, 7, 8: names, wildcards, exact IPs (IPv6 bracketed), CIDRs (IPv6 unbracketed), ports where allowed', () => {
    // <-loopback> first: Chromium lets later rules override earlier ones (measured).
    assert.deepEqual(list(['intranet.corp', 'Wiki.Corp.Example:8443', '*.corp.example', '10.2.3.4', '10.2.3.4:8080', '[fd00::1]', '[FD00::0:1]:8443', 'fd00:ab::/32', '100.64.0.0/10']), [
      '<-loopback>',
      'intranet.corp',
      'wiki.corp.example:8443',
      '*.corp.example',
      '10.2.3.4',
      '10.2.3.4:8080',
      '[fd00::1]',
      '[fd00::1]:8443',
      'fd00:ab::/32',
      '100.64.0.0/10',
    ]);
  });
  test('the same rule twice appears once; an invalid entry is never turned into a rule', () => {
    assert.deepEqual(list(['a.example', 'A.example']), ['<-loopback>', 'a.example']);
    assert.throws(() => chromiumBypassList(['8.8.8.8']), /invalid/);
  });
});
