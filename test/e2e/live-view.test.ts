import assert from 'node:assert/strict';
import fs from 'node:fs';
import zlib from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { chromium, type Browser, type Page } from 'playwright-core';
import WebSocket from 'ws';
import { eventually, sessionProcesses, signingKey, startServer, startSite, type TestServer } from '../helpers/server.js';

// The live view end to end: a headful session shows a page the test serves; a second
// Chromium (the "person") opens browser_live_view_url, and what it sees and does is
// checked against the session's page, read over CDP.

const VIEWER_ARGS = ['--no-sandbox', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'];

/** Solid red page, a white input at a known place, and a log of every mousedown. */
const PAGE = `<!doctype html><meta charset="utf-8"><title>live view test page</title>
<style>
html, body { margin: 0; height: 100%; overflow: hidden; background: rgb(255, 0, 0); }
#in { position: absolute; left: 200px; top: 150px; width: 400px; height: 80px; box-sizing: border-box;
  border: 0; outline: none; background: rgb(255, 255, 255); color: rgb(0, 0, 0); font: 28px sans-serif; caret-color: transparent; }
</style>
<input id="in" autocomplete="off" spellcheck="false">
<script>
window.clicks = [];
addEventListener('mousedown', (e) => clicks.push({ target: e.target.id, clientX: e.clientX, clientY: e.clientY, screenX: e.screenX, screenY: e.screenY, button: e.button }), true);
</script>`;

type RGB = [number, number, number];
const RED: RGB = [255, 0, 0];
const WHITE: RGB = [255, 255, 255];

interface BrowserBody {
  session_id: string;
  cdp_ws_url: string;
  webdriver_ws_url: string;
  browser_live_view_url?: string;
  headless: boolean;
  kiosk_mode?: boolean;
  timeout_seconds: number;
  viewport?: { width: number; height: number; refresh_rate?: number };
  deleted_at?: string;
}

interface Click {
  target: string;
  clientX: number;
  clientY: number;
  screenX: number;
  screenY: number;
  button: number;
}

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;
let viewer: Browser;

before(async () => {
  server = await startServer();
  site = await startSite(PAGE);
  viewer = await chromium.launch({ executablePath: '/usr/lib/chromium/chromium', args: VIEWER_ARGS });
});
after(async () => {
  await viewer?.close();
  // stop() ends every session the server still runs.
  await server?.stop();
  await site?.close();
});

// ---- helpers: API -----------------------------------------------------------------

async function create(body: Record<string, unknown>): Promise<BrowserBody> {
  const res = await fetch(`${server.url}/browsers`, { method: 'POST', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify(body) });
  const json = (await res.json()) as BrowserBody;
  assert.equal(res.status, 200, JSON.stringify(json));
  return json;
}

async function remove(id: string): Promise<void> {
  const res = await fetch(`${server.url}/browsers/${id}`, { method: 'DELETE', headers: server.headers() });
  assert.equal(res.status, 204, await res.text());
}

function jwtOf(url: string): string {
  const t = new URL(url).searchParams.get('jwt');
  assert.ok(t, `no jwt in ${url}`);
  return t;
}

function claimsOf(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** The live view page URL with another token. */
function pageUrl(liveUrl: string, jwt: string | null, extra = ''): string {
  const u = new URL(liveUrl);
  u.search = jwt === null ? '' : `?jwt=${encodeURIComponent(jwt)}`;
  return `${u.href}${extra}`;
}

/** `http://host/browser/live?jwt=T` -> `ws://host/browser/live/ws?jwt=T` (T replaced when given). */
function liveWsUrl(liveUrl: string, jwt?: string | null): string {
  const u = new URL(liveUrl);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  u.pathname = '/browser/live/ws';
  if (jwt === null) u.search = '';
  else if (jwt !== undefined) u.search = `?jwt=${encodeURIComponent(jwt)}`;
  return u.href;
}

/** A live-channel token signed with the server's own key, as the server would sign it. */
async function mintLiveToken(sessionId: string, extra: Record<string, unknown> = {}): Promise<string> {
  const key = signingKey(server.dataDir);
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ ch: 'live', ...extra })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer('browserd')
    .setSubject(sessionId)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(key);
}

async function liveStatus(liveUrl: string): Promise<string> {
  const u = new URL(liveUrl);
  u.pathname = '/browser/live/status';
  const res = await fetch(u);
  assert.equal(res.status, 200);
  return ((await res.json()) as { state: string }).state;
}

/**
 * Attempts a websocket upgrade. Resolves with the HTTP status when the server refuses the
 * upgrade, or with opened=true when a websocket was established (then closed again).
 */
function tryUpgrade(url: string): Promise<{ opened: boolean; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const ws = new WebSocket(url, ['binary']);
    const timer = setTimeout(
      () =>
        settle(() => {
          ws.terminate();
          reject(new Error(`no answer to the upgrade of ${url}`));
        }),
      15_000,
    );
    ws.once('open', () =>
      settle(() => {
        ws.close();
        resolve({ opened: true });
      }),
    );
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () =>
        settle(() => {
          ws.terminate();
          resolve({ opened: false, status: res.statusCode, body });
        }),
      );
    });
    ws.on('error', (err) => settle(() => reject(err)));
  });
}

// ---- helpers: processes -----------------------------------------------------------

