import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * Loopback-only test proxies that log what reached them. Requests for loopback hosts
 * (127.0.0.1, localhost, *.localhost) are really forwarded to 127.0.0.1; for any other host
 * the proxy answers itself ("proxied by <name>") and never dials out, so no test traffic
 * leaves the machine.
 */

export interface ProxyLogEntry {
  /** GET, CONNECT or SOCKS5 */
  method: string;
  /** The absolute URL (HTTP), or host:port (CONNECT, SOCKS5). */
  target: string;
  host: string;
  /** user:password the client authenticated with, or null. */
  auth: string | null;
}

export interface TestProxy {
  name: string;
  port: number;
  log: ProxyLogEntry[];
  hosts(): string[];
  close(): Promise<void>;
}

const isLoopback = (host: string) => host === '127.0.0.1' || host === 'localhost' || host.endsWith('.localhost') || host === '[::1]' || host === '::1';

function cannedPage(name: string, target: string): string {
  const body = `<title>proxied by ${name}</title><p id="via">${name} ${target}</p>`;
  return `HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

function basicAuth(header: string | undefined): string | null {
  const m = /^Basic\s+(.+)$/i.exec(header ?? '');
  return m ? Buffer.from(m[1]!, 'base64').toString('utf8') : null;
}

/** An HTTP proxy (or, with `tls`, an HTTPS proxy: TLS between client and proxy). */
export async function startHttpProxy(name: string, opts: { auth?: string; tls?: { key: string; cert: string } } = {}): Promise<TestProxy> {
  const log: ProxyLogEntry[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const auth = basicAuth(req.headers['proxy-authorization']);
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end('not a proxy request');
      return;
    }
    log.push({ method: req.method ?? 'GET', target: url.toString(), host: url.hostname, auth });
    if (opts.auth && auth !== opts.auth) {
      res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
      return;
    }
    if (!isLoopback(url.hostname)) {
      const body = `<title>proxied by ${name}</title><p id="via">${name} ${url.toString()}</p>`;
      res.writeHead(200, { 'content-type': 'text/html' }).end(body);
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const up = http.request({ host: '127.0.0.1', port: Number(url.port || 80), method: req.method, path: `${url.pathname}${url.search}`, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  };
  const server = opts.tls ? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, handler) : http.createServer(handler);
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const auth = basicAuth(req.headers['proxy-authorization']);
    const target = req.url ?? '';
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
    log.push({ method: 'CONNECT', target, host, auth });
    socket.on('error', () => undefined);
    if (opts.auth && auth !== opts.auth) {
      socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm="test"\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    if (!isLoopback(host)) {
      // Accept the tunnel and end it: nothing leaves the machine.
      socket.end('HTTP/1.1 200 Connection Established\r\n\r\n');
      return;
    }
    const up = net.connect(port, '127.0.0.1', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) up.write(head);
      up.pipe(socket);
      socket.pipe(up);
    });
    up.on('error', () => socket.destroy());
  });
  return listen(server, name, log);
}

/** A SOCKS5 proxy (RFC 1928) with optional username/password authentication (RFC 1929). */
export async function startSocksProxy(name: string, opts: { auth?: string } = {}): Promise<TestProxy> {
  const log: ProxyLogEntry[] = [];
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    let stage: 'greeting' | 'auth' | 'request' | 'done' = 'greeting';
    let auth: string | null = null;
    socket.on('data', (d: Buffer) => {
      if (stage === 'done') return;
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (stage === 'greeting') {
          if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
          const methods = [...buf.subarray(2, 2 + buf[1]!)];
          buf = buf.subarray(2 + buf[1]!);
          if (opts.auth) {
            if (!methods.includes(2)) return void socket.end(Buffer.from([5, 0xff]));
            socket.write(Buffer.from([5, 2]));
            stage = 'auth';
          } else {
            socket.write(Buffer.from([5, 0]));
            stage = 'request';
          }
        } else if (stage === 'auth') {
          if (buf.length < 2) return;
          const ulen = buf[1]!;
          if (buf.length < 3 + ulen) return;
          const plen = buf[2 + ulen]!;
          if (buf.length < 3 + ulen + plen) return;
          auth = `${buf.subarray(2, 2 + ulen).toString()}:${buf.subarray(3 + ulen, 3 + ulen + plen).toString()}`;
          buf = buf.subarray(3 + ulen + plen);
          if (auth !== opts.auth) {
            log.push({ method: 'SOCKS5', target: '(auth failed)', host: '', auth });
            return void socket.end(Buffer.from([1, 1]));
          }
          socket.write(Buffer.from([1, 0]));
          stage = 'request';
        } else if (stage === 'request') {
          if (buf.length < 5) return;
          const atyp = buf[3]!;
          let host: string;
          let off: number;
          if (atyp === 1) {
            if (buf.length < 10) return;
            host = [...buf.subarray(4, 8)].join('.');
            off = 8;
          } else if (atyp === 3) {
            const len = buf[4]!;
            if (buf.length < 5 + len + 2) return;
            host = buf.subarray(5, 5 + len).toString();
            off = 5 + len;
          } else {
            return void socket.end(Buffer.from([5, 8, 0, 1, 0, 0, 0, 0, 0, 0]));
          }
          const port = buf.readUInt16BE(off);
          const rest = buf.subarray(off + 2);
          stage = 'done';
          log.push({ method: 'SOCKS5', target: `${host}:${port}`, host, auth });
          const ok = Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]);
          if (!isLoopback(host)) {
            socket.write(ok);
            // Answer an HTTP request ourselves; a TLS client just sees the connection end.
            socket.once('data', () => socket.end(cannedPage(name, `${host}:${port}`)));
            return;
          }
          const up = net.connect(port, '127.0.0.1', () => {
            socket.write(ok);
            if (rest.length) up.write(rest);
            up.pipe(socket);
            socket.pipe(up);
          });
          up.on('error', () => socket.destroy());
          return;
        } else return;
      }
    });
  });
  return listen(server, name, log);
}

async function listen(server: net.Server, name: string, log: ProxyLogEntry[]): Promise<TestProxy> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    name,
    port: (server.address() as net.AddressInfo).port,
    log,
    hosts: () => log.map((e) => e.host),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A self-signed certificate for 127.0.0.1 (openssl), in a temp dir; its path goes into NODE_EXTRA_CA_CERTS. */
export function selfSignedCert(): { key: string; cert: string; certFile: string; dir: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proxy-cert-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8'), certFile, dir };
}
