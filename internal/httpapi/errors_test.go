package httpapi

import (
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// errorAnswer is the public API's answer to err, as its parts.
func errorAnswer(err error) (status int, problems []limits.Problem, retryAfter int) {
	a := answerOf(err)
	return a.Status, a.Problems, a.RetryAfter
}

// TestNewRefusesMissingParts: a server without its pipeline or admission
// is a wiring error New returns, not a panic.
func TestNewRefusesMissingParts(t *testing.T) {
	if s, err := New(Config{}); err == nil || s != nil {
		t.Errorf("New(Config{}) = %v, %v, want an error", s, err)
	}
}
