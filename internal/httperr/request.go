package httperr

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outprint/outprint/internal/admission"
)

// Writer is what the handlers of one listener share to answer: its log,
// the mapper of its own errors, its metrics of requests and the bound on
// sending an answer. The zero value logs nothing and maps nothing but the
// errors Of knows.
type Writer struct {
	// Logger receives one line per request and every failure, with the
	// request id (nil: discard).
	Logger *slog.Logger
	// Map gives the answers of the listener's own errors (Of's mappers).
	Map Mapper
	// Observe, when set, records the time to answer one request; route
	// is the pattern that served it, or "other" (a bounded set: never the
	// client's path).
	Observe func(route string, status int, d time.Duration)
	// WriteTimeout bounds sending one answer, from its first byte; 0 for
	// none. A client that stops reading must not hold the connection (and
	// a PDF in memory). It starts at the first byte, not as
	// http.Server.WriteTimeout does, which would count the render too.
	WriteTimeout time.Duration

	// quiet holds, per quiet path, the refusal last logged there; a
	// success there forgets it. A probe that polls a server that is not
	// ready yet (make run, a load balancer, a gateway) logs why once, not
	// once a poll.
	quiet sync.Map // path → string
}

func (wr *Writer) log() *slog.Logger {
	if wr.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return wr.Logger
}

// Error answers r with err's error list (Of with the Writer's mapper) and
// logs err with its whole chain. A client that went away gets nothing; a
// request stopped by a shutdown is told so, whatever error the stopped
// render returned; a refusal given before the body was read closes the
// connection instead of reading the body first.
func (wr *Writer) Error(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	log := wr.log()
	// A body read that timed out cancels the request's context in
	// net/http as a vanished client would, but this client is still there
	// and should hear why.
	if ClientGone(ctx) && !errors.Is(err, ErrBodyTimeout) {
		log.InfoContext(ctx, "client gone", "request_id", RequestID(ctx), "err", err)
		return
	}
	closeUnread(w, r)
	if ShuttingDown(ctx) {
		// The grace period ran out and the render was stopped; the error
		// it returned says "cancelled", the client should hear why.
		err = fmt.Errorf("%w: %w", admission.ErrClosed, err)
	}
	a := Of(err, wr.Map)
	refusal := a.Status < 500 || a.Status == http.StatusServiceUnavailable
	if refusal && quietPaths[r.URL.Path] {
		// A probe polls: its refusal is logged when its cause changes.
		if prev, ok := wr.quiet.Swap(r.URL.Path, err.Error()); ok && prev == err.Error() {
			Write(w, a)
			return
		}
	}
	if !refusal {
		// 503 is a state (starting, stopping), not a fault: it is logged
		// as a refusal.
		log.ErrorContext(ctx, "request failed", "request_id", RequestID(ctx), "status", a.Status, "err", err)
	} else {
		log.InfoContext(ctx, "request refused", "request_id", RequestID(ctx), "status", a.Status, "err", err)
	}
	Write(w, a)
}

// ClientGone reports whether the request ended because its client went
// away: its context is cancelled and not by a shutdown (the service
// cancels its listener's base context with admission.ErrClosed as the
// cause when the grace period runs out).
func ClientGone(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), admission.ErrClosed)
}

// ShuttingDown reports whether the request's context was cancelled by a
// shutdown.
func ShuttingDown(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), admission.ErrClosed)
}

// Method answers 405 with the error list and an Allow header to any method
// but m (GET also takes HEAD).
func (wr *Writer) Method(m string, h http.HandlerFunc) http.Handler {
	return wr.Methods(map[string]http.HandlerFunc{m: h})
}

// Methods is Method for routes with more than one method.
func (wr *Writer) Methods(hs map[string]http.HandlerFunc) http.Handler {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if hs[m] != nil {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	allowed := strings.Join(allow, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := r.Method
		if m == http.MethodHead {
			m = http.MethodGet
		}
		if h := hs[m]; h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Allow", allowed)
		wr.Error(w, r, ErrMethod)
	})
}

// NoEndpoint answers every request with ErrNoEndpoint: a mux's "/" route.
func (wr *Writer) NoEndpoint(w http.ResponseWriter, r *http.Request) { wr.Error(w, r, ErrNoEndpoint) }

type ctxKey int

const requestIDKey ctxKey = 0

// RequestID returns the id of the request, for logs.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// newRequestID returns 16 hex digits; unique enough to find one request in
// the logs, and never taken from the client, so a log line cannot be
// forged through it.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// quietPaths are not logged per request: probes and scrapes arrive every
// few seconds and would bury the renders.
var quietPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Wrap gives every request an id (echoed in X-Request-Id), logs one line
// per request, records it with Observe and turns a panic into a 500 error
// list. Admission tickets are released by the handlers' own defers, which
// run while the panic unwinds, before it reaches this recover.
func (wr *Writer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		r = trackBody(r.WithContext(ctx))
		sw := &statusWriter{ResponseWriter: w, writeTimeout: wr.WriteTimeout}
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				wr.log().ErrorContext(ctx, "panic", "request_id", id, "panic", v)
				if !sw.wrote {
					wr.Error(sw, r, errors.New("panic"))
				}
			}
			took := time.Since(start)
			if wr.Observe != nil {
				wr.Observe(routeLabel(r.Pattern), sw.status, took)
			}
			if quietPaths[r.URL.Path] {
				if sw.status < 400 {
					wr.quiet.Delete(r.URL.Path)
				}
			} else {
				wr.log().InfoContext(ctx, "request", "request_id", id, "method", r.Method, "path", r.URL.Path,
					"status", sw.status, "bytes", sw.bytes, "duration_ms", took.Milliseconds())
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeLabel is the metrics label of a request: the route pattern the mux
// matched (set on the request by ServeMux), so that the label's values are
// the registered routes and a client cannot add one. Paths no route
// matched share one value.
func routeLabel(pattern string) string {
	if pattern == "" || pattern == "/" {
		return "other"
	}
	return pattern
}

// statusWriter remembers the status and size of an answer for the request
// log line. It forwards Unwrap so http.ResponseController reaches the
// connection (read deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	// writeTimeout bounds the answer from its first byte on (Writer).
	writeTimeout time.Duration
	// ownDeadline is set once the handler set a write deadline itself
	// (an event stream clears it): writeTimeout then does not apply.
	ownDeadline bool
}

// SetWriteDeadline is what http.ResponseController calls on a handler's
// behalf; the handler's own deadline wins over writeTimeout.
func (w *statusWriter) SetWriteDeadline(t time.Time) error {
	w.ownDeadline = true
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(t)
}

func (w *statusWriter) start(code int) {
	w.status, w.wrote = code, true
	if w.writeTimeout > 0 && !w.ownDeadline {
		// A writer without deadlines (http.ErrNotSupported: not a
		// net/http connection) keeps the server's WriteTimeout; a
		// closed connection needs none.
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.start(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.start(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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

// trackBody wraps r's body so that Error knows whether it was read.
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
// past instead of waiting for a client that trickles (issue 10).
func closeUnread(w http.ResponseWriter, r *http.Request) {
	tb, _ := r.Context().Value(bodyKey{}).(*trackedBody)
	if tb == nil || tb.read.Load() {
		return
	}
	w.Header().Set("Connection", "close")
	// A writer without deadlines (http.ErrNotSupported: not a net/http
	// connection) has no connection to drain; a closed one neither.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
