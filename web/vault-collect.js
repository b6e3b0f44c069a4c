// The collection page: shows the fields of one vault item and posts what a person types.
// The token in the page URL is the only credential; no value is ever read back.
const token = new URLSearchParams(location.search).get('jwt') ?? '';
const q = `?jwt=${encodeURIComponent(token)}`;
const $ = (id) => document.getElementById(id);

const INPUT = {
  text: { type: 'text' },
  email: { type: 'email', autocomplete: 'off' },
  password: { type: 'password', autocomplete: 'new-password' },
  totp: { type: 'password', autocomplete: 'off', hint: 'The TOTP secret (base32, as shown under the QR code) or the otpauth:// URI.' },
  tel: { type: 'tel' },
  card_number: { type: 'text', inputmode: 'numeric', autocomplete: 'off' },
  exp_month: { type: 'text', inputmode: 'numeric', placeholder: 'MM' },
  exp_year: { type: 'text', inputmode: 'numeric', placeholder: 'YYYY' },
  cvc: { type: 'password', inputmode: 'numeric', autocomplete: 'off' },
  secret: { type: 'password', autocomplete: 'off' },
  note: { textarea: true },
};

function status(text, cls) {
  $('status').textContent = text;
  $('status').className = cls ?? '';
}

function problems(list) {
  const ul = $('problems');
  ul.replaceChildren(...list.map((m) => Object.assign(document.createElement('li'), { textContent: m })));
}

async function load() {
  const r = await fetch(`vault-collect/form${q}`, { cache: 'no-store' });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    $('what').textContent = body.message ?? `This link cannot be used (${r.status}).`;
    return;
  }
  $('what').textContent = `Item "${body.item.key}" (${body.item.type.replace('_', ' ')}) in vault "${body.vault}". This link expires at ${new Date(body.expires_at).toLocaleString()}.`;
  const box = $('fields');
  let anyKept = false;
  for (const f of body.fields) {
    const spec = INPUT[f.kind] ?? INPUT.text;
    const id = `f-${f.name}`;
    const label = Object.assign(document.createElement('label'), { htmlFor: id, textContent: f.label });
    if (!f.required || f.has_value) {
      const opt = Object.assign(document.createElement('span'), { className: 'opt', textContent: f.has_value ? ' (has a value; empty keeps it)' : ' (optional)' });
      label.append(opt);
    }
    anyKept ||= f.has_value;
    const input = document.createElement(spec.textarea ? 'textarea' : 'input');
    input.id = id;
    input.name = f.name;
    input.spellcheck = false;
    input.setAttribute('autocomplete', spec.autocomplete ?? 'off');
    if (!spec.textarea) input.type = spec.type;
    if (spec.inputmode) input.setAttribute('inputmode', spec.inputmode);
    if (spec.placeholder) input.placeholder = spec.placeholder;
    if (f.required && !f.has_value) input.required = true;
    box.append(label, input);
    if (spec.hint) box.append(Object.assign(document.createElement('p'), { className: 'hint', textContent: spec.hint }));
  }
  $('keep-hint').hidden = !anyKept;
  $('form').hidden = false;
}

$('form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  problems([]);
  const values = {};
  for (const el of $('form').querySelectorAll('input, textarea')) if (el.value !== '') values[el.name] = el.value;
  $('save').disabled = true;
  status('Saving…');
  try {
    const r = await fetch(`vault-collect/submit${q}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ values }), cache: 'no-store' });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      status(body.message ?? `Not saved (${r.status}).`, 'err');
      problems((body.details ?? []).map((d) => d.message));
      $('save').disabled = false;
      return;
    }
    for (const el of $('form').querySelectorAll('input, textarea')) el.value = '';
    $('form').hidden = true;
    status('Saved. The values are stored encrypted; you can close this page.', 'ok');
  } catch {
    status('Could not reach browserd; try again.', 'err');
    $('save').disabled = false;
  }
});

load().catch(() => {
  $('what').textContent = 'Could not load this page; try the link again.';
});
