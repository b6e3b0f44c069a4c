import crypto from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { bearerToken } from './auth.js';
import { RateLimited } from './errors.js';

/**
 * Per-key request rate limit (requests per minute, per node). Requests are counted by a
 * hash of the presented key (never the key itself), or by client address when there is
 * none. Routes with `config.rateLimit: false` (health checks) are not counted.
 */
export async function installRateLimit(app: FastifyInstance, perMinute: number): Promise<void> {
  if (perMinute <= 0) return;
  await app.register(rateLimit, {
    max: perMinute,
    timeWindow: 60_000,
    hook: 'onRequest',
    keyGenerator: (req) => {
      const key = bearerToken(req);
      return key ? `k:${crypto.createHash('sha256').update(key).digest('base64url')}` : `ip:${req.ip}`;
    },
    errorResponseBuilder: (_req, ctx) => new RateLimited(ctx.ttl / 1000),
  });
}
