import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { PolicySchema } from '../domain/chrome-policy.js';
import type { BrowserRuntime } from './browser-runtime.js';
import { CdpClient } from './cdp-client.js';

const PROBE_ID = 'policy-schema-probe';
const READ_SCHEMA = `(async () => {
  const { loadTimeData } = await import('chrome://resources/js/load_time_data.js');
  return loadTimeData.getValue('initialSchema');
})()`;

function chromiumVersion(chromiumPath: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(chromiumPath, ['--version'], { timeout: 5000 }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim())));
  });
}

/**
 * The policy schema (name -> type) of the installed Chromium, read from the browser
 * itself: chrome://policy/test carries it as `initialSchema`. Reading it costs one
 * short headless launch, so it is cached in the data dir per Chromium version and in
 * memory; concurrent callers share one probe.
 */
export class PolicySchemaSource {
  private cached: PolicySchema | null = null;
  private loading: Promise<PolicySchema> | null = null;

  constructor(private readonly deps: { runtime: BrowserRuntime; chromiumPath: string; dataDir: string; log: Logger }) {}

  get(): Promise<PolicySchema> {
    if (this.cached) return Promise.resolve(this.cached);
    this.loading ??= this.load().then(
      (s) => {
        this.cached = s;
        return s;
      },
      (err) => {
        this.loading = null;
        throw err;
      },
    );
    return this.loading;
  }

  private async load(): Promise<PolicySchema> {
    const version = await chromiumVersion(this.deps.chromiumPath);
    const file = path.join(this.deps.dataDir, `policy-schema-${version.replace(/[^A-Za-z0-9.]+/g, '_')}.json`);
    try {
      return JSON.parse(fs.readFileSync(file, 'utf8')) as PolicySchema;
    } catch {
      /* not cached yet */
    }
    const schema = await this.probe();
    fs.writeFileSync(file, JSON.stringify(schema), { mode: 0o644 });
    this.deps.log.info({ chromium: version, policies: Object.keys(schema).length }, 'read the Chromium policy schema');
    return schema;
  }

  private async probe(): Promise<PolicySchema> {
    const h = await this.deps.runtime.launch({
      sessionId: PROBE_ID,
      headless: true,
      kioskMode: false,
      width: 800,
      height: 600,
      refreshRate: 1,
      startUrl: null,
      chromePolicy: null,
      memoryBytes: null,
    });
    try {
      const cdp = await CdpClient.connect(`ws://127.0.0.1:${h.chromium.port}${h.chromium.wsPath}`);
      try {
        const { sessionId } = await cdp.openPage('chrome://policy/test');
        for (let attempt = 0; attempt < 20; attempt++) {
          const raw = await cdp.evaluate<unknown>(sessionId, READ_SCHEMA);
          const parsed = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { chrome?: PolicySchema } | null;
          if (parsed?.chrome && Object.keys(parsed.chrome).length) return parsed.chrome;
          await new Promise((r) => setTimeout(r, 100));
        }
        throw new Error('chrome://policy/test did not provide a policy schema');
      } finally {
        cdp.close();
      }
    } finally {
      await this.deps.runtime.stop(PROBE_ID, h);
    }
  }
}
