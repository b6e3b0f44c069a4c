import http from 'node:http';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { EgressBridges, type Upstream } from './egress-bridge.js';

export interface CheckResult {
  ok: boolean;
  target: string;
  status_code?: number;
  error?: string;
}

/** Without a URL the check asks the proxy for a tunnel to this address (no bytes go through it). */
export const DEFAULT_CHECK_TARGET = 'example.com:443';
const TIMEOUT_MS = 15_000;

/** A CONNECT through the local bridge: the socket of an established tunnel, or the refusal. */
function connectVia(port: number, target: string): Promise<{ socket?: import('node:net').Socket; status: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'CONNECT', path: target, headers: { host: target }, timeout: TIMEOUT_MS });
    req.on('connect', (res, socket) => {
      if (res.statusCode === 200) resolve({ socket, status: 200 });
      else {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0 });
      }
    });
    req.on('timeout', () => req.destroy(new Error('the proxy did not answer in time')));
    req.on('error', reject);
    req.end();
  });
}

/** Reads the status line of an HTTP response from a socket (after writing `request`). */
function statusOver(socket: import('node:net').Socket | tls.TLSSocket, request: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => socket.destroy(new Error('the target did not answer in time')), TIMEOUT_MS);
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(buf);
      if (m) {
        clearTimeout(timer);
        socket.destroy();
        resolve(Number(m[1]));
      } else if (buf.length > 8192 || buf.includes('\r\n')) {
        clearTimeout(timer);
        socket.destroy();
        reject(new Error('the target did not answer HTTP'));
      }
    });
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      reject(new Error('the connection closed before an answer'));
    });
    socket.write(request);
  });
}

/**
 * Connects through the proxy exactly as sessions do (through an egress bridge) and reports
 * what happened. With `url`, fetches it (GET) and reports its HTTP status; without, asks
 * the proxy to open a tunnel to DEFAULT_CHECK_TARGET.
 */
export async function checkProxy(upstream: Upstream, url: URL | null, log: Logger): Promise<CheckResult> {
  const bridges = new EgressBridges(log);
  const id = `check-${Math.random().toString(36).slice(2)}`;
  const port = await bridges.open(id, upstream);
  const target = url ? url.toString() : DEFAULT_CHECK_TARGET;
  try {
    if (!url) {
      const r = await connectVia(port, DEFAULT_CHECK_TARGET);
      r.socket?.destroy();
      return r.status === 200 ? { ok: true, target } : { ok: false, target, error: proxyRefusal(r.status) };
    }
    const hostPort = `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
    const request = `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\nUser-Agent: browserd-proxy-check\r\n\r\n`;
    let status: number;
    if (url.protocol === 'https:') {
      const r = await connectVia(port, hostPort);
      if (!r.socket) return { ok: false, target, error: proxyRefusal(r.status) };
      const secure = tls.connect({ socket: r.socket, servername: url.hostname.replace(/^\[|\]$/g, '') });
      status = await statusOver(secure, request);
    } else {
      // Plain HTTP goes to the proxy as an absolute-URI request, as Chromium sends it.
      status = await new Promise<number>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: url.toString(), headers: { host: url.host, 'user-agent': 'browserd-proxy-check' }, timeout: TIMEOUT_MS });
        req.on('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('timeout', () => req.destroy(new Error('no answer in time')));
        req.on('error', reject);
        req.end();
      });
      // The bridge answers 407/5xx itself when the upstream refuses or cannot be reached.
      if (BRIDGE_FAILURES[status]) return { ok: false, target, error: proxyRefusal(status) };
    }
    return { ok: status >= 200 && status < 400, target, status_code: status, ...(status >= 400 ? { error: `the target answered ${status}` } : {}) };
  } catch (err) {
    return { ok: false, target, error: (err as Error).message };
  } finally {
    await bridges.closeAll();
  }
}

/** proxy-chain answers with these codes when the upstream proxy fails (see its statuses.js). */
const BRIDGE_FAILURES: Record<number, string> = {
  407: 'the proxy refused the credentials',
  597: 'the proxy refused the credentials',
  590: 'the proxy refused the request',
  504: 'the proxy or the target did not answer in time',
  592: 'the proxy answered nonsense',
  593: 'the proxy or the target could not be resolved',
  594: 'the connection to the proxy or through it was refused',
  595: 'the connection to the proxy or through it was reset',
  596: 'the connection to the proxy broke',
  599: 'the proxy failed',
};

function proxyRefusal(status: number): string {
  return BRIDGE_FAILURES[status] ?? `the proxy answered ${status}`;
}
