import { CAPTCHA_TYPES, type CaptchaType, type DetectedChallenge, type DetectionSignal } from './captcha-events.js';

/** The isolated world the detector runs in: the page's own scripts never see it. */
export const CAPTCHA_WORLD = '__browserd_captcha';

/** How long one read of the detector's findings waits for news before answering empty. */
export const NEXT_WAIT_MS = 25_000;
/** The expression browserd evaluates (awaiting it) in the detector's world to read its findings. */
export const NEXT_EXPRESSION = `globalThis.__browserdCaptcha ? globalThis.__browserdCaptcha.next(${NEXT_WAIT_MS}) : null`;

/**
 * The detector, run in every document of a page or frame target (isolated world, from
 * document creation on): finds widgets by their DOM contract and queues each sitekey once
 * per document. browserd reads the queue by evaluating NEXT_EXPRESSION in that world,
 * which waits until there is something to read: a push channel without `Runtime.enable`
 * (which bindings would need, and which stealth sessions avoid) and without anything the
 * page can see. Signals:
 * - elements `.g-recaptcha` / `.h-captcha` / `.cf-turnstile` with `data-sitekey` (and
 *   `data-callback`, `data-action`, `data-cdata`, `data-size`);
 * - scripts `recaptcha/api.js?render=<sitekey>` / `enterprise.js?render=` (reCAPTCHA v3);
 * - iframes `…/recaptcha/api2|enterprise/anchor?k=<sitekey>`, hCaptcha's
 *   `hcaptcha.com/captcha/…#…sitekey=<key>`, Turnstile's `challenges.cloudflare.com/…/turnstile/if/…/<sitekey>/…`.
 * A reCAPTCHA anchor frame whose sitekey a v3 script rendered is v3 (v3 draws an invisible anchor).
 * The DOM is watched with a MutationObserver; scans are batched (one per task).
 */
export const DETECTOR_SOURCE = `(() => {
  if (globalThis.__browserdCaptcha) return;
  const queue = [];
  const waiters = new Set();
  globalThis.__browserdCaptcha = {
    next: (ms) => {
      if (queue.length) return Promise.resolve(queue.splice(0));
      return new Promise((resolve) => {
        const w = () => { clearTimeout(timer); waiters.delete(w); resolve(queue.splice(0)); };
        const timer = setTimeout(w, ms);
        waiters.add(w);
      });
    },
  };
  const sent = new Set();
  const v3Keys = new Set();
  const top = (() => { try { return window === window.top; } catch (e) { return false; } })();
  const param = (u, name) => {
    try {
      const url = new URL(u, location.href);
      const q = url.searchParams.get(name);
      if (q) return q;
      return new URLSearchParams(url.hash.slice(1)).get(name);
    } catch (e) { return null; }
  };
  const send = (c) => {
    if (!c.sitekey || c.sitekey.length > 200) return;
    const key = c.sitekey;
    if (sent.has(key)) return;
    sent.add(key);
    c.url = location.href;
    c.top = top;
    queue.push(JSON.stringify(c));
    for (const w of [...waiters]) w();
  };
  const TYPES = [['g-recaptcha', 'recaptcha_v2'], ['h-captcha', 'hcaptcha'], ['cf-turnstile', 'turnstile']];
  const scan = () => {
    for (const s of document.querySelectorAll('script[src]')) {
      const src = s.src || '';
      const m = /\\/recaptcha\\/(api|enterprise)\\.js/.exec(src);
      if (!m) continue;
      const r = param(src, 'render');
      if (r && r !== 'explicit' && r !== 'onload') {
        v3Keys.add(r);
        send({ type: 'recaptcha_v3', sitekey: r, signal: 'script', enterprise: m[1] === 'enterprise' });
      }
    }
    for (const el of document.querySelectorAll('[data-sitekey]')) {
      const t = TYPES.find(([cls]) => el.classList.contains(cls));
      if (!t) continue;
      const d = el.dataset;
      const sitekey = d.sitekey || '';
      send({
        type: t[1] === 'recaptcha_v2' && v3Keys.has(sitekey) ? 'recaptcha_v3' : t[1],
        sitekey, signal: 'element',
        callback: d.callback || undefined, action: d.action || undefined, cdata: d.cdata || undefined,
        invisible: d.size === 'invisible' || undefined,
      });
    }
    for (const f of document.querySelectorAll('iframe[src]')) {
      const src = f.src || '';
      let m;
      if ((m = /\\/recaptcha\\/(api2|enterprise)\\/anchor/.exec(src))) {
        const k = param(src, 'k') || '';
        send({ type: v3Keys.has(k) ? 'recaptcha_v3' : 'recaptcha_v2', sitekey: k, signal: 'iframe', invisible: param(src, 'size') === 'invisible' || undefined, enterprise: m[1] === 'enterprise' || undefined });
      } else if (/hcaptcha\\.com\\/captcha\\//.test(src)) {
        send({ type: 'hcaptcha', sitekey: param(src, 'sitekey') || '', signal: 'iframe' });
      } else if ((m = /challenges\\.cloudflare\\.com\\/.*\\/turnstile\\/if\\/(?:[^/]+\\/)*?(0x[0-9A-Za-z_-]+)\\//.exec(src))) {
        send({ type: 'turnstile', sitekey: m[1], signal: 'iframe' });
      }
    }
  };
  let queued = false;
  const later = () => {
    if (queued) return;
    queued = true;
    setTimeout(() => { queued = false; try { scan(); } catch (e) {} }, 0);
  };
  new MutationObserver(later).observe(document, { childList: true, subtree: true, attributes: true, attributeFilter: ['data-sitekey', 'src', 'class'] });
  later();
})();`;

