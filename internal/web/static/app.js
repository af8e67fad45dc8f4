// outprint's page: print a document as a job, watch it, preview and
// download it, list one's jobs. It only calls the public API. With API keys
// configured the key is kept in sessionStorage (this tab only, never in a
// URL or localStorage) and sent as a Bearer token; every request is made
// with fetch so that the key can go along, the event stream included.
'use strict';

const $ = (id) => document.getElementById(id);
const KEY = 'outprint.apiKey';

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  const key = sessionStorage.getItem(KEY);
  if (key) h['Authorization'] = 'Bearer ' + key;
  return h;
}

function announce(text) {
  // Re-set so that the same text is announced again.
  const el = $('announce');
  el.textContent = '';
  setTimeout(() => { el.textContent = text; }, 30);
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

// api calls the API; a 401 asks for a key and rejects.
async function api(path, opts) {
  opts = opts || {};
  const res = await fetch(path, Object.assign({}, opts, { headers: authHeaders(opts.headers), cache: 'no-store' }));
  if (res.status === 401) {
    askKey();
    throw new Error('An API key is needed.');
  }
  return res;
}

async function errorsOf(res) {
  try {
    const body = await res.json();
    if (body && Array.isArray(body.errors)) return body.errors;
  } catch (e) { /* not JSON */ }
  return [{ message: 'The server answered ' + res.status + '.', line: null }];
}

// ---- API key ----
function askKey() {
  $('key-section').hidden = false;
  $('key').focus();
  announce('This server needs an API key.');
}

$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const v = $('key').value.trim();
  if (!v) return;
  sessionStorage.setItem(KEY, v);
  $('key').value = '';
  $('key-section').hidden = true;
  announce('Key saved for this tab.');
  loadJobs();
  route();
});

// ---- choosing a document ----
const IMAGE = /\.(png|jpe?g|svg)$/i;
const MD = /\.(md|markdown|txt)$/i;
// Office documents go to the server as they are (the part file of a job):
// it recognises them by their content, so the name only picks the route.
const OFFICE = /\.(docx|docm|doc|odt|rtf|xlsx|xlsm|xls|ods|csv|pptx|ppt|odp)$/i;

// picked returns {doc: File|null, office: File|null, images: [{file, path}]}.
function picked() {
  const out = { doc: null, office: null, images: [] };
  const add = (f, rel) => {
    if (OFFICE.test(f.name) && !out.office) { out.office = f; return; }
    if (MD.test(f.name) && !out.doc) { out.doc = f; return; }
    if (IMAGE.test(f.name)) out.images.push({ file: f, path: rel });
  };
  for (const f of $('files').files) add(f, f.name);
  for (const f of $('folder').files) {
    // "folder/images/a.png" → "images/a.png": paths relative to the folder.
    const rel = (f.webkitRelativePath || f.name).split('/').slice(1).join('/') || f.name;
    add(f, rel);
  }
  return out;
}

