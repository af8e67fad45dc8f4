package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
)

// Codes of the HTTP layer's own answers, beside those of package limits.
const (
	CodeUnauthorized = "unauthorized"  // 401: no or unknown API key
	CodeNotFound     = "not_found"     // 404: no such endpoint
	CodeMethod       = "method"        // 405: wrong method for the endpoint
	CodeUnsupported  = "unsupported"   // 415: body neither multipart nor JSON
	CodeShuttingDown = "shutting_down" // 503: the process is stopping
	CodeNotReady     = "not_ready"     // 503: TeX or the data folder fails
)

// Errors of the HTTP layer itself. Each maps to one answer in errorAnswer.
var (
	errInternal      = errors.New("internal error")
	errNotFound      = errors.New("no such endpoint")
	errMethod        = errors.New("method not allowed")
	errUnsupported   = errors.New("unsupported media type")
	errRequestTooBig = errors.New("request body too large")
)

// authError is a request without acceptable credentials (401). message is
// what the client reads; it never says which part of a key was wrong.
type authError struct{ message string }

func (e *authError) Error() string { return "unauthorized: " + e.message }

var (
	errNoCredentials = &authError{"authentication required: send Authorization: Bearer <API key>"}
	errUnknownKey    = &authError{"the API key is not valid"}
)

// requestError is a client mistake in the request's shape, with the text
// the client sees.
type requestError struct {
	status  int
	field   string
	message string
}

func (e *requestError) Error() string { return e.message }

func badRequest(field, message string) error {
	return &requestError{status: http.StatusBadRequest, field: field, message: message}
}

// notReadyError carries why a readiness check failed, for the logs only.
type notReadyError struct{ cause error }

func (e *notReadyError) Error() string { return "not ready: " + e.cause.Error() }
func (e *notReadyError) Unwrap() error { return e.cause }

func notReady(err error) error { return &notReadyError{cause: err} }

// errorAnswer maps any error to its status, its client-facing error list and
// the Retry-After seconds (0 for none). It is the one place that decides
// what a client learns about a failure; an error it does not know is a 500
// whose text stays in the logs.
func errorAnswer(err error) (status int, problems []limits.Problem, retryAfter int) {
	var (
		ref *admission.Refusal
		le  *limits.Error
		re  *requestError
		ae  *authError
		nr  *notReadyError
	)
	one := func(status int, source limits.Source, code, field, message string) (int, []limits.Problem) {
		return status, []limits.Problem{{Field: field, Source: source, Code: code, Message: message}}
	}
	if status, problems, retryAfter, ok := outlineAnswer(err); ok {
		return status, problems, retryAfter
	}
	if status, problems, retryAfter, ok := jobsAnswer(err); ok {
		return status, problems, retryAfter
	}
	if status, problems, retryAfter, ok := adminAnswer(err); ok {
		return status, problems, retryAfter
	}
	if status, problems, retryAfter, ok := webAnswer(err); ok {
		return status, problems, retryAfter
	}
	switch {
	case errors.As(err, &ref):
		le := ref.LimitsError()
		return kindStatus(le.Kind), le.Problems, ref.RetryAfterSeconds()
	case errors.As(err, &le):
		return kindStatus(le.Kind), le.Problems, 0
	case errors.As(err, &re):
		status, problems = one(re.status, limits.SourceRequest, limits.CodeInvalid, re.field, re.message)
		return status, problems, 0
	case errors.As(err, &ae):
		status, problems = one(http.StatusUnauthorized, limits.SourceAuth, CodeUnauthorized, "", ae.message)
		return status, problems, 0
	case errors.Is(err, errUnsupported):
		status, problems = one(http.StatusUnsupportedMediaType, limits.SourceRequest, CodeUnsupported, "",
			`send multipart/form-data (parts document, metadata, asset) or application/json {"markdown","metadata"}`)
		return status, problems, 0
	case errors.Is(err, errRequestTooBig):
		status, problems = one(http.StatusRequestEntityTooLarge, limits.SourceRequest, limits.CodeTooLarge, "",
			fmt.Sprintf("the request is too large: at most %d bytes of Markdown and %d bytes of images",
				limits.MaxMarkdownBytes, limits.MaxTotalImageBytes))
		return status, problems, 0
	case errors.Is(err, errNotFound):
		status, problems = one(http.StatusNotFound, limits.SourceRequest, CodeNotFound, "",
			"no such endpoint: see POST /v1/render, GET /healthz, /readyz, /metrics")
		return status, problems, 0
	case errors.Is(err, errMethod):
		status, problems = one(http.StatusMethodNotAllowed, limits.SourceRequest, CodeMethod, "",
			"method not allowed for this endpoint (see the Allow header)")
		return status, problems, 0
	case errors.Is(err, admission.ErrClosed):
		status, problems = one(http.StatusServiceUnavailable, limits.SourceService, CodeShuttingDown, "",
			"the service is shutting down, retry shortly")
		return status, problems, 1
	case errors.As(err, &nr):
		status, problems = one(http.StatusServiceUnavailable, limits.SourceService, CodeNotReady, "",
			"the renderer is not ready")
		return status, problems, 1
	}
	status, problems = one(http.StatusInternalServerError, limits.SourceService, limits.CodeInternal, "",
		"internal error; the request id in X-Request-Id identifies it in the logs")
	return status, problems, 0
}

