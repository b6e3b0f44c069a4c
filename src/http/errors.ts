/** One entry of the Error body's `details`: a broken rule, naming the field path. */
export interface ErrorDetail {
  code: string;
  message: string;
}

export interface ErrorBody {
  code: string;
  message: string;
  details?: ErrorDetail[];
  inner_error?: ErrorDetail;
}

/**
 * Typed errors thrown anywhere and turned into the contract's Error body in one handler
 * (http/error-handler.ts). The status lives with the class, not at the throw site.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.details && this.details.length) body.details = this.details;
    return body;
  }
}

export class BadRequest extends ApiError {
  constructor(message: string, details?: ErrorDetail[]) {
    super(400, 'bad_request', message, details);
  }
}

/** A request body that broke one or more rules: one `invalid_input` detail per rule, each naming its field. */
export function invalidInput(problems: { field: string; message: string }[]): BadRequest {
  const details = problems.map((p) => ({ code: 'invalid_input', message: `${p.field}: ${p.message}` }));
  const summary = problems.length === 1 ? details[0]!.message : `${problems.length} fields are invalid`;
  return new BadRequest(`invalid request: ${summary}`, details);
}

export class Unauthorized extends ApiError {
  constructor(message = 'missing or invalid API key') {
    super(401, 'unauthorized', message);
  }
}

export class Forbidden extends ApiError {
  constructor(message: string, code = 'forbidden') {
    super(403, code, message);
  }
}

export class NotFound extends ApiError {
  constructor(message: string, code = 'not_found') {
    super(404, code, message);
  }
}

export class Conflict extends ApiError {
  constructor(message: string, code = 'conflict') {
    super(409, code, message);
  }
}

export class RateLimited extends ApiError {
  constructor(retryAfterSeconds: number) {
    const s = Math.max(1, Math.ceil(retryAfterSeconds));
    super(429, 'rate_limited', `rate limit exceeded; retry in ${s} s`, undefined, { 'retry-after': String(s) });
  }
}

export class CapacityExhausted extends ApiError {
  constructor(message: string) {
    super(529, 'capacity_exhausted', message);
  }
}

export class InternalError extends ApiError {
  constructor(message = 'internal error', code = 'internal_error') {
    super(500, code, message);
  }
}
