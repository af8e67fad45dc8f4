package httperr

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
)

// TestErrorKindStatus: every kind of *limits.Error has the status README's
// and SPEC's tables give it, and a gateway reads a worker's status back
// into the same kind.
func TestErrorKindStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{limits.Invalid(limits.Problem{Source: limits.SourceDocument, Code: limits.CodeMath, Message: "m"}), http.StatusUnprocessableEntity},
		{limits.TooLarge(limits.MaxMarkdownBytes + 10), http.StatusRequestEntityTooLarge},
		{limits.TooManyPages(500), http.StatusRequestEntityTooLarge},
		{limits.PDFTooLarge(2, 1), http.StatusRequestEntityTooLarge},
		{limits.Resource("memory"), http.StatusRequestEntityTooLarge},
		{limits.Timeout(time.Minute), http.StatusGatewayTimeout},
		{fmt.Errorf("render: %w", limits.Timeout(time.Minute)), http.StatusGatewayTimeout},
		{&limits.Error{Kind: limits.KindRequest}, http.StatusBadRequest},
		{&limits.Error{Kind: "unheard-of"}, http.StatusInternalServerError},
		{&admission.Refusal{Code: limits.CodeBusy, RetryAfter: time.Second}, http.StatusTooManyRequests},
		{(&admission.Refusal{Code: limits.CodeUserLimit}).LimitsError(), http.StatusTooManyRequests},
		{limits.NoSpace(), http.StatusInsufficientStorage},
		{&limits.Error{Kind: limits.KindUnsupported}, http.StatusUnsupportedMediaType},
		{fmt.Errorf("spool: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), http.StatusInsufficientStorage},
	} {
		if got := Of(tc.err).Status; got != tc.want {
			t.Errorf("Of(%v).Status = %d, want %d", tc.err, got, tc.want)
		}
	}
	for _, k := range Kinds {
		if got, ok := KindOf(Status(k)); !ok || got != k {
			t.Errorf("KindOf(Status(%s)) = %s, %v, want %s, true", k, got, ok, k)
		}
	}
	if a := Of(fmt.Errorf("put: %w", syscall.EDQUOT)); a.RetryAfter <= 0 || len(a.Problems) != 1 || a.Problems[0].Code != limits.CodeNoSpace {
		t.Errorf("Of(EDQUOT) = %+v, want no_space with Retry-After", a)
	}
	if k, ok := KindOf(http.StatusTeapot); ok {
		t.Errorf("KindOf(418) = %s, true, want no kind", k)
	}
}

// TestWriteRead: an answer written with Write reads back (Read) into the
// *limits.Error it was made from, line numbers included, as a gateway
// reads a worker's.
func TestWriteRead(t *testing.T) {
	t.Parallel()
	want := &limits.Error{Kind: limits.KindDocument, Problems: []limits.Problem{
		{Field: "document", Source: limits.SourceDocument, Code: limits.CodeMath, Line: 3, Message: "unbalanced $"},
		{Source: limits.SourceImage, Code: limits.CodeImage, Message: "no such image"},
	}}
	rec := httptest.NewRecorder()
	Write(rec, Of(fmt.Errorf("check: %w", want)))
	if rec.Code != http.StatusUnprocessableEntity || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("Write = %d %v, want 422 JSON no-store", rec.Code, rec.Header())
	}
	got, ok := Read(rec.Code, rec.Body.Bytes())
	if !ok || got.Kind != want.Kind || !reflect.DeepEqual(got.Problems, want.Problems) {
		t.Errorf("Read(Write(%v)) = %+v, %v, want %+v", want, got, ok, want)
	}
	for _, tc := range []struct {
		status int
		body   string
	}{
		{http.StatusTeapot, `{"errors":[{"code":"x","message":"y"}]}`},
		{http.StatusUnprocessableEntity, `{"errors":[]}`},
		{http.StatusUnprocessableEntity, `<html>`},
	} {
		if le, ok := Read(tc.status, []byte(tc.body)); ok {
			t.Errorf("Read(%d, %s) = %v, true, want no error list", tc.status, tc.body, le)
		}
	}
}

// TestAnswers: the refusals every listener shares have their status, code
// and Retry-After; an unknown error is a 500 that shows none of its text,
// and a 401 carries a Bearer challenge.
func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
		retry  int
	}{
		{"closed", fmt.Errorf("acquire: %w", admission.ErrClosed), 503, CodeShuttingDown, 1},
		{"not ready", NotReady(fmt.Errorf("xelatex missing")), 503, CodeNotReady, 1},
		{"not ready while closing", NotReady(admission.ErrClosed), 503, CodeShuttingDown, 1},
		{"no endpoint", ErrNoEndpoint, 404, CodeNotFound, 0},
		{"method", ErrMethod, 405, CodeMethod, 0},
		{"body timeout", fmt.Errorf("read: %w", ErrBodyTimeout), 408, limits.CodeInvalid, 0},
		{"unauthorized", Unauthorized("no key"), 401, CodeUnauthorized, 0},
		{"internal", fmt.Errorf("open /var/secret: denied"), 500, limits.CodeInternal, 0},
	} {
		rec := httptest.NewRecorder()
		Write(rec, Of(tc.err))
		var body struct{ Errors []limits.Problem }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Errors) != 1 {
			t.Fatalf("%s: body %s is not an error list of one: %v", tc.name, rec.Body, err)
		}
		retry := rec.Header().Get("Retry-After")
		if rec.Code != tc.status || body.Errors[0].Code != tc.code || (tc.retry > 0) != (retry != "") {
			t.Errorf("%s: answer = %d %s Retry-After %q, want %d %s %d", tc.name, rec.Code, body.Errors[0].Code, retry, tc.status, tc.code, tc.retry)
		}
		if tc.status == 401 && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
		if tc.status == 500 && body.Errors[0].Message == tc.err.Error() {
			t.Errorf("%s: the 500 shows the internal text %q", tc.name, tc.err)
		}
	}
}
