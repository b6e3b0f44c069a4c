import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { ROOT } from './server.js';

/** One signal of the bot-check page (test/fixtures/bot-check/checks.js). */
export interface BotCheck {
  name: string;
  pass: boolean;
  detail: string;
}

const DIR = path.join(ROOT, 'test/fixtures/bot-check');
const PAGES: Record<string, string> = { '/': 'index.html', '/frame': 'frame.html', '/popup': 'popup.html' };
const SCRIPTS: Record<string, string> = { '/checks.js': 'checks.js', '/worker.js': 'worker.js', '/sw.js': 'sw.js' };

/**
 * Serves the bot-check page on 127.0.0.1 (a secure context, so client hints and
 * userAgentData apply). Pages get the headers of their own request injected; `/headers`
 * echoes any request's headers as JSON (fetched from workers).
 */
export async function startBotCheckSite(): Promise<{ url: string; requests: { path: string; headers: http.IncomingHttpHeaders }[]; close(): Promise<void> }> {
  const requests: { path: string; headers: http.IncomingHttpHeaders }[] = [];
  const server = http.createServer((req, res) => {
    const p = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push({ path: p, headers: req.headers });
    res.setHeader('cache-control', 'no-store');
    // Ask for the high-entropy hints too, as a site that fingerprints would.
    res.setHeader('accept-ch', 'Sec-CH-UA-Full-Version-List, Sec-CH-UA-Arch, Sec-CH-UA-Platform-Version, Sec-CH-UA-Model');
    if (p === '/headers') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(req.headers));
    } else if (PAGES[p]) {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      const html = fs.readFileSync(path.join(DIR, PAGES[p]!), 'utf8');
      res.end(html.replace('/*HEADERS*/null', JSON.stringify(req.headers).replace(/</g, '\\u003c')));
    } else if (SCRIPTS[p]) {
      res.setHeader('content-type', 'text/javascript');
      res.end(fs.readFileSync(path.join(DIR, SCRIPTS[p]!), 'utf8'));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Loads the bot-check page in `page` and runs every check (from page.evaluate: a user gesture, so window.open is allowed). */
export async function runBotChecks(page: Page, url: string, expected: { width: number; height: number }): Promise<BotCheck[]> {
  await page.goto(url);
  return page.evaluate((e) => (window as unknown as { runBotChecks(e: unknown): Promise<BotCheck[]> }).runBotChecks(e), expected);
}

/** The names of the checks that failed, with their details, for assertion messages. */
export function failures(results: BotCheck[]): string {
  return results
    .filter((r) => !r.pass)
    .map((r) => `${r.name}: ${r.detail}`)
    .join('\n');
}
