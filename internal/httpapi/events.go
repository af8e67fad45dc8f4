package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/raster"
)

// GET /v1/jobs/{id}/events is a server-sent event stream of one job: an
// event named "job" each time its state, phase, pages or queue position
// changes, whose data is the job's JSON (as GET /v1/jobs/{id}) plus
// "queuePosition". The stream closes after the event of a terminal state.
//
// The events are read from the job's row, which the worker beats about once
// a second; the stream looks every EventPoll. Each event's id names the
// snapshot it shows (state, phase, pages, position), so a client that
// reconnects with Last-Event-ID is sent the current snapshot only when it
// differs from the last one it saw, and never loses the terminal event: a
// job that ended is always answered with its terminal event, unless
// Last-Event-ID says the client has it already, in which case the answer is
// 204, which tells an EventSource to stop reconnecting.
//
// Proxies close connections that stay silent; a comment line goes out every
// EventHeartbeat. A user may hold MaxEventStreams streams at once; one more
// is 429 too_many_streams, since each stream is a connection and a poll
// loop for as long as the job runs.

// Defaults of the event stream (Config.EventPoll, EventHeartbeat,
// MaxEventStreams).
const (
	DefaultEventPoll       = 250 * time.Millisecond
	DefaultEventHeartbeat  = 15 * time.Second
	DefaultMaxEventStreams = 8
)

// CodeTooManyStreams is the 429 of a user who holds MaxEventStreams event
// streams already.
const CodeTooManyStreams = "too_many_streams"

// errTooManyStreams answers a stream over the per-user bound.
var errTooManyStreams = errors.New("too many event streams")

// webAnswer maps the errors of the event stream and the page routes.
func webAnswer(err error) (httperr.Answer, bool) {
	switch {
	case errors.Is(err, errTooManyStreams):
		a := httperr.One(http.StatusTooManyRequests, limits.Problem{Source: limits.SourceService, Code: CodeTooManyStreams,
			Message: "you have too many job event streams open; close one or poll GET /v1/jobs/{id}"})
		a.RetryAfter = 5
		return a, true
	case errors.Is(err, jobs.ErrNoSuchPage):
		return httperr.One(http.StatusNotFound, limits.Problem{Source: limits.SourceRequest, Code: httperr.CodeNotFound,
			Message: "the result has no such page"}), true
	case errors.Is(err, raster.ErrBusy):
		// The drawing waited for a processor busier work had: not the
		// page's fault, and not remembered (jobs.Thumbnail).
		a := httperr.One(http.StatusTooManyRequests, limits.Problem{Source: limits.SourceService, Code: limits.CodeBusy,
			Message: "the server is too busy to draw the page now; retry later"})
		a.RetryAfter = 5
		return a, true
	case errors.Is(err, raster.ErrTooCostly):
		return httperr.One(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceService, Code: limits.CodeResource,
			Message: "the page is too costly to draw as a thumbnail; download the PDF"}), true
	}
	return httperr.Answer{}, false
}

// streamCounter bounds the event streams per tenant and user.
type streamCounter struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

// acquire counts one stream of key, or reports false when key holds max.
func (c *streamCounter) acquire(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	if c.n[key] >= c.max {
		return false
	}
	c.n[key]++
	return true
}

func (c *streamCounter) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// jobEvent is the data of one event.
type jobEvent struct {
	jobs.View
	// QueuePosition is the job's place in line while it is queued (1:
	// next), 0 otherwise.
	QueuePosition int `json:"queuePosition"`
}

// eventID names a snapshot of a job: equal ids mean nothing changed.
func eventID(j jobs.Job, position int) string {
	return fmt.Sprintf("%s.%s.%d.%d", j.State, j.Phase, j.Pages, position)
}

// jobEvents is GET /v1/jobs/{id}/events.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) {
	c, err := s.jobCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	job, err := s.cfg.Jobs.Get(ctx, c.tenant, r.PathValue("id"))
	if err == nil {
		// Another user's job is 404 here as on GET /v1/jobs/{id}
		// (issue 24: the stream checked the tenant only).
		err = c.mayRead(job)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	pos, err := s.cfg.Jobs.QueuePosition(ctx, job)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if job.Terminal() && last == eventID(job, pos) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	key := c.tenant + "\x00" + c.user
	if !s.streams.acquire(key) {
		s.writeError(w, r, errTooManyStreams)
		return
	}
	defer s.streams.release(key)
	s.stream(w, r, c, job, pos, last)
}

