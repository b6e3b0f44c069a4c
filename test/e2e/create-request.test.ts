import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel from '@onkernel/sdk';
import { chromium, type Browser, type Page } from 'playwright-core';
import { cliJson, eventually, sessionProcesses, startServer, startSite, type TestServer } from '../helpers/server.js';

/**
 * What each field of the create request does in a real session: the viewport is the
 * screen, kiosk mode hides the browser UI, start_url is the first page, memory is a
 * cgroup limit, region and gpu follow the plan and the node, chrome_policy applies to
 * one session only; and what the Browser body carries.
 */

type Json = Record<string, unknown>;

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let kernel: Kernel;
let acmeKey: string;


/** A start_up organization with its own key, on the store of `s`. */
async function startUpKey(s: TestServer): Promise<string> {
  await cliJson(s.dataDir, 'orgs', 'create', 'acme', '--plan', 'start_up');
  return (await cliJson<{ key: string }>(s.dataDir, 'keys', 'create', '--org', 'acme')).key;
}

before(async () => {
  server = await startServer({ env: { BROWSERD_REGION: 'us-east' } });
  site = await startSite();
  kernel = new Kernel({ apiKey: server.apiKey, baseURL: server.url, maxRetries: 0 });
  acmeKey = await startUpKey(server);
});
after(async () => {
  await server?.stop();
  await site?.close();
});

