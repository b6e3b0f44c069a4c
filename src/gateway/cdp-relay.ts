import WebSocket from 'ws';
import type { CdpTap } from '../telemetry/telemetry-service.js';
import type { DisconnectReason } from '../telemetry/telemetry-events.js';
import { inspectCommand, mightBeRefused, refusalReply } from './cdp-guard.js';

const MAX_FRAME = 512 * 1024 * 1024;

/**
 * Connects to the browser's own CDP endpoint on loopback. Resolves only once it is open,
 * so the client's upgrade is completed only when there is somewhere to relay to.
 */
export function connectUpstream(port: number, wsPath: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${wsPath}`, { maxPayload: MAX_FRAME, perMessageDeflate: false });
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error('browser did not accept the CDP connection within 10 s'));
    }, 10_000);
    ws.once('open', () => {
      clearTimeout(timer);
      resolve(ws);
    });
    ws.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/**
 * Relays frames between an agent and the browser, unchanged except for refused
 * commands (answered with a CDP error). When either side closes, so does the other.
 * `tap` (telemetry) counts frames and, only while control capture is on, reads the
 * client's commands; it never changes what is relayed.
 */
export function relayCdp(client: WebSocket, upstream: WebSocket, onClose: () => void, sessionDir?: string, tap?: CdpTap): { close(code?: number, reason?: string): void } {
  let closed = false;
  let endReason: DisconnectReason = 'context_cancelled';
  const closeBoth = (code?: unknown, reason?: unknown) => {
    if (closed) return;
    closed = true;
    tap?.closed(endReason);
    const why = typeof reason === 'string' && reason ? reason : 'browser connection closed';
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) client.close(typeof code === 'number' && code >= 1000 && code !== 1005 && code !== 1006 ? code : 1000, why);
    if (upstream.readyState === WebSocket.OPEN || upstream.readyState === WebSocket.CONNECTING) upstream.close();
    setTimeout(() => {
      client.terminate();
      upstream.terminate();
    }, 2000).unref();
    onClose();
  };
  client.on('message', (data, isBinary) => {
    const frame = data as Buffer;
    if (tap) {
      tap.messages++;
      if (tap.control && !isBinary) tap.command(frame);
    }
    if (!isBinary && mightBeRefused(frame)) {
      const verdict = inspectCommand(frame.toString(), sessionDir);
      if (verdict && 'refusal' in verdict) {
        client.send(refusalReply(verdict.refusal));
        return;
      }
      if (verdict) {
        upstream.send(verdict.rewritten);
        return;
      }
    }
    upstream.send(frame, { binary: isBinary });
  });
  upstream.on('message', (data, isBinary) => {
    if (tap) tap.messages++;
    if (client.readyState === WebSocket.OPEN) client.send(data, { binary: isBinary });
  });
  const ended = (reason: DisconnectReason, code?: number, text?: string) => () => {
    if (!closed) endReason = reason;
    closeBoth(code, text);
  };
  client.on('close', ended('client_close'));
  upstream.on('close', ended('upstream_error', 1011, 'browser connection closed'));
  client.on('error', ended('client_close'));
  upstream.on('error', ended('upstream_error', 1011, 'browser connection failed'));
  return { close: (code, reason) => closeBoth(code, reason) };
}

export const CDP_MAX_FRAME = MAX_FRAME;