function cmdline(pid: number): string[] {
  return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

function argAfter(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

function uids(pid: number): number[] {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Uid:'));
  assert.ok(line, `no Uid line for ${pid}`);
  return line.split(/\s+/).slice(1).filter(Boolean).map(Number);
}

function gone(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The session's one Xvfb and one x11vnc (asserting there is exactly one of each). */
function displayProcesses(sessionId: string): { xvfb: number; x11vnc: number } {
  const procs = sessionProcesses(server.dataDir).filter((p) => p.sessionId === sessionId);
  const xvfb = procs.filter((p) => cmdline(p.pid)[0] === 'Xvfb');
  const vnc = procs.filter((p) => cmdline(p.pid)[0] === 'x11vnc');
  assert.equal(xvfb.length, 1, `Xvfb processes of ${sessionId}: ${JSON.stringify(procs)}`);
  assert.equal(vnc.length, 1, `x11vnc processes of ${sessionId}: ${JSON.stringify(procs)}`);
  return { xvfb: xvfb[0]!.pid, x11vnc: vnc[0]!.pid };
}

/** TCP sockets in LISTEN state held by `pid`, from its own /proc/<pid>/net view. */
function listeningSockets(pid: number): { family: 'tcp' | 'tcp6'; local: string }[] {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  const out: { family: 'tcp' | 'tcp6'; local: string }[] = [];
  for (const family of ['tcp', 'tcp6'] as const) {
    let text = '';
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${family}`, 'utf8');
    } catch {
      continue; // no IPv6 in this kernel
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      if (f[3] === '0A' && inodes.has(f[9]!)) out.push({ family, local: f[1]! });
    }
  }
  return out;
}

// ---- helpers: PNG (Playwright screenshots) ----------------------------------------

/** Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are). */
function decodePng(buf: Buffer): { width: number; height: number; pixel(x: number, y: number): RGB } {
  assert.deepEqual([...buf.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], 'not a PNG');
  let width = 0;
  let height = 0;
  let bitDepth = 0;
  let colorType = 0;
  let interlace = 0;
  const idat: Buffer[] = [];
  for (let pos = 8; pos < buf.length; ) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('latin1', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      bitDepth = data[8]!;
      colorType = data[9]!;
      interlace = data[12]!;
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    pos += 12 + len;
  }
  assert.equal(bitDepth, 8);
  assert.ok(colorType === 2 || colorType === 6, `PNG colour type ${colorType}`);
  assert.equal(interlace, 0);
  const bpp = colorType === 6 ? 4 : 3;
  const stride = width * bpp;
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = y * stride;
    const prev = row - stride;
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? px[row + i - bpp]! : 0;
      const b = y > 0 ? px[prev + i]! : 0;
      const c = i >= bpp && y > 0 ? px[prev + i - bpp]! : 0;
      let v = line[i]!;
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else assert.equal(filter, 0, `PNG filter ${filter}`);
      px[row + i] = v & 0xff;
    }
  }
  return {
    width,
    height,
    pixel(x, y) {
      assert.ok(x >= 0 && y >= 0 && x < width && y < height, `pixel ${x},${y} outside ${width}x${height}`);
      const o = y * stride + x * bpp;
      return [px[o]!, px[o + 1]!, px[o + 2]!];
    },
  };
}

function near(c: RGB, want: RGB, tolerance = 40): boolean {
  return c.every((v, i) => Math.abs(v - want[i]!) <= tolerance);
}

// ---- helpers: the viewer ----------------------------------------------------------

interface CanvasBox {
  /** The remote screen's size (the canvas's own pixels). */
  width: number;
  height: number;
  /** Where the canvas is shown in the viewer's window (CSS pixels). */
  left: number;
  top: number;
  cssWidth: number;
  cssHeight: number;
}

async function openViewer(url: string, size = { width: 800, height: 600 }): Promise<Page> {
  const ctx = await viewer.newContext({ viewport: size });
  const page = await ctx.newPage();
  await page.goto(url);
  await page.waitForSelector('body[data-state="connected"]', { timeout: 30_000 });
  return page;
}

async function closeViewer(page: Page): Promise<void> {
  await page.context().close();
}

async function canvasBox(v: Page): Promise<CanvasBox> {
  return v.evaluate(() => {
    const c = document.querySelector('#screen canvas') as HTMLCanvasElement;
    const r = c.getBoundingClientRect();
    return { width: c.width, height: c.height, left: r.left, top: r.top, cssWidth: r.width, cssHeight: r.height };
  });
}

/** Viewer window coordinates of the centre of remote screen pixel (rx, ry). */
function toViewer(box: CanvasBox, rx: number, ry: number): { x: number; y: number } {
  return { x: box.left + ((rx + 0.5) * box.cssWidth) / box.width, y: box.top + ((ry + 0.5) * box.cssHeight) / box.height };
}

/** Colours of remote screen pixels as a screenshot of the viewer shows them. */
async function seen(v: Page, points: [number, number][]): Promise<RGB[]> {
  const box = await canvasBox(v);
  const png = decodePng(await v.screenshot());
  return points.map(([rx, ry]) => {
    const p = toViewer(box, rx, ry);
    return png.pixel(Math.floor(p.x), Math.floor(p.y));
  });
}

/** Waits until the viewer shows the expected colours at the given remote points. */
async function waitForView(v: Page, expect: { at: [number, number]; is: RGB | ((c: RGB) => boolean) }[], what: string): Promise<RGB[]> {
  let last: RGB[] = [];
  const ok = await eventually(
    async () => {
      last = await seen(
        v,
        expect.map((e) => e.at),
      );
      return last.every((c, i) => {
        const want = expect[i]!.is;
        return typeof want === 'function' ? want(c) : near(c, want);
      });
    },
    30_000,
    300,
  );
  assert.ok(ok, `${what}: the viewer shows ${JSON.stringify(last)} at ${JSON.stringify(expect.map((e) => e.at))}`);
  return last;
}

// ---- helpers: the session's page over CDP -----------------------------------------

interface Geometry {
  /** Where the page's viewport starts on the screen (below the tab strip and toolbar). */
  left: number;
  top: number;
  innerWidth: number;
  innerHeight: number;
  input: { x: number; y: number; w: number; h: number };
}

async function geometry(p: Page): Promise<Geometry> {
  return p.evaluate(() => {
    const r = document.querySelector('#in')!.getBoundingClientRect();
    return {
      left: window.screenX + (window.outerWidth - window.innerWidth),
      top: window.screenY + (window.outerHeight - window.innerHeight),
      innerWidth: window.innerWidth,
      innerHeight: window.innerHeight,
      input: { x: r.left, y: r.top, w: r.width, h: r.height },
    };
  });
}

async function clicks(p: Page): Promise<Click[]> {
  return p.evaluate(() => (window as unknown as { clicks: Click[] }).clicks.slice());
}

async function inputValue(p: Page): Promise<string> {
  return p.evaluate(() => (document.querySelector('#in') as HTMLInputElement).value);
}

// ---- helpers: a raw RFB client over the live websocket ----------------------------

/**
 * Speaks RFB 3.8 itself over /browser/live/ws, so what the gateway forwards can be tested
 * apart from noVNC (which, in a readonly view, never sends input in the first place).
 */
class RawRfb {
  private buf = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  width = 0;
  height = 0;
  private format = { bpp: 32, bigEndian: false, redMax: 255, greenMax: 255, blueMax: 255, redShift: 16, greenShift: 8, blueShift: 0 };
  closed: { code: number; reason: string } | null = null;
  readonly whenClosed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake();
    });
    this.whenClosed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closed = { code, reason: reason.toString() };
        this.wake();
        resolve(this.closed);
      }),
    );
  }

  static async open(url: string): Promise<RawRfb> {
    const ws = new WebSocket(url, ['binary']);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    assert.equal(ws.protocol, 'binary');
    return new RawRfb(ws);
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  async read(n: number, timeoutMs = 15_000): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    while (this.buf.length < n) {
      if (this.closed) throw new Error(`the live websocket closed (${this.closed.code} ${this.closed.reason}) while ${n} bytes were awaited`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${n} bytes from the VNC server within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** RFB 3.8 handshake with security None and a shared session; returns the server's version string. */
  async handshake(): Promise<string> {
    const version = (await this.read(12)).toString('latin1');
    this.ws.send(Buffer.from('RFB 003.008\n', 'latin1'));
    const n = (await this.read(1))[0]!;
    assert.ok(n > 0, 'the VNC server offered no security type');
    const types = [...(await this.read(n))];
    assert.ok(types.includes(1), `security None not offered: ${types}`);
    this.ws.send(Buffer.from([1]));
    assert.equal((await this.read(4)).readUInt32BE(0), 0, 'security result');
    this.ws.send(Buffer.from([1])); // ClientInit: shared
    const init = await this.read(24);
    this.width = init.readUInt16BE(0);
    this.height = init.readUInt16BE(2);
    this.format = {
      bpp: init[4]!,
      bigEndian: init[6] !== 0,
      redMax: init.readUInt16BE(8),
      greenMax: init.readUInt16BE(10),
      blueMax: init.readUInt16BE(12),
      redShift: init[14]!,
      greenShift: init[15]!,
      blueShift: init[16]!,
    };
    await this.read(init.readUInt32BE(20)); // desktop name
    // Raw encoding only, so a framebuffer update is easy to read.
    this.ws.send(Buffer.from([2, 0, 0, 1, 0, 0, 0, 0]));
    return version;
  }

  /** The colour of one screen pixel, read from a framebuffer update (proves the stream can be watched). */
  async pixel(x: number, y: number): Promise<RGB> {
    assert.equal(this.format.bpp, 32, 'the test reads 32-bit pixels only');
    const req = Buffer.alloc(10);
    req[0] = 3;
    req[1] = 0; // not incremental: the region is sent whatever changed
    req.writeUInt16BE(x, 2);
    req.writeUInt16BE(y, 4);
    req.writeUInt16BE(1, 6);
    req.writeUInt16BE(1, 8);
    for (let attempt = 0; attempt < 5; attempt++) {
      this.ws.send(req);
      let type = (await this.read(1))[0]!;
      while (type !== 0) {
        if (type === 3) {
          const len = (await this.read(7)).readUInt32BE(3);
          await this.read(len); // ServerCutText
        } else assert.equal(type, 2, `unexpected server message type ${type}`); // 2: Bell
        type = (await this.read(1))[0]!;
      }
      const rects = (await this.read(3)).readUInt16BE(1);
      let found: RGB | null = null;
      for (let i = 0; i < rects; i++) {
        const h = await this.read(12);
        const [rx, ry, rw, rh, enc] = [h.readUInt16BE(0), h.readUInt16BE(2), h.readUInt16BE(4), h.readUInt16BE(6), h.readInt32BE(8)];
        assert.equal(enc, 0, `rectangle encoding ${enc} (only raw was asked for)`);
        const data = await this.read(rw * rh * 4);
        if (x >= rx && x < rx + rw && y >= ry && y < ry + rh) {
          const o = ((y - ry) * rw + (x - rx)) * 4;
          const v = this.format.bigEndian ? data.readUInt32BE(o) : data.readUInt32LE(o);
          const f = this.format;
          found = [
            Math.round((((v >>> f.redShift) & f.redMax) * 255) / f.redMax),
            Math.round((((v >>> f.greenShift) & f.greenMax) * 255) / f.greenMax),
            Math.round((((v >>> f.blueShift) & f.blueMax) * 255) / f.blueMax),
          ];
        }
      }
      if (found) return found;
    }
    throw new Error(`no framebuffer update covered pixel ${x},${y}`);
  }

  pointer(x: number, y: number, mask: number): void {
    const b = Buffer.alloc(6);
    b[0] = 5;
    b[1] = mask;
    b.writeUInt16BE(x, 2);
    b.writeUInt16BE(y, 4);
    this.ws.send(b);
  }

  click(x: number, y: number): void {
    this.pointer(x, y, 0);
    this.pointer(x, y, 1);
    this.pointer(x, y, 0);
  }

  key(keysym: number, down: boolean): void {
    const b = Buffer.alloc(8);
    b[0] = 4;
    b[1] = down ? 1 : 0;
    b.writeUInt32BE(keysym, 4);
    this.ws.send(b);
  }

  /** Types lower-case letters and digits (their keysyms are their code points). */
  type(text: string): void {
    for (const ch of text) {
      assert.match(ch, /^[a-z0-9]$/);
      this.key(ch.charCodeAt(0), true);
      this.key(ch.charCodeAt(0), false);
    }
  }

  cutText(text: string): void {
    const t = Buffer.from(text, 'latin1');
    const h = Buffer.alloc(8);
    h[0] = 6;
    h.writeUInt32BE(t.length, 4);
    this.ws.send(Buffer.concat([h, t]));
  }

  close(): void {
    this.ws.close();
  }
}

// =====================================================================================

describe('live view of a headful session', () => {
  let b: BrowserBody;
  let liveUrl: string;
  let cdp: Browser;
  let sp: Page;
  let geo: Geometry;
  let v: Page;
  const opened: RawRfb[] = [];

  before(async () => {
    b = await create({ headless: false, viewport: { width: 1024, height: 768, refresh_rate: 10 } });
    assert.ok(b.browser_live_view_url, 'a headful session has a browser_live_view_url');
    liveUrl = b.browser_live_view_url;
    cdp = await chromium.connectOverCDP(b.cdp_ws_url);
    const first = cdp.contexts()[0]?.pages()[0];
    assert.ok(first, 'the session has no tab');
    sp = first;
    await sp.goto(site.url);
    geo = await geometry(sp);
  });
  after(async () => {
    for (const r of opened) r.ws.terminate();
    if (v && !v.isClosed()) await closeViewer(v);
    await cdp?.close().catch(() => undefined);
    if (b) await fetch(`${server.url}/browsers/${b.session_id}`, { method: 'DELETE', headers: server.headers() });
  });

  async function rfb(url: string): Promise<RawRfb> {
    const r = await RawRfb.open(url);
    opened.push(r);
    return r;
  }

  test('the URL: /browser/live on this server with a live-channel token for the session; viewport echoed', () => {
    const u = new URL(liveUrl);
    assert.equal(u.origin, server.url);
    assert.equal(u.pathname, '/browser/live');
    const claims = claimsOf(jwtOf(liveUrl));
    assert.equal(claims.ch, 'live');
    assert.equal(claims.sub, b.session_id);
    assert.equal(claims.ro, undefined);
    assert.deepEqual(b.viewport, { width: 1024, height: 768, refresh_rate: 10 });
  });

  test('processes: exactly one Xvfb and one x11vnc, the display at the viewport size, x11vnc on loopback only, not root, frames capped by refresh_rate', () => {
    const { xvfb, x11vnc } = displayProcesses(b.session_id);
    const xa = cmdline(xvfb);
    assert.equal(argAfter(xa, '-screen'), '0');
    assert.ok(xa.includes('1024x768x24'), `Xvfb args: ${xa.join(' ')}`);
    assert.equal(argAfter(xa, '-nolisten'), 'tcp');

    const va = cmdline(x11vnc);
    // refresh_rate 10 Hz -> at most one frame every 100 ms.
    assert.equal(argAfter(va, '-wait'), '100', `x11vnc args: ${va.join(' ')}`);
    assert.equal(argAfter(va, '-defer'), '100');
    assert.ok(va.includes('-localhost'));
    // x11vnc draws the same display as Xvfb: the display number Chromium uses too.
    const display = argAfter(va, '-display');
    assert.match(display ?? '', /^:\d+$/);
    assert.ok(fs.existsSync(`/tmp/.X11-unix/X${display!.slice(1)}`), 'the display socket exists');

    for (const pid of [xvfb, x11vnc]) {
      const ids = uids(pid);
      assert.ok(ids.every((id) => id !== 0), `process ${pid} (${cmdline(pid)[0]}) runs with uids ${ids}`);
    }

    const socks = listeningSockets(x11vnc);
    assert.ok(socks.length >= 1, 'x11vnc listens on no TCP socket');
    for (const s of socks) {
      assert.equal(s.family, 'tcp', `x11vnc listens on IPv6: ${s.local}`);
      assert.match(s.local, /^0100007F:[0-9A-F]{4}$/, `x11vnc listens on ${s.local}, not 127.0.0.1`);
    }
  });

  test('the viewer connects and shows the session page, scaled to its 800x600 window', async () => {
    v = await openViewer(liveUrl);
    assert.equal(await v.getAttribute('body', 'data-readonly'), 'false');
    assert.equal(await v.isHidden('#badge'), true, 'a controlling view shows no "view only" badge');

    const box = await canvasBox(v);
    // The canvas holds the whole remote screen and is drawn smaller to fit the window.
    assert.equal(box.width, 1024);
    assert.equal(box.height, 768);
    assert.ok(box.cssWidth <= 800 + 0.5 && box.cssHeight <= 600 + 0.5, `canvas shown at ${box.cssWidth}x${box.cssHeight}`);
    assert.ok(Math.abs(box.cssWidth - 800) < 1 || Math.abs(box.cssHeight - 600) < 1, 'the canvas fills the window in one dimension');
    assert.ok(Math.abs(box.cssWidth / box.cssHeight - 1024 / 768) < 0.01, 'aspect ratio kept');

    const inputCentre: [number, number] = [Math.round(geo.left + geo.input.x + geo.input.w / 2), Math.round(geo.top + geo.input.y + geo.input.h / 2)];
    const pageBelowInput: [number, number] = [Math.round(geo.left + 100), Math.round(geo.top + geo.innerHeight - 60)];
    const pageRight: [number, number] = [1000, Math.round(geo.top + 40)];
    const tabStrip: [number, number] = [Math.round(geo.left + 600), 4];
    await waitForView(
      v,
      [
        { at: pageBelowInput, is: RED },
        { at: pageRight, is: RED },
        { at: inputCentre, is: WHITE },
        // Not kiosk: the browser's own UI (tab strip) is on the screen above the page.
        { at: tabStrip, is: (c) => !near(c, RED) },
      ],
      'the session page',
    );
    assert.ok(geo.top > 20, `the page starts ${geo.top} px below the top of the screen (tab strip and toolbar above it)`);
  });

  test('the view follows the window size (a narrower window gives a smaller canvas, same aspect)', async () => {
    await v.setViewportSize({ width: 640, height: 600 });
    const small = await eventually(async () => {
      const box = await canvasBox(v);
      return Math.abs(box.cssWidth - 640) < 1 ? box : null;
    }, 10_000);
    assert.ok(small, 'the canvas did not shrink to the 640 px window');
    assert.ok(Math.abs(small.cssHeight - 480) < 1, `canvas height ${small.cssHeight} for a 640 px wide window`);
    await v.setViewportSize({ width: 800, height: 600 });
    const back = await eventually(async () => {
      const box = await canvasBox(v);
      return Math.abs(box.cssWidth - 800) < 1 ? box : null;
    }, 10_000);
    assert.ok(back, 'the canvas did not grow back');
  });

  test('a click in the viewer arrives in the page at the matching remote coordinates', async () => {
    const before = (await clicks(sp)).length;
    const rx = Math.round(geo.left + geo.input.x + geo.input.w * 0.3);
    const ry = Math.round(geo.top + geo.input.y + geo.input.h * 0.5);
    const box = await canvasBox(v);
    const at = toViewer(box, rx, ry);
    await v.mouse.click(at.x, at.y);
    const got = await eventually(async () => {
      const c = await clicks(sp);
      return c.length > before ? c : null;
    }, 15_000);
    assert.ok(got, 'the click never reached the session page');
    const c = got[before]!;
    assert.equal(c.target, 'in');
    assert.equal(c.button, 0);
    // One viewer pixel is 1.28 remote pixels here: allow a little rounding.
    assert.ok(Math.abs(c.screenX - rx) <= 3 && Math.abs(c.screenY - ry) <= 3, `clicked remote (${rx},${ry}), the page saw screen (${c.screenX},${c.screenY})`);
    assert.ok(Math.abs(c.clientX - (rx - geo.left)) <= 3 && Math.abs(c.clientY - (ry - geo.top)) <= 3, `page coordinates (${c.clientX},${c.clientY})`);
    assert.equal(await sp.evaluate(() => document.activeElement?.id), 'in', 'the click focused the input');
  });

  test('text typed in the viewer arrives in the focused input', async () => {
    const text = 'Hello live view 42';
    await v.keyboard.type(text);
    const value = await eventually(async () => {
      const val = await inputValue(sp);
      return val === text ? val : null;
    }, 15_000);
    assert.equal(value, text, `the input holds ${JSON.stringify(await inputValue(sp))}`);
    // And what was typed is on the screen the viewer shows: dark pixels of text in the white input.
    const band: [number, number][] = [];
    for (let x = 2; x < 200; x += 2) band.push([Math.round(geo.left + geo.input.x + x), Math.round(geo.top + geo.input.y + geo.input.h / 2)]);
    const dark = await eventually(async () => (await seen(v, band)).some((c) => c.every((ch) => ch < 160)), 15_000, 300);
    assert.ok(dark, 'the typed text is not visible in the viewer');
  });

  test('clipboard: text sent from the viewer panel is pasted with Ctrl+V; text copied in the session shows up in the panel', async () => {
    await sp.evaluate(() => {
      const i = document.querySelector('#in') as HTMLInputElement;
      i.value = '';
      i.focus();
    });
    assert.equal(await v.isHidden('#clip'), true);
    await v.click('#clip-toggle');
    assert.equal(await v.isVisible('#clip'), true);
    const sent = 'pasted from the viewer';
    await v.fill('#clip-text', sent);
    await v.click('#clip-send'); // also gives the keyboard back to the screen
    await v.keyboard.press('Control+v');
    const pasted = await eventually(async () => ((await inputValue(sp)) === sent ? true : null), 20_000, 200);
    assert.ok(pasted, `after Ctrl+V the input holds ${JSON.stringify(await inputValue(sp))}`);

    // The other way: the session copies, the viewer's panel shows the remote clipboard.
    // (x11vnc only starts sending selection changes about 15 s after a viewer connects.)
    const copied = 'copied in the session';
    const ok = await sp.evaluate((t) => {
      const i = document.querySelector('#in') as HTMLInputElement;
      i.value = t;
      i.select();
      return document.execCommand('copy');
    }, copied);
    assert.equal(ok, true, 'execCommand("copy") failed in the session');
    const shown = await eventually(async () => ((await v.inputValue('#clip-text')) === copied ? true : null), 45_000, 500);
    assert.ok(shown, `the panel shows ${JSON.stringify(await v.inputValue('#clip-text'))}`);
    await v.click('#clip-toggle');
    assert.equal(await v.isHidden('#clip'), true);
  });

  test('readonly: &readonly=1 redirects to a readonly token that stays readonly without the parameter', async () => {
    const res = await fetch(`${liveUrl}&readonly=1`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    const target = new URL(res.headers.get('location') ?? '', liveUrl);
    assert.equal(target.origin, server.url);
    assert.equal(target.pathname, '/browser/live');
    assert.equal(target.searchParams.get('readonly'), null, 'the redirect target carries no readonly parameter; the token is what is readonly');
    const ro = jwtOf(target.href);
    assert.notEqual(ro, jwtOf(liveUrl));
    const claims = claimsOf(ro);
    assert.equal(claims.ro, true);
    assert.equal(claims.ch, 'live');
    assert.equal(claims.sub, b.session_id);

    // Without readonly=1, the readonly token still gives the readonly page.
    const plain = await fetch(target);
    assert.equal(plain.status, 200);
    assert.match(await plain.text(), /<body data-readonly="true">/);
    // readonly=1 on a readonly token: the page, no second redirect.
    const again = await fetch(`${target.href}&readonly=1`, { redirect: 'manual' });
    assert.equal(again.status, 200);
    // The controlling token's own page is not readonly; readonly=0 does not redirect.
    for (const u of [liveUrl, `${liveUrl}&readonly=0`]) {
      const r = await fetch(u, { redirect: 'manual' });
      assert.equal(r.status, 200, u);
      assert.match(await r.text(), /<body data-readonly="false">/);
    }
  });

  test('readonly: the view connects and shows the page, but clicks and typing do not reach the session', async () => {
    const input: [number, number] = [Math.round(geo.left + geo.input.x + geo.input.w * 0.7), Math.round(geo.top + geo.input.y + geo.input.h * 0.5)];
    const ro = await openViewer(`${liveUrl}&readonly=1`);
    try {
      assert.notEqual(jwtOf(ro.url()), jwtOf(liveUrl), 'the browser followed the redirect to the readonly token');
      assert.equal(await ro.getAttribute('body', 'data-readonly'), 'true');
      assert.equal(await ro.isVisible('#badge'), true, 'the "view only" badge is shown');
      assert.equal(await ro.isHidden('#clip-send'), true, 'no "send to browser" in a readonly view');
      await waitForView(
        ro,
        [
          { at: [Math.round(geo.left + 100), Math.round(geo.top + geo.innerHeight - 60)], is: RED },
          { at: input, is: WHITE },
        ],
        'the readonly view',
      );

      await sp.evaluate(() => {
        // Focused, so typing would land in it if it got through.
        const i = document.querySelector('#in') as HTMLInputElement;
        i.value = '';
        i.focus();
        (window as unknown as { clicks: Click[] }).clicks.length = 0;
      });
      const box = await canvasBox(ro);
      const at = toViewer(box, input[0], input[1]);
      await ro.mouse.click(at.x, at.y);
      await ro.keyboard.type('readonly');
      await ro.keyboard.press('Control+v');

      // A controlling client acts afterwards; once its click has arrived, the readonly
      // input would have arrived too.
      const rw = await rfb(liveWsUrl(liveUrl));
      await rw.handshake();
      rw.click(900, Math.round(geo.top + geo.innerHeight - 30));
      const got = await eventually(async () => {
        const c = await clicks(sp);
        return c.length ? c : null;
      }, 15_000);
      assert.ok(got, 'the controlling client’s click never arrived');
      assert.equal(got.length, 1, `clicks in the page: ${JSON.stringify(got)}`);
      assert.ok(Math.abs(got[0]!.screenX - 900) <= 1, 'the one click is the controlling client’s');
      assert.equal(await inputValue(sp), '');
      rw.close();
    } finally {
      await closeViewer(ro);
    }
  });

  test('readonly: the gateway drops input a readonly client sends anyway (raw RFB), and forwards the screen', async () => {
    const roUrl = new URL((await fetch(`${liveUrl}&readonly=1`, { redirect: 'manual' })).headers.get('location') ?? '', liveUrl).href;
    const ro = await rfb(liveWsUrl(liveUrl, jwtOf(roUrl)));
    assert.match(await ro.handshake(), /^RFB 003\.00\d\n$/);
    assert.equal(ro.width, 1024);
    assert.equal(ro.height, 768);
    // Watching works: a framebuffer update shows the page's colours.
    const redAt: [number, number] = [Math.round(geo.left + 100), Math.round(geo.top + geo.innerHeight - 60)];
    assert.ok(near(await ro.pixel(...redAt), RED), 'the readonly client reads the red page');
    assert.ok(near(await ro.pixel(Math.round(geo.left + geo.input.x + geo.input.w / 2), Math.round(geo.top + geo.input.y + 4)), WHITE));

    await sp.evaluate(() => {
      const i = document.querySelector('#in') as HTMLInputElement;
      i.value = '';
      i.focus();
      (window as unknown as { clicks: Click[] }).clicks.length = 0;
    });
    // Input of every kind, at the input box: click, keys, clipboard, then Ctrl+V.
    const ix = Math.round(geo.left + geo.input.x + 50);
    const iy = Math.round(geo.top + geo.input.y + geo.input.h / 2);
    ro.click(ix, iy);
    ro.type('readonly1');
    ro.cutText('readonly clipboard');
    ro.key(0xffe3, true);
    ro.key(0x76, true);
    ro.key(0x76, false);
    ro.key(0xffe3, false);
    // The same connection still works afterwards (dropped input does not desynchronise the stream).
    assert.ok(near(await ro.pixel(...redAt), RED));

    // Control: the same bytes with the controlling token do arrive.
    const rw = await rfb(liveWsUrl(liveUrl));
    await rw.handshake();
    rw.click(ix, iy);
    rw.type('rw2');
    const typed = await eventually(async () => ((await inputValue(sp)) === 'rw2' ? true : null), 15_000);
    assert.ok(typed, `the controlling client's typing: input holds ${JSON.stringify(await inputValue(sp))}`);
    const c = await clicks(sp);
    assert.equal(c.length, 1, `clicks: ${JSON.stringify(c)}`);
    assert.ok(Math.abs(c[0]!.screenX - ix) <= 1 && Math.abs(c[0]!.screenY - iy) <= 1);
    assert.equal(ro.closed, null, 'the readonly connection stays open');
    ro.close();
    rw.close();
  });

  test('tokens: missing, tampered, other-channel and unknown-session tokens are refused on the page, status and websocket', async () => {
    const good = jwtOf(liveUrl);
    const sig = good.split('.')[2]!;
    const tampered = `${good.split('.').slice(0, 2).join('.')}.${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`;
    const cdpToken = jwtOf(b.cdp_ws_url);
    const bidiToken = jwtOf(b.webdriver_ws_url);
    const cases: [string, string | null][] = [
      ['missing', null],
      ['empty', ''],
      ['tampered', tampered],
      ['cdp channel', cdpToken],
      ['bidi channel', bidiToken],
      ['garbage', 'not-a-jwt'],
    ];
    for (const [name, jwt] of cases) {
      const page = await fetch(pageUrl(liveUrl, jwt));
      assert.equal(page.status, 401, `page, ${name} token`);
      const body = (await page.json()) as { code: string; message: string };
      assert.equal(body.code, 'unauthorized', name);
      assert.ok(body.message);
      const st = new URL(pageUrl(liveUrl, jwt));
      st.pathname = '/browser/live/status';
      assert.equal((await fetch(st)).status, 401, `status, ${name} token`);
      const ws = await tryUpgrade(liveWsUrl(liveUrl, jwt));
      assert.equal(ws.opened, false, `websocket, ${name} token`);
      assert.equal(ws.status, 401, `websocket, ${name} token: ${ws.body}`);
      assert.equal((JSON.parse(ws.body ?? '{}') as { code?: string }).code, 'unauthorized');
    }
    const other = await fetch(pageUrl(liveUrl, cdpToken));
    assert.match(((await other.json()) as { message: string }).message, /cdp/);

    // A well-signed token for a session that does not exist: 404.
    const unknown = await mintLiveToken('nosuchsession0000000000000');
    assert.equal((await fetch(pageUrl(liveUrl, unknown))).status, 404);
    assert.equal((await tryUpgrade(liveWsUrl(liveUrl, unknown))).status, 404);

    // The real token, and one minted with the store's key for this session, both work.
    assert.equal((await fetch(liveUrl)).status, 200);
    assert.equal((await tryUpgrade(liveWsUrl(liveUrl))).opened, true);
    const minted = await mintLiveToken(b.session_id);
    assert.equal((await fetch(pageUrl(liveUrl, minted))).status, 200);
    assert.equal((await tryUpgrade(liveWsUrl(liveUrl, minted))).opened, true);
    assert.equal(await liveStatus(liveUrl), 'active');
  });

  test('the page is a private page: no caching, no referrer, no sniffing; it may be embedded (framed) by any origin', async () => {
    const res = await fetch(liveUrl);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('x-frame-options'), null, 'dashboards embed the live view in an iframe');
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors \*/);
  });

  test('deleting the session: the viewer shows that it ended, websockets close with 1000 and the reason, Xvfb and x11vnc end', async () => {
    assert.equal(await v.getAttribute('body', 'data-state'), 'connected');
    const raw = await rfb(liveWsUrl(liveUrl));
    await raw.handshake();
    const { xvfb, x11vnc } = displayProcesses(b.session_id);
    const display = argAfter(cmdline(x11vnc), '-display')!.slice(1);
    await cdp.close();

    await remove(b.session_id);

    const closed = await Promise.race([raw.whenClosed, new Promise<null>((r) => setTimeout(() => r(null), 15_000))]);
    assert.ok(closed, 'the live websocket was not closed');
    assert.equal(closed.code, 1000);
    assert.match(closed.reason, /session ended/);
    assert.equal(closed.reason, 'session ended (deleted)');

    await v.waitForSelector('body[data-state="ended"]', { timeout: 20_000 });
    assert.match((await v.textContent('#status')) ?? '', /session has ended/i);
    assert.equal(await v.isVisible('#status'), true);

    assert.equal(await liveStatus(liveUrl), 'ended');
    const page = await fetch(liveUrl);
    assert.equal(page.status, 404);
    assert.equal(((await page.json()) as { code: string }).code, 'session_not_found');
    assert.equal((await tryUpgrade(liveWsUrl(liveUrl))).status, 404);

    assert.ok(await eventually(() => gone(xvfb) && gone(x11vnc), 15_000), 'Xvfb or x11vnc outlived the session');
    assert.equal(sessionProcesses(server.dataDir).filter((p) => p.sessionId === b.session_id).length, 0);
    // Xvfb ended cleanly (by signal, not left to die): its lock and socket are gone.
    assert.ok(await eventually(() => !fs.existsSync(`/tmp/.X${display}-lock`) && !fs.existsSync(`/tmp/.X11-unix/X${display}`), 10_000), `display :${display} left its lock or socket`);
    await closeViewer(v);
  });
});

