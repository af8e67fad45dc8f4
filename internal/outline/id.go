package outline

import (
	"net/http"
	"regexp"
	"strings"
)

// CookieName is Outline's session cookie.
const CookieName = "accessToken"

// maxTokenBytes bounds a token: Outline's JWTs are a few hundred bytes.
const maxTokenBytes = 4096

var (
	uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// slugURLIDRE is Outline's SLUG_URL_REGEX: an optional slug ending in
	// "-", then the urlId of 10 to 15 alphanumerics.
	slugURLIDRE = regexp.MustCompile(`^(?:[0-9a-zA-Z_~-]*-)?[a-zA-Z0-9]{10,15}$`)
)

// ValidDocumentID reports whether id can name an Outline document: a UUID,
// a urlId (10–15 alphanumerics, "hDYep1TPAM") or a slug and urlId
// ("my-title-hDYep1TPAM"). Anything else is refused before Outline is asked.
func ValidDocumentID(id string) bool {
	if len(id) == 0 || len(id) > 256 {
		return false
	}
	return uuidRE.MatchString(id) || slugURLIDRE.MatchString(id)
}

// validUUID reports whether s is a UUID, the form of attachment ids.
func validUUID(s string) bool { return uuidRE.MatchString(s) }

// ValidToken reports whether tok can be an Outline session token: the JWT
// alphabet (base64url, '.', and the few other cookie characters base64
// uses), at most 4 KiB, and not an API key (Outline refuses those in the
// cookie). It keeps a value with ";", ",", spaces or control characters from
// ever being written into the Cookie header we send.
func ValidToken(tok string) bool {
	if tok == "" || len(tok) > maxTokenBytes || strings.HasPrefix(tok, "ol_api_") {
		return false
	}
	return strings.Trim(tok, tokenChars) == "" // every byte one of tokenChars
}

// tokenChars are the bytes a session token may have.
const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/="

// TokenFromRequest returns the reader's accessToken cookie from an incoming
// request, or "" when there is none or it is not a valid token. Only this
// cookie is ever forwarded to Outline: never the request's other cookies,
// its Authorization header or a token parameter, which Outline would prefer
// over the cookie.
func TokenFromRequest(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil || !ValidToken(c.Value) {
		return ""
	}
	return c.Value
}
