package httperr

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
)

// Codes of the answers the HTTP layers give of themselves, beside those of
// package limits.
const (
	CodeUnauthorized = "unauthorized"  // 401: no or unknown credentials
	CodeForbidden    = "forbidden"     // 403: known, but not allowed
	CodeNotFound     = "not_found"     // 404: no such endpoint, job or page
	CodeMethod       = "method"        // 405: wrong method for the endpoint
	CodeUnsupported  = "unsupported"   // 415: a body of a type the route does not take
	CodeShuttingDown = "shutting_down" // 503: the process is stopping
	CodeNotReady     = "not_ready"     // 503: TeX, the data folder or the workers fail
)

// Answer is what a client is told about a failure: the status, the error
// list and the Retry-After seconds (0 for none).
type Answer struct {
	Status     int
	Problems   []limits.Problem
	RetryAfter int
}

// One is an answer of a single problem.
func One(status int, p limits.Problem) Answer {
	return Answer{Status: status, Problems: []limits.Problem{p}}
}

// Error is a failure that carries its own answer: the HTTP layers' own
// refusals (no such endpoint, a malformed body, no credentials). Compare
// with errors.Is against the variables that hold one.
type Error struct {
	Answer
}

// New returns an error answered with status and the one problem p.
func New(status int, p limits.Problem) *Error { return &Error{Answer: One(status, p)} }

func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return http.StatusText(e.Status)
	}
	return e.Problems[0].Code + ": " + e.Problems[0].Message
}

// BadRequest is a client mistake in the request's shape (400), naming the
// field.
func BadRequest(field, message string) *Error {
	return New(http.StatusBadRequest, limits.Problem{Field: field, Source: limits.SourceRequest, Code: limits.CodeInvalid, Message: message})
}

// Unauthorized is a request without acceptable credentials (401); message
// is what the client reads.
func Unauthorized(message string) *Error {
	return New(http.StatusUnauthorized, limits.Problem{Source: limits.SourceAuth, Code: CodeUnauthorized, Message: message})
}

// Forbidden is a request whose credentials are known but not allowed (403).
func Forbidden(message string) *Error {
	return New(http.StatusForbidden, limits.Problem{Source: limits.SourceAuth, Code: CodeForbidden, Message: message})
}

// NotFound is a 404 with the text the client reads.
func NotFound(field, message string) *Error {
	return New(http.StatusNotFound, limits.Problem{Field: field, Source: limits.SourceRequest, Code: CodeNotFound, Message: message})
}

// The refusals every listener shares.
var (
	// ErrNoEndpoint answers a path no route serves.
	ErrNoEndpoint = NotFound("", "no such endpoint: see POST /v1/render, GET /healthz, /readyz, /metrics")
	// ErrMethod answers a method the route does not take (with Allow).
	ErrMethod = New(http.StatusMethodNotAllowed, limits.Problem{Source: limits.SourceRequest, Code: CodeMethod,
		Message: "method not allowed for this endpoint (see the Allow header)"})
	// ErrBodyTimeout is a body that did not arrive within the listener's
	// bound. The client is still there and hears it, although net/http
	// cancelled the request's context as for a client gone.
	ErrBodyTimeout = New(http.StatusRequestTimeout, limits.Problem{Source: limits.SourceRequest, Code: limits.CodeInvalid,
		Message: "the request body did not arrive in time; send it without pauses"})
)

// notReadyError carries why a readiness check failed, for the logs only.
type notReadyError struct{ cause error }

func (e *notReadyError) Error() string { return "not ready: " + e.cause.Error() }
func (e *notReadyError) Unwrap() error { return e.cause }

// NotReady wraps why a readiness check failed: the client hears 503
// not_ready, the log the cause.
func NotReady(err error) error { return &notReadyError{cause: err} }

// A Mapper gives the answers of the errors one package knows (a job that
// does not exist, Outline refusing the reader); ok is false for any other
// error.
type Mapper func(err error) (a Answer, ok bool)