async function call(method: string, p: string, body?: unknown, key = server.apiKey, s = server): Promise<{ status: number; body: Json; text: string }> {
  const h: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(`${s.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: (text ? JSON.parse(text) : undefined) as Json, text };
}

async function create(body: Json, key?: string, s?: TestServer): Promise<Json> {
  const r = await call('POST', '/browsers', body, key, s);
  assert.equal(r.status, 200, r.text);
  return r.body;
}

async function del(b: Json, key?: string, s?: TestServer): Promise<void> {
  const r = await call('DELETE', `/browsers/${b.session_id as string}`, undefined, key, s);
  assert.equal(r.status, 204, r.text);
}

/** Runs `fn` with a session made from `body`, deleting the session afterwards whatever happens. */
async function withSession<T>(body: Json, fn: (b: Json) => Promise<T>, key?: string, s?: TestServer): Promise<T> {
  const b = await create(body, key, s);
  try {
    return await fn(b);
  } finally {
    await del(b, key, s);
  }
}

/** Connects Playwright through the gateway and runs `fn` with the session's first page. */
async function withPage<T>(b: Json, fn: (page: Page, browser: Browser) => Promise<T>): Promise<T> {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url as string);
  try {
    const ctx = browser.contexts()[0]!;
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    return await fn(page, browser);
  } finally {
    await browser.close();
  }
}

interface Geometry {
  screenWidth: number;
  screenHeight: number;
  innerWidth: number;
  innerHeight: number;
  outerWidth: number;
  outerHeight: number;
}
function geometry(page: Page): Promise<Geometry> {
  return page.evaluate(() => ({
    screenWidth: screen.width,
    screenHeight: screen.height,
    innerWidth: window.innerWidth,
    innerHeight: window.innerHeight,
    outerWidth: window.outerWidth,
    outerHeight: window.outerHeight,
  }));
}

/** A rejected create: status, code, and the details' messages. */
async function rejected(body: unknown, status: number, code?: string, key?: string, s?: TestServer): Promise<{ body: Json; details: string[] }> {
  const r = await call('POST', '/browsers', body, key, s);
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.body.code, 'string', r.text);
  assert.equal(typeof r.body.message, 'string', r.text);
  if (code) assert.equal(r.body.code, code, r.text);
  const details = ((r.body.details as Json[] | undefined) ?? []).map((d) => {
    assert.equal(d.code, 'invalid_input', r.text);
    return d.message as string;
  });
  return { body: r.body, details };
}

async function activeIds(key?: string, s?: TestServer): Promise<string[]> {
  const r = await call('GET', '/browsers?limit=100', undefined, key, s);
  assert.equal(r.status, 200, r.text);
  return (r.body as unknown as Json[]).map((b) => b.session_id as string).sort();
}

// ---- viewport and kiosk -------------------------------------------------------------

describe('viewport: the screen of the session', () => {
  test('headless 1280x720: screen is 1280x720, the response echoes it with refresh_rate 60 derived', async () => {
    await withSession({ headless: true, viewport: { width: 1280, height: 720 } }, async (b) => {
      assert.deepEqual(b.viewport, { width: 1280, height: 720, refresh_rate: 60 });
      const g = await withPage(b, geometry);
      assert.equal(g.screenWidth, 1280, JSON.stringify(g));
      assert.equal(g.screenHeight, 720, JSON.stringify(g));
    });
  });

  test('no viewport: the response reports the default 1920x1080@25 and the screen is that size', async () => {
    await withSession({ headless: true }, async (b) => {
      assert.deepEqual(b.viewport, { width: 1920, height: 1080, refresh_rate: 25 });
      const g = await withPage(b, geometry);
      assert.equal(g.screenWidth, 1920, JSON.stringify(g));
      assert.equal(g.screenHeight, 1080, JSON.stringify(g));
      const got = await call('GET', `/browsers/${b.session_id as string}`);
      assert.deepEqual(got.body.viewport, { width: 1920, height: 1080, refresh_rate: 25 }, 'retrieve reports the same');
    });
  });

  test('headful kiosk 1024x768 with refresh_rate 30: the screen is the viewport and the page fills the window, no browser UI', async () => {
    await withSession({ headless: false, kiosk_mode: true, viewport: { width: 1024, height: 768, refresh_rate: 30 } }, async (b) => {
      assert.deepEqual(b.viewport, { width: 1024, height: 768, refresh_rate: 30 }, 'a given refresh_rate is kept');
      assert.equal(b.kiosk_mode, true);
      assert.equal(b.headless, false);
      // The kiosk window settles once it is mapped full screen: wait until the page fills it.
      const g = await withPage(b, async (page) => (await eventually(async () => {
        const x = await geometry(page);
        return x.outerWidth === x.innerWidth && x.outerHeight === x.innerHeight ? x : null;
      }, 10_000)) ?? geometry(page));
      assert.equal(g.screenWidth, 1024, JSON.stringify(g));
      assert.equal(g.screenHeight, 768, JSON.stringify(g));
      assert.equal(g.outerHeight - g.innerHeight, 0, `kiosk: no tab strip or address bar: ${JSON.stringify(g)}`);
      assert.equal(g.outerWidth - g.innerWidth, 0, JSON.stringify(g));
      // Chromium on X keeps a window that would cover the whole screen one pixel short of it
      // (1023x767 here, kiosk or not): the page is the viewport to within that pixel.
      assert.ok(g.innerWidth >= 1023 && g.innerWidth <= 1024, JSON.stringify(g));
      assert.ok(g.innerHeight >= 767 && g.innerHeight <= 768, JSON.stringify(g));
    });
  });

  test('headful without kiosk 1024x768: the screen is the viewport and the browser UI takes its share', async () => {
    await withSession({ headless: false, viewport: { width: 1024, height: 768 } }, async (b) => {
      assert.deepEqual(b.viewport, { width: 1024, height: 768, refresh_rate: 60 });
      assert.equal(b.kiosk_mode, false);
      const g = await withPage(b, geometry);
      assert.equal(g.screenWidth, 1024, JSON.stringify(g));
      assert.equal(g.screenHeight, 768, JSON.stringify(g));
      assert.ok(g.outerHeight - g.innerHeight > 0, `tab strip and address bar: ${JSON.stringify(g)}`);
      assert.ok(g.innerHeight < 768, JSON.stringify(g));
    });
  });
});

// ---- start_url ----------------------------------------------------------------------

describe('start_url', () => {
  test('the session opens start_url as its first page', async () => {
    await withSession({ headless: true, start_url: site.url }, async (b) => {
      assert.equal(b.start_url, site.url);
      await withPage(b, async (_page, browser) => {
        const url = await eventually(() => {
          const first = browser.contexts()[0]!.pages()[0];
          return first && first.url() === site.url ? first.url() : null;
        }, 15_000);
        assert.equal(url, site.url, `pages: ${browser.contexts()[0]!.pages().map((p) => p.url()).join(', ')}`);
        const first = browser.contexts()[0]!.pages()[0]!;
        assert.equal(await eventually(async () => (await first.title()) === 'browserd test page', 10_000), true);
      });
    });
  });

  test('an unreachable start_url still creates the session, and the response records it', async () => {
    const r = await call('POST', '/browsers', { headless: true, start_url: 'http://127.0.0.1:9/' });
    assert.equal(r.status, 200, r.text);
    try {
      assert.equal(r.body.start_url, 'http://127.0.0.1:9/');
      const got = await call('GET', `/browsers/${r.body.session_id as string}`);
      assert.equal(got.body.start_url, 'http://127.0.0.1:9/');
      // The browser is there and answers.
      const title = await withPage(r.body, (page) => page.evaluate(() => typeof document.title));
      assert.equal(title, 'string');
    } finally {
      await del(r.body);
    }
  });
});

// ---- timeout_seconds ------------------------------------------------------------------

describe('timeout_seconds', () => {
  for (const t of [9, 259201, 0, -1]) {
    test(`${t} is refused with a detail naming timeout_seconds, and nothing is created`, async () => {
      const before = await activeIds();
      const { details } = await rejected({ headless: true, timeout_seconds: t }, 400, 'bad_request');
      assert.equal(details.length, 1, details.join(' | '));
      assert.match(details[0]!, /^timeout_seconds: /);
      assert.deepEqual(await activeIds(), before);
    });
  }
  test('omitted, the default 60 is echoed; the bounds 10 and 259200 are accepted and echoed', async () => {
    await withSession({ headless: true }, async (b) => assert.equal(b.timeout_seconds, 60));
    const s = await kernel.browsers.create({ headless: true, timeout_seconds: 259200 });
    try {
      assert.equal(s.timeout_seconds, 259200);
    } finally {
      await kernel.browsers.deleteByID(s.session_id);
    }
    await withSession({ headless: true, timeout_seconds: 10 }, async (b) => assert.equal(b.timeout_seconds, 10));
  });
});

// ---- memory -------------------------------------------------------------------------

/** The memory cgroup directory of a process (cgroup v1 memory controller, or the v2 unified group). */
function memoryCgroupDir(pid: number): string {
  const lines = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => /^\d+:memory:/.test(l));
  if (v1 && fs.existsSync('/sys/fs/cgroup/memory')) return path.join('/sys/fs/cgroup/memory', v1.split(':')[2]!);
  const v2 = lines.find((l) => l.startsWith('0::'));
  assert.ok(v2, `no memory cgroup for ${pid}: ${lines.join(' | ')}`);
  return path.join('/sys/fs/cgroup', v2.slice(3));
}

function memoryLimit(dir: string): number {
  const v1 = path.join(dir, 'memory.limit_in_bytes');
  return Number(fs.readFileSync(fs.existsSync(v1) ? v1 : path.join(dir, 'memory.max'), 'utf8').trim());
}

/** Every process of the session is in one memory cgroup, the session's own; returns that cgroup's directory. */
function sessionCgroup(sessionId: string, expectDisplay: boolean): string {
  const procs = sessionProcesses(server.dataDir).filter((p) => p.sessionId === sessionId);
  assert.ok(procs.some((p) => /chromium|chrome/.test(p.cmd)), `a Chromium process: ${JSON.stringify(procs)}`);
  if (expectDisplay) assert.ok(procs.some((p) => /Xvfb/.test(p.cmd)), `an Xvfb process: ${JSON.stringify(procs)}`);
  const dirs = new Set<string>();
  for (const p of procs) {
    try {
      dirs.add(memoryCgroupDir(p.pid));
    } catch (err) {
      if (fs.existsSync(`/proc/${p.pid}`)) throw err; // a short-lived child may be gone already
    }
  }
  assert.equal(dirs.size, 1, `one cgroup for all the session's processes: ${[...dirs].join(', ')}`);
  const dir = [...dirs][0]!;
  assert.equal(path.basename(dir), sessionId, `the cgroup is the session's own: ${dir}`);
  return dir;
}

const GiB = 1024 ** 3;

describe('memory', () => {
  test('headful 16GiB: reported, and all the session processes are in a cgroup limited to 16 GiB, removed on delete', async () => {
    const b = await create({ headless: false, memory: '16GiB' });
    let dir: string;
    try {
      assert.equal(b.memory, '16GiB');
      dir = sessionCgroup(b.session_id as string, true);
      assert.equal(memoryLimit(dir), 16 * GiB);
      assert.equal((await call('GET', `/browsers/${b.session_id as string}`)).body.memory, '16GiB');
    } finally {
      await del(b);
    }
    assert.equal(fs.existsSync(dir), false, `the session's cgroup ${dir} is removed after delete`);
  });

  test('headful by default: 8GiB reported and an 8 GiB limit', async () => {
    await withSession({ headless: false }, async (b) => {
      assert.equal(b.memory, '8GiB');
      assert.equal(memoryLimit(sessionCgroup(b.session_id as string, true)), 8 * GiB);
    });
  });

  test('headless: 2GiB reported and enforced, whatever is asked', async () => {
    for (const memory of [undefined, '8GiB', '16GiB']) {
      await withSession({ headless: true, ...(memory ? { memory } : {}) }, async (b) => {
        assert.equal(b.memory, '2GiB', `asked ${memory ?? 'nothing'}`);
        assert.equal(memoryLimit(sessionCgroup(b.session_id as string, false)), 2 * GiB);
      });
    }
  });
});

// ---- region and gpu -------------------------------------------------------------------

describe('region', () => {
  test('a free organization choosing a region is refused 403 plan_required, any region, and nothing is created', async () => {
    const before = await activeIds();
    for (const region of ['us-east', 'eu-west', 'ap-southeast']) {
      const { body } = await rejected({ headless: true, region }, 403, 'plan_required');
      assert.match(body.message as string, /plan/i);
    }
    assert.deepEqual(await activeIds(), before);
  });

  test('start_up on a us-east node: us-east is served, eu-west and ap-southeast are 529 capacity_exhausted', async () => {
    for (const region of ['eu-west', 'ap-southeast']) {
      const { body } = await rejected({ headless: true, region }, 529, 'capacity_exhausted', acmeKey);
      assert.match(body.message as string, new RegExp(region));
    }
    assert.deepEqual(await activeIds(acmeKey), [], 'nothing was created');
    await withSession({ headless: true, region: 'us-east' }, async (b) => assert.equal(b.region, 'us-east'), acmeKey);
    // Without a region the session is in us-east.
    await withSession({ headless: true }, async (b) => assert.equal(b.region, 'us-east'), acmeKey);
  });

  test('a node serving us-east,eu-west accepts eu-west and records it', async () => {
    const two = await startServer({ env: { BROWSERD_REGION: 'us-east,eu-west' } });
    try {
      const key = await startUpKey(two);
      await withSession(
        { headless: true, region: 'eu-west' },
        async (b) => {
          assert.equal(b.region, 'eu-west');
          assert.equal((await call('GET', `/browsers/${b.session_id as string}`, undefined, key, two)).body.region, 'eu-west');
        },
        key,
        two,
      );
      await rejected({ headless: true, region: 'ap-southeast' }, 529, 'capacity_exhausted', key, two);
    } finally {
      await two.stop();
    }
  });
});

describe('gpu', () => {
  test('free plan: gpu is refused; on this GPU-less node the node answer (400 on gpu) comes before the plan gate', async () => {
    const { details } = await rejected({ gpu: true }, 400, 'bad_request');
    assert.ok(details.some((d) => /^gpu: GPU acceleration is not available on this node/.test(d)), details.join(' | '));
  });
  test('start_up with gpu and headless: 400 naming gpu', async () => {
    const { details } = await rejected({ gpu: true, headless: true }, 400, 'bad_request', acmeKey);
    assert.ok(details.some((d) => /^gpu: .*headless=false/.test(d)), details.join(' | '));
    assert.ok(details.every((d) => d.startsWith('gpu: ')), details.join(' | '));
  });
  test('start_up with gpu in another region: 400 naming gpu', async () => {
    const { details } = await rejected({ gpu: true, headless: false, region: 'eu-west' }, 400, 'bad_request', acmeKey);
    assert.ok(details.some((d) => /^gpu: .*region=us-east/.test(d)), details.join(' | '));
  });
  test('start_up with gpu, headful: 400 "not available on this node", nothing created', async () => {
    const { details } = await rejected({ gpu: true, headless: false }, 400, 'bad_request', acmeKey);
    assert.deepEqual(details, ['gpu: GPU acceleration is not available on this node']);
    assert.deepEqual(await activeIds(acmeKey), []);
  });
  test('gpu false is fine and reported', async () => {
    await withSession({ headless: true, gpu: false }, async (b) => assert.equal(b.gpu, false));
  });
});

// ---- name, tags, invocation_id --------------------------------------------------------

describe('name, tags and invocation_id', () => {
  test('are echoed on create and retrieve; a second active session with the name is 409', async () => {
    const body = { headless: true, name: 'cr-echo.1', tags: { team: 'qa', 'env:stage': 'a b/c', empty: '' }, invocation_id: 'inv_0123456789' };
    await withSession(body, async (b) => {
      assert.equal(b.name, 'cr-echo.1');
      assert.deepEqual(b.tags, body.tags);
      assert.equal(b.invocation_id, 'inv_0123456789');
      const got = await call('GET', '/browsers/cr-echo.1');
      assert.equal(got.status, 200, got.text);
      assert.equal(got.body.session_id, b.session_id);
      assert.deepEqual(got.body.tags, body.tags);
      assert.equal(got.body.invocation_id, 'inv_0123456789');

      const before = await activeIds();
      const dup = await call('POST', '/browsers', { headless: true, name: 'cr-echo.1' });
      assert.equal(dup.status, 409, dup.text);
      assert.equal(typeof dup.body.code, 'string');
      assert.match(dup.body.message as string, /cr-echo\.1|name/);
      assert.deepEqual(await activeIds(), before, 'the conflicting create made nothing');
    });
    // Once the first one is deleted, the name is free again.
    await withSession({ headless: true, name: 'cr-echo.1' }, async (b) => assert.equal(b.name, 'cr-echo.1'));
  });
  test('without them, none of name, tags, invocation_id appears', async () => {
    await withSession({ headless: true }, async (b) => {
      for (const k of ['name', 'tags', 'invocation_id', 'start_url', 'chrome_policy']) assert.ok(!(k in b), `${k}: ${JSON.stringify(b)}`);
    });
  });
});

// ---- chrome_policy --------------------------------------------------------------------

describe('chrome_policy', () => {
  test('URLBlocklist applies to its own session only: the site is blocked there while another session loads it', async () => {
    const host = new URL(site.url).host; // 127.0.0.1:<port>
    const policy = { URLBlocklist: [host] };
    const blocked = await create({ headless: true, chrome_policy: policy });
    try {
      const open = await create({ headless: true });
      try {
        assert.deepEqual(blocked.chrome_policy, policy, 'the response echoes the policy');
        assert.ok(!('chrome_policy' in open));
        assert.deepEqual((await call('GET', `/browsers/${blocked.session_id as string}`)).body.chrome_policy, policy);
        // Both sessions run at once.
        await withPage(blocked, async (bp) => {
          await withPage(open, async (op) => {
            await assert.rejects(bp.goto(site.url), /net::ERR_BLOCKED_BY_ADMINISTRATOR/);
            await op.goto(site.url);
            assert.equal(await op.title(), 'browserd test page');
            await assert.rejects(bp.goto(site.url), /net::ERR_BLOCKED_BY_ADMINISTRATOR/, 'still blocked after the other session loaded it');
          });
        });
      } finally {
        await del(open);
      }
    } finally {
      await del(blocked);
    }
  });

  test('a well-typed policy of each JSON kind is accepted and echoed', async () => {
    const policy = { BookmarkBarEnabled: true, DefaultPopupsSetting: 2, WebRtcIPHandling: 'default', URLAllowlist: ['example.com'] };
    await withSession({ headless: true, chrome_policy: policy }, async (b) => assert.deepEqual(b.chrome_policy, policy));
  });

  const bad: [string, Json, string[]][] = [
    ['an unknown policy', { NoSuchPolicyXyz: true }, ['NoSuchPolicyXyz']],
    ['a wrongly typed policy', { BookmarkBarEnabled: 'yes' }, ['BookmarkBarEnabled']],
    ['an integer policy given 1.5', { DefaultPopupsSetting: 1.5 }, ['DefaultPopupsSetting']],
    ['a list policy given a string', { URLBlocklist: 'example.com' }, ['URLBlocklist']],
    ['ProxyMode (managed by browserd)', { ProxyMode: 'direct' }, ['ProxyMode']],
    ['ExtensionInstallForcelist (managed by browserd)', { ExtensionInstallForcelist: ['abcdefghijklmnopabcdefghijklmnop;https://x.example/u'] }, ['ExtensionInstallForcelist']],
    ['RemoteDebuggingAllowed (managed by browserd)', { RemoteDebuggingAllowed: true }, ['RemoteDebuggingAllowed']],
    [
      'all of them at once, next to a good one',
      { BookmarkBarEnabled: 'yes', NoSuchPolicyXyz: 1, ProxyMode: 'direct', ExtensionInstallForcelist: [], ShowHomeButton: true },
      ['BookmarkBarEnabled', 'NoSuchPolicyXyz', 'ProxyMode', 'ExtensionInstallForcelist'],
    ],
  ];
  for (const [label, policy, names] of bad) {
    test(`${label}: 400 with one detail per policy naming chrome_policy.<Name>, nothing created`, async () => {
      const before = await activeIds();
      const { details } = await rejected({ headless: true, chrome_policy: policy }, 400, 'bad_request');
      assert.equal(details.length, names.length, details.join(' | '));
      for (const n of names) assert.equal(details.filter((d) => d.startsWith(`chrome_policy.${n}: `)).length, 1, `${n}: ${details.join(' | ')}`);
      assert.deepEqual(await activeIds(), before);
    });
  }
  test('the kinds of refusal say what is wrong', async () => {
    const { details } = await rejected({ chrome_policy: { NoSuchPolicyXyz: 1, BookmarkBarEnabled: 1, ProxyMode: 'direct' } }, 400);
    assert.ok(details.includes('chrome_policy.NoSuchPolicyXyz: is not a policy this Chromium knows'), details.join(' | '));
    assert.ok(details.includes('chrome_policy.BookmarkBarEnabled: must be a boolean'), details.join(' | '));
    assert.ok(details.includes('chrome_policy.ProxyMode: is managed by browserd and cannot be set per session'), details.join(' | '));
  });
});

// ---- the Browser body -------------------------------------------------------------------

/** The Browser table of the contract, plus invocation_id (echoed, see docs/create-request.md). */
const BROWSER_FIELDS = new Set([
  'session_id', 'created_at', 'deleted_at', 'cdp_ws_url', 'webdriver_ws_url', 'browser_live_view_url', 'base_url', 'region', 'stealth',
  'headless', 'gpu', 'kiosk_mode', 'memory', 'timeout_seconds', 'name', 'tags', 'chrome_policy', 'network', 'proxy', 'proxy_id', 'profile',
  'profile_save_changes', 'pool', 'start_url', 'telemetry', 'usage', 'usage_status', 'vaults', 'viewport', 'invocation_id',
]);
const REQUIRED = ['created_at', 'cdp_ws_url', 'webdriver_ws_url', 'session_id', 'region', 'stealth', 'headless', 'memory', 'timeout_seconds'];

function assertBrowserKeys(b: Json, what: string): void {
  for (const k of Object.keys(b)) assert.ok(BROWSER_FIELDS.has(k), `${what}: "${k}" is not a field of the Browser body`);
  for (const k of REQUIRED) assert.ok(k in b && b[k] !== null, `${what}: required "${k}" missing`);
  assert.ok(!('base_url' in b), `${what}: no base_url`);
}

describe('the Browser body: presence rules', () => {
  test('a headful session with every supported field set carries exactly the expected keys', async () => {
    const body = {
      headless: false,
      kiosk_mode: true,
      stealth: false,
      gpu: false,
      memory: '8GiB',
      name: 'cr-full',
      tags: { a: 'b' },
      invocation_id: 'inv_full',
      timeout_seconds: 120,
      start_url: site.url,
      viewport: { width: 800, height: 600 },
      chrome_policy: { BookmarkBarEnabled: false },
      telemetry: null,
    };
    const b = await create(body);
    try {
      assertBrowserKeys(b, 'create');
      assert.deepEqual(
        Object.keys(b).sort(),
        [
          'browser_live_view_url', 'cdp_ws_url', 'chrome_policy', 'created_at', 'gpu', 'headless', 'invocation_id', 'kiosk_mode', 'memory', 'name',
          'region', 'session_id', 'start_url', 'stealth', 'tags', 'telemetry', 'timeout_seconds', 'usage', 'viewport', 'webdriver_ws_url',
        ].sort(),
      );
      assert.equal(b.telemetry, null);
      assert.equal(typeof b.browser_live_view_url, 'string');
      assert.ok(new URL(b.browser_live_view_url as string).searchParams.get('jwt'), 'the live view URL carries a jwt');
      assert.ok(!('deleted_at' in b) && !('usage_status' in b), 'an active session has no deleted_at / usage_status');
      const got = await call('GET', `/browsers/${b.session_id as string}`);
      assertBrowserKeys(got.body, 'retrieve');
      assert.deepEqual(Object.keys(got.body).sort(), Object.keys(b).sort());
    } finally {
      await del(b);
    }
    // Deleted: deleted_at and usage_status appear, the live view goes.
    const gone = await call('GET', `/browsers/${b.session_id as string}?include_deleted=true`);
    assert.equal(gone.status, 200, gone.text);
    assertBrowserKeys(gone.body, 'deleted');
    assert.equal(typeof gone.body.deleted_at, 'string');
    assert.ok(Number.isFinite(Date.parse(gone.body.deleted_at as string)));
    assert.ok(['pending', 'ready'].includes(gone.body.usage_status as string), JSON.stringify(gone.body));
    assert.ok(!('browser_live_view_url' in gone.body), 'a deleted session has no live view');
    const listed = await call('GET', '/browsers?status=deleted&limit=100');
    const mine = (listed.body as unknown as Json[]).find((x) => x.session_id === b.session_id)!;
    assert.ok(mine, 'listed among deleted sessions');
    assertBrowserKeys(mine, 'listed deleted');
    assert.ok('deleted_at' in mine && 'usage_status' in mine);
  });

  test('a headless session has no browser_live_view_url; a headful one has it', async () => {
    await withSession({ headless: true }, async (b) => {
      assertBrowserKeys(b, 'headless');
      assert.ok(!('browser_live_view_url' in b));
      assert.equal(b.headless, true);
    });
    const s = await kernel.browsers.create({ headless: false });
    try {
      assert.equal(typeof s.browser_live_view_url, 'string');
      assertBrowserKeys(s as unknown as Json, 'headful (SDK)');
    } finally {
      await kernel.browsers.deleteByID(s.session_id);
    }
  });

  test('active sessions in a list carry no deleted_at or usage_status', async () => {
    await withSession({ headless: true }, async (b) => {
      const listed = await call('GET', '/browsers?limit=100');
      const mine = (listed.body as unknown as Json[]).find((x) => x.session_id === b.session_id)!;
      assert.ok(mine);
      assertBrowserKeys(mine, 'listed active');
      assert.ok(!('deleted_at' in mine) && !('usage_status' in mine));
    });
  });

  test('a request breaking several rules gets one detail per broken rule, and nothing is created', async () => {
    const before = await activeIds();
    const { details } = await rejected(
      {
        headless: true,
        timeout_seconds: 5,
        viewport: { width: 0, height: 600 },
        tags: { 'bad key!': 'v' },
        extensions: Array.from({ length: 21 }, (_, i) => ({ name: `ext${i}` })),
        proxy: {},
        proxy_id: 'p1',
      },
      400,
      'bad_request',
    );
    const expect: [string, RegExp][] = [
      ['timeout_seconds', /^timeout_seconds: /],
      ['viewport.width', /^viewport\.width: /],
      ['tag key', /^tags\.bad key!: tag key/],
      ['21 extensions', /^extensions: must NOT have more than 20 items/],
      ['proxy without mode, id or name', /^proxy: exactly one of mode, id, name/],
      ['proxy with proxy_id', /^proxy_id: cannot be combined with proxy/],
    ];
    for (const [what, re] of expect) assert.equal(details.filter((d) => re.test(d)).length, 1, `one detail for ${what}: ${details.join(' | ')}`);
    assert.equal(new Set(details).size, details.length, `no detail twice: ${details.join(' | ')}`);
    // Whatever else is reported names a field of the request ("not supported yet" for proxy, proxy_id).
    for (const d of details) assert.match(d, /^(timeout_seconds|viewport\.width|tags\.bad key!|extensions|proxy|proxy_id): /, d);
    assert.deepEqual(await activeIds(), before);

    // Schema problems and the checks that need the server (chrome_policy, the node) come in one answer too.
    const mixed = await rejected({ timeout_seconds: 5, memory: '4GiB', gpu: true, chrome_policy: { ProxyMode: 'direct', NoSuchPolicyXyz: 1 }, start_url: 'ftp://x.example/' }, 400, 'bad_request');
    assert.deepEqual(
      mixed.details.map((d) => d.slice(0, d.indexOf(':'))).sort(),
      ['chrome_policy.NoSuchPolicyXyz', 'chrome_policy.ProxyMode', 'gpu', 'memory', 'start_url', 'timeout_seconds'],
      mixed.details.join(' | '),
    );
    assert.deepEqual(await activeIds(), before);
  });
});
