import { connectUpstream, relayCdp } from './cdp-relay.js';
import type { ChannelHandler } from './channel.js';

/** CDP: one websocket to Chromium's browser endpoint per client, frames relayed through the guard. */
export const cdpChannel: ChannelHandler = async (ctx) => {
  const { port, wsPath } = ctx.session.handle.chromium;
  const upstream = await connectUpstream(port, wsPath);
  if (ctx.socket.destroyed) {
    upstream.close();
    return;
  }
  ctx.accept((client, closed) => relayCdp(client, upstream, closed, ctx.session.handle.dir, ctx.telemetry?.connection(ctx.session.record.id, 'cdp')));
};
