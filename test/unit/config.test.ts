import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError, defaultPublicUrl, loadConfig, type Config } from '../../src/config.js';

const CWD = '/srv/browserd';

function load(env: Record<string, string>): Config {
  return loadConfig(env, CWD);
}

/** The problems of the ConfigError that `env` must raise. */
function problems(env: Record<string, string>): string[] {
  try {
    load(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    return err.problems;
  }
  assert.fail(`expected a ConfigError for ${JSON.stringify(env)}`);
}

function rejects(env: Record<string, string>, varName: string): void {
  const p = problems(env);
  assert.equal(p.length, 1, `one problem expected, got ${JSON.stringify(p)}`);
  assert.match(p[0]!, new RegExp(varName));
}

describe('loadConfig defaults', () => {
  test('an empty environment gives every default', () => {
    const c = load({});
    assert.deepEqual(c, {
      host: '127.0.0.1',
      port: 8080,
      publicUrl: 'http://127.0.0.1:8080',
      dataDir: path.join(CWD, 'data'),
      store: { kind: 'sqlite', file: path.join(CWD, 'data', 'browserd.sqlite') },
      apiKey: null,
      maxSessions: 16,
      rateLimitPerMinute: 600,
      chromiumPath: '/usr/lib/chromium/chromium',
      sessionUser: 'browserd',
      regions: ['us-east'],
      region: 'us-east',
      nodeId: null,
      logLevel: 'info',
      reaperIntervalMs: 5000,
      warm: { headless: 2, headful: 1, refillGapMs: 1500 },
      telemetryScreenshotIntervalMs: 5000,
      telemetryRetainedEvents: 10_000,
    } satisfies Config);
  });

  test('empty strings count as unset', () => {
    const c = load({
      BROWSERD_HOST: '',
      BROWSERD_PORT: '',
      BROWSERD_API_KEY: '',
      BROWSERD_MAX_SESSIONS: '',
      BROWSERD_RATE_LIMIT: '',
      BROWSERD_REGION: '',
      BROWSERD_LOG_LEVEL: '',
      BROWSERD_DATABASE_URL: '',
      BROWSERD_PUBLIC_URL: '',
    });
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 8080);
    assert.equal(c.apiKey, null);
    assert.equal(c.maxSessions, 16);
    assert.equal(c.rateLimitPerMinute, 600);
    assert.equal(c.region, 'us-east');
    assert.equal(c.logLevel, 'info');
    assert.equal(c.store.kind, 'sqlite');
    assert.equal(c.publicUrl, 'http://127.0.0.1:8080');
  });

  test('reads only the object it is given, not process.env', () => {
    const saved = process.env.BROWSERD_PORT;
    process.env.BROWSERD_PORT = 'not-a-port';
    try {
      assert.equal(load({}).port, 8080);
    } finally {
      if (saved === undefined) delete process.env.BROWSERD_PORT;
      else process.env.BROWSERD_PORT = saved;
    }
  });
});

describe('BROWSERD_HOST', () => {
  test('accepts names, IPv4 and IPv6 addresses', () => {
    assert.equal(load({ BROWSERD_HOST: '0.0.0.0' }).host, '0.0.0.0');
    assert.equal(load({ BROWSERD_HOST: 'browserd.internal' }).host, 'browserd.internal');
    assert.equal(load({ BROWSERD_HOST: '::1' }).host, '::1');
  });
  test('rejects a value with spaces or slashes', () => {
    rejects({ BROWSERD_HOST: 'two words' }, 'BROWSERD_HOST');
    rejects({ BROWSERD_HOST: 'http://x' }, 'BROWSERD_HOST');
  });
});

describe('BROWSERD_PORT', () => {
  for (const [raw, want] of [
    ['0', 0],
    ['1', 1],
    ['65535', 65535],
    [' 9000 ', 9000],
  ] as const) {
    test(`accepts ${JSON.stringify(raw)}`, () => assert.equal(load({ BROWSERD_PORT: raw }).port, want));
  }
  for (const raw of ['65536', 'abc', '-1', '80.5', '1e3', '0x50']) {
    test(`rejects ${JSON.stringify(raw)}`, () => rejects({ BROWSERD_PORT: raw }, 'BROWSERD_PORT'));
  }
});

