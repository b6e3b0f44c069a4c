import crypto from 'node:crypto';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { BidiServer } from 'chromium-bidi/out/Default/gen/src/bidiMapper/BidiMapper.js';
import type { BidiTransport } from 'chromium-bidi/out/Default/gen/src/bidiMapper/BidiTransport.js';
import type { MapperCdpConnection } from 'chromium-bidi/out/Default/gen/src/cdp/CdpConnection.js';
import type { ChromiumBidi } from 'chromium-bidi/out/Default/gen/src/protocol/protocol.js';
import type { LoggerFn } from 'chromium-bidi/out/Default/gen/src/utils/log.js';
import type { SessionClient } from '../sessions/session-service.js';
import type { ChannelHandler } from './channel.js';
import { inspectCommand, refusalReply } from './cdp-guard.js';
import { connectUpstream } from './cdp-relay.js';

/**
 * WebDriver BiDi: each client gets its own chromium-bidi mapper, run inside this process
 * over its own CDP connection to the session's Chromium (see docs/bidi.md for why this
 * and not ChromeDriver). The mapper is the same code ChromeDriver runs in a hidden tab;
 * here it costs no process, no tab, and tens of milliseconds per connection.
 */
export const bidiChannel: ChannelHandler = async (ctx) => {
  const { port, wsPath } = ctx.session.handle.chromium;
  const [mapper, upstream] = await Promise.all([loadMapper(ctx.log), connectUpstream(port, wsPath)]);
  if (ctx.socket.destroyed) {
    upstream.close();
    return;
  }
  ctx.accept((client, closed) => {
    // Telemetry: bidi_connect / bidi_disconnect (connection category); commands are not read.
    const tap = ctx.telemetry?.connection(ctx.session.record.id, 'bidi');
    if (tap) client.on('message', () => tap.messages++);
    const detached = () => {
      tap?.closed('client_close');
      closed();
    };
    return new BidiConnection(mapper, client, upstream, ctx.session.handle.dir, detached, ctx.log);
  });
};

/** The parts of chromium-bidi a connection uses. */
interface Mapper {
  BidiServer: typeof BidiServer;
  MapperCdpConnection: typeof MapperCdpConnection;
  BidiParser: typeof import('chromium-bidi/out/Default/gen/src/bidiTab/BidiParser.js').BidiParser;
}

let mapperModules: Promise<Mapper> | null = null;

/**
 * chromium-bidi and its protocol schemas cost the server about 12 MB once loaded, so they
 * are loaded with the first BiDi connection, not at start-up.
 */
function loadMapper(log: Logger): Promise<Mapper> {
  mapperModules ??= (async () => {
    const [server, cdp, client, parser] = await Promise.all([
      import('chromium-bidi/out/Default/gen/src/bidiMapper/BidiMapper.js'),
      import('chromium-bidi/out/Default/gen/src/cdp/CdpConnection.js'),
      import('chromium-bidi/out/Default/gen/src/cdp/CdpClient.js'),
      import('chromium-bidi/out/Default/gen/src/bidiTab/BidiParser.js'),
    ]);
    guardAgainstMapperRejections(log, client.CloseError);
    return { BidiServer: server.BidiServer, MapperCdpConnection: cdp.MapperCdpConnection, BidiParser: parser.BidiParser };
  })();
  mapperModules.catch(() => (mapperModules = null));
  return mapperModules;
}

/** Commands a client may send before its mapper has started (it takes tens of ms); more closes the connection. */
const MAX_EARLY_COMMANDS = 1000;

/**
 * BiDi commands refused before they reach the mapper, for the same reason the CDP relay
 * refuses Extensions.loadUnpacked: a path given by an agent names a directory of the server.
 */
const REFUSED_BIDI_METHODS = new Set(['webExtension.install', 'webExtension.uninstall']);

type Command = ChromiumBidi.Command;

/** An error message of the BiDi protocol (`type: 'error'`), as the spec shapes it. */
function errorMessage(id: number | null, error: string, message: string, channel?: string | null): Record<string, unknown> {
  return { type: 'error', id, error, message, ...(channel ? { 'goog:channel': channel } : {}) };
}

function jsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

/**
 * Reads one client frame as a BiDi command, the checks chromium-bidi's own tab transport
 * makes: a JSON object with an unsigned integer id, a string method and object params.
 * A frame that is not a command gets an `invalid argument` error with the id when one
 * could be read, null otherwise.
 */
export function parseBidiCommand(text: string): { ok: true; command: Command } | { ok: false; id: number | null; message: string } {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch (err) {
    return { ok: false, id: null, message: `cannot parse the message as JSON: ${(err as Error).message}` };
  }
  if (jsonType(msg) !== 'object') return { ok: false, id: null, message: `expected a JSON object, got ${jsonType(msg)}` };
  const { id, method, params, 'goog:channel': channel } = msg as Record<string, unknown>;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) return { ok: false, id: null, message: `expected an unsigned integer id, got ${jsonType(id)}` };
  if (typeof method !== 'string') return { ok: false, id, message: `expected a string method, got ${jsonType(method)}` };
  if (jsonType(params) !== 'object') return { ok: false, id, message: `expected object params, got ${jsonType(params)}` };
  if (channel !== undefined && typeof channel !== 'string') return { ok: false, id, message: `expected a string goog:channel, got ${jsonType(channel)}` };
  return { ok: true, command: { id, method, params, ...(channel ? { 'goog:channel': channel } : {}) } as Command };
}

