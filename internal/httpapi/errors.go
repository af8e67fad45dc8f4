package httpapi

import (
	"fmt"
	"net/http"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
)

// The refusals of the public API's own making. Each carries its answer
// (package httperr); the errors of the packages below are mapped by
// mapError.
var (
	errNoCredentials = httperr.Unauthorized("authentication required: send Authorization: Bearer <API key>")
	errUnknownKey    = httperr.Unauthorized("the API key is not valid")
	errUnsupported   = httperr.New(http.StatusUnsupportedMediaType, limits.Problem{Source: limits.SourceRequest, Code: httperr.CodeUnsupported,
		Message: `send multipart/form-data (parts document, metadata, asset) or application/json {"markdown","metadata"}`})
	errRequestTooBig = httperr.New(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceRequest, Code: limits.CodeTooLarge,
		Message: fmt.Sprintf("the request is too large: at most %d bytes of Markdown and %d bytes of images",
			limits.MaxMarkdownBytes, limits.MaxTotalImageBytes)})
)

// mapError gives the answers of the errors of the packages the public API
// calls (outline, jobs, raster) and of its own routes; httperr.Of knows the
// rest.
func mapError(err error) (httperr.Answer, bool) {
	for _, m := range []httperr.Mapper{outlineAnswer, jobsAnswer, webAnswer} {
		if a, ok := m(err); ok {
			return a, true
		}
	}
	return httperr.Answer{}, false
}

// answerOf is the answer the public API gives err.
func answerOf(err error) httperr.Answer { return httperr.Of(err, mapError) }

// writeError answers with the error list of SPEC §5 and logs the error
// with its whole chain (httperr.Writer.Error).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.ans.Error(w, r, err)
}
