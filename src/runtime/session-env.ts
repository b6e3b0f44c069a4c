import path from 'node:path';
import { MARK_RUNTIME, MARK_SESSION } from './processes.js';

/**
 * The whole environment of a session's processes. Built from scratch, never inherited:
 * the server's environment may hold BROWSERD_API_KEY or database credentials.
 */
export function sessionEnv(opts: { runtimeDir: string; sessionId: string; sessionDir: string; tmpDir: string; display?: number }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: opts.sessionDir,
    TMPDIR: opts.tmpDir,
    XDG_CONFIG_HOME: path.join(opts.sessionDir, 'config'),
    XDG_CACHE_HOME: path.join(opts.sessionDir, 'cache'),
    LANG: 'C.UTF-8',
    [MARK_RUNTIME]: opts.runtimeDir,
    [MARK_SESSION]: opts.sessionId,
  };
  if (opts.display !== undefined) env.DISPLAY = `:${opts.display}`;
  return env;
}