/**
 * One BiDi client: its websocket, its CDP connection to Chromium and the mapper between
 * them. Closing either side, or the session ending, tears all three down.
 */
class BidiConnection implements SessionClient {
  private readonly cdp: MapperCdpConnection;
  private server: BidiServer | null = null;
  /** The mapper's command handler, set when the mapper is constructed (end of createAndStart). */
  private toMapper: ((command: Command) => unknown) | null = null;
  /** Commands that arrived while the mapper was starting; null once they have been handed over. */
  private early: Command[] | null = [];
  private onBrowserMessage: ((message: string) => unknown) | null = null;
  /** Ids of session.new commands, whose answer gets a real session id (the mapper says 'unknown'). */
  private readonly sessionNewIds = new Set<number>();
  private closed = false;

  constructor(
    private readonly mapper: Mapper,
    private readonly client: WebSocket,
    private readonly upstream: WebSocket,
    /** The session's own directory: the guard keeps file paths (downloads, uploads) inside it. */
    private readonly sessionDir: string,
    private readonly onClosed: () => void,
    private readonly log: Logger,
  ) {
    // The client may send session.new right after the upgrade: listen before any await.
    client.on('message', (data, isBinary) => this.fromClient(data as Buffer, isBinary));
    client.on('close', () => this.close());
    client.on('error', () => this.close());
    upstream.on('message', (data) => this.fromBrowser((data as Buffer).toString()));
    upstream.on('close', () => this.close(1011, 'browser connection closed'));
    upstream.on('error', () => this.close(1011, 'browser connection failed'));

    this.cdp = new mapper.MapperCdpConnection(
      {
        setOnMessage: (handler) => {
          this.onBrowserMessage = handler;
        },
        sendMessage: (message) => this.toBrowser(message),
        close: () => undefined,
      },
      mapperLogger(log),
    );
    void this.start();
  }

  private async start(): Promise<void> {
    const transport: BidiTransport = {
      setOnMessage: (handler) => {
        this.toMapper = handler;
      },
      sendMessage: (message) => this.toClient(message),
      close: () => undefined,
    };
    try {
      const browserClient = await this.cdp.createBrowserSession();
      const server = await this.mapper.BidiServer.createAndStart(transport, this.cdp, browserClient, /* selfTargetId: no mapper tab */ '', new this.mapper.BidiParser(), mapperLogger(this.log));
      if (this.closed) {
        server.close();
        return;
      }
      this.server = server;
      const early = this.early ?? [];
      this.early = null;
      for (const command of early) this.dispatch(command);
    } catch (err) {
      if (this.closed) return;
      this.log.warn({ err: describe(err) }, 'WebDriver BiDi mapper did not start');
      this.close(1011, 'could not start the WebDriver BiDi session');
    }
  }

  private fromClient(frame: Buffer, isBinary: boolean): void {
    if (this.closed) return;
    if (isBinary) {
      this.toClient(errorMessage(null, 'invalid argument', 'WebDriver BiDi commands are text frames'));
      return;
    }
    const parsed = parseBidiCommand(frame.toString());
    if (!parsed.ok) {
      this.toClient(errorMessage(parsed.id, 'invalid argument', parsed.message));
      return;
    }
    const command = parsed.command;
    const channel = command['goog:channel'];
    if (REFUSED_BIDI_METHODS.has(command.method)) {
      this.toClient(errorMessage(command.id, 'unsupported operation', `${command.method} is not allowed through browserd`, channel));
      return;
    }
    if (command.method === 'session.new') this.sessionNewIds.add(command.id);
    if (this.early) {
      if (this.early.length >= MAX_EARLY_COMMANDS) {
        this.close(1008, 'too many commands before the BiDi session started');
        return;
      }
      this.early.push(command);
      return;
    }
    this.dispatch(command);
  }

  private dispatch(command: Command): void {
    try {
      // The mapper answers every command itself, errors included; this only catches a throw
      // that escaped it, so one client's input never becomes the server's exception.
      const done = this.toMapper?.(command);
      if (done instanceof Promise) done.catch((err: unknown) => this.mapperFailed(command, err));
    } catch (err) {
      this.mapperFailed(command, err);
    }
  }

  private mapperFailed(command: Command, err: unknown): void {
    this.log.warn({ err: describe(err), method: command.method }, 'WebDriver BiDi mapper failed on a command');
    this.toClient(errorMessage(command.id, 'unknown error', describe(err), command['goog:channel']));
  }