describe('kiosk_mode', () => {
  let k: BrowserBody;
  after(async () => {
    if (k) await fetch(`${server.url}/browsers/${k.session_id}`, { method: 'DELETE', headers: server.headers() });
  });

  test('the live view of a kiosk session has no browser UI: the page starts at the top of the screen', async () => {
    k = await create({ headless: false, kiosk_mode: true, viewport: { width: 1024, height: 768 }, start_url: site.url });
    assert.equal(k.kiosk_mode, true);
    assert.ok(k.browser_live_view_url);
    const v = await openViewer(k.browser_live_view_url);
    try {
      // The page's input is at (200..600, 150..230) of the page, and so of the screen; the
      // top rows, where a normal window has its tab strip, are the page's red.
      await waitForView(
        v,
        [
          { at: [10, 1], is: RED },
          { at: [300, 3], is: RED },
          { at: [600, 10], is: RED },
          { at: [1010, 2], is: RED },
          { at: [512, 60], is: RED },
          { at: [400, 145], is: RED },
          { at: [400, 190], is: WHITE },
          { at: [400, 235], is: RED },
          { at: [20, 760], is: RED },
        ],
        'the kiosk session page',
      );
    } finally {
      await closeViewer(v);
    }
    const cdp = await chromium.connectOverCDP(k.cdp_ws_url);
    try {
      const page = cdp.contexts()[0]!.pages().find((p) => p.url() === site.url);
      assert.ok(page, 'the start_url tab');
      const g = await geometry(page);
      assert.equal(g.top, 0, 'no UI above the page');
      // The page takes the whole screen. (Chromium on X11 makes a window asked to be exactly
      // the screen's size one pixel smaller in each dimension: 1023x767 here.)
      assert.ok(g.innerHeight >= 767 && g.innerHeight <= 768, `page height ${g.innerHeight}`);
      assert.ok(g.innerWidth >= 1023 && g.innerWidth <= 1024, `page width ${g.innerWidth}`);
    } finally {
      await cdp.close();
    }
  });
});