// stream sends the events of job, whose queue position is pos, to a
// client that saw the event last (its Last-Event-ID), until the job ends,
// the client leaves or reading the job fails (the client reconnects and
// resumes).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c caller, job jobs.Job, pos int, last string) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// The stream outlives the server's write timeout by design.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// A client that reconnects waits this long first (EventSource's retry).
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return
	}
	_ = rc.Flush()

	poll := time.NewTicker(s.cfg.EventPoll)
	defer poll.Stop()
	beat := time.NewTicker(s.cfg.EventHeartbeat)
	defer beat.Stop()
	for {
		if id := eventID(job, pos); id != last {
			if writeEvent(w, id, jobEvent{View: jobs.NewView(job), QueuePosition: pos}) != nil {
				return
			}
			_ = rc.Flush()
			last = id
		}
		if job.Terminal() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
			continue
		case <-poll.C:
		}
		var err error
		if job, pos, err = s.reloadJob(ctx, c.tenant, job, pos); err != nil {
			return
		}
	}
}

// reloadJob reads the job and its queue position again; on an error it
// logs it (unless the client left) and returns it.
func (s *Server) reloadJob(ctx context.Context, tenant string, job jobs.Job, pos int) (jobs.Job, int, error) {
	next, err := s.cfg.Jobs.Get(ctx, tenant, job.ID)
	if err == nil {
		var p int
		if p, err = s.cfg.Jobs.QueuePosition(ctx, next); err == nil {
			return next, p, nil
		}
	}
	if ctx.Err() == nil {
		s.log.ErrorContext(ctx, "job events: reload", "request_id", httperr.RequestID(ctx), "job", job.ID, "err", err)
	}
	return job, pos, err
}

// writeEvent writes one "job" event. The data is one line of JSON (the
// encoder escapes newlines inside strings), as SSE requires.
func writeEvent(w http.ResponseWriter, id string, ev jobEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %s\nevent: job\ndata: %s\n\n", id, data)
	return err
}

// waitTerminal polls job id of tenant until it ends or d passes, and
// returns it as last read.
func (s *Server) waitTerminal(ctx context.Context, tenant, id string, d time.Duration) (jobs.Job, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(s.cfg.EventPoll)
	defer tick.Stop()
	for {
		job, err := s.cfg.Jobs.Get(ctx, tenant, id)
		if err != nil || job.Terminal() {
			return job, err
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-deadline.C:
			return job, nil
		case <-tick.C:
		}
	}
}

// Thumbnail widths: ?width=N is rounded up to a multiple of
// thumbnailStep within [thumbnailStep, maxThumbnailWidth], so the drawings
// cached beside a result are a bounded set.
const (
	defaultThumbnailWidth = 300
	thumbnailStep         = 50
	maxThumbnailWidth     = 1600
)

