package httpapi

import (
	"net/http"
	"time"

	"github.com/outprint/outprint/internal/worker"
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
//     worker.Config.CheckBudget, under the user's count, and at most
//     CheckSlots of them at once for all users together (a check that
//     finds no place within its budget is refused 429 busy).
//   - An answer must be taken by the client within WriteTimeout from its
//     first byte.

// DefaultWriteTimeout bounds how long a client may take to receive an
// answer (a 50 MiB PDF at 1 MB/s fits).
const DefaultWriteTimeout = 2 * time.Minute

// admissionKey is what the per-user count is keyed on: the tenant and the
// user together, since a user name is only unique within its tenant
// (acme/alice and beta/alice are two people). The NUL byte cannot occur in
// a configured or Outline-confirmed name.
func (id identity) admissionKey() string { return id.tenant + "\x00" + id.user }

// enter counts the request against its user, before its body is read
// (worker.Capacity: the rest of SPEC §4's order is the ticket's).
func (s *Server) enter(id identity) (*worker.Ticket, error) {
	return s.cfg.Capacity.Enter(id.admissionKey())
}

// admit authenticates the request and counts it against its user, before
// its body is read: the first two steps of SPEC §4 that every synchronous
// route takes. The caller ends the ticket.
func (s *Server) admit(r *http.Request) (identity, *worker.Ticket, error) {
	id, err := s.authenticate(r)
	if err != nil {
		return identity{}, nil, err
	}
	t, err := s.enter(id)
	return id, t, err
}

// admitCaller is admit for the job routes, whose caller may also be an
// Outline reader (jobCaller).
func (s *Server) admitCaller(r *http.Request) (caller, *worker.Ticket, error) {
	c, err := s.jobCaller(r)
	if err != nil {
		return caller{}, nil, err
	}
	t, err := s.enter(c.identity)
	return c, t, err
}

// enterStatus counts a /status check: under the reader's tenant and user,
// apart from their renders.
func (s *Server) enterStatus(id identity) (*worker.Ticket, error) {
	id.user += "\x00status"
	return s.enter(id)
}