describe('an open live view is activity', () => {
  let s: BrowserBody;
  after(async () => {
    if (s) await fetch(`${server.url}/browsers/${s.session_id}`, { method: 'DELETE', headers: server.headers() });
  });

  test('a session with timeout_seconds 10 lives on while a viewer is connected, and ends after the viewer leaves', async () => {
    s = await create({ headless: false, timeout_seconds: 10, viewport: { width: 800, height: 600 } });
    assert.equal(s.timeout_seconds, 10);
    const live = s.browser_live_view_url!;
    const v = await openViewer(live);
    let closed = false;
    try {
      // Well past the timeout plus a reaper period: only the open viewer keeps it.
      await new Promise((r) => setTimeout(r, 16_000));
      assert.equal(await liveStatus(live), 'active');
      const got = await fetch(`${server.url}/browsers/${s.session_id}`, { headers: server.headers() });
      assert.equal(got.status, 200, 'the session ended while a viewer was connected');
      assert.equal(((await got.json()) as BrowserBody).deleted_at, undefined);
      assert.equal(await v.getAttribute('body', 'data-state'), 'connected');
      await closeViewer(v);
      closed = true;
      const ended = await eventually(async () => (await liveStatus(live)) === 'ended', 45_000, 500);
      assert.ok(ended, 'the session did not end after its viewer left');
      const deleted = await eventually(async () => {
        const res = await fetch(`${server.url}/browsers/${s.session_id}?include_deleted=true`, { headers: server.headers() });
        assert.equal(res.status, 200);
        return ((await res.json()) as BrowserBody).deleted_at;
      }, 10_000);
      assert.ok(deleted, 'deleted_at is set');
      // The log line comes once the processes are gone, a little after the session stops being live.
      assert.ok(
        await eventually(() => server.output().split('\n').some((l) => l.includes(s.session_id) && l.includes('"reason":"inactivity"')), 15_000),
        'the server logged the end for inactivity',
      );
      assert.ok(await eventually(() => sessionProcesses(server.dataDir).every((p) => p.sessionId !== s.session_id), 15_000), 'processes outlived the session');
    } finally {
      if (!closed) await closeViewer(v);
    }
  });
});

