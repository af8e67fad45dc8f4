package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// The bounds of a request around the pipeline's own (issue 10): who may
// hold a connection, for how long, and what a request may cost before it
// holds a slot.
//
//   - A request that is refused before its body was read (401, 429
//     user_limit or quota, 415, a declared length over the limit) is
//     answered with Connection: close and its body is never read: net/http
//     would otherwise read up to 256 KiB of it, as slowly as the client
//     sends it, before the answer goes out.
//   - The per-user count (admission Enter) is taken before the body is
//     read, so one user holds at most admission.perUser connections that
//     upload, check, fetch or render, and the body itself must arrive
//     within BodyTimeout.
//   - The cheap checks (Markdown parse, Binding, math) run within
//     CheckBudget, under the user's count, and at most checkSlots of
//     them at once for all users together (a check that finds no place
//     within its budget is refused 429 busy).
//   - An answer must be taken by the client within WriteTimeout from its
//     first byte.

// DefaultCheckBudget bounds the cheap checks of one request: parsing a
// 1 MiB document takes well under a second, so a document that needs
// longer is hostile or pathological.
const DefaultCheckBudget = 5 * time.Second

// DefaultWriteTimeout bounds how long a client may take to receive an
// answer (a 50 MiB PDF at 1 MB/s fits).
const DefaultWriteTimeout = 2 * time.Minute

// checkSlots is how many cheap checks may run at once with procs Go
// processors: one fewer than procs (at least one), so that however many
// hostile documents are being parsed, one processor is left for the
// server's other goroutines (accepting connections, /healthz, refusals)
// and none of them waits for the scheduler to preempt a parse.
func checkSlots(procs int) int { return max(procs-1, 1) }

// admissionKey is what the per-user count is keyed on: the tenant and the
// user together, since a user name is only unique within its tenant
// (acme/alice and beta/alice are two people). The NUL byte cannot occur in
// a configured or Outline-confirmed name.
func (id identity) admissionKey() string { return id.tenant + "\x00" + id.user }

// admitted is a request counted against its user: the admission ticket and
// what Done should record. done gives the ticket back unless the check
// stage handed it over to a check that outlives the request (see check).
type admitted struct {
	t        *admission.Ticket
	took     time.Duration
	detached bool
}

func (a *admitted) done() {
	if !a.detached {
		a.t.Done(a.took)
	}
}

// enter counts the request against its user, before its body is read.
func (s *Server) enter(id identity) (*admitted, error) {
	t, err := s.cfg.Admission.Enter(id.admissionKey())
	if err != nil {
		s.refused(err)
		return nil, err
	}
	return &admitted{t: t}, nil
}

// check runs the pipeline's cheap checks within the check budget. Parsing
// is pure CPU and cannot be stopped from outside, so when the budget (or
// the client) runs out first the request is answered at once and the
// check goes on in its goroutine, which then owns the user's ticket and
// gives it back when the parse returns: the user stays counted for as long
// as their document costs CPU, so one user can never run more checks at
// once than admission.perUser allows.
func (s *Server) check(ctx context.Context, a *admitted, req render.Request) (*render.Checked, error) {
	type result struct {
		c   *render.Checked
		err error
	}
	timer := time.NewTimer(s.cfg.CheckBudget)
	defer timer.Stop()
	// Checks of all users together take at most cap(s.checks) CPUs; a
	// check that finds no place within its budget is refused busy. A free
	// place is taken first, before the budget is looked at.
	select {
	case s.checks <- struct{}{}:
	default:
		select {
		case s.checks <- struct{}{}:
		case <-timer.C:
			s.obs.Refused(limits.CodeBusy)
			return nil, &admission.Refusal{Code: limits.CodeBusy, RetryAfter: time.Second}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ch := make(chan result, 1)
	go func() { // ends when Check returns; owns a.t once detached
		defer func() { <-s.checks }()
		c, err := s.cfg.Pipeline.Check(req)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	a.detached = true
	t := a.t
	go func() { // ends when the check above does
		<-ch
		t.Done(0)
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, limits.Resource(fmt.Sprintf("its Markdown takes longer than %s to read", s.cfg.CheckBudget))
}

// trackedBody records whether a handler started reading the request body.
type trackedBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

type bodyKey struct{}

// trackBody wraps r's body so that writeError knows whether it was read.
func trackBody(r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody {
		return r
	}
	tb := &trackedBody{ReadCloser: r.Body}
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, tb))
	r.Body = tb
	return r
}

// closeUnread makes sure an answer given before the body was read is not
// preceded by reading it: the connection closes after the answer, and
// net/http's drain of the unread body fails at once on a deadline in the
// past instead of waiting for a client that trickles.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	tb, _ := r.Context().Value(bodyKey{}).(*trackedBody)
	if tb == nil || tb.read.Load() {
		return
	}
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// enterStatus counts a /status check: under the reader's tenant and user,
// apart from their renders.
func (s *Server) enterStatus(id identity) (*admitted, error) {
	id.user += "\x00status"
	return s.enter(id)
}
