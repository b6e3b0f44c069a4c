import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import type { RuntimeHandle } from '../runtime/browser-runtime.js';
import type { SessionRecord } from '../sessions/session-record.js';
import type { SessionClient } from '../sessions/session-service.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import type { SessionClaims } from './tokens.js';

/**
 * What a channel handler (cdp, bidi, live) gets once the gateway has checked the token
 * and found the session running on this node. The handler prepares its upstream (browser,
 * VNC server, BiDi mapper) and then accepts, or refuses with an HTTP status.
 */
export interface ChannelContext {
  req: IncomingMessage;
  socket: Duplex;
  url: URL;
  session: { record: SessionRecord; handle: RuntimeHandle };
  claims: SessionClaims;
  log: Logger;
  /** Telemetry capture (connection events, the CDP tap); absent when the server runs without it. */
  telemetry?: TelemetryService;
  /**
   * Completes the websocket upgrade. `onOpen` wires the client to its upstream and returns
   * the connection's handle; it is registered as session activity until `closed()` is called.
   */
  accept(onOpen: (client: WebSocket, closed: () => void) => SessionClient): void;
  refuse(status: number, code: string, message: string): void;
}

export type ChannelHandler = (ctx: ChannelContext) => Promise<void>;