describe('BROWSERD_PUBLIC_URL', () => {
  test('defaults to the listen address; a wildcard host is shown as 127.0.0.1', () => {
    assert.equal(load({ BROWSERD_PORT: '9000' }).publicUrl, 'http://127.0.0.1:9000');
    assert.equal(load({ BROWSERD_HOST: '0.0.0.0', BROWSERD_PORT: '9000' }).publicUrl, 'http://127.0.0.1:9000');
    assert.equal(load({ BROWSERD_HOST: '::', BROWSERD_PORT: '9000' }).publicUrl, 'http://127.0.0.1:9000');
    assert.equal(load({ BROWSERD_HOST: '::1', BROWSERD_PORT: '9000' }).publicUrl, 'http://[::1]:9000');
    assert.equal(defaultPublicUrl('example.test', 81), 'http://example.test:81');
  });
  test('is null while the port is 0 (not known yet) and unset', () => {
    assert.equal(load({ BROWSERD_PORT: '0' }).publicUrl, null);
  });
  test('an explicit value wins even with port 0', () => {
    assert.equal(load({ BROWSERD_PORT: '0', BROWSERD_PUBLIC_URL: 'https://b.example' }).publicUrl, 'https://b.example');
  });
  test('trailing slashes are stripped', () => {
    assert.equal(load({ BROWSERD_PUBLIC_URL: 'https://browsers.example.com/' }).publicUrl, 'https://browsers.example.com');
    assert.equal(load({ BROWSERD_PUBLIC_URL: 'https://browsers.example.com/base//' }).publicUrl, 'https://browsers.example.com/base');
    assert.equal(load({ BROWSERD_PUBLIC_URL: 'http://10.0.0.5:8080' }).publicUrl, 'http://10.0.0.5:8080');
  });
  for (const raw of ['https://b.example/?x=1', 'https://b.example/#frag', 'https://user:pw@b.example', 'ftp://b.example', 'ws://b.example', 'not a url', '/relative']) {
    test(`rejects ${JSON.stringify(raw)}`, () => rejects({ BROWSERD_PUBLIC_URL: raw }, 'BROWSERD_PUBLIC_URL'));
  }
});

describe('BROWSERD_DATA_DIR and BROWSERD_DATABASE_URL', () => {
  test('unset database URL -> SQLite file inside the data dir (relative dirs resolve against cwd)', () => {
    const c = load({ BROWSERD_DATA_DIR: 'state' });
    assert.equal(c.dataDir, path.join(CWD, 'state'));
    assert.deepEqual(c.store, { kind: 'sqlite', file: path.join(CWD, 'state', 'browserd.sqlite') });
    const abs = load({ BROWSERD_DATA_DIR: '/var/lib/browserd' });
    assert.deepEqual(abs.store, { kind: 'sqlite', file: '/var/lib/browserd/browserd.sqlite' });
  });
  test('postgres:// and postgresql:// select PostgreSQL with the URL as given', () => {
    const u1 = 'postgres://u:p@db.example:5432/browserd';
    const u2 = 'postgresql://u@db.example/browserd?sslmode=require';
    assert.deepEqual(load({ BROWSERD_DATABASE_URL: u1 }).store, { kind: 'postgres', url: u1 });
    assert.deepEqual(load({ BROWSERD_DATABASE_URL: u2 }).store, { kind: 'postgres', url: u2 });
  });
  for (const raw of ['mysql://u:p@db/browserd', 'sqlite:///tmp/x.db', 'db.example:5432', 'http://db.example']) {
    test(`rejects ${JSON.stringify(raw)}`, () => rejects({ BROWSERD_DATABASE_URL: raw }, 'BROWSERD_DATABASE_URL'));
  }
});

describe('BROWSERD_API_KEY', () => {
  test('unset -> null', () => assert.equal(load({}).apiKey, null));
  test('16 and 256 printable characters are accepted as given', () => {
    const k16 = 'a'.repeat(16);
    const k256 = 'Z'.repeat(256);
    assert.equal(load({ BROWSERD_API_KEY: k16 }).apiKey, k16);
    assert.equal(load({ BROWSERD_API_KEY: k256 }).apiKey, k256);
    assert.equal(load({ BROWSERD_API_KEY: 'bd_!#$%&()*+,-./:;<=>?@' }).apiKey, 'bd_!#$%&()*+,-./:;<=>?@');
  });
  for (const [label, raw] of [
    ['15 characters (too short)', 'a'.repeat(15)],
    ['257 characters (too long)', 'a'.repeat(257)],
    ['a space', 'abcdefgh ijklmnopq'],
    ['a non-ASCII character', 'abcdefghijklmnopé'],
  ] as const) {
    test(`rejects ${label}`, () => rejects({ BROWSERD_API_KEY: raw }, 'BROWSERD_API_KEY'));
  }
  test('the error does not echo the key', () => {
    const secret = 'short-secret';
    const p = problems({ BROWSERD_API_KEY: secret });
    assert.ok(!p.join('\n').includes(secret));
  });
});

describe('BROWSERD_MAX_SESSIONS', () => {
  test('default 16; 1 and 10000 accepted', () => {
    assert.equal(load({}).maxSessions, 16);
    assert.equal(load({ BROWSERD_MAX_SESSIONS: '1' }).maxSessions, 1);
    assert.equal(load({ BROWSERD_MAX_SESSIONS: '10000' }).maxSessions, 10000);
  });
  for (const raw of ['0', '10001', 'many', '-3']) {
    test(`rejects ${JSON.stringify(raw)}`, () => rejects({ BROWSERD_MAX_SESSIONS: raw }, 'BROWSERD_MAX_SESSIONS'));
  }
});