// imageRefs lists the relative image paths the Markdown uses.
function imageRefs(md) {
  const refs = new Set();
  const re = /!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+["'(][^)]*)?\)/g;
  let m;
  while ((m = re.exec(md)) !== null) {
    const p = m[1];
    if (!/^[a-z][a-z0-9+.-]*:/i.test(p)) refs.add(p.replace(/^\.\//, ''));
  }
  return [...refs];
}

function describeChoice() {
  const p = picked();
  const parts = [];
  if (p.office) parts.push('Office document: ' + p.office.name);
  if (p.doc && !p.office) parts.push('Document: ' + p.doc.name);
  if (p.images.length) parts.push(p.images.length + ' image' + (p.images.length > 1 ? 's' : ''));
  $('chosen').textContent = parts.join(' · ');
}
$('files').addEventListener('change', describeChoice);
$('folder').addEventListener('change', describeChoice);

function metadata() {
  const m = {};
  for (const name of ['title', 'subtitle', 'author', 'version', 'date', 'language', 'paper']) {
    const v = $('print-form').elements[name].value.trim();
    if (v) m[name] = v;
  }
  const toc = $('m-toc').value;
  if (toc) m.toc = toc === 'true';
  if ($('m-number').checked) m.numberSections = true;
  return m;
}

// ---- submitting ----
let sourceText = '';

$('print-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const p = picked();
  if (p.office) {
    await submitOffice(p.office);
    return;
  }
  let text, name;
  if (p.doc) {
    text = await p.doc.text();
    name = p.doc.name;
  } else {
    text = $('markdown').value;
    name = 'document.md';
  }
  if (!text.trim()) {
    showProblems([{ message: 'Choose a Markdown file or paste some Markdown.', line: null }], '');
    $('markdown').focus();
    return;
  }
  sourceText = text;
  const form = new FormData();
  form.append('document', new Blob([text], { type: 'text/markdown' }), name);
  const meta = metadata();
  if (Object.keys(meta).length) form.append('metadata', new Blob([JSON.stringify(meta)], { type: 'application/json' }), 'metadata.json');
  // Each image goes under the path the Markdown uses for it: a file chosen
  // on its own is matched by its name.
  const refs = imageRefs(text);
  const sent = new Set();
  for (const img of p.images) {
    let path = img.path;
    if (!refs.includes(path)) {
      const byName = refs.find((r) => r.split('/').pop() === img.file.name);
      if (byName) path = byName;
    }
    if (sent.has(path)) continue;
    sent.add(path);
    form.append('asset', img.file, path);
  }
  $('submit').disabled = true;
  announce('Sending the document…');
  try {
    const res = await api('v1/jobs', { method: 'POST', body: form });
    if (res.status === 202 || res.status === 200) {
      const job = await res.json();
      $('problems').hidden = true;
      location.hash = '#job=' + job.id;
      loadJobs();
      return;
    }
    showProblems(await errorsOf(res), text);
  } catch (err) {
    showProblems([{ message: String(err.message || err), line: null }], text);
  } finally {
    $('submit').disabled = false;
  }
});

// submitOffice sends an Office document as a job: the part file first (the
// server tells an Office job by its first part), then the paper, the only
// layout choice of the form LibreOffice honours.
async function submitOffice(file) {
  const form = new FormData();
  form.append('file', file, file.name);
  const paper = $('m-paper').value;
  if (paper) form.append('metadata', new Blob([JSON.stringify({ paper })], { type: 'application/json' }), 'metadata.json');
  sourceText = '';
  $('submit').disabled = true;
  announce('Sending the document…');
  try {
    const res = await api('v1/jobs', { method: 'POST', body: form });
    if (res.status === 202 || res.status === 200) {
      const job = await res.json();
      $('problems').hidden = true;
      location.hash = '#job=' + job.id;
      loadJobs();
      return;
    }
    showProblems(await errorsOf(res), '');
  } catch (err) {
    showProblems([{ message: String(err.message || err), line: null }], '');
  } finally {
    $('submit').disabled = false;
  }
}

function showProblems(list, text) {
  const ul = $('problem-list');
  ul.replaceChildren();
  for (const p of list) {
    const li = document.createElement('li');
    if (p.line) {
      const a = document.createElement('a');
      a.href = '#src-line-' + p.line;
      a.textContent = 'Line ' + p.line;
      a.addEventListener('click', (ev) => { ev.preventDefault(); showLine(p.line); });
      li.append(a, ': ');
    } else if (p.field) {
      li.append(p.field + ': ');
    }
    li.append(p.message || p.code || 'error');
    ul.append(li);
  }
  const src = $('source');
  src.replaceChildren();
  const lines = text ? text.split('\n') : [];
  lines.forEach((line, i) => {
    const li = document.createElement('li');
    li.id = 'src-line-' + (i + 1);
    li.textContent = line || ' ';
    src.append(li);
  });
  $('source-title').parentElement.hidden = lines.length === 0;
  $('problems').hidden = false;
  announce(list.length + ' problem' + (list.length === 1 ? '' : 's') + ' to fix.');
  ul.querySelector('a') ? ul.querySelector('a').focus() : $('problems-title').scrollIntoView();
}

function showLine(n) {
  for (const li of document.querySelectorAll('.source li.hit')) li.classList.remove('hit');
  const li = $('src-line-' + n);
  if (!li) return;
  li.classList.add('hit');
  li.tabIndex = -1;
  li.scrollIntoView({ block: 'center' });
  li.focus();
}

// ---- watching a job ----
let watching = null; // {id, abort}

function route() {
  const m = /^#job=([0-9a-f-]{36})$/.exec(location.hash);
  if (m) watch(m[1]);
}
window.addEventListener('hashchange', route);

const STATES = { queued: 'Queued', running: 'Running', succeeded: 'Succeeded', failed: 'Failed', cancelled: 'Cancelled' };
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

function watch(id) {
  if (watching && watching.id === id) return;
  if (watching) watching.abort.abort();
  const ctl = new AbortController();
  watching = { id, abort: ctl };
  $('job').hidden = false;
  // Job ids are UUIDv7: their first characters are the time, shared by
  // jobs made together, their last ones random.
  $('job-title').textContent = 'Job ' + id.slice(-8);
  $('thumbs').replaceChildren();
  $('preview-title').hidden = true;
  $('download').hidden = true;
  $('cancel').hidden = false;
  $('cancel').disabled = false;
  $('j-error').hidden = true;
  $('j-state').textContent = '…';
  $('job').scrollIntoView();
  let lastState = '';
  streamEvents(id, ctl.signal, (ev) => {
    show(ev);
    if (ev.state !== lastState) {
      lastState = ev.state;
      announce('Job ' + (STATES[ev.state] || ev.state).toLowerCase() + '.');
    }
    if (TERMINAL.has(ev.state)) finished(ev);
  });
}

function show(ev) {
  // The document's title tells jobs made a minute apart from each other.
  if (ev.title) $('job-title').textContent = ev.title;
  const st = $('j-state');
  st.textContent = STATES[ev.state] || ev.state;
  st.className = 'state-' + ev.state;
  $('j-phase').textContent = (ev.progress && ev.progress.phase) || '—';
  $('j-pages').textContent = String((ev.progress && ev.progress.pages) || 0);
  $('j-queue-row').hidden = ev.state !== 'queued';
  $('j-queue').textContent = ev.queuePosition ? String(ev.queuePosition) : '—';
  const bar = $('j-progress');
  if (TERMINAL.has(ev.state)) { bar.max = 1; bar.value = 1; } else { bar.removeAttribute('value'); }
  $('cancel').hidden = TERMINAL.has(ev.state);
}

function finished(ev) {
  $('cancel').hidden = true;
  if (ev.state === 'failed' && ev.error) {
    $('j-error').textContent = ev.error.message + ' (' + ev.error.code + ')';
    $('j-error').hidden = false;
  }
  if (ev.state === 'succeeded') {
    $('download').hidden = false;
    thumbnails(ev.id, (ev.progress && ev.progress.pages) || 0);
  }
  loadJobs();
}

// streamEvents reads GET /v1/jobs/{id}/events with fetch (an EventSource
// cannot send the key) and reconnects with Last-Event-ID until the job
// ended.
async function streamEvents(id, signal, onEvent) {
  let last = '';
  for (;;) {
    if (signal.aborted) return;
    let res;
    try {
      const h = { Accept: 'text/event-stream' };
      if (last) h['Last-Event-ID'] = last;
      res = await api('v1/jobs/' + id + '/events', { headers: h, signal });
    } catch (e) {
      if (signal.aborted) return;
      await sleep(1000);
      continue;
    }
    if (res.status === 204) return;
    if (!res.ok) {
      const errs = await errorsOf(res);
      if (res.status === 429 || res.status >= 500) {
        await sleep(1000 * (Number(res.headers.get('Retry-After')) || 2));
        continue;
      }
      $('j-error').textContent = errs.map((x) => x.message).join(' ');
      $('j-error').hidden = false;
      return;
    }
    let ended = false;
    try {
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let evID = null, data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('id:')) evID = line.slice(3).trim();
            else if (line.startsWith('data:')) data += line.slice(5).trim();
          }
          if (!data) continue;
          if (evID !== null) last = evID;
          const ev = JSON.parse(data);
          onEvent(ev);
          if (TERMINAL.has(ev.state)) ended = true;
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    if (ended) return;
    await sleep(1000);
  }
}

$('cancel').addEventListener('click', async () => {
  if (!watching) return;
  $('cancel').disabled = true;
  announce('Cancelling…');
  try {
    const res = await api('v1/jobs/' + watching.id, { method: 'DELETE' });
    if (!res.ok) announce((await errorsOf(res)).map((x) => x.message).join(' '));
  } catch (e) { announce(String(e.message || e)); }
});

async function thumbnails(id, pages) {
  const ul = $('thumbs');
  ul.replaceChildren();
  const n = Math.min(pages, 24);
  $('preview-title').hidden = n === 0;
  for (let p = 1; p <= n; p++) {
    const li = document.createElement('li');
    const img = document.createElement('img');
    img.alt = 'Page ' + p;
    img.width = 150;
    li.append(img, 'Page ' + p);
    ul.append(li);
    try {
      const res = await api('v1/jobs/' + id + '/pages/' + p + '.png?width=300');
      if (!res.ok) { img.alt = 'Page ' + p + ' (no preview)'; continue; }
      img.src = URL.createObjectURL(await res.blob());
    } catch (e) { img.alt = 'Page ' + p + ' (no preview)'; }
  }
  if (pages > n) {
    const li = document.createElement('li');
    li.textContent = '… and ' + (pages - n) + ' more pages';
    ul.append(li);
  }
}

function fileName(res) {
  const cd = res.headers.get('Content-Disposition') || '';
  const star = /filename\*=UTF-8''([^;]+)/i.exec(cd);
  if (star) { try { return decodeURIComponent(star[1]); } catch (e) { /* fall through */ } }
  const plain = /filename="([^"]+)"/i.exec(cd);
  return plain ? plain[1] : 'document.pdf';
}

