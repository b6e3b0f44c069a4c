import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../http/errors.js';
import type { Store } from '../store/database.js';

/**
 * /healthz: the process is up. /readyz: the store answers and Chromium can be started
 * (the binary is there and executable, and so is Xvfb for headful sessions). Neither
 * needs a key nor counts against the rate limit.
 */
export function healthRoutes(app: FastifyInstance, deps: { store: Store; chromiumPath: string }): void {
  const open = { auth: false, rateLimit: false };
  app.get('/healthz', { config: open, schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { config: open, schema: { hide: true } }, async () => {
    const problems: { code: string; message: string }[] = [];
    if (!(await deps.store.ping())) problems.push({ code: 'store_unreachable', message: `the ${deps.store.kind} store does not answer` });
    for (const bin of [deps.chromiumPath, '/usr/bin/Xvfb']) {
      try {
        fs.accessSync(bin, fs.constants.X_OK);
      } catch {
        problems.push({ code: 'binary_missing', message: `${bin} is missing or not executable` });
      }
    }
    if (problems.length) throw new ApiError(503, 'not_ready', 'browserd is not ready', problems);
    return { status: 'ready' };
  });
}
