import pino, { type Logger } from 'pino';

/** Replaces the value of a `jwt` query parameter: connection tokens never reach the log. */
export function redactUrl(url: string): string {
  return url.replace(/([?&]jwt=)[^&]*/gi, '$1[redacted]');
}

/**
 * Structured JSON logs. The Authorization header and session tokens are never logged:
 * request records carry only method, redacted URL and remote address.
 */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'browserd' },
    redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.api_key', '*.jwt'], censor: '[redacted]' },
    serializers: {
      req: (req: { method?: string; url?: string; ip?: string }) => ({ method: req.method, url: redactUrl(req.url ?? ''), remote: req.ip }),
      res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
    },
  });
}
