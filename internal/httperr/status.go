// Package httperr is how every outprint listener answers a failure: the one
// table of error kinds and HTTP statuses (SPEC §3–§5), the error list
// (`{"errors":[…]}`) that every non-2xx answer carries, reading such an
// answer back (a gateway reads its workers'), and the request wrapper that
// gives each request an id and a log line and turns a panic into that same
// error list. The public API (httpapi), the worker's listener (cluster) and
// the page for people (web) answer through it, so a status means the same
// on every port.
//
// Packages below the HTTP edge never see a status: they return a
// *limits.Error with a Kind, an *admission.Refusal, or sentinels of their
// own, which the HTTP layer maps with a Mapper.
package httperr

import (
	"net/http"

	"github.com/outprint/outprint/internal/limits"
)

// Status is the HTTP status of each kind of *limits.Error (SPEC §3, §4):
// the one place where the bound that refused a render becomes a status. A
// kind it does not know is a 500.
func Status(k limits.Kind) int {
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
	case limits.KindNoSpace:
		return http.StatusInsufficientStorage
	case limits.KindUnsupported:
		return http.StatusUnsupportedMediaType
	}
	return http.StatusInternalServerError
}

// Kinds lists every kind Status knows.
var Kinds = []limits.Kind{limits.KindDocument, limits.KindRequest, limits.KindTooLarge, limits.KindTimeout, limits.KindBusy, limits.KindNoSpace, limits.KindUnsupported}

// KindOf is Status backwards: a gateway reads a worker's error list answer
// back into the *limits.Error the worker answered with. ok is false for a
// status no kind has.
func KindOf(status int) (kind limits.Kind, ok bool) {
	for _, k := range Kinds {
		if Status(k) == status {
			return k, true
		}
	}
	return "", false
}
