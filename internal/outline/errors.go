package outline

import (
	"errors"
	"fmt"
	"net/http"
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

// The client's errors are these sentinels, for the HTTP layer to map
// (httpapi); compare with errors.Is. Outline's own refusals are an
// *APIError that matches the sentinel of its status and code; refusals the
// client makes without asking Outline (no token, a malformed id) wrap the
// sentinel alone, so they are never taken for something Outline said.
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
	// ErrNoSession: the request has no valid Outline session — no
	// accessToken cookie, one that cannot be a token, or one Outline
	// refuses (401 authentication_required).
	ErrNoSession = errors.New("no valid Outline session")
	// ErrSuspended: the reader's account is suspended (403
	// user_suspended, or auth.info's isSuspended).
	ErrSuspended = errors.New("the Outline account is suspended")
	// ErrForbidden: Outline refuses the reader this document, collection
	// or attachment (403 authorization_error; also another team's).
	ErrForbidden = errors.New("outline refuses access")
	// ErrNotFound: Outline has no such document, collection or attachment
	// (404 not_found).
	ErrNotFound = errors.New("outline has no such document")
	// ErrBadID: an id that cannot name a document, collection or
	// attachment, refused without asking Outline, or Outline's 400
	// validation_error.
	ErrBadID = errors.New("not an Outline id")
	// ErrPaymentRequired: Outline's cloud refuses every call of a
	// workspace whose plan has lapsed (402 payment_required).
	ErrPaymentRequired = errors.New("the Outline workspace's plan has lapsed")
	// ErrRateLimited: Outline is limiting the reader's requests (429);
	// RetryAfter says for how long.
	ErrRateLimited = errors.New("outline is limiting the requests")
	// ErrUnexpected: any other refusal of Outline (405, 422, …): Outline
	// and outprint disagree about the API.
	ErrUnexpected = errors.New("outline answered in an unexpected way")
)

// APIError is an answer of Outline that refuses the reader: 4xx with
// Outline's JSON error body, exactly as Outline sent it. It matches
// (errors.Is) the sentinel of its status and code. Message is Outline's
// text: log it, do not show it.
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

// Is matches the sentinel of e's status and code.
func (e *APIError) Is(target error) bool { return e.sentinel() == target }

func (e *APIError) sentinel() error {
	switch e.Status {
	case http.StatusUnauthorized:
		return ErrNoSession
	case http.StatusForbidden:
		if e.Code == CodeUserSuspended {
			return ErrSuspended
		}
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadRequest:
		return ErrBadID
	case http.StatusPaymentRequired:
		return ErrPaymentRequired
	case http.StatusTooManyRequests:
		return ErrRateLimited
	}
	return ErrUnexpected
}

// RetryAfter is how long Outline asked to wait when err is its 429, 0
// otherwise (or when it did not say).
func RetryAfter(err error) time.Duration {
	var api *APIError
	if errors.As(err, &api) && api.Status == http.StatusTooManyRequests {
		return api.RetryAfter
	}
	return 0
}

// errBadToken refuses a token that is missing or could not be a token of
// Outline, without asking Outline.
func errBadToken(why string) error { return fmt.Errorf("%w: %s", ErrNoSession, why) }

// errBadID refuses an id that cannot name what it should, without asking
// Outline.
func errBadID(what string) error { return fmt.Errorf("%w: %s", ErrBadID, what) }
