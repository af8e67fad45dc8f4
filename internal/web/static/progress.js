// The page an Outline reader's browser gets while a document prints: it
// follows the job's event stream (the reader's cookie goes along) and
// downloads the PDF when the job succeeded.
'use strict';

const main = document.getElementById('main');
// A page sent before its job was accepted (the document's images were
// still being fetched) names the job, or the error, at its end: this
// script runs once the whole page has arrived (defer).
const late = document.getElementById('late');
const id = main.dataset.job || (late ? late.dataset.job : '');
const status = document.getElementById('status');
const bar = document.getElementById('bar');
const result = document.getElementById('result');
const error = document.getElementById('error');

function say(text) { status.textContent = text; }

function done(ev) {
  bar.max = 1;
  bar.value = 1;
  if (ev.state === 'succeeded') {
    say('Ready: ' + ev.progress.pages + ' page' + (ev.progress.pages === 1 ? '' : 's') + '. The download starts now.');
    result.hidden = false;
    location.assign(result.href);
  } else if (ev.state === 'failed') {
    say('The document could not be printed.');
    error.textContent = ev.error ? ev.error.message : 'Unknown error';
    error.hidden = false;
  } else {
    say('The print was cancelled.');
  }
}

function show(ev) {
  if (ev.state === 'queued') say(ev.queuePosition > 1 ? 'Waiting: ' + ev.queuePosition + ' in line.' : 'Starting…');
  else if (ev.state === 'running') say('Typesetting' + (ev.progress.pages ? ': page ' + ev.progress.pages : '…'));
}

// follow watches the job's events. EventSource resumes with Last-Event-ID
// by itself after a drop, and stops when the server answers 204 (the job
// ended and we saw its end).
function follow() {
  result.href = '../v1/jobs/' + id + '/result';
  const es = new EventSource('../v1/jobs/' + id + '/events');
  es.addEventListener('job', (e) => {
    const ev = JSON.parse(e.data);
    show(ev);
    if (ev.state === 'succeeded' || ev.state === 'failed' || ev.state === 'cancelled') {
      es.close();
      done(ev);
    }
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) say('Lost the connection; reload the page.'); };
}

if (id) {
  follow();
} else {
  bar.max = 1;
  bar.value = 1;
  say('The document could not be printed.');
  error.textContent = (late && late.dataset.error) || 'The page ended before the print started; reload the page.';
  error.hidden = false;
}
