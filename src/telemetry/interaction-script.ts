/** The isolated world the interaction script runs in (the page's own scripts never see it or its binding). */
export const INTERACTION_WORLD = '__browserd_telemetry';
/** The binding the script reports through (exposed only in INTERACTION_WORLD). */
export const INTERACTION_BINDING = '__browserdInteraction';
/** A scroll is settled when its position has not changed for this long. */
export const SCROLL_SETTLE_MS = 150;

/**
 * Listens (capture phase, trusted events only) for clicks, keydowns and scrolls in every
 * frame and reports them through the binding. Privacy: no key value is sent for a password
 * or payment-card field (`masked: true` instead), no value of any field is ever read, and
 * a clicked form field's text is not sent.
 */
export const INTERACTION_SCRIPT = `(() => {
  const send = globalThis[${JSON.stringify(INTERACTION_BINDING)}];
  if (typeof send !== 'function' || globalThis.__browserdInteractionOn) return;
  globalThis.__browserdInteractionOn = true;
  const post = (m) => { try { m.url = location.href; send(JSON.stringify(m)); } catch {} };
  const esc = (s) => (globalThis.CSS && CSS.escape ? CSS.escape(s) : s);
  const selector = (el) => {
    const parts = [];
    while (el && el.nodeType === 1 && parts.length < 6) {
      if (el.id) { parts.unshift('#' + esc(el.id)); break; }
      let s = el.tagName.toLowerCase();
      const p = el.parentElement;
      if (p) {
        const same = Array.prototype.filter.call(p.children, (c) => c.tagName === el.tagName);
        if (same.length > 1) s += ':nth-of-type(' + (same.indexOf(el) + 1) + ')';
      }
      parts.unshift(s);
      el = p;
    }
    return parts.join(' > ');
  };
  const isField = (el) => el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT');
  const secret = (el) => !!el && el.tagName === 'INPUT' && (String(el.type).toLowerCase() === 'password' || /(^|\\s)cc-/.test(String(el.autocomplete || '')));
  addEventListener('click', (e) => {
    if (!e.isTrusted) return;
    const el = e.target && e.target.nodeType === 1 ? e.target : null;
    const text = el && !isField(el) ? String(el.innerText || el.textContent || '').trim().slice(0, 200) : undefined;
    post({ t: 'click', x: e.clientX, y: e.clientY, selector: el ? selector(el) : undefined, tag: el ? el.tagName : undefined, text });
  }, true);
  addEventListener('keydown', (e) => {
    if (!e.isTrusted) return;
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    const masked = secret(el) || secret(e.target);
    post({ t: 'key', key: masked ? undefined : e.key, masked, selector: el && el !== document.body ? selector(el) : undefined, tag: el ? el.tagName : undefined });
  }, true);
  const scrolls = new Map();
  addEventListener('scroll', (e) => {
    if (!e.isTrusted) return;
    const doc = e.target === document || e.target === document.documentElement || !e.target || e.target.nodeType !== 1;
    const key = doc ? document : e.target;
    const pos = () => (doc ? [scrollX, scrollY] : [key.scrollLeft, key.scrollTop]);
    let s = scrolls.get(key);
    if (!s) { s = { from: key.__browserdLast || [0, 0], timer: 0 }; scrolls.set(key, s); }
    clearTimeout(s.timer);
    s.timer = setTimeout(() => {
      scrolls.delete(key);
      const to = pos();
      key.__browserdLast = to;
      post({ t: 'scroll', fx: s.from[0], fy: s.from[1], tx: to[0], ty: to[1], selector: doc ? 'document' : selector(key) });
    }, ${SCROLL_SETTLE_MS});
  }, { capture: true, passive: true });
})();`;
