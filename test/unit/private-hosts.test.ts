import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkCreateRules } from '../../src/domain/browser-rules.js';
import { checkPrivateHosts, DEFAULT_PRIVATE_RANGES, parsePrivateHost, type PrivateHost } from '../../src/domain/private-hosts.js';

/**
 * The contract's Network configuration rules, one table per rule. Each accepted entry is
 * checked for what it parses to; each refused one for a reason that names the rule.
 */

function accepted(entry: string): PrivateHost {
  const r = parsePrivateHost(entry);
  assert.ok(!('error' in r), `${JSON.stringify(entry)} must be accepted; got ${JSON.stringify(r)}`);
  return r;
}

function refused(entry: string, reason: RegExp): void {
  const r = parsePrivateHost(entry);
  assert.ok('error' in r, `${JSON.stringify(entry)} must be refused; got ${JSON.stringify(r)}`);
  assert.match(r.error, reason, `${JSON.stringify(entry)}: ${r.error}`);
  // The same verdict through checkPrivateHosts, naming the entry by index and quoting it.
  const problems = checkPrivateHosts(['ok.corp.example', entry]);
  assert.deepEqual(problems.map((p) => p.field), ['network.private_hosts[1]']);
  assert.ok(problems[0]!.message.startsWith(`${JSON.stringify(entry)}: `), problems[0]!.message);
}

const NOT_PRIVATE = /only (ranges inside|addresses in the private ranges)/;
const NOT_CANONICAL = /canonical masked form/;

