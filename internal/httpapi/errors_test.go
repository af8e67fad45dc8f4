package httpapi

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
)

// TestErrorKindStatus: every kind of *limits.Error has the status README's
// and SPEC's tables give it, and a gateway reads a worker's status back
// into the same kind.
func TestErrorKindStatus(t *testing.T) {
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
	} {
		if got, _, _ := errorAnswer(tc.err); got != tc.want {
			t.Errorf("errorAnswer(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	for _, k := range errorKinds {
		if got, ok := kindOfStatus(kindStatus(k)); !ok || got != k {
			t.Errorf("kindOfStatus(kindStatus(%s)) = %s, %v, want %s, true", k, got, ok, k)
		}
	}
	if k, ok := kindOfStatus(http.StatusTeapot); ok {
		t.Errorf("kindOfStatus(418) = %s, true, want no kind", k)
	}
}

// TestNewRefusesMissingParts: a server without its pipeline or admission
// is a wiring error New returns, not a panic.
func TestNewRefusesMissingParts(t *testing.T) {
	if s, err := New(Config{}); err == nil || s != nil {
		t.Errorf("New(Config{}) = %v, %v, want an error", s, err)
	}
}
