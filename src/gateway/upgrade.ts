import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type { SessionService } from '../sessions/session-service.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import type { ChannelHandler } from './channel.js';
import { CDP_MAX_FRAME } from './cdp-relay.js';
import type { Channel, SessionTokens } from './tokens.js';

const CHANNEL_PATHS: Record<string, Channel> = {
  '/browser/cdp': 'cdp',
  '/browser/bidi': 'bidi',
  '/browser/live/ws': 'live',
};

/** Answers a refused upgrade with a plain HTTP response carrying the Error body, then drops the socket. */
function refuse(socket: Duplex, status: number, code: string, message: string): void {
  const body = JSON.stringify({ code, message });
  const reason = { 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 501: 'Not Implemented', 502: 'Bad Gateway' }[status] ?? 'Error';
  if (!socket.destroyed) {
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * The websocket edge. Every upgrade is checked (token signature, expiry, channel, live
 * session on this node) before any byte reaches Chromium; only then is the browser
 * connection opened and the client's upgrade completed.
 */
export class Gateway {
  private readonly wss = new WebSocketServer({
    noServer: true,
    maxPayload: CDP_MAX_FRAME,
    perMessageDeflate: false,
    // noVNC asks for the "binary" subprotocol and gives up without it.
    handleProtocols: (offered) => (offered.has('binary') ? 'binary' : false),
  });

  constructor(
    private readonly deps: { sessions: SessionService; tokens: SessionTokens; log: Logger; channels: Partial<Record<Channel, ChannelHandler>>; telemetry?: TelemetryService },
  ) {}

  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    this.handle(req, socket, head).catch((err) => {
      this.deps.log.error({ err: String(err) }, 'websocket upgrade failed');
      refuse(socket, 502, 'bad_gateway', 'could not connect to the browser');
    });
  };

  private async handle(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://gateway');
    } catch {
      return refuse(socket, 400, 'bad_request', 'malformed request URL');
    }
    const channel = CHANNEL_PATHS[url.pathname.replace(/\/+$/, '')];
    if (!channel) return refuse(socket, 404, 'not_found', `no websocket endpoint at ${url.pathname}`);
    const check = await this.deps.tokens.verify(url.searchParams.get('jwt'), channel);
    if (!check.ok) return refuse(socket, 401, 'unauthorized', check.reason);
    const live = this.deps.sessions.liveSession(check.claims.sessionId);
    if (!live) return refuse(socket, 404, 'session_not_found', 'the session has ended or does not run on this node');
    if (!this.deps.sessions.tokenCurrent(live.record.id, check.claims.issuedAt)) {
      return refuse(socket, 401, 'unauthorized', 'the token was issued for an earlier lease of this pool browser; use the URLs of the current lease');
    }
    const handler = this.deps.channels[channel];
    if (!handler) return refuse(socket, 501, 'not_implemented', `the ${channel} channel is not available in this browserd version`);

    const log = this.deps.log.child({ session_id: live.record.id, channel });
    await handler({
      req,
      socket,
      url,
      session: live,
      claims: check.claims,
      log,
      telemetry: this.deps.telemetry,
      refuse: (status, code, message) => refuse(socket, status, code, message),
      accept: (onOpen) => {
        if (socket.destroyed) return;
        this.wss.handleUpgrade(req, socket, head, (client) => {
          let detach: () => void = () => undefined;
          const conn = onOpen(client, () => detach());
          detach = this.deps.sessions.attach(live.record.id, conn);
          log.debug('client attached');
        });
      },
    });
  }

  close(): void {
    for (const c of this.wss.clients) c.terminate();
    this.wss.close();
  }
}