// thumbnailWidth reads ?width=.
func thumbnailWidth(v string) (int, error) {
	if v == "" {
		return defaultThumbnailWidth, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxThumbnailWidth {
		return 0, httperr.BadRequest("width", fmt.Sprintf("width must be an integer from 1 to %d", maxThumbnailWidth))
	}
	return (n + thumbnailStep - 1) / thumbnailStep * thumbnailStep, nil
}

// jobPage is GET /v1/jobs/{id}/pages/{n}.png?width=N: page n of a
// succeeded job's result as a PNG, drawn in a sandboxed process and cached
// with the result (it expires with it). The reader is checked before
// anything is drawn: another user's job is 404 as its result is, and for
// an Outline job the reader must still be allowed to download the
// document. A drawing is work (issue 24): the reader is counted and the
// drawing holds a place in the preview pool, never a render slot
// (previewGate); a page drawn or refused before costs neither.
func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	c, err := s.jobCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Raster == nil {
		s.writeError(w, r, httperr.ErrNoEndpoint)
		return
	}
	num, ok := strings.CutSuffix(r.PathValue("page"), ".png")
	page, perr := strconv.Atoi(num)
	if !ok || perr != nil || page < 1 {
		s.writeError(w, r, httperr.ErrNoEndpoint)
		return
	}
	width, err := thumbnailWidth(r.URL.Query().Get("width"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	job, err := s.cfg.Jobs.Get(ctx, c.tenant, r.PathValue("id"))
	if err == nil {
		err = c.mayRead(job)
	}
	if err == nil && job.Source == jobs.SourceOutline {
		err = s.checkDownload(r, job.OutlineDocumentID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	png, job, err := s.cfg.Jobs.Thumbnail(ctx, c.tenant, job.ID, page, width, s.cfg.Raster, s.previewGate(c.identity))
	if err != nil {
		if errors.Is(err, jobs.ErrNotReady) {
			err = &notReadyJobError{state: job.State, err: err}
		}
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Content-Length", strconv.Itoa(len(png)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		// The status is sent: a failed write is a client gone, with no one to tell.
		_, _ = w.Write(png)
	}
}

// previewGate admits the drawing of a page preview for the reader id: in
// the preview pool of the capacity (worker.Capacity.Preview), which counts
// the reader against admission.perUser (429 user_limit: one user cannot
// run forty pdftoppm at once) and draws at most admission.previewSlots
// pages at once (FIFO queue, maxWait: 429 busy), never in a render slot:
// a preview is the least urgent work there is, and a render never waits
// for one (issue 24). The same on serve and gateway, which both draw
// previews.
func (s *Server) previewGate(id identity) jobs.Gate {
	return func(ctx context.Context, draw func(ctx context.Context) error) error {
		return s.cfg.Capacity.Preview(ctx, id.admissionKey(), draw)
	}
}

// browserWait is how long GET /render/{id} waits for a browser's job before
// it answers with the progress page instead of the PDF.
const browserWait = time.Second

// wantsHTML reports whether the client is a browser navigating to the
// address: it asks for HTML. curl and API clients do not, and keep the
// synchronous answer.
func wantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/html") {
			return true
		}
	}
	return false
}

// outlineBrowser is GET /render/{documentId} for a browser: the document
// is printed as a job (accepted as POST /v1/jobs would, as the reader of
// the cookie). When it is done within browserWait the PDF is the answer,
// as for any client; otherwise the browser gets a small page that follows
// the job and downloads the PDF when it is ready, instead of a connection
// that hangs for as long as TeX runs. Accepting the job fetches the
// document's images from Outline's storage, which may be slow: when that
// has not ended within browserWait, the page is sent at once and names
// its job (or why there is none) at its end (issue 25, item 7).
func (s *Server) outlineBrowser(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// Acceptance counts the reader as POST /v1/jobs does (guard.go).
	c, a, err := s.admitCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer a.Done()
	doc, err := s.outlineDocument(r, r.PathValue("documentId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	title := doc.Title
	if title == "" {
		title = "Untitled"
	}
	ctx := r.Context()
	// The fetch and the submission run beside the wait below; this
	// handler receives their end before it returns, whatever it answered.
	done := make(chan accepted, 1)
	go func() {
		in, err := s.outlineInput(r, a, doc)
		if err != nil {
			done <- accepted{err: err}
			return
		}
		in.Tenant, in.User = c.tenant, c.user
		job, _, err := s.cfg.Jobs.Submit(ctx, in)
		done <- accepted{job: job, err: err}
	}()
	timer := time.NewTimer(browserWait)
	defer timer.Stop()
	var acc accepted
	select {
	case acc = <-done:
	case <-timer.C:
		s.outlineBrowserLate(w, r, c, title, done)
		return
	}
	a.Done() // accepted: waiting for the job holds no count
	if acc.err != nil {
		s.writeError(w, r, acc.err)
		return
	}
	job := acc.job
	s.log.InfoContext(ctx, "outline browser job", "request_id", httperr.RequestID(ctx), "job", job.ID, "user", c.user, "tenant", c.tenant)
	job, err = s.waitTerminal(ctx, c.tenant, job.ID, max(0, browserWait-time.Since(start)))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if job.State == jobs.StateSucceeded {
		rc, job, err := s.cfg.Jobs.Result(ctx, c.tenant, job.ID)
		if err == nil {
			defer func() { _ = rc.Close() }() // read only: its Close has nothing to report
			s.writeResult(w, r, rc, job)
			return
		}
	}
	s.cfg.Web.Progress(w, r, job.ID, title)
}

// accepted is how the acceptance of a browser's Outline job ended.
type accepted struct {
	job jobs.Job
	err error
}

// outlineBrowserLate sends the progress page before the job is accepted
// and ends it with the job's id, or with the error that refused it, once
// done says. The status is 200 by then: a refusal shows on the page (its
// first problem's message) and in the log.
func (s *Server) outlineBrowserLate(w http.ResponseWriter, r *http.Request, c caller, title string, done <-chan accepted) {
	ctx := r.Context()
	end, err := s.cfg.Web.ProgressStart(w, r, title)
	acc := <-done
	if err != nil {
		// Nothing reached the browser: it gets the answer it would
		// have had without the page.
		if acc.err == nil {
			acc.err = err
		}
		s.writeError(w, r, acc.err)
		return
	}
	if acc.err != nil {
		ans := answerOf(acc.err)
		msg := "The document could not be printed."
		if len(ans.Problems) > 0 {
			msg = ans.Problems[0].Message
		}
		s.log.InfoContext(ctx, "outline browser job refused after the page", "request_id", httperr.RequestID(ctx), "status", ans.Status, "err", acc.err)
		if err := end("", msg); err != nil {
			s.log.InfoContext(ctx, "outline browser page", "request_id", httperr.RequestID(ctx), "err", err)
		}
		return
	}
	s.log.InfoContext(ctx, "outline browser job", "request_id", httperr.RequestID(ctx), "job", acc.job.ID, "user", c.user, "tenant", c.tenant, "page_first", true)
	if err := end(acc.job.ID, ""); err != nil {
		s.log.InfoContext(ctx, "outline browser page", "request_id", httperr.RequestID(ctx), "err", err)
	}
}
