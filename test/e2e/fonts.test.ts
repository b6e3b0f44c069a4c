import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type CDPSession, type Page } from 'playwright-core';
import { startServer, startSite, type TestServer } from '../helpers/server.js';

// Text of every script renders with real glyphs, not boxes, in headless and headful
// sessions (the fonts come from the machine's set-up). Two independent checks per line:
//  1. CDP CSS.getPlatformFontsForNode names the fonts Chromium used for the line; every
//     character must be covered by one of them (checked with fontconfig). A missing glyph
//     is drawn as the .notdef box of some fallback font that does not cover the character.
//  2. Rendered pixels: each distinct character drawn alone on a canvas gives its own
//     bitmap, different from the box a character without a glyph gets. Boxes are all alike.

const LINES = {
  zh: { lang: 'zh-Hans', text: '简体中文测试' },
  ja: { lang: 'ja', text: '日本語のテスト' },
  ko: { lang: 'ko', text: '한국어 테스트' },
  ar: { lang: 'ar', text: 'اختبار اللغة العربية' },
  hi: { lang: 'hi', text: 'हिन्दी परीक्षण' },
} as const;
type Script = keyof typeof LINES;

/** Private-use code points: no installed font has glyphs for them, so they render as boxes. */
const BOXES = '\uE000\uE001\uE002\uE003';

const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>scripts</title>
<style>body { font-size: 32px; margin: 16px; } p { margin: 8px 0; white-space: nowrap; }</style></head><body>
${Object.entries(LINES)
  .map(([id, l]) => `<p id="${id}" lang="${l.lang}"${id === 'ar' ? ' dir="rtl"' : ''}>${l.text}</p>`)
  .join('\n')}