// kindStatus is the HTTP status of each kind of *limits.Error (SPEC §3,
// §4): the one place where the bound that refused a render becomes a
// status. A kind it does not know is a 500.
func kindStatus(k limits.Kind) int {
	switch k {
	case limits.KindDocument:
		return http.StatusUnprocessableEntity
	case limits.KindRequest:
		return http.StatusBadRequest
	case limits.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case limits.KindTimeout:
		return http.StatusGatewayTimeout
	case limits.KindBusy:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// errorKinds lists every kind kindStatus knows, for kindOfStatus.
var errorKinds = []limits.Kind{limits.KindDocument, limits.KindRequest, limits.KindTooLarge, limits.KindTimeout, limits.KindBusy}

// kindOfStatus is kindStatus backwards: a gateway reads a worker's error
// list answer back into the *limits.Error the worker answered with. ok is
// false for a status no kind has.
func kindOfStatus(status int) (kind limits.Kind, ok bool) {
	for _, k := range errorKinds {
		if kindStatus(k) == status {
			return k, true
		}
	}
	return "", false
}

// clientGone reports whether the request ended because its client went
// away: its context is cancelled and not by a shutdown (cmd cancels the
// server's base context with admission.ErrClosed as the cause when the
// grace period runs out).
func clientGone(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), admission.ErrClosed)
}

// shuttingDown reports whether the request's context was cancelled by a
// shutdown.
func shuttingDown(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), admission.ErrClosed)
}

// writeError answers with the error list of SPEC §5 and logs the error
// with its whole chain.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	// A body read that timed out cancels the request's context in
	// net/http as a vanished client would, but this client is still there
	// and should hear why.
	if clientGone(ctx) && !errors.Is(err, errBodyTimeout) {
		// Nobody reads the answer; whatever failed, failed because the
		// client left.
		s.log.InfoContext(ctx, "client gone", "request_id", requestID(ctx), "err", err)
		return
	}
	closeUnread(w, r)
	if shuttingDown(ctx) {
		// The grace period ran out and the render was stopped; the error
		// it returned says "cancelled", the client should hear why.
		err = fmt.Errorf("%w: %w", admission.ErrClosed, err)
	}
	status, problems, retry := errorAnswer(err)
	switch {
	case status >= 500 && status != http.StatusServiceUnavailable:
		// 503 is a state (starting, stopping), not a fault: it is logged
		// as a refusal below.
		s.log.ErrorContext(ctx, "request failed", "request_id", requestID(ctx), "status", status, "err", err)
	default:
		s.log.InfoContext(ctx, "request refused", "request_id", requestID(ctx), "status", status, "err", err)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="outprint"`)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]any{"errors": problems})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
