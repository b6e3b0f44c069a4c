import type { FastifyReply } from 'fastify';

/**
 * Kernel-style offset pagination: the body is a bare array; X-Has-More says whether more
 * follow and X-Next-Offset is the absolute offset of the next page (0 on the last page,
 * which the Kernel SDK reads as "stop").
 */
export function setPageHeaders(reply: FastifyReply, offset: number, count: number, hasMore: boolean): void {
  void reply.header('X-Has-More', hasMore ? 'true' : 'false');
  void reply.header('X-Next-Offset', String(hasMore ? offset + count : 0));
}