/**
 * Places a token in the main world of the widget's document (run with Runtime.callFunctionOn
 * on that document's element, so `this` is in the page's own world): writes the response
 * field the widget's page reads (creating it inside the widget when the widget's script did
 * not), calls the widget's `data-callback` (or, for reCAPTCHA rendered explicitly, the
 * callback recorded in `___grecaptcha_cfg`), and for reCAPTCHA v3 makes `grecaptcha.execute`
 * resolve with the token. Returns what it did.
 */
export const PLACE_TOKEN = `function (a) {
  const doc = this.ownerDocument || this;
  const win = doc.defaultView;
  const FIELDS = { recaptcha_v2: ['g-recaptcha-response'], recaptcha_v3: ['g-recaptcha-response'], hcaptcha: ['h-captcha-response', 'g-recaptcha-response'], turnstile: ['cf-turnstile-response'] };
  const CLASSES = { recaptcha_v2: 'g-recaptcha', recaptcha_v3: 'g-recaptcha', hcaptcha: 'h-captcha', turnstile: 'cf-turnstile' };
  const widgets = Array.from(doc.querySelectorAll('.' + CLASSES[a.type] + '[data-sitekey]')).filter((w) => w.getAttribute('data-sitekey') === a.sitekey);
  let fields = 0;
  const write = (el) => {
    el.value = a.token;
    if (el.tagName === 'TEXTAREA') el.textContent = a.token;
    fields++;
  };
  const make = (name, parent) => {
    const el = doc.createElement(a.type === 'turnstile' ? 'input' : 'textarea');
    el.name = name;
    if (a.type === 'turnstile') el.type = 'hidden';
    else {
      if (!doc.getElementById(name)) el.id = name;
      el.className = name;
      el.style.display = 'none';
    }
    parent.appendChild(el);
    return el;
  };
  for (const name of FIELDS[a.type]) {
    if (widgets.length) {
      for (const w of widgets) {
        const own = w.querySelectorAll('[name="' + name + '"]');
        if (own.length) own.forEach(write);
        else write(make(name, w));
      }
    } else if (a.type !== 'recaptcha_v3') {
      const any = doc.querySelectorAll('[name="' + name + '"]');
      if (any.length) any.forEach(write);
      else if (doc.forms.length === 1) write(make(name, doc.forms[0]));
    }
  }
  const lookup = (path) => {
    let o = win;
    for (const part of String(path).split('.')) {
      if (o == null) return undefined;
      o = o[part];
    }
    return o;
  };
  let callback = 'none';
  let fn;
  const named = widgets.map((w) => w.getAttribute('data-callback')).find(Boolean) || a.callback;
  if (named) {
    fn = lookup(named);
    if (typeof fn !== 'function') callback = 'not_found';
  } else if (a.type === 'recaptcha_v2' && win.___grecaptcha_cfg && win.___grecaptcha_cfg.clients) {
    const seen = new Set();
    const walk = (o, depth) => {
      if (!o || typeof o !== 'object' || depth > 5 || seen.has(o) || fn) return;
      seen.add(o);
      if (o.sitekey === a.sitekey && o.callback) { fn = typeof o.callback === 'function' ? o.callback : lookup(o.callback); return; }
      for (const k of Object.keys(o)) { try { walk(o[k], depth + 1); } catch (e) {} }
    };
    walk(win.___grecaptcha_cfg.clients, 0);
  }
  if (typeof fn === 'function') {
    try { fn.call(win, a.token); callback = 'called'; } catch (e) { callback = 'threw'; }
  }
  let executePatched = false;
  if (a.type === 'recaptcha_v3') {
    const g = win.grecaptcha || (win.grecaptcha = { ready: (cb) => { try { cb(); } catch (e) {} } });
    const patch = (o) => {
      if (!o) return;
      const own = typeof o.execute === 'function' ? o.execute : null;
      o.execute = function (key) {
        if (key === undefined || key === a.sitekey) return Promise.resolve(a.token);
        return own ? own.apply(this, arguments) : Promise.reject(new Error('unknown site key'));
      };
      if (typeof o.ready !== 'function') o.ready = (cb) => { try { cb(); } catch (e) {} };
    };
    patch(g);
    if (a.enterprise) patch(g.enterprise || (g.enterprise = {}));
    executePatched = true;
  }
  return { fields, callback, executePatched };
}`;

const SIGNALS: readonly DetectionSignal[] = ['element', 'script', 'iframe'];
const SHORT = /^[\x20-\x7e]{1,200}$/;

/** A detector finding, validated (it comes from a world the page cannot reach, but from a page's process all the same). */
export function parseReport(payload: string): DetectedChallenge | null {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(payload) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (!o || typeof o !== 'object') return null;
  if (!CAPTCHA_TYPES.includes(o.type as CaptchaType)) return null;
  if (typeof o.sitekey !== 'string' || !/^[A-Za-z0-9_.-]{1,200}$/.test(o.sitekey)) return null;
  if (typeof o.url !== 'string' || o.url.length > 8192) return null;
  if (!SIGNALS.includes(o.signal as DetectionSignal)) return null;
  const str = (v: unknown) => (typeof v === 'string' && SHORT.test(v) ? v : undefined);
  const out: DetectedChallenge = { type: o.type as CaptchaType, sitekey: o.sitekey, url: o.url, signal: o.signal as DetectionSignal, top: o.top === true };
  const callback = str(o.callback);
  if (callback && /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(callback)) out.callback = callback;
  const action = str(o.action);
  if (action) out.action = action;
  const cdata = str(o.cdata);
  if (cdata) out.cdata = cdata;
  if (o.invisible === true) out.invisible = true;
  if (o.enterprise === true) out.enterprise = true;
  return out;
}