describe('BROWSERD_RATE_LIMIT', () => {
  test('default 600; 0 (disabled) and 1000000 accepted', () => {
    assert.equal(load({}).rateLimitPerMinute, 600);
    assert.equal(load({ BROWSERD_RATE_LIMIT: '0' }).rateLimitPerMinute, 0);
    assert.equal(load({ BROWSERD_RATE_LIMIT: '1000000' }).rateLimitPerMinute, 1_000_000);
  });
  for (const raw of ['1000001', '-1', '1.5', 'unlimited']) {
    test(`rejects ${JSON.stringify(raw)}`, () => rejects({ BROWSERD_RATE_LIMIT: raw }, 'BROWSERD_RATE_LIMIT'));
  }
});

describe('BROWSERD_REAPER_INTERVAL_MS', () => {
  test('default 5000; 100 and 60000 accepted', () => {
    assert.equal(load({}).reaperIntervalMs, 5000);
    assert.equal(load({ BROWSERD_REAPER_INTERVAL_MS: '100' }).reaperIntervalMs, 100);
    assert.equal(load({ BROWSERD_REAPER_INTERVAL_MS: '60000' }).reaperIntervalMs, 60000);
  });
  for (const raw of ['99', '60001']) {
    test(`rejects ${raw}`, () => rejects({ BROWSERD_REAPER_INTERVAL_MS: raw }, 'BROWSERD_REAPER_INTERVAL_MS'));
  }
});