$('download').addEventListener('click', async () => {
  if (!watching) return;
  try {
    const res = await api('v1/jobs/' + watching.id + '/result');
    if (!res.ok) { announce((await errorsOf(res)).map((x) => x.message).join(' ')); return; }
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement('a');
    a.href = url;
    a.download = fileName(res);
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    announce('Download started.');
  } catch (e) { announce(String(e.message || e)); }
});

// ---- your jobs ----
async function loadJobs() {
  let res;
  try { res = await api('v1/jobs?limit=20'); } catch (e) { return; }
  if (!res.ok) return;
  const body = await res.json();
  const rows = $('job-rows');
  rows.replaceChildren();
  for (const j of body.jobs || []) {
    const tr = document.createElement('tr');
    const title = document.createElement('td');
    title.textContent = j.title || '—';
    const created = document.createElement('td');
    created.textContent = new Date(j.createdAt).toLocaleString();
    const state = document.createElement('td');
    state.textContent = STATES[j.state] || j.state;
    state.className = 'state-' + j.state;
    const pages = document.createElement('td');
    pages.textContent = String((j.progress && j.progress.pages) || 0);
    const link = document.createElement('td');
    const a = document.createElement('a');
    a.href = '#job=' + j.id;
    a.textContent = 'Open ' + j.id.slice(-8);
    link.append(a);
    tr.append(title, created, state, pages, link);
    rows.append(tr);
  }
  $('no-jobs').hidden = (body.jobs || []).length > 0;
}
$('refresh').addEventListener('click', loadJobs);

