/**
 * Control API throughput (requests per second), BENCH_CONCURRENCY requests in flight over
 * keep-alive connections for BENCH_SECONDS each, against the server's cheapest route.
 *
 *   npm run bench:control
 *   BENCH_SECONDS=2 npm run bench:control
 *
 * - baseline: GET /healthz (no key, no store): what the HTTP stack alone manages on this machine.
 * - POST /browsers, validation path: bodies that break rules (schema and create rules), each
 *   answered 400 with the Error body (key check, JSON parse, schema, rules, error body).
 * - GET /vaults/{id}/items of a full vault (500 items, the most a vault holds: docs/vaults.md),
 *   and the 1,000 vaults of a project listed page by page (GET /vaults?limit=100&offset=…,
 *   10 pages per listing).
 * Every answer's status is checked; a wrong one fails the benchmark.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { summary } from './lib/proc.js';
import { ratio, runBench } from './lib/report.js';
import { benchServer, type TestServer } from './lib/server.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const VAULT_ITEMS = 500;
const VAULTS = 1000;
const PAGE = 100;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function client(server: TestServer) {
  const url = new URL(server.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const auth = `Bearer ${server.apiKey}`;
  return {
    agent,
    request(method: string, path: string, body?: unknown, withKey = true): Promise<Answer> {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      return new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: url.hostname,
            port: url.port,
            method,
            path,
            agent,
            headers: { ...(withKey ? { authorization: auth } : {}), ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
          },
          (res) => {
            let data = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (data += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
    },
  };
}

/** Runs `op` from CONCURRENCY loops for SECONDS; every op's latency is kept. */
async function load(op: () => Promise<number>): Promise<{ per_s: number; requests: number; latency_ms: ReturnType<typeof summary> }> {
  const end = performance.now() + SECONDS * 1000;
  const lat: number[] = [];
  let requests = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const n = await op();
        requests += n;
        lat.push(performance.now() - t0);
      }
    }),
  );
  const t = SECONDS + (performance.now() - end) / 1000;
  return { per_s: Math.round(requests / t), requests, latency_ms: summary(lat, 2) };
}

const INVALID_CREATES: unknown[] = [
  { timeout_seconds: 5 },
  { viewport: { width: 0, height: 0 } },
  { headless: 'yes', name: '' },
  { tags: { '': 'x' }, kiosk_mode: 1 },
  { timeout_seconds: 999999999, stealth: 'on', unknown_field: true },
];

async function main(): Promise<Record<string, unknown>> {
  const server = await benchServer({ BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' });
  const c = client(server);
  const expect = (a: Answer, status: number, what: string) => {
    if (a.status !== status) throw new Error(`${what}: ${a.status} ${a.body.slice(0, 300)} (expected ${status})`);
  };

  // Data: one full vault, and 1,000 vaults in the project.
  expect(await c.request('POST', '/vaults', { name: 'bench-items' }), 201, 'POST /vaults');
  const types = [{ type: 'credential' }, { type: 'card' }, { type: 'api_key', spec: { service: 'bench' } }, { type: 'secure_note', spec: { title: 'note' } }, { type: 'credential', spec: { origins: ['https://example.com'] } }];
  for (let i = 0; i < VAULT_ITEMS; i++) expect(await c.request('PUT', `/vaults/bench-items/items/item-${String(i).padStart(4, '0')}`, types[i % types.length]), 201, 'PUT item');
  for (let i = 1; i < VAULTS; i++) expect(await c.request('POST', '/vaults', { name: `bench-${String(i).padStart(4, '0')}` }), 201, 'POST /vaults');
  const items = await c.request('GET', '/vaults/bench-items/items');
  expect(items, 200, 'GET items');
  const itemCount = (JSON.parse(items.body) as unknown[]).length;
  if (itemCount !== VAULT_ITEMS) throw new Error(`the vault lists ${itemCount} items, not ${VAULT_ITEMS}`);
  const listAll = async (): Promise<number> => {
    let seen = 0;
    let requests = 0;
    for (let offset = 0; ; ) {
      const a = await c.request('GET', `/vaults?limit=${PAGE}&offset=${offset}`);
      expect(a, 200, 'GET /vaults');
      requests++;
      seen += (JSON.parse(a.body) as unknown[]).length;
      if (a.headers['x-has-more'] !== 'true') break;
      offset = Number(a.headers['x-next-offset']);
    }
    if (seen !== VAULTS) throw new Error(`listing page by page saw ${seen} vaults, not ${VAULTS}`);
    return requests;
  };
  for (const body of INVALID_CREATES) {
    const a = await c.request('POST', '/browsers', body);
    expect(a, 400, `POST /browsers ${JSON.stringify(body)}`);
    const e = JSON.parse(a.body) as { code?: string; details?: unknown[] };
    if (!e.code || !e.details?.length) throw new Error(`POST /browsers 400 without code and details: ${a.body.slice(0, 200)}`);
  }

  const health = await load(async () => (expect(await c.request('GET', '/healthz', undefined, false), 200, 'GET /healthz'), 1));
  let k = 0;
  const validation = await load(async () => (expect(await c.request('POST', '/browsers', INVALID_CREATES[k++ % INVALID_CREATES.length]), 400, 'POST /browsers'), 1));
  const itemList = await load(async () => (expect(await c.request('GET', '/vaults/bench-items/items'), 200, 'GET items'), 1));
  const pages = await load(listAll);
  c.agent.destroy();

  return {
    bench: 'control-api',
    seconds_each: SECONDS,
    concurrency: CONCURRENCY,
    baseline_healthz: health,
    post_browsers_validation_400: { ...validation, over_baseline: ratio(validation.per_s, health.per_s) },
    vault_items_list: { items: VAULT_ITEMS, ...itemList, items_per_s: itemList.per_s * VAULT_ITEMS, over_baseline: ratio(itemList.per_s, health.per_s) },
    vaults_listed_page_by_page: { vaults: VAULTS, page_size: PAGE, pages_per_listing: Math.ceil(VAULTS / PAGE), ...pages, listings_per_s: Math.round((pages.per_s / Math.ceil(VAULTS / PAGE)) * 10) / 10, over_baseline: ratio(pages.per_s, health.per_s) },
    note: 'a vault holds at most 500 items (docs/vaults.md); the 1,000 listed page by page are the project\'s vaults',
  };
}

runBench(main);
