// The live view: noVNC's RFB client on the session's screen, scaled to this window.
import RFB from '../novnc/core/rfb.js';

const params = new URLSearchParams(location.search);
const jwt = params.get('jwt') ?? '';
const readonly = document.body.dataset.readonly === 'true';
const screen = document.getElementById('screen');
const status = document.getElementById('status');
const clip = document.getElementById('clip');
const clipText = document.getElementById('clip-text');

// Relative to this page, so a BROWSERD_PUBLIC_URL with a path prefix keeps working.
const wsUrl = new URL(`live/ws?jwt=${encodeURIComponent(jwt)}`, location.href);
wsUrl.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
const statusUrl = new URL(`live/status?jwt=${encodeURIComponent(jwt)}`, location.href);

function show(message, action) {
  status.textContent = message;
  if (action) {
    const b = document.createElement('button');
    b.textContent = action.label;
    b.addEventListener('click', action.run);
    status.append(document.createElement('br'), b);
  }
  status.hidden = false;
  document.body.dataset.state = 'disconnected';
}

let rfb;
function connect() {
  show('Connecting…');
  rfb = new RFB(screen, wsUrl.href, { wsProtocols: ['binary'], shared: true });
  rfb.scaleViewport = true; // fit the remote screen to this window, keeping its aspect ratio
  rfb.resizeSession = false; // the session's viewport is fixed at creation
  rfb.viewOnly = readonly;
  rfb.focusOnClick = !readonly;
  rfb.addEventListener('connect', () => {
    status.hidden = true;
    document.body.dataset.state = 'connected';
    if (!readonly) rfb.focus();
  });
  rfb.addEventListener('disconnect', async () => {
    let ended = false;
    try {
      const r = await fetch(statusUrl, { cache: 'no-store' });
      ended = !r.ok || (await r.json()).state !== 'active';
    } catch {
      /* network gone: treat as a lost connection */
    }
    if (ended) {
      show('This browser session has ended.');
      document.body.dataset.state = 'ended';
    } else show('The connection to the browser was lost.', { label: 'Reconnect', run: connect });
  });
  rfb.addEventListener('clipboard', (e) => {
    clipText.value = e.detail.text;
    navigator.clipboard?.writeText(e.detail.text).catch(() => undefined);
  });
}

document.getElementById('badge').hidden = !readonly;
document.getElementById('clip-toggle').addEventListener('click', () => (clip.hidden = !clip.hidden));
document.getElementById('clip-send').hidden = readonly;
clipText.readOnly = readonly;
document.getElementById('clip-send').addEventListener('click', () => {
  rfb?.clipboardPasteFrom(clipText.value);
  rfb?.focus();
});
// A paste into the view (Ctrl+V) first puts the local text on the remote clipboard.
document.addEventListener('paste', (e) => {
  if (readonly || !rfb || e.target === clipText) return;
  const text = e.clipboardData?.getData('text/plain');
  if (text) rfb.clipboardPasteFrom(text);
});

connect();