loadJobs();
route();

// ---- forms ----
// A PDF form's fields become an HTML form; its values go back with the PDF
// as a job (POST /v1/jobs with parts pdf and values), watched like any job.
let formFields = [];

function formProblems(list) {
  const ul = $('form-problem-list');
  ul.replaceChildren();
  for (const p of list) {
    const li = document.createElement('li');
    li.textContent = (p.field ? p.field + ': ' : '') + (p.message || p.code || 'error');
    ul.append(li);
  }
  $('form-problems').hidden = list.length === 0;
  if (list.length) announce(list.length + ' problem' + (list.length === 1 ? '' : 's') + ' with the form.');
}

function fieldControl(f, i) {
  const id = 'ff-' + i;
  const wrap = document.createElement('div');
  wrap.className = 'field';
  const label = document.createElement('label');
  label.htmlFor = id;
  label.textContent = f.name + (f.required ? ' (required)' : '');
  let input;
  const opts = f.options || [];
  const labels = f.labels || opts;
  if (f.type === 'checkbox' && opts.length <= 1) {
    wrap.className = 'field check';
    input = document.createElement('input');
    input.type = 'checkbox';
    input.checked = f.value === true;
    wrap.append(input, label);
  } else if (f.type === 'radio' || f.type === 'choice' || f.type === 'checkbox') {
    input = document.createElement('select');
    if (f.multiSelect) input.multiple = true;
    const none = document.createElement('option');
    none.value = '';
    none.textContent = '—';
    if (!f.multiSelect) input.append(none);
    opts.forEach((o, k) => {
      const op = document.createElement('option');
      op.value = o;
      op.textContent = labels[k] || o;
      op.selected = Array.isArray(f.value) ? f.value.includes(o) : f.value === o;
      input.append(op);
    });
    wrap.append(label, input);
  } else {
    input = document.createElement(f.multiline ? 'textarea' : 'input');
    if (f.maxLen) input.maxLength = f.maxLen;
    input.value = typeof f.value === 'string' ? f.value : '';
    if (f.type === 'signature') {
      input.disabled = true;
      input.placeholder = 'Signature fields cannot be filled here';
    }
    wrap.append(label, input);
  }
  input.id = id;
  if (f.readOnly) input.disabled = true;
  return wrap;
}

