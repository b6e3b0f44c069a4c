import type { FastifyReply } from 'fastify';

/**
 * Headers for pages reached with a token in their URL (live view, vault collection and
 * authorization pages): never cached, never sent on as a referrer, never sniffed, with the
 * page's own Content-Security-Policy. `frameable` pages (the live view, which dashboards
 * embed) may be framed by any origin; the others by none.
 */
export function privatePage(reply: FastifyReply, opts: { csp: string; frameable: boolean }): FastifyReply {
  void reply
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', `${opts.csp}; frame-ancestors ${opts.frameable ? '*' : "'none'"}`);
  return opts.frameable ? reply : reply.header('x-frame-options', 'DENY');
}
