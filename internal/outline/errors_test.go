package outline

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestAPIErrorIs: each answer Outline refuses with matches the sentinel of
// its status and code, and no other; RetryAfter reads a 429's wait.
func TestAPIErrorIs(t *testing.T) {
	t.Parallel()
	sentinels := []error{ErrNoSession, ErrSuspended, ErrForbidden, ErrNotFound, ErrBadID, ErrPaymentRequired, ErrRateLimited, ErrUnexpected, ErrUnavailable}
	for _, tt := range []struct {
		status int
		code   string
		want   error
	}{
		{401, CodeAuthenticationRequired, ErrNoSession},
		{403, CodeUserSuspended, ErrSuspended},
		{403, CodeAuthorization, ErrForbidden},
		{404, CodeNotFound, ErrNotFound},
		{400, CodeValidation, ErrBadID},
		{402, CodePaymentRequired, ErrPaymentRequired},
		{429, CodeRateLimited, ErrRateLimited},
		{405, "method_not_allowed", ErrUnexpected},
		{422, "something_new", ErrUnexpected},
	} {
		err := fmt.Errorf("documents.info: %w", &APIError{Status: tt.status, Code: tt.code, RetryAfter: 3 * time.Second})
		for _, s := range sentinels {
			if got := errors.Is(err, s); got != (s == tt.want) {
				t.Errorf("errors.Is(%d %s, %v) = %v, want %v", tt.status, tt.code, s, got, s == tt.want)
			}
		}
		if want := map[bool]time.Duration{true: 3 * time.Second}[tt.status == 429]; RetryAfter(err) != want {
			t.Errorf("RetryAfter(%d) = %v, want %v", tt.status, RetryAfter(err), want)
		}
	}
}
