import dns from 'node:dns';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { Server } from 'proxy-chain';
import { matchesBypassHost } from '../domain/proxy-bypass.js';

/** Where a bridge sends traffic: an upstream proxy URL (credentials included) and the hosts that skip it. */
export interface Upstream {
  url: string;
  bypassHosts: string[];
  /** For logs: never the URL (it may hold a password). */
  label: string;
}

/**
 * TLS to an HTTPS upstream proxy, verified against the proxy's own name. proxy-chain sends
 * its CONNECT with `Host: <target>`, and Node's agent would take the TLS server name (SNI
 * and the certificate check) from that header, i.e. from the site being visited, so every
 * tunnel through an HTTPS proxy would fail its certificate check.
 */
class UpstreamTlsAgent extends https.Agent {
  override createConnection(options: https.RequestOptions & tls.ConnectionOptions, callback?: (err: Error | null, socket: net.Socket) => void): net.Socket {
    const host = options.host ?? 'localhost';
    const fixed = { ...options, servername: net.isIP(host) ? '' : host, checkServerIdentity: (_name: string, cert: tls.PeerCertificate) => tls.checkServerIdentity(host, cert) };
    return (https.Agent.prototype as unknown as { createConnection(o: unknown, cb?: unknown): net.Socket }).createConnection.call(this, fixed, callback);
  }
}
const upstreamTls = new UpstreamTlsAgent({ keepAlive: false });

/**
 * Direct connections resolve `localhost` and `*.localhost` to loopback without asking DNS
 * (RFC 6761), as Chromium does itself: a session with direct egress sees the same
 * addresses through its bridge as without one.
 */
const lookupLocalhost = ((hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost')) {
    if (options?.all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
    else callback(null, '127.0.0.1', 4);
    return;
  }
  dns.lookup(hostname, options, callback as never);
}) as unknown as typeof dns.lookup;

interface Bridge {
  server: Server;
  upstream: Upstream | null;
}

/**
 * One local forwarding proxy per session, on a loopback port Chromium is pointed at
 * (`--proxy-server`, locked by policy). Chromium cannot send proxy credentials from its
 * command line, so the bridge holds them and speaks to the upstream (HTTP, HTTPS or
 * SOCKS5, via proxy-chain); with no upstream it connects directly. The upstream is read
 * per request, so switching it changes the egress of the running session without a
 * restart: open connections are closed so that nothing keeps using the old one.
 */
export class EgressBridges {
  private readonly bridges = new Map<string, Bridge>();

  constructor(private readonly log: Logger) {}

  /** Opens the session's bridge (port 0: any free port; a re-adopted session asks for its old one). Returns the port. */
  async open(sessionId: string, upstream: Upstream | null, port = 0): Promise<number> {
    await this.close(sessionId);
    const bridge: Bridge = { server: null as unknown as Server, upstream };
    bridge.server = new Server({
      port,
      host: '127.0.0.1',
      verbose: false,
      prepareRequestFunction: ({ hostname }) => {
        const u = bridge.upstream;
        if (!u || matchesBypassHost(u.bypassHosts, hostname)) return { requestAuthentication: false, upstreamProxyUrl: null, dnsLookup: lookupLocalhost };
        return { requestAuthentication: false, upstreamProxyUrl: u.url, ...(u.url.startsWith('https:') ? { httpsAgent: upstreamTls } : {}) };
      },
    });
    bridge.server.on('requestFailed', ({ error }: { error: Error }) => this.log.debug({ session_id: sessionId, err: String(error) }, 'egress bridge request failed'));
    await bridge.server.listen();
    this.bridges.set(sessionId, bridge);
    return bridge.server.port;
  }

  /** Changes where the session's traffic goes, now. */
  switch(sessionId: string, upstream: Upstream | null): boolean {
    const b = this.bridges.get(sessionId);
    if (!b) return false;
    b.upstream = upstream;
    for (const socket of b.server.connections.values()) socket.destroy();
    this.log.info({ session_id: sessionId, egress: upstream?.label ?? 'direct' }, 'session egress switched');
    return true;
  }

  has(sessionId: string): boolean {
    return this.bridges.has(sessionId);
  }

  async close(sessionId: string): Promise<void> {
    const b = this.bridges.get(sessionId);
    if (!b) return;
    this.bridges.delete(sessionId);
    await b.server.close(true);
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.bridges.keys()].map((id) => this.close(id)));
  }
}
