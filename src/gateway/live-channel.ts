import net from 'node:net';
import WebSocket from 'ws';
import type { ChannelHandler } from './channel.js';
import { RfbInputFilter, RfbProtocolError } from './rfb-input-filter.js';

const HIGH_WATER = 4 * 1024 * 1024;

function connectVnc(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error('the VNC server did not accept the connection within 5 s'));
    }, 5000);
    s.once('connect', () => {
      clearTimeout(timer);
      resolve(s);
    });
    s.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/**
 * Live view: the viewer's websocket (noVNC, subprotocol "binary") bridged to the
 * session's x11vnc. A readonly token gets its input stripped by RfbInputFilter. The
 * VNC server's output is paused while the viewer is slow, so a slow viewer cannot make
 * browserd buffer without bound.
 */
export const liveChannel: ChannelHandler = async (ctx) => {
  const vnc = ctx.session.handle.vnc;
  if (ctx.session.record.headless || !vnc) return ctx.refuse(404, 'no_live_view', 'headless sessions have no live view');
  let upstream: net.Socket;
  try {
    upstream = await connectVnc(vnc.port);
  } catch (err) {
    ctx.log.warn({ err: String(err) }, 'live view: VNC server unreachable');
    return ctx.refuse(502, 'bad_gateway', 'the live view is not available');
  }
  if (ctx.socket.destroyed) {
    upstream.destroy();
    return;
  }
  const filter = ctx.claims.readonly ? new RfbInputFilter() : null;
  ctx.accept((client, detached) => {
    const viewerLeft = ctx.telemetry?.liveView(ctx.session.record.id);
    let closed = false;
    const close = (code = 1000, reason = 'live view closed') => {
      if (closed) return;
      closed = true;
      viewerLeft?.();
      if (client.readyState === WebSocket.OPEN) client.close(code, reason);
      else client.terminate();
      upstream.destroy();
      detached();
    };
    client.on('message', (data: Buffer) => {
      try {
        const bytes = filter ? filter.push(data) : data;
        if (bytes.length) upstream.write(bytes);
      } catch (err) {
        if (err instanceof RfbProtocolError) close(1008, 'unsupported VNC message');
        else close(1011, 'live view error');
      }
    });
    upstream.on('data', (chunk) => {
      if (client.readyState !== WebSocket.OPEN) return;
      client.send(chunk, { binary: true }, () => {
        if (upstream.isPaused() && client.bufferedAmount < HIGH_WATER / 4) upstream.resume();
      });
      if (client.bufferedAmount > HIGH_WATER) upstream.pause();
    });
    client.on('close', () => close());
    client.on('error', () => close());
    upstream.on('close', () => close(1011, 'the VNC server closed the connection'));
    upstream.on('error', () => close(1011, 'the VNC server connection failed'));
    return { close };
  });
};
