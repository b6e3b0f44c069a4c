import { execFile } from 'node:child_process';
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../http/errors.js';
import { ErrorBodySchema } from './schemas.js';
import type { Store } from '../store/database.js';

/** Runs `chromium --version` (it loads the binary and its libraries without starting a browser); cached for 30 s. */
function chromiumRunner(chromiumPath: string): () => Promise<string | null> {
  let cached: { at: number; problem: string | null } | null = null;
  return async () => {
    if (cached && Date.now() - cached.at < 30_000) return cached.problem;
    const problem = await new Promise<string | null>((resolve) => {
      execFile(chromiumPath, ['--version'], { timeout: 5000 }, (err, stdout) => {
        resolve(err ? `${chromiumPath} --version failed: ${err.message.split('\n')[0]}` : /Chromium|Chrome/.test(stdout) ? null : `${chromiumPath} --version printed no version`);
      });
    });
    cached = { at: Date.now(), problem };
    return problem;
  };
}

/**
 * /healthz: the process is up. /readyz: the store answers and Chromium can be started
 * (its binary runs, and Xvfb for headful sessions is there). Neither
 * needs a key nor counts against the rate limit.
 */
export function healthRoutes(app: FastifyInstance, deps: { store: Store; chromiumPath: string; warm?: () => { headless: number; headful: number } }): void {
  const open = { auth: false, rateLimit: false };
  const chromiumProblem = chromiumRunner(deps.chromiumPath);
  const status = Type.Object({ status: Type.String() });
  app.get('/healthz', { config: open, schema: { summary: 'Liveness: the process is up', tags: ['health'], security: [], response: { 200: status } } }, async () => ({ status: 'ok' }));
  // `warm`: the pre-launched browsers ready on this node, per kind (docs/warm-start.md).
  const ready = Type.Object({ status: Type.String(), warm: Type.Optional(Type.Object({ headless: Type.Integer(), headful: Type.Integer() })) });
  app.get('/readyz', { config: open, schema: { summary: 'Readiness: the store answers and Chromium can start', tags: ['health'], security: [], response: { 200: ready, 503: ErrorBodySchema } } }, async () => {
    const problems: { code: string; message: string }[] = [];
    if (!(await deps.store.ping())) problems.push({ code: 'store_unreachable', message: `the ${deps.store.kind} store does not answer` });
    for (const bin of [deps.chromiumPath, '/usr/bin/Xvfb']) {
      try {
        fs.accessSync(bin, fs.constants.X_OK);
      } catch {
        problems.push({ code: 'binary_missing', message: `${bin} is missing or not executable` });
      }
    }
    const chromium = problems.length ? null : await chromiumProblem();
    if (chromium) problems.push({ code: 'chromium_not_launchable', message: chromium });
    if (problems.length) throw new ApiError(503, 'not_ready', 'browserd is not ready', problems);
    return { status: 'ready', ...(deps.warm ? { warm: deps.warm() } : {}) };
  });
}
