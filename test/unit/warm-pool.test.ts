import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { BrowserRuntime, LaunchSpec, RuntimeHandle } from '../../src/runtime/browser-runtime.js';
import { WarmPool, type WarmCdp, type WarmPoolDeps } from '../../src/sessions/warm-pool.js';

/**
 * The warm pool's bookkeeping with a fake runtime and fake CDP connections: sizes, capacity,
 * one launch at a time, no refill during a session's launch, take/giveBack/discard, what a
 * hand-out sends, shutdown. (The real browsers: test/e2e/warm-start.test.ts.)
 */

const GiB = 1024 ** 3;

class FakeRuntime {
  launches: LaunchSpec[] = [];
  stopped: string[] = [];
  dead = new Set<string>();
  limits = new Map<string, number>();
  inFlight = 0;
  maxInFlight = 0;
  /** When set, launches wait for it. */
  gate: Promise<void> | null = null;
  /** When set, launches fail (after the gate). */
  fail = false;
  private pid = 1000;

  async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.gate) await this.gate;
      await new Promise((r) => setTimeout(r, 2));
      if (this.fail) throw new Error('launch failed');
      this.launches.push(spec);
      return { dir: `/fake/${spec.sessionId}`, chromium: { pid: this.pid++, port: 9222, wsPath: `/devtools/browser/${spec.sessionId}` }, display: null };
    } finally {
      this.inFlight--;
    }
  }
  isRunning(h: RuntimeHandle): boolean {
    return !this.dead.has(h.dir.slice('/fake/'.length));
  }
  async stop(id: string): Promise<void> {
    this.stopped.push(id);
  }
  setMemoryLimit(id: string, bytes: number): boolean {
    this.limits.set(id, bytes);
    return true;
  }
}

interface Sent {
  method: string;
  params: Record<string, unknown>;
  session?: string;
}

function fakeConnect(log: Sent[], closed: string[]) {
  return async (h: RuntimeHandle, headless: boolean): Promise<WarmCdp> => ({
    client: {
      send: (async (method: string, params: Record<string, unknown> = {}, session?: string) => {
        log.push({ method, params, ...(session ? { session } : {}) });
        return {};
      }) as WarmCdp['client']['send'],
      close: () => void closed.push(h.chromium.wsPath),
    },
    pageSession: `page-of-${h.chromium.pid}`,
    windowId: 7,
    screenId: headless ? 'screen-1' : null,
    closed: false,
  });
}

function pool(o: { sizes: { headless: number; headful: number }; maxSessions?: number; active?: () => number; gapMs?: number }) {
  const runtime = new FakeRuntime();
  const sent: Sent[] = [];
  const closed: string[] = [];
  const deps: WarmPoolDeps = {
    runtime: runtime as unknown as BrowserRuntime,
    bridges: null,
    sizes: o.sizes,
    refillGapMs: o.gapMs ?? 5,
    maxSessions: o.maxSessions ?? 16,
    memoryEnforced: true,
    activeCount: o.active ?? (() => 0),
    log: pino({ level: 'silent' }),
    cpuBusy: async () => 0,
    connect: fakeConnect(sent, closed),
  };
  return { pool: new WarmPool(deps), runtime, sent, closed };
}

async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('WarmPool filling', () => {
  test('fills each kind to its size, one launch at a time, with the default shape of its kind', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 2, headful: 1 } });
    p.start();
    await until(() => p.counts().headless === 2 && p.counts().headful === 1, 'full pool');
    assert.equal(runtime.launches.length, 3);
    assert.equal(runtime.maxInFlight, 1, 'never two launches at once');
    for (const l of runtime.launches) {
      assert.equal(l.width, 1920);
      assert.equal(l.height, 1080);
      assert.equal(l.kioskMode, false);
      assert.equal(l.chromePolicy, null);
      assert.equal(l.startUrl, null);
      assert.equal(l.memoryBytes, l.headless ? 2 * GiB : 8 * GiB);
    }
    assert.equal(new Set(runtime.launches.map((l) => l.sessionId)).size, 3, 'each has its own id');
    await p.shutdown();
  });

  test('sizes 0: nothing is launched', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 0, headful: 0 } });
    p.start();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(runtime.launches.length, 0);
    assert.deepEqual(p.counts(), { headless: 0, headful: 0 });
    await p.shutdown();
  });

  test('sessions plus warm browsers stay within the capacity', async () => {
    let active = 1;
    const { pool: p, runtime } = pool({ sizes: { headless: 3, headful: 0 }, maxSessions: 3, active: () => active });
    p.start();
    await until(() => p.counts().headless === 2, 'two warm (1 session + 2 = capacity 3)');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(runtime.launches.length, 2, 'no third launch at capacity');
    // A session ends: the periodic check or the next take refills.
    active = 0;
    p.take('headful');
    await until(() => p.counts().headless === 3, 'the freed slot is filled');
    await p.shutdown();
  });

  test('no refill launch starts while a session launch is in progress', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 1, headful: 0 } });
    let finish!: () => void;
    const sessionLaunch = p.trackLaunch(() => new Promise<void>((r) => (finish = r)));
    p.start();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(runtime.launches.length + runtime.inFlight, 0, 'the refill waits for the session launch');
    finish();
    await sessionLaunch;
    await until(() => p.counts().headless === 1, 'refill after the session launch');
    await p.shutdown();
  });
});