<p id="boxes">${BOXES}</p>
</body></html>`;

let server: TestServer;
let site: Awaited<ReturnType<typeof startSite>>;

before(async () => {
  server = await startServer();
  site = await startSite(PAGE);
});
after(async () => {
  await server?.stop();
  await site?.close();
});

// ---- helpers ----------------------------------------------------------------------

const coverCache = new Map<number, Set<string>>();
/** Font families (every name fontconfig knows them by) with a glyph for code point `cp`. */
function familiesCovering(cp: number): Set<string> {
  let set = coverCache.get(cp);
  if (!set) {
    const out = execFileSync('fc-list', ['--format=%{family}\\n', `:charset=${cp.toString(16)}`], { encoding: 'utf8' });
    set = new Set(
      out
        .split('\n')
        .flatMap((l) => l.split(','))
        .map((f) => f.trim())
        .filter(Boolean),
    );
    coverCache.set(cp, set);
  }
  return set;
}

function distinctChars(text: string): string[] {
  return [...new Set([...text].filter((c) => c.trim() !== ''))];
}

/** Characters of `text` that none of `families` has a glyph for. */
function uncovered(text: string, families: string[]): string[] {
  return distinctChars(text).filter((ch) => !families.some((f) => familiesCovering(ch.codePointAt(0)!).has(f)));
}

async function platformFonts(cdp: CDPSession, rootId: number, selector: string): Promise<{ familyName: string; glyphCount: number }[]> {
  const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: rootId, selector });
  assert.ok(nodeId, `no ${selector}`);
  const { fonts } = await cdp.send('CSS.getPlatformFontsForNode', { nodeId });
  return fonts;
}

/**
 * For each character: a hash of its bitmap drawn alone at 48 px in the page's default
 * font, the number of inked pixels and its advance width. (A string, not a function:
 * the test runner's transpiler would add helpers the page does not have.)
 */
const GLYPHS = `(chars) => {
  const c = document.createElement('canvas');
  c.width = 96; c.height = 96;
  const ctx = c.getContext('2d', { willReadFrequently: true });
  ctx.font = '48px sans-serif';
  ctx.textBaseline = 'middle';
  return chars.map((ch) => {
    ctx.clearRect(0, 0, 96, 96);
    ctx.fillText(ch, 24, 48);
    const d = ctx.getImageData(0, 0, 96, 96).data;
    let h = 2166136261, ink = 0;
    for (let i = 3; i < d.length; i += 4) { if (d[i]) ink++; h = Math.imul(h ^ d[i], 16777619); }
    return { ch, hash: (h >>> 0).toString(16), ink, width: ctx.measureText(ch).width };
  });
}`;

interface Glyph {
  ch: string;
  hash: string;
  ink: number;
  width: number;
}

async function glyphs(page: Page, chars: string[]): Promise<Glyph[]> {
  return (await page.evaluate(`(${GLYPHS})(${JSON.stringify(chars)})`)) as Glyph[];
}

// ---- the checks, for one session --------------------------------------------------

function scriptTests(label: string, body: Record<string, unknown>): void {
  describe(`${label} session`, () => {
    let id: string | null = null;
    let cdpBrowser: Browser;
    let page: Page;
    let cdp: CDPSession;
    let rootId: number;

    before(async () => {
      const res = await fetch(`${server.url}/browsers`, { method: 'POST', headers: server.headers({ 'content-type': 'application/json' }), body: JSON.stringify(body) });
      const b = (await res.json()) as { session_id: string; cdp_ws_url: string; headless: boolean };
      assert.equal(res.status, 200, JSON.stringify(b));
      id = b.session_id;
      assert.equal(b.headless, body.headless);
      cdpBrowser = await chromium.connectOverCDP(b.cdp_ws_url);
      const first = cdpBrowser.contexts()[0]?.pages()[0];
      assert.ok(first, 'the session has no tab');
      page = first;
      await page.goto(site.url);
      await page.evaluate(() => document.fonts.ready.then(() => undefined));
      cdp = await page.context().newCDPSession(page);
      await cdp.send('DOM.enable');
      await cdp.send('CSS.enable');
      rootId = (await cdp.send('DOM.getDocument', { depth: -1 })).root.nodeId;
    });
    after(async () => {
      await cdpBrowser?.close().catch(() => undefined);
      if (id) await fetch(`${server.url}/browsers/${id}`, { method: 'DELETE', headers: server.headers() });
    });

    test('control: characters without any glyph are detected as boxes by both checks', async () => {
      const fonts = await platformFonts(cdp, rootId, '#boxes');
      assert.ok(fonts.length > 0);
      // Chromium reports a font (and glyphs: the .notdef ones) even for boxes...
      assert.ok(fonts.reduce((n, f) => n + f.glyphCount, 0) > 0);
      // ...but none of the fonts it used covers the characters.
      assert.deepEqual(
        uncovered(
          BOXES,
          fonts.map((f) => f.familyName),
        ),
        [...BOXES],
      );
      const g = await glyphs(page, [...BOXES]);
      assert.equal(new Set(g.map((x) => x.hash)).size, 1, `boxes all look alike: ${JSON.stringify(g)}`);
    });

    for (const [script, line] of Object.entries(LINES) as [Script, (typeof LINES)[Script]][]) {
      test(`${script} (${line.text}): drawn with fonts that have its glyphs`, async () => {
        const fonts = await platformFonts(cdp, rootId, `#${script}`);
        const families = fonts.map((f) => f.familyName);
        assert.ok(fonts.length > 0, 'no platform font reported');
        const glyphCount = fonts.reduce((n, f) => n + f.glyphCount, 0);
        assert.ok(glyphCount >= distinctChars(line.text).length / 2, `glyphs: ${JSON.stringify(fonts)}`);
        assert.deepEqual(uncovered(line.text, families), [], `fonts used: ${JSON.stringify(fonts)}`);
        // CJK and Devanagari come from the Noto fonts of the set-up (Arabic may use DejaVu Sans, which has it).
        if (script !== 'ar') assert.ok(families.some((f) => /^Noto /.test(f)), `fonts used: ${families.join(', ')}`);
      });

      test(`${script}: every character renders as its own glyph, not a box`, async () => {
        const chars = distinctChars(line.text);
        const [box] = await glyphs(page, [BOXES[0]!]);
        const g = await glyphs(page, chars);
        for (const x of g) {
          assert.ok(x.ink > 0, `${x.ch} draws nothing`);
          assert.notEqual(x.hash, box!.hash, `${x.ch} (U+${x.ch.codePointAt(0)!.toString(16)}) is drawn as a box`);
        }
        const distinct = new Set(g.map((x) => x.hash)).size;
        assert.equal(distinct, chars.length, `${chars.length} characters, ${distinct} different bitmaps: ${JSON.stringify(g)}`);
        // Widths: not every character has the box's width.
        assert.ok(
          g.some((x) => Math.abs(x.width - box!.width) > 0.5),
          `every character is as wide as a box (${box!.width}): ${JSON.stringify(g.map((x) => x.width))}`,
        );
      });
    }
  });
}

scriptTests('headless', { headless: true, viewport: { width: 800, height: 600 } });
scriptTests('headful', { headless: false, viewport: { width: 800, height: 600 } });
