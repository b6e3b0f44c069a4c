import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A task the local solver received (the createTask `task` object). */
export type ReceivedTask = { type: string; websiteURL: string; websiteKey: string } & Record<string, unknown>;

export interface LocalSolver {
  /** Base URL (BROWSERD_CAPTCHA_SOLVER_URL). */
  url: string;
  key: string;
  /** Every task created, in order, with the id and the token it was (or will be) solved with. */
  tasks: { id: number; task: ReceivedTask; token: string; polls: number }[];
  /** createTask calls refused for a wrong clientKey. */
  refusedKeys: number;
  close(): Promise<void>;
}

/**
 * A local solver service speaking the createTask / getTaskResult protocol (anti-captcha
 * style): createTask checks `clientKey` and answers `{errorId: 0, taskId}`; getTaskResult
 * answers `processing` `processingPolls` times, then `ready` with the token in
 * `solution.gRecaptchaResponse` (reCAPTCHA, hCaptcha) or `solution.token` (Turnstile).
 * `failWith(task)` may name an errorCode to answer a task's result with instead; while
 * `hold(task)` is true the task stays `processing`.
 */
export async function startLocalSolver(opts: { key?: string; processingPolls?: number; failWith?: (t: ReceivedTask) => string | null; hold?: (t: ReceivedTask) => boolean } = {}): Promise<LocalSolver> {
  const key = opts.key ?? `solver-${crypto.randomBytes(8).toString('hex')}`;
  const processingPolls = opts.processingPolls ?? 1;
  const tasks: LocalSolver['tasks'] = [];
  const state = { refusedKeys: 0 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const send = (o: unknown) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(o));
      };
      let msg: { clientKey?: string; task?: ReceivedTask; taskId?: number };
      try {
        msg = JSON.parse(body) as typeof msg;
      } catch {
        return send({ errorId: 1, errorCode: 'ERROR_BAD_REQUEST', errorDescription: 'not JSON' });
      }
      if (msg.clientKey !== key) {
        state.refusedKeys++;
        return send({ errorId: 1, errorCode: 'ERROR_KEY_DOES_NOT_EXIST', errorDescription: 'Account authorization key not found in the system' });
      }
      if (req.url === '/createTask') {
        if (!msg.task || typeof msg.task.type !== 'string' || !msg.task.websiteURL || !msg.task.websiteKey) {
          return send({ errorId: 1, errorCode: 'ERROR_TASK_ABSENT', errorDescription: 'Task property is empty or not set' });
        }
        const id = 1000 + tasks.length;
        tasks.push({ id, task: msg.task, token: `${msg.task.type}.${crypto.randomBytes(24).toString('base64url')}`, polls: 0 });
        return send({ errorId: 0, taskId: id });
      }
      if (req.url === '/getTaskResult') {
        const t = tasks.find((x) => x.id === msg.taskId);
        if (!t) return send({ errorId: 16, errorCode: 'ERROR_NO_SUCH_CAPCHA_ID', errorDescription: 'Task you are requesting does not exist' });
        t.polls++;
        if (t.polls <= processingPolls || opts.hold?.(t.task)) return send({ errorId: 0, status: 'processing' });
        const fail = opts.failWith?.(t.task);
        if (fail) return send({ errorId: 12, errorCode: fail, errorDescription: 'Captcha could not be solved by 5 different workers' });
        const solution = t.task.type.startsWith('Turnstile') ? { token: t.token, userAgent: 'Mozilla/5.0' } : { gRecaptchaResponse: t.token };
        return send({ errorId: 0, status: 'ready', solution, cost: '0.00200', ip: '127.0.0.1', createTime: 0, endTime: 1, solveCount: 0 });
      }
      res.statusCode = 404;
      send({ errorId: 1, errorCode: 'ERROR_NO_SUCH_METHOD', errorDescription: 'no such method' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    key,
    tasks,
    get refusedKeys() {
      return state.refusedKeys;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export const SITEKEYS = {
  recaptcha_v2: '6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI',
  recaptcha_v3: '6LcR_okUAAAAAPYrPe-HK_0RULO1aZM15ENyM-Mf',
  hcaptcha: '10000000-ffff-ffff-ffff-000000000001',
  turnstile: '1x00000000000000000000AA',
} as const;

/** Sitekeys of the /frames page, known only from frame URLs. */
export const FRAME_SITEKEYS = {
  recaptcha_v2: '6LdFrameKeyAAAAAA-recaptcha_v2_frame000',
  hcaptcha: 'a5f74b19-9e45-40e0-b45d-47ff91b7a6c2',
  turnstile: '0x4AAAAAAAFrameKey_Turnstile',
} as const;

/** A form submitted to the widget site. */
export interface Submission {
  page: string;
  fields: Record<string, string>;
}

export interface WidgetSite {
  url: string;
  port: number;
  submissions: Submission[];
  close(): Promise<void>;
}

/** Submits the form from the widget's callback, as sites commonly do; the callback also copies the token into a field of its own. */
const CALLBACK = `<script>
function onCaptcha(token) {
  window.__callbackToken = token;
  document.getElementById('cb').value = token;
  document.getElementById('f').submit();
}
</script>`;

function widgetPage(title: string, script: string, widget: string, page: string): string {
  return `<!doctype html><html><head><title>${title}</title>${script}</head><body>
<form id="f" method="POST" action="/submit?page=${page}">
  <input name="email" value="someone@example.test">
  ${widget}
  <input type="hidden" name="callback_token" id="cb">
  <button type="submit">Send</button>
</form>${CALLBACK}</body></html>`;
}

/**
 * Pages following each real widget's DOM contract. The widgets' own scripts come from
 * google.com, hcaptcha.com and cloudflare.com (unreachable here: they fail to load), so
 * the widgets are the markup a site writes: the container with data-sitekey and
 * data-callback inside the form the response field is posted with.
 */
export async function startWidgetSite(): Promise<WidgetSite> {
  const submissions: Submission[] = [];
  const turnstile = (page: string) =>
    widgetPage(
      'Turnstile',
      '<script src="https://challenges.cloudflare.com/turnstile/v0/api.js" async defer></script>',
      `<div class="cf-turnstile" data-sitekey="${SITEKEYS.turnstile}" data-callback="onCaptcha" data-action="login"></div>`,
      page,
    );
  const pages: Record<string, () => string> = {
    '/recaptcha': () =>
      widgetPage('reCAPTCHA v2', '<script src="https://www.google.com/recaptcha/api.js" async defer></script>', `<div class="g-recaptcha" data-sitekey="${SITEKEYS.recaptcha_v2}" data-callback="onCaptcha"></div>`, 'recaptcha'),
    '/hcaptcha': () =>
      widgetPage('hCaptcha', '<script src="https://js.hcaptcha.com/1/api.js" async defer></script>', `<div class="h-captcha" data-sitekey="${SITEKEYS.hcaptcha}" data-callback="onCaptcha"></div>`, 'hcaptcha'),
    '/turnstile': () => turnstile('turnstile'),
    '/turnstile-framed': () => turnstile('turnstile-framed'),
    // v3: no widget; the page asks grecaptcha.execute for a token when the form is sent.
    '/v3': () => `<!doctype html><html><head><title>reCAPTCHA v3</title>
<script src="https://www.google.com/recaptcha/api.js?render=${SITEKEYS.recaptcha_v3}"></script></head><body>
<form id="f" method="POST" action="/submit?page=v3">
  <input type="hidden" name="g-recaptcha-response" id="v3token">
  <button id="send" type="button" onclick="sendForm()">Send</button>
</form>
<script>
function sendForm() {
  grecaptcha.ready(function () {
    grecaptcha.execute(${JSON.stringify(SITEKEYS.recaptcha_v3)}, { action: 'submit' }).then(function (token) {
      document.getElementById('v3token').value = token;
      document.getElementById('f').submit();
    });
  });
}
</script></body></html>`,
    // A widget inside a cross-site (out-of-process) frame: the frame's own form is sent.
    '/framed': () => `<!doctype html><title>framed</title><iframe src="http://localhost:${port}/turnstile-framed" width="600" height="300"></iframe>`,
    // A widget a script adds once the page runs (single-page apps): found by the DOM watch.
    '/dynamic': () => `<!doctype html><title>dynamic</title>
<form id="f" method="POST" action="/submit?page=dynamic"><input type="hidden" name="callback_token" id="cb"></form>${CALLBACK}
<script>setTimeout(function () {
  var w = document.createElement('div');
  w.className = 'g-recaptcha';
  w.setAttribute('data-sitekey', ${JSON.stringify(SITEKEYS.recaptcha_v2)});
  w.setAttribute('data-callback', 'onCaptcha');
  document.getElementById('f').appendChild(w);
}, 300);</script>`,
    // Widgets known only by the frames their scripts draw (the frame URLs of the real widgets; unreachable here).
    '/frames': () => `<!doctype html><title>frames</title>
<iframe title="reCAPTCHA" src="https://www.google.com/recaptcha/api2/anchor?ar=1&k=${FRAME_SITEKEYS.recaptcha_v2}&co=aHR0cDovL2E6ODA.&hl=en&v=abc&size=normal&cb=x1"></iframe>
<iframe title="hCaptcha" src="https://newassets.hcaptcha.com/captcha/v1/0a1b2c/static/hcaptcha.html#frame=checkbox&id=0x1&host=127.0.0.1&sentry=true&sitekey=${FRAME_SITEKEYS.hcaptcha}"></iframe>
<iframe title="Turnstile" src="https://challenges.cloudflare.com/cdn-cgi/challenge-platform/h/b/turnstile/if/ov2/av0/rcv0/0/x7k2p/${FRAME_SITEKEYS.turnstile}/light/fbE/normal/auto/"></iframe>`,
    '/plain': () => '<!doctype html><title>plain</title><p>no challenge here</p>',
  };
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'POST' && u.pathname === '/submit') {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        submissions.push({ page: u.searchParams.get('page') ?? '', fields: Object.fromEntries(new URLSearchParams(body)) });
        res.setHeader('content-type', 'text/html');
        res.end('<!doctype html><title>sent</title>sent');
      });
      return;
    }
    const page = pages[u.pathname];
    res.setHeader('content-type', 'text/html');
    if (!page) {
      res.statusCode = 404;
      return res.end('not found');
    }
    res.end(page());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    submissions,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
