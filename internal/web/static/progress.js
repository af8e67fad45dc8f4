// The page an Outline reader's browser gets while a document prints: it
// follows the job's event stream (the reader's cookie goes along) and
// downloads the PDF when the job succeeded.
'use strict';

const main = document.getElementById('main');
const id = main.dataset.job;
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

// EventSource resumes with Last-Event-ID by itself after a drop, and stops
// when the server answers 204 (the job ended and we saw its end).
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