  private toClient(message: object): void {
    if (this.client.readyState !== WebSocket.OPEN) return;
    const m = message as { type?: unknown; id?: unknown; result?: { sessionId?: unknown } };
    if (m.type === 'success' && typeof m.id === 'number' && this.sessionNewIds.delete(m.id) && m.result?.sessionId === 'unknown') {
      m.result.sessionId = crypto.randomUUID();
    } else if (m.type === 'error') {
      if (typeof m.id === 'number') this.sessionNewIds.delete(m.id);
      // The mapper's stack trace is of the server's code (and names its paths), not the client's.
      delete (m as { stacktrace?: unknown }).stacktrace;
    }
    try {
      this.client.send(JSON.stringify(message));
    } catch (err) {
      this.log.warn({ err: describe(err) }, 'could not send a BiDi message to the client');
    }
  }

  /**
   * The mapper talks to Chromium directly, not through the CDP relay, but its commands pass
   * the same guard: what the relay refuses (goog:cdp.sendCommand would otherwise reach it,
   * and BiDi commands map onto the same CDP: a file: navigation, files from outside the
   * session) gets the CDP error an agent would get, and download paths are moved into the
   * session the same way.
   */
  private toBrowser(message: string): void {
    if (this.closed || this.upstream.readyState !== WebSocket.OPEN) return;
    const verdict = inspectCommand(message, this.sessionDir);
    if (verdict && 'refusal' in verdict) {
      const reply = refusalReply(verdict.refusal);
      setImmediate(() => this.fromBrowser(reply));
      return;
    }
    this.upstream.send(verdict ? verdict.rewritten : message);
  }

  private fromBrowser(message: string): void {
    if (this.closed) return;
    try {
      this.onBrowserMessage?.(message);
    } catch (err) {
      this.log.warn({ err: describe(err) }, 'WebDriver BiDi mapper failed on a browser message');
    }
  }

  /** SessionClient: the session ending closes the client with its code and reason. */
  close(code = 1000, reason = 'WebDriver BiDi connection closed'): void {
    if (this.closed) return;
    this.closed = true;
    this.early = null;
    try {
      this.server?.close();
    } catch (err) {
      this.log.debug({ err: describe(err) }, 'closing the BiDi mapper failed');
    }
    // MapperCdpConnection.close() would reject the mapper's in-flight CDP commands, and the
    // mapper (written for a browser tab, where nobody crashes) does not catch all of them.
    // Closing the socket instead leaves them pending; they are collected with the connection.
    this.upstream.removeAllListeners('message');
    if (this.upstream.readyState === WebSocket.OPEN || this.upstream.readyState === WebSocket.CONNECTING) this.upstream.close();
    if (this.client.readyState === WebSocket.OPEN || this.client.readyState === WebSocket.CONNECTING) this.client.close(code, reason);
    setTimeout(() => {
      this.client.terminate();
      this.upstream.terminate();
    }, 2000).unref();
    this.onClosed();
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (err && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') return (err as { message: string }).message;
  return String(err);
}

/** The mapper's own error log goes to ours at debug level (it reports client mistakes there too). */
function mapperLogger(log: Logger): LoggerFn | undefined {
  if (!log.isLevelEnabled('debug')) return undefined;
  return (type) => (type === 'debug:error' || type === 'debug:warn' ? (...messages: unknown[]) => log.debug({ mapper: type }, messages.map(describe).join(' ')) : undefined);
}

let rejectionGuardInstalled = false;

/**
 * chromium-bidi is written to run in a browser tab, where a promise rejection nobody
 * handles is only a console line; in Node it ends the process. Its CDP commands reject
 * when a target goes away mid-command (a tab closed, a frame detached), and not every call
 * site catches that. This hook drops rejections that come from the mapper (its CloseError,
 * a CDP error object, or an error thrown in chromium-bidi's code) and rethrows every other
 * one, which keeps Node's default of failing loudly for our own code.
 */
function guardAgainstMapperRejections(log: Logger, CloseError: new (...args: never[]) => Error): void {
  if (rejectionGuardInstalled) return;
  rejectionGuardInstalled = true;
  // Installed from the first connection, but about every one: the binding is reset.
  const processLog = log.child({ session_id: null });
  process.on('unhandledRejection', (reason) => {
    if (reason instanceof CloseError || isMapperRejection(reason)) {
      processLog.debug({ err: describe(reason) }, 'ignored a rejection the WebDriver BiDi mapper left unhandled');
      return;
    }
    throw reason instanceof Error ? reason : new Error(`unhandled promise rejection: ${describe(reason)}`);
  });
}

function isMapperRejection(reason: unknown): boolean {
  if (reason instanceof Error) return typeof reason.stack === 'string' && /[/\\]node_modules[/\\]chromium-bidi[/\\]/.test(reason.stack);
  // MapperCdpConnection rejects with Chromium's error object as parsed: { code, message }.
  return !!reason && typeof reason === 'object' && typeof (reason as { code?: unknown }).code === 'number' && typeof (reason as { message?: unknown }).message === 'string';
}
