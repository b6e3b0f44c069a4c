import type { FastifyError, FastifyInstance } from 'fastify';
import { ApiError, NotFound, invalidInput } from './errors.js';
import { problemsFromAjv } from './validation.js';

const CODES_BY_STATUS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  408: 'request_timeout',
  409: 'conflict',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  431: 'headers_too_large',
};

/**
 * The one place where errors become responses. Typed ApiErrors carry their status;
 * Fastify's own client errors (bad JSON, wrong content type, oversized body, failed
 * schema validation) keep their 4xx status; anything else is a 500 that is logged.
 * Every response is the contract's Error body.
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | ApiError, req, reply) => {
    let apiErr: ApiError;
    if (err instanceof ApiError) apiErr = err;
    else if ((err as FastifyError).validation) {
      const fe = err as FastifyError;
      apiErr = invalidInput(problemsFromAjv(fe.validation as never, fe.validationContext));
    } else {
      const status = (err as FastifyError).statusCode ?? 500;
      if (status >= 400 && status < 500) {
        apiErr = new ApiError(status, CODES_BY_STATUS[status] ?? 'bad_request', cleanMessage(err.message));
      } else {
        req.log.error({ err }, 'unhandled error');
        apiErr = new ApiError(500, 'internal_error', 'internal error');
      }
    }
    if (apiErr.headers) void reply.headers(apiErr.headers);
    void reply.code(apiErr.status).type('application/json').send(apiErr.toBody());
  });

  app.setNotFoundHandler((req, reply) => {
    const e = new NotFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
    void reply.code(404).type('application/json').send(e.toBody());
  });
}

/** Fastify messages sometimes start with their internal code; keep the human part. */
function cleanMessage(m: string): string {
  return m.replace(/^FST_[A-Z_]+:\s*/, '') || 'bad request';
}