describe('WarmPool take, giveBack, discard', () => {
  test('take gives the oldest of the kind, skips (and ends) dead ones, null when none, and refills', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 2, headful: 0 } });
    p.start();
    await until(() => p.counts().headless === 2, 'full');
    const [first, second] = runtime.launches.map((l) => l.sessionId);
    assert.equal(p.take('headful'), null, 'no headful kind');
    runtime.dead.add(first!);
    const w = p.take('headless');
    assert.equal(w?.id, second, 'the dead one was skipped');
    await until(() => runtime.stopped.includes(first!), 'the dead one is ended');
    assert.ok(!runtime.stopped.includes(second!));
    await until(() => p.counts().headless === 2, 'refilled');
    await p.shutdown();
  });

  test('giveBack puts a browser first again; after shutdown it is ended instead', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 1, headful: 0 } });
    p.start();
    await until(() => p.counts().headless === 1, 'full');
    const w = p.take('headless')!;
    p.giveBack(w);
    assert.equal(p.take('headless')?.id, w.id);
    await p.shutdown();
    p.giveBack(w);
    await until(() => runtime.stopped.includes(w.id), 'ended when given back after shutdown');
  });
});

describe('WarmPool takeOrAwait', () => {
  test('none ready but one of the kind launching: the request gets that one when it is up; a second request does not wait', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 1, headful: 0 } });
    let open!: () => void;
    runtime.gate = new Promise<void>((r) => (open = r));
    p.start();
    await until(() => runtime.inFlight === 1, 'the first launch is in progress');
    assert.equal(await p.takeOrAwait('headful'), null, 'another kind does not wait');
    const waiting = p.takeOrAwait('headless');
    assert.equal(await p.takeOrAwait('headless'), null, 'only one request waits for a launch');
    runtime.gate = null;
    open();
    const w = await waiting;
    assert.ok(w, 'the waiting request got the browser');
    assert.equal(w.id, runtime.launches[0]!.sessionId);
    await until(() => p.counts().headless === 1 && runtime.launches.length === 2, 'the pool refills for itself');
    await p.shutdown();
  });

  test('the launch fails: the waiting request gets null (and launches fresh)', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 1, headful: 0 } });
    let open!: () => void;
    runtime.gate = new Promise<void>((r) => (open = r));
    runtime.fail = true;
    p.start();
    await until(() => runtime.inFlight === 1, 'a launch in progress');
    const waiting = p.takeOrAwait('headless');
    open();
    assert.equal(await waiting, null);
    await p.shutdown();
  });

  test('a ready browser is taken at once', async () => {
    const { pool: p } = pool({ sizes: { headless: 1, headful: 0 } });
    p.start();
    await until(() => p.counts().headless === 1, 'full');
    assert.ok(await p.takeOrAwait('headless'));
    await p.shutdown();
  });
});

describe('WarmPool hand-out', () => {
  test('nothing to apply: no CDP command, the connection is closed', async () => {
    const { pool: p, sent, closed } = pool({ sizes: { headless: 1, headful: 0 } });
    p.start();
    await until(() => p.counts().headless === 1, 'full');
    const w = p.take('headless')!;
    const h = await p.handOut(w, { screen: null, memoryBytes: null, startUrl: null });
    assert.equal(h, w.handle);
    assert.deepEqual(sent, []);
    assert.deepEqual(closed, [w.handle.chromium.wsPath]);
    await p.shutdown();
  });

  test('viewport, memory and start_url', async () => {
    const { pool: p, runtime, sent, closed } = pool({ sizes: { headless: 1, headful: 0 } });
    p.start();
    await until(() => p.counts().headless === 1, 'full');
    const w = p.take('headless')!;
    await p.handOut(w, { screen: { width: 1280, height: 800 }, memoryBytes: 16 * GiB, startUrl: 'https://example.test/' });
    assert.deepEqual(sent.slice(0, 2).map((s) => s.method).sort(), ['Browser.setWindowBounds', 'Emulation.updateScreen']);
    assert.deepEqual(sent.find((s) => s.method === 'Emulation.updateScreen')!.params, { screenId: 'screen-1', left: 0, top: 0, width: 1280, height: 800 });
    assert.deepEqual(sent.find((s) => s.method === 'Browser.setWindowBounds')!.params, { windowId: 7, bounds: { left: 0, top: 0, width: 1280, height: 800 } });
    const nav = sent.find((s) => s.method === 'Page.navigate')!;
    assert.deepEqual(nav, { method: 'Page.navigate', params: { url: 'https://example.test/' }, session: w.cdp.pageSession });
    assert.equal(runtime.limits.get(w.id), 16 * GiB);
    await until(() => closed.length === 1, 'closed once the navigation answered');
    await p.shutdown();
  });

  test('a headful browser has no screen to resize: the hand-out fails (the caller launches fresh)', async () => {
    const { pool: p } = pool({ sizes: { headless: 0, headful: 1 } });
    p.start();
    await until(() => p.counts().headful === 1, 'full');
    const w = p.take('headful')!;
    await assert.rejects(p.handOut(w, { screen: { width: 800, height: 600 }, memoryBytes: null, startUrl: null }), /no screen/);
    await p.shutdown();
  });
});

describe('WarmPool shutdown', () => {
  test('ends every warm browser and one still launching, and launches nothing more', async () => {
    const { pool: p, runtime } = pool({ sizes: { headless: 2, headful: 1 } });
    p.start();
    await until(() => p.counts().headless + p.counts().headful >= 1, 'one ready');
    let open!: () => void;
    runtime.gate = new Promise<void>((r) => (open = r));
    await until(() => runtime.inFlight === 1, 'a launch in progress');
    const done = p.shutdown();
    open();
    await done;
    const launched = runtime.launches.map((l) => l.sessionId);
    assert.deepEqual([...runtime.stopped].sort(), [...launched].sort(), 'every launched browser was ended');
    assert.deepEqual(p.counts(), { headless: 0, headful: 0 });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(runtime.launches.length, launched.length, 'nothing launched after shutdown');
  });
});