// Of maps any error to its answer: the mappers first, then the errors
// every listener knows (*Error, *admission.Refusal, *limits.Error by its
// kind, admission.ErrClosed, NotReady). It is the one place that decides
// what a client learns about a failure; an error nobody knows is a 500
// whose text stays in the logs.
func Of(err error, mappers ...Mapper) Answer {
	for _, m := range mappers {
		if m == nil {
			continue
		}
		if a, ok := m(err); ok {
			return a
		}
	}
	var (
		e   *Error
		ref *admission.Refusal
		le  *limits.Error
		nr  *notReadyError
	)
	switch {
	case errors.As(err, &e):
		return e.Answer
	case errors.As(err, &ref):
		le := ref.LimitsError()
		return Answer{Status: Status(le.Kind), Problems: le.Problems, RetryAfter: ref.RetryAfterSeconds()}
	case errors.As(err, &le):
		a := Answer{Status: Status(le.Kind), Problems: le.Problems}
		if le.Kind == limits.KindNoSpace {
			a.RetryAfter = int(limits.NoSpaceRetry / time.Second)
		}
		return a
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// A file of the request (an upload spooled, TeX's folder) found
		// the disk full: the client is told so, not "internal".
		return Of(limits.NoSpace())
	case errors.Is(err, admission.ErrClosed):
		a := One(http.StatusServiceUnavailable, limits.Problem{Source: limits.SourceService, Code: CodeShuttingDown,
			Message: "the service is shutting down, retry shortly"})
		a.RetryAfter = 1
		return a
	case errors.As(err, &nr):
		a := One(http.StatusServiceUnavailable, limits.Problem{Source: limits.SourceService, Code: CodeNotReady,
			Message: "the renderer is not ready"})
		a.RetryAfter = 1
		return a
	}
	return One(http.StatusInternalServerError, limits.Problem{Source: limits.SourceService, Code: limits.CodeInternal,
		Message: "internal error; the request id in X-Request-Id identifies it in the logs"})
}

// Write answers with a's error list (SPEC §5): never cached, Retry-After
// when a says, and a Bearer challenge on a 401 that has none yet.
func Write(w http.ResponseWriter, a Answer) {
	h := w.Header()
	if a.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(a.RetryAfter))
	}
	if a.Status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", `Bearer realm="outprint"`)
	}
	h.Set("Cache-Control", "no-store")
	problems := a.Problems
	if problems == nil {
		problems = []limits.Problem{}
	}
	WriteJSON(w, a.Status, map[string]any{"errors": problems})
}

// WriteJSON answers with v as JSON, HTML characters unescaped (the answers
// are never HTML).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	// The status is sent: an encoding that fails now is a write to a
	// client that left, and there is no one left to tell.
	_ = enc.Encode(v)
}

// Parse reads an error list answer back into its problems, so that a
// gateway answers its client exactly as the worker did. ok is false for a
// body that is not an error list with at least one problem.
func Parse(body []byte) (problems []limits.Problem, ok bool) {
	var v struct {
		Errors []struct {
			Field   string        `json:"field"`
			Source  limits.Source `json:"source"`
			Code    string        `json:"code"`
			Message string        `json:"message"`
			Line    *int          `json:"line"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Errors) == 0 {
		return nil, false
	}
	out := make([]limits.Problem, len(v.Errors))
	for i, e := range v.Errors {
		out[i] = limits.Problem{Field: e.Field, Source: e.Source, Code: e.Code, Message: strings.TrimSpace(e.Message)}
		if e.Line != nil {
			out[i].Line = *e.Line
		}
	}
	return out, true
}

// Read reads an answer of status with body back into the error it
// stands for: a *limits.Error of the kind whose status it is, with the
// worker's own problems. ok is false for a status no kind has or a body
// that is not an error list.
func Read(status int, body []byte) (*limits.Error, bool) {
	kind, known := KindOf(status)
	if !known {
		return nil, false
	}
	problems, ok := Parse(body)
	if !ok {
		return nil, false
	}
	return &limits.Error{Kind: kind, Problems: problems}, true
}
