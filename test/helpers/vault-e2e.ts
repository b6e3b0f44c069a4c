import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import type { TestServer } from './server.js';

/** Shared pieces of the vault e2e tests: calls that remember every answer, secret scans, the collection page. */

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Answer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

/** An HTTP client for one server that keeps the text of every response it got. */
export class VaultClient {
  readonly answers: string[] = [];

  constructor(
    readonly server: TestServer,
    private readonly key = server.apiKey,
  ) {}

  withKey(key: string): VaultClient {
    const c = new VaultClient(this.server, key);
    // Answers of every client of a test are scanned together.
    (c as { answers: string[] }).answers = this.answers;
    return c;
  }

  async call(method: string, p: string, body?: unknown, extra: Record<string, string> = {}): Promise<Answer> {
    const h: Record<string, string> = { authorization: `Bearer ${this.key}`, ...extra };
    if (body !== undefined) h['content-type'] = 'application/json';
    const r = await fetch(`${this.server.url}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    this.answers.push(text, JSON.stringify([...r.headers]));
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: r.status, headers: r.headers, body: parsed, text };
  }

  /** A raw fetch (pages, redirects) whose answer is also kept. */
  async raw(url: string, init: RequestInit = {}): Promise<Response> {
    const r = await fetch(url, init);
    const text = await r.clone().text();
    this.answers.push(text, JSON.stringify([...r.headers]));
    return r;
  }

  async ok(method: string, p: string, body?: unknown, status = 200): Promise<Json> {
    const r = await this.call(method, p, body);
    assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
    return r.body as Json;
  }

  async err(method: string, p: string, body: unknown, status: number, code?: string): Promise<Json> {
    const r = await this.call(method, p, body);
    assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
    assert.equal(typeof r.body?.code, 'string', r.text);
    assert.equal(typeof r.body?.message, 'string', r.text);
    if (code) assert.equal(r.body.code, code, r.text);
    return r.body as Json;
  }
}

/** The SQLite file and its WAL as bytes (latin1 keeps every byte as one character). */
export function storeBytes(server: TestServer): string {
  const f = path.join(server.dataDir, 'browserd.sqlite');
  return [f, `${f}-wal`].filter((x) => fs.existsSync(x)).map((x) => fs.readFileSync(x).toString('latin1')).join('\n');
}

/**
 * A stored secret is in none of: the database file and its WAL, everything the server
 * printed (its logs), and every answer any client got.
 */
export function assertNoSecret(server: TestServer, answers: string[], secrets: string[], what: string): void {
  const bytes = storeBytes(server);
  const logs = server.output();
  const all = answers.join('\n');
  for (const s of secrets) {
    assert.ok(s.length >= 6, `secret too short to search for: ${s.length}`);
    assert.ok(!bytes.includes(s), `${what}: the database file or its WAL holds a secret`);
    assert.ok(!logs.includes(s), `${what}: the server's output holds a secret`);
    assert.ok(!all.includes(s), `${what}: an API answer holds a secret`);
  }
}

/** A local Chromium for the person's side (collection page, consent page); closed by the caller. */
export function launchPersonBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/lib/chromium/chromium',
    args: ['--no-sandbox', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
  });
}

/** A person opens the action link, types the values into the form and saves. Returns the status line. */
export async function fillCollectionPage(browser: Browser, url: string, values: Record<string, string>): Promise<string> {
  const ctx = await browser.newContext();
  try {
    const page = await ctx.newPage();
    const r = await page.goto(url);
    assert.equal(r?.status(), 200);
    await page.waitForSelector('#form:not([hidden])');
    for (const [name, value] of Object.entries(values)) await page.fill(`[name="${name}"]`, value);
    await page.click('#save');
    await page.waitForFunction(() => /Saved|Not saved|not|Could/.test(document.getElementById('status')?.textContent ?? ''));
    return (await page.textContent('#status')) ?? '';
  } finally {
    await ctx.close();
  }
}

export { cliJson } from './server.js';