$('form-pick').addEventListener('submit', async (e) => {
  e.preventDefault();
  const file = $('form-pdf').files[0];
  if (!file) { formProblems([{ message: 'Choose a PDF form first.' }]); $('form-pdf').focus(); return; }
  const body = new FormData();
  body.append('pdf', file, file.name);
  $('form-read').disabled = true;
  try {
    const res = await api('v1/forms/fields', { method: 'POST', body });
    if (!res.ok) { formProblems(await errorsOf(res)); return; }
    formFields = (await res.json()).fields || [];
    const box = $('form-fields');
    box.replaceChildren(...formFields.map(fieldControl));
    $('form-summary').textContent = formFields.length
      ? formFields.length + ' field' + (formFields.length === 1 ? '' : 's') + ' in ' + file.name + '.'
      : file.name + ' has no fields to fill; it comes back flattened as it is.';
    $('form-fill').hidden = false;
    formProblems([]);
    announce('Read ' + formFields.length + ' fields.');
    const first = box.querySelector('input:not([disabled]),select:not([disabled]),textarea:not([disabled])');
    if (first) first.focus();
  } catch (err) {
    formProblems([{ message: String(err.message || err) }]);
  } finally {
    $('form-read').disabled = false;
  }
});

$('form-fill').addEventListener('submit', async (e) => {
  e.preventDefault();
  const file = $('form-pdf').files[0];
  if (!file) return;
  const values = {};
  formFields.forEach((f, i) => {
    const el = $('ff-' + i);
    if (!el || el.disabled) return;
    if (el.type === 'checkbox') { if (el.checked !== (f.value === true)) values[f.name] = el.checked; return; }
    if (el.multiple) {
      const sel = [...el.selectedOptions].map((o) => o.value);
      if (JSON.stringify(sel) !== JSON.stringify(f.value || [])) values[f.name] = sel;
      return;
    }
    if (el.value !== (typeof f.value === 'string' ? f.value : '')) {
      if (el.value !== '' || f.type === 'text') values[f.name] = el.value;
    }
  });
  const body = new FormData();
  body.append('pdf', file, file.name);
  body.append('values', new Blob([JSON.stringify(values)], { type: 'application/json' }), 'values.json');
  $('form-submit').disabled = true;
  try {
    const res = await api('v1/jobs', { method: 'POST', body });
    if (res.status === 202 || res.status === 200) {
      const job = await res.json();
      formProblems([]);
      location.hash = '#job=' + job.id;
      loadJobs();
      return;
    }
    formProblems(await errorsOf(res));
  } catch (err) {
    formProblems([{ message: String(err.message || err) }]);
  } finally {
    $('form-submit').disabled = false;
  }
});