describe('headless sessions have no live view', () => {
  let h: BrowserBody;
  after(async () => {
    if (h) await fetch(`${server.url}/browsers/${h.session_id}`, { method: 'DELETE', headers: server.headers() });
  });

  test('no browser_live_view_url; a live token for it is refused by the page and the websocket; no Xvfb or x11vnc', async () => {
    h = await create({ headless: true });
    assert.equal(h.headless, true);
    assert.equal('browser_live_view_url' in h, false);
    const listed = await fetch(`${server.url}/browsers/${h.session_id}`, { headers: server.headers() });
    assert.equal('browser_live_view_url' in ((await listed.json()) as BrowserBody), false);

    const token = await mintLiveToken(h.session_id);
    const base = `${server.url}/browser/live`;
    const page = await fetch(`${base}?jwt=${token}`);
    assert.equal(page.status, 404);
    assert.equal(((await page.json()) as { code: string }).code, 'no_live_view');
    const ro = await fetch(`${base}?jwt=${token}&readonly=1`, { redirect: 'manual' });
    assert.equal(ro.status, 404, 'no readonly token is handed out for a headless session');
    const ws = await tryUpgrade(liveWsUrl(base, token));
    assert.equal(ws.opened, false);
    assert.equal(ws.status, 404);
    assert.equal((JSON.parse(ws.body ?? '{}') as { code?: string }).code, 'no_live_view');

    const procs = sessionProcesses(server.dataDir).filter((p) => p.sessionId === h.session_id);
    assert.ok(procs.length > 0);
    assert.ok(procs.every((p) => !/^(Xvfb|x11vnc)\b/.test(p.cmd)), JSON.stringify(procs));
  });
});
