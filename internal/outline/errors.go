package outline

import (
	"errors"
	"fmt"
	"time"
)

// Outline's error codes (the "error" field of its error bodies), as listed
// in outline-api.md. APIError.Code holds one of these, or whatever new code
// Outline sends.
const (
	CodeAuthenticationRequired = "authentication_required" // 401: no, bad or expired token
	CodeUserSuspended          = "user_suspended"          // 403
	CodeAuthorization          = "authorization_error"     // 403: no access, also another team's document
	CodeNotFound               = "not_found"               // 404
	CodeValidation             = "validation_error"        // 400: malformed id
	CodeRateLimited            = "rate_limit_exceeded"     // 429
	CodePaymentRequired        = "payment_required"        // 402: the workspace's plan has lapsed (Outline's cloud)
)

// APIError is an answer of Outline that refuses the reader: 4xx with
// Outline's JSON error body. The HTTP layer maps it to its own answer
// (401 → 401, 403 → 403, 404 → 404, 400 → 400, 429 → 429 with RetryAfter).
// Message is Outline's text: log it, do not show it.
type APIError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is Outline's Retry-After on a 429, 0 when absent.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("outline: %d %s: %s", e.Status, e.Code, e.Message)
}

var (
	// ErrUnavailable: Outline could not be asked. It is unreachable, timed
	// out, answered 5xx, redirected an API call, or answered something that
	// is not its JSON. Nobody has to fix the document; waiting (or the
	// operator) helps: a 502 with source "service".
	ErrUnavailable = errors.New("outline unavailable")
	// ErrNoDownload: the reader may read the document but not download it
	// (policies[].abilities.download is false), and Outline's own export
	// requires that right.
	ErrNoDownload = errors.New("no right to download this document")
	// ErrTooLarge: Outline's answer is over the size cap. For
	// documents.info the cap is far above what a document of
	// limits.MaxMarkdownBytes can produce, so the document is too large
	// (413 too_large).
	ErrTooLarge = errors.New("outline answer too large")
	// ErrDeleted: the document is in Outline's trash (deletedAt is set).
	// Outline still shows it to whoever may restore it; outprint refuses
	// it so that a deleted document never prints as if it were live.
	ErrDeleted = errors.New("the document is deleted")
)

// errBadToken is the answer for a token that is missing or could not be a
// token of Outline: it is refused without asking Outline, the same way
// Outline would refuse it.
func errBadToken(why string) *APIError {
	return &APIError{Status: 401, Code: CodeAuthenticationRequired, Message: why}
}

// errBadID is the answer for an id that cannot name a document.
func errBadID(what string) *APIError {
	return &APIError{Status: 400, Code: CodeValidation, Message: what}
}