describe('rules 1 and 2: the default private ranges', () => {
  test('the defaults are exactly the five private ranges of the contract', () => {
    assert.deepEqual([...DEFAULT_PRIVATE_RANGES], ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7']);
  });
  test('each default range is itself a valid entry, returned as written', () => {
    for (const r of DEFAULT_PRIVATE_RANGES) assert.deepEqual(accepted(r), { kind: 'cidr', cidr: r });
  });
  test('an empty list is valid (it disables the defaults)', () => {
    assert.deepEqual(checkPrivateHosts([]), []);
  });
});

describe('rule 3: entries are hostname patterns or IP / CIDR literals', () => {
  const table: [string, PrivateHost][] = [
    ['db.corp.example', { kind: 'host', host: 'db.corp.example', wildcard: false, port: null }],
    ['intranet', { kind: 'host', host: 'intranet', wildcard: false, port: null }],
    ['*.corp.example.com', { kind: 'host', host: 'corp.example.com', wildcard: true, port: null }],
    ['DB.Corp.Example', { kind: 'host', host: 'db.corp.example', wildcard: false, port: null }],
    ['10.1.2.3', { kind: 'ip', address: '10.1.2.3', port: null }],
    ['[fd00::1]', { kind: 'ip', address: 'fd00::1', port: null }],
    ['10.1.2.0/24', { kind: 'cidr', cidr: '10.1.2.0/24' }],
    ['fd00::/8', { kind: 'cidr', cidr: 'fd00::/8' }],
  ];
  for (const [entry, want] of table) test(`${entry} is a ${want.kind} entry`, () => assert.deepEqual(accepted(entry), want));

  const garbage: [string, RegExp][] = [
    ['', /empty/],
    [' 10.0.0.1', /spaces/],
    ['db corp', /spaces/],
    ['10.0.0', /neither a full IPv4 address nor a host name/],
    ['1.2.3.4.5', /neither a full IPv4 address nor a host name/],
    ['-bad.example', /not a valid host name/],
    ['bad-.example', /not a valid host name/],
    ['under_score.example', /not a valid host name/],
    ['a..b.example', /not a valid host name/],
    [`${'a'.repeat(64)}.example`, /not a valid host name/],
    ['http://db.corp.example', /not a valid/],
    ['db.corp.example/path', /not a valid CIDR range/],
  ];
  for (const [entry, reason] of garbage) test(`${JSON.stringify(entry)} is refused`, () => refused(entry, reason));
  test('a label of 63 characters is a valid host label', () => {
    accepted(`${'a'.repeat(63)}.example`);
  });
});

describe('rule 4: IP entries are literals, never hostnames that look like addresses', () => {
  test('an IPv4 address is an ip entry, not a host entry', () => {
    assert.equal(accepted('192.168.1.10').kind, 'ip');
  });
  // The URL parser reads a host whose last label is a number (decimal, octal or hex) as an
  // IPv4 address: such an entry is an address in disguise, never a host name, so the
  // address rules cannot be dodged by spelling 127.0.0.1 as 0x7f.0.0.1.
  for (const entry of ['0x7f.0.0.1', '0x0a.0.0.1', '*.10.0.0.1', '*.192.168.1.1', 'host.10', 'host.0x10']) {
    test(`${entry} is not accepted as a host name`, () => refused(entry, /neither a full IPv4 address nor a host name/));
  }
  test('a host name with digits in its labels is still a host name', () => {
    assert.equal(accepted('db1.corp2.example').kind, 'host');
    assert.equal(accepted('10x.corp.example').kind, 'host');
  });
});

describe('rule 5: CIDRs are canonical and inside the private ranges', () => {
  const ok = [
    '10.0.0.0/8',
    '10.1.0.0/16',
    '10.1.2.0/24',
    '10.1.2.3/32',
    '172.16.0.0/12',
    '172.31.0.0/16',
    '192.168.0.0/16',
    '192.168.1.0/24',
    '100.64.0.0/10',
    '100.127.0.0/16',
    'fc00::/7',
    'fd00::/8',
    'fd12:3456::/32',
    'fc00::1/128',
    'FD00::/8',
  ];
  for (const entry of ok) test(`${entry} is accepted`, () => assert.equal(accepted(entry).kind, 'cidr'));

  test('IPv6 ranges come back in their short lower-case form', () => {
    assert.deepEqual(accepted('FD00:0:0:0:0:0:0:0/8'), { kind: 'cidr', cidr: 'fd00::/8' });
  });

  const nonCanonical = ['10.1.0.0/8', '10.0.0.1/24', '192.168.1.1/16', '172.16.0.1/12', '100.64.0.1/10', 'fd12:3456::1/32', 'fd00::1/8'];
  for (const entry of nonCanonical) {
    test(`${entry} has host bits set and is refused, naming the canonical form`, () => refused(entry, NOT_CANONICAL));
  }
  test('the message names the canonical form', () => {
    assert.deepEqual(parsePrivateHost('10.1.0.0/8'), { error: 'CIDR must be in canonical masked form (host bits zero): 10.0.0.0/8' });
  });

  const outside: [string, string][] = [
    ['8.8.8.0/24', 'public'],
    ['1.0.0.0/8', 'public'],
    ['172.15.0.0/16', 'public, just below 172.16/12'],
    ['172.32.0.0/16', 'public, just above 172.16/12'],
    ['192.167.0.0/16', 'public, next to 192.168/16'],
    ['100.128.0.0/10', 'public, just above 100.64/10'],
    ['2001:db8::/32', 'public IPv6'],
    ['127.0.0.0/8', 'loopback'],
    ['127.0.0.1/32', 'loopback'],
    ['::1/128', 'loopback IPv6'],
    ['169.254.0.0/16', 'link-local'],
    ['fe80::/10', 'link-local IPv6'],
    ['0.0.0.0/0', 'unspecified (everything)'],
    ['0.0.0.0/32', 'unspecified'],
    ['::/0', 'unspecified IPv6 (everything)'],
    ['::/128', 'unspecified IPv6'],
    ['10.0.0.0/7', 'wider than 10/8'],
    ['172.16.0.0/11', 'wider than 172.16/12'],
    ['192.168.0.0/15', 'wider than 192.168/16'],
    ['100.64.0.0/9', 'wider than 100.64/10'],
    ['fc00::/6', 'wider than fc00::/7'],
    ['fe00::/7', 'next to fc00::/7'],
    ['::ffff:10.0.0.0/104', 'IPv4-mapped IPv6'],
  ];
  for (const [entry, what] of outside) {
    test(`${entry} (${what}) is refused`, () => {
      const r = parsePrivateHost(entry);
      assert.ok('error' in r, `${entry} must be refused`);
      // A wider range with the private prefix's bits set is also non-canonical; either reason names a rule.
      assert.match(r.error, entry === '172.16.0.0/11' || entry === '100.64.0.0/9' ? NOT_CANONICAL : NOT_PRIVATE);
      refused(entry, /.+/);
    });
  }

  const addresses: [string, string][] = [
    ['8.8.8.8', 'public'],
    ['172.32.0.1', 'public'],
    ['100.128.0.0', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.1.2.3', 'loopback'],
    ['169.254.1.1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['[::1]', 'loopback IPv6'],
    ['[fe80::1]', 'link-local IPv6'],
    ['[::]', 'unspecified IPv6'],
    ['[2001:db8::1]', 'public IPv6'],
    ['[::ffff:10.0.0.1]', 'IPv4-mapped IPv6'],
  ];
  for (const [entry, what] of addresses) test(`address ${entry} (${what}) is refused`, () => refused(entry, NOT_PRIVATE));
  for (const entry of ['10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.0.1', '100.64.0.1', '100.127.255.255', '[fc00::]', '[fdff:ffff::1]']) {
    test(`address ${entry} inside a private range is accepted`, () => assert.equal(accepted(entry).kind, 'ip'));
  }

  const malformed = ['10.0.0.0/33', 'fd00::/129', '10.0.0.0/-1', '10.0.0.0/', '/8', '10.0.0.0/8/8', '10/8', '300.0.0.0/8'];
  for (const entry of malformed) test(`${entry} is not a CIDR range`, () => refused(entry, /not a valid CIDR range|dotted decimal/));
});

describe('rule 6: exact IPv6 addresses are bracketed, IPv6 ranges are not', () => {
  test('a bracketed exact address is accepted, with or without a port', () => {
    assert.deepEqual(accepted('[fd00::1]'), { kind: 'ip', address: 'fd00::1', port: null });
    assert.deepEqual(accepted('[fd00::1]:8080'), { kind: 'ip', address: 'fd00::1', port: 8080 });
    assert.deepEqual(accepted('[FD00:0:0:0:0:0:0:1]'), { kind: 'ip', address: 'fd00::1', port: null });
  });
  test('an unbracketed IPv6 range is accepted', () => {
    assert.deepEqual(accepted('fd00:1234::/32'), { kind: 'cidr', cidr: 'fd00:1234::/32' });
  });
  for (const entry of ['fd00::1', 'fc00::', 'fd00:0:0:0:0:0:0:1', '::1', '::']) {
    test(`unbracketed exact address ${entry} is refused`, () => refused(entry, /must be bracketed/));
  }
  for (const entry of ['[fd00::/8]', '[fc00::/7]', '[fd00::/8]:80']) {
    test(`bracketed range ${entry} is refused`, () => refused(entry, /without brackets|must look like/));
  }
  test('the refusal of a bracketed range says how to write it', () => {
    assert.deepEqual(parsePrivateHost('[fd00::/8]'), { error: 'IPv6 CIDR ranges are written without brackets (fd00::/8)' });
  });
  for (const entry of ['[]', '[fd00::1', '[fd00::1]x', '[fd00::zz]', '[10.0.0.1]']) {
    test(`malformed bracket form ${entry} is refused`, () => refused(entry, /bracketed IPv6|not an IPv6 address/));
  }
});

describe('rule 7: a wildcard is a single leading "*." over at least two labels, not a public suffix', () => {
  const ok: [string, string][] = [
    ['*.corp.example.com', 'corp.example.com'],
    ['*.example.com', 'example.com'],
    ['*.corp.example', 'corp.example'],
    ['*.internal.corp', 'internal.corp'],
    ['*.myapp.example.co.uk', 'myapp.example.co.uk'],
    ['*.example.co.uk', 'example.co.uk'],
    ['*.someone.github.io', 'someone.github.io'],
  ];
  for (const [entry, host] of ok) test(`${entry} is accepted`, () => assert.deepEqual(accepted(entry), { kind: 'host', host, wildcard: true, port: null }));

  const publicSuffixes = ['*.co.uk', '*.github.io', '*.com.au', '*.appspot.com', '*.s3.amazonaws.com', '*.CO.UK'];
  for (const entry of publicSuffixes) test(`${entry} (directly over a public suffix) is refused`, () => refused(entry, /public suffix/));

  const oneLabel = ['*.com', '*.corp', '*.x', '*.uk'];
  for (const entry of oneLabel) test(`${entry} (one label) is refused`, () => refused(entry, /at least two labels/));

  const misplaced: [string, RegExp][] = [
    ['a.*.example.com', /single leading/],
    ['*.*.example.com', /single leading/],
    ['*example.com', /single leading/],
    ['db.*', /single leading/],
    ['**.example.com', /single leading/],
    ['*', /single leading|not a valid host name/],
    ['*.', /not a valid host name/],
    ['*.-x.example', /not a valid host name/],
  ];
  for (const [entry, reason] of misplaced) test(`${entry} is refused`, () => refused(entry, reason));
});

describe('rule 8: host and IP entries may carry a port 1..65535, CIDR ranges may not', () => {
  const ports: [string, PrivateHost][] = [
    ['db.corp.example:5432', { kind: 'host', host: 'db.corp.example', wildcard: false, port: 5432 }],
    ['intranet:1', { kind: 'host', host: 'intranet', wildcard: false, port: 1 }],
    ['*.corp.example.com:8443', { kind: 'host', host: 'corp.example.com', wildcard: true, port: 8443 }],
    ['10.1.2.3:65535', { kind: 'ip', address: '10.1.2.3', port: 65535 }],
    ['[fd00::1]:443', { kind: 'ip', address: 'fd00::1', port: 443 }],
  ];
  for (const [entry, want] of ports) test(`${entry} carries its port`, () => assert.deepEqual(accepted(entry), want));

  const badPorts = [
    'db.corp.example:0',
    'db.corp.example:65536',
    'db.corp.example:99999',
    'db.corp.example:',
    'db.corp.example:http',
    'db.corp.example:-1',
    '10.1.2.3:0',
    '10.1.2.3:65536',
    '[fd00::1]:0',
    '[fd00::1]:65536',
    '[fd00::1]:',
    '*.corp.example.com:123456',
  ];
  for (const entry of badPorts) test(`${entry} has no valid port and is refused`, () => refused(entry, /port must be a number from 1 to 65535/));

  for (const entry of ['10.0.0.0/8:80', '192.168.1.0/24:443', '10.1.2.3/32:80']) {
    test(`range ${entry} with a port is refused`, () => refused(entry, /CIDR ranges may not carry a port/));
  }
  test('an IPv6 range with a port is refused', () => refused('fd00::/8:80', /not a valid CIDR range/));
});

describe('rule 9: hostname entries are not resolved', () => {
  test('names that do not resolve anywhere are accepted as they are', () => {
    for (const entry of ['does-not-exist.invalid', 'nothing.here.test', '*.nowhere.invalid', 'localhost.invalid:8080']) {
      assert.equal(accepted(entry).kind, 'host', entry);
    }
    assert.deepEqual(checkPrivateHosts(['does-not-exist.invalid', 'nothing.here.test']), []);
  });
  test('a name is a host entry even where it would resolve to a public or loopback address', () => {
    // "localhost" resolves to 127.0.0.1, but rule 4 makes host entries independent of addresses.
    assert.equal(accepted('localhost').kind, 'host');
  });
});

describe('rule 10: private_hosts is checked on its own, unrelated to proxy settings', () => {
  test('the verdict on an entry does not depend on a proxy in the same request', () => {
    const entries = ['db.corp.example', '8.8.8.8'];
    const alone = checkCreateRules({ network: { private_hosts: entries } }).filter((p) => p.field.startsWith('network.private_hosts'));
    const withProxy = checkCreateRules({ network: { private_hosts: entries }, proxy: { mode: 'direct' } }).filter((p) => p.field.startsWith('network.private_hosts'));
    assert.deepEqual(alone.map((p) => p.field), ['network.private_hosts[1]']);
    assert.deepEqual(withProxy, alone);
  });
});

describe('checkPrivateHosts: one problem per refused entry, each naming it', () => {
  test('every refused entry is named by its index and quoted; accepted ones are not named', () => {
    const entries = ['10.0.0.0/8', '8.8.8.8', 'ok.corp.example', '*.co.uk', '[fd00::1]', 'fd00::1', '10.0.0.0/8:80', '10.1.0.0/8'];
    const problems = checkPrivateHosts(entries);
    assert.deepEqual(
      problems.map((p) => p.field),
      ['network.private_hosts[1]', 'network.private_hosts[3]', 'network.private_hosts[5]', 'network.private_hosts[6]', 'network.private_hosts[7]'],
    );
    for (const p of problems) {
      const i = Number(/\[(\d+)\]$/.exec(p.field)![1]);
      assert.ok(p.message.startsWith(`"${entries[i]}": `), p.message);
    }
  });
  test('the field prefix can be chosen', () => {
    assert.deepEqual(checkPrivateHosts(['127.0.0.1'], 'x.hosts').map((p) => p.field), ['x.hosts[0]']);
  });
  test('32 valid entries give no problem; the same bad entry twice gives two', () => {
    assert.deepEqual(checkPrivateHosts(Array.from({ length: 32 }, (_, i) => `h${i}.corp.example`)), []);
    assert.deepEqual(checkPrivateHosts(['127.0.0.1', '127.0.0.1']).map((p) => p.field), ['network.private_hosts[0]', 'network.private_hosts[1]']);
  });
  test('checkCreateRules reports private_hosts problems next to the others', () => {
    const p = checkCreateRules({ network: { private_hosts: ['ok.corp.example', '*.github.io', '169.254.0.0/16'] }, timeout_seconds: 60 });
    const hosts = p.filter((x) => x.field.startsWith('network.private_hosts'));
    assert.deepEqual(hosts.map((x) => x.field), ['network.private_hosts[1]', 'network.private_hosts[2]']);
    assert.match(hosts[0]!.message, /public suffix/);
    assert.match(hosts[1]!.message, NOT_PRIVATE);
  });
});