describe('BROWSERD_WARM_HEADLESS, BROWSERD_WARM_HEADFUL, BROWSERD_WARM_REFILL_GAP_MS', () => {
  test('defaults 2 headless, 1 headful, 1500 ms; 0 disables a kind', () => {
    assert.deepEqual(load({}).warm, { headless: 2, headful: 1, refillGapMs: 1500 });
    assert.deepEqual(load({ BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' }).warm, { headless: 0, headful: 0, refillGapMs: 1500 });
    assert.deepEqual(load({ BROWSERD_WARM_HEADLESS: '64', BROWSERD_WARM_HEADFUL: '3', BROWSERD_WARM_REFILL_GAP_MS: '0' }).warm, { headless: 64, headful: 3, refillGapMs: 0 });
  });
  for (const [name, raw] of [
    ['BROWSERD_WARM_HEADLESS', '65'],
    ['BROWSERD_WARM_HEADLESS', '-1'],
    ['BROWSERD_WARM_HEADFUL', 'two'],
    ['BROWSERD_WARM_HEADFUL', '1.5'],
    ['BROWSERD_WARM_REFILL_GAP_MS', '600001'],
  ] as const) {
    test(`rejects ${name}=${raw}`, () => rejects({ [name]: raw }, name));
  }
});

describe('BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS', () => {
  test('default 5000; 250 and 3600000 accepted', () => {
    assert.equal(load({}).telemetryScreenshotIntervalMs, 5000);
    assert.equal(load({ BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS: '250' }).telemetryScreenshotIntervalMs, 250);
    assert.equal(load({ BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS: '3600000' }).telemetryScreenshotIntervalMs, 3_600_000);
  });
  for (const raw of ['249', '3600001', 'often', '1.5']) {
    test(`rejects ${raw}`, () => rejects({ BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS: raw }, 'BROWSERD_TELEMETRY_SCREENSHOT_INTERVAL_MS'));
  }
});

describe('BROWSERD_TELEMETRY_RETAINED_EVENTS', () => {
  test('default 10000; 100 and 1000000 accepted', () => {
    assert.equal(load({}).telemetryRetainedEvents, 10_000);
    assert.equal(load({ BROWSERD_TELEMETRY_RETAINED_EVENTS: '100' }).telemetryRetainedEvents, 100);
    assert.equal(load({ BROWSERD_TELEMETRY_RETAINED_EVENTS: '1000000' }).telemetryRetainedEvents, 1_000_000);
  });
  for (const raw of ['99', '1000001', '0', '-5', 'lots', '1e4', '150.5']) {
    test(`rejects ${raw}`, () => rejects({ BROWSERD_TELEMETRY_RETAINED_EVENTS: raw }, 'BROWSERD_TELEMETRY_RETAINED_EVENTS'));
  }
});

describe('BROWSERD_REGION', () => {
  for (const r of ['us-east', 'eu-west', 'ap-southeast'] as const) {
    test(`accepts ${r}`, () => assert.equal(load({ BROWSERD_REGION: r }).region, r));
  }
  for (const raw of ['mars', 'US-EAST', 'us-west', 'us-east,mars', 'us-east,']) {
    test(`rejects ${raw}`, () => rejects({ BROWSERD_REGION: raw }, 'BROWSERD_REGION'));
  }
  test('a node may serve several regions; the first is its primary', () => {
    const c = load({ BROWSERD_REGION: 'eu-west, us-east,eu-west' });
    assert.deepEqual(c.regions, ['eu-west', 'us-east']);
    assert.equal(c.region, 'eu-west');
    assert.deepEqual(load({}).regions, ['us-east']);
  });
});

describe('BROWSERD_LOG_LEVEL', () => {
  for (const l of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) {
    test(`accepts ${l}`, () => assert.equal(load({ BROWSERD_LOG_LEVEL: l }).logLevel, l));
  }
  for (const raw of ['verbose', 'INFO', 'warning']) {
    test(`rejects ${raw}`, () => rejects({ BROWSERD_LOG_LEVEL: raw }, 'BROWSERD_LOG_LEVEL'));
  }
});

describe('BROWSERD_NODE_ID, BROWSERD_CHROMIUM_PATH, BROWSERD_SESSION_USER', () => {
  test('accepted values', () => {
    const c = load({ BROWSERD_NODE_ID: 'node-1', BROWSERD_CHROMIUM_PATH: '/opt/chrome/chrome', BROWSERD_SESSION_USER: 'sandbox_1' });
    assert.equal(c.nodeId, 'node-1');
    assert.equal(c.chromiumPath, '/opt/chrome/chrome');
    assert.equal(c.sessionUser, 'sandbox_1');
    assert.equal(load({ BROWSERD_NODE_ID: 'a'.repeat(63) }).nodeId, 'a'.repeat(63));
  });
  test('rejected values', () => {
    rejects({ BROWSERD_NODE_ID: 'Node_1' }, 'BROWSERD_NODE_ID');
    rejects({ BROWSERD_NODE_ID: 'a'.repeat(64) }, 'BROWSERD_NODE_ID');
    rejects({ BROWSERD_CHROMIUM_PATH: 'chromium' }, 'BROWSERD_CHROMIUM_PATH');
    rejects({ BROWSERD_SESSION_USER: 'Root User' }, 'BROWSERD_SESSION_USER');
  });
});

describe('BROWSERD_STEALTH_PROXY_URL', () => {
  test('absent by default; http, https and socks5 URLs with a port are taken, credentials kept, a trailing slash dropped', () => {
    assert.equal(load({}).stealthProxyUrl, undefined);
    assert.equal(load({ BROWSERD_STEALTH_PROXY_URL: 'http://proxy.example:3128' }).stealthProxyUrl, 'http://proxy.example:3128');
    assert.equal(load({ BROWSERD_STEALTH_PROXY_URL: 'https://u:p%40ss@proxy.example:443/' }).stealthProxyUrl, 'https://u:p%40ss@proxy.example:443');
    assert.equal(load({ BROWSERD_STEALTH_PROXY_URL: ' socks5://u:p@10.0.0.1:1080 ' }).stealthProxyUrl, 'socks5://u:p@10.0.0.1:1080');
  });
  test('refused: other schemes, no port, a path, a query, not a URL; the message never shows the value (it may hold a password)', () => {
    for (const v of ['ftp://x:21', 'socks4://x:1080', 'http://proxy.example', 'http://x:1/path', 'http://x:1/?q=1', 'http://x:1/#f', 'proxy.example:3128', 'http://:secret@:1']) {
      const p = problems({ BROWSERD_STEALTH_PROXY_URL: v });
      assert.equal(p.length, 1, v);
      assert.match(p[0]!, /BROWSERD_STEALTH_PROXY_URL must be/);
      assert.ok(!p[0]!.includes(v), 'the value is in the message');
    }
  });
});

describe('ConfigError', () => {
  test('lists every bad value, not only the first', () => {
    const env = {
      BROWSERD_PORT: '65536',
      BROWSERD_PUBLIC_URL: 'ftp://x.example',
      BROWSERD_DATABASE_URL: 'mysql://db/x',
      BROWSERD_API_KEY: 'short',
      BROWSERD_MAX_SESSIONS: '0',
      BROWSERD_RATE_LIMIT: 'abc',
      BROWSERD_REGION: 'mars',
      BROWSERD_LOG_LEVEL: 'loud',
    };
    let caught: unknown;
    try {
      load(env);
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof ConfigError);
    const vars = Object.keys(env);
    assert.equal(caught.problems.length, vars.length, JSON.stringify(caught.problems));
    for (const v of vars) {
      assert.ok(caught.problems.some((p) => p.includes(v)), `${v} missing from ${JSON.stringify(caught.problems)}`);
      assert.ok(caught.message.includes(v), `${v} missing from the message`);
    }
  });
});
