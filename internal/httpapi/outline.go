package httpapi

import (
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/render"
)

// The Outline endpoints (SPEC §5 "Outline documents"): a reader follows a
// link on Outline's own host, their browser sends Outline's accessToken
// cookie along, and outprint asks Outline who they are and what they may
// read. The cookie is the only credential these routes look at: an
// Authorization header, a token parameter or any other cookie the client
// adds is neither forwarded (package outline sends only the cookie) nor
// used to identify the reader. The per-user admission count is keyed by the
// user id Outline confirms and by nothing the client sends.
//
// outprint is mounted on Outline's origin, so its answers must never be
// something a browser could take for a page of that origin: every answer
// of these routes carries X-Content-Type-Options: nosniff and no-store.
//
// Every call to Outline is bounded by the outline.Client (its timeout per
// API call) and every attachment by the fetch.Client, so a slow Outline
// ends in a 502 or an image error and never holds a request open.

// Codes of the Outline routes' own answers, beside CodeUnauthorized (no or
// expired Outline session) and CodeNotFound (no such document).
const (
	CodeForbidden   = "forbidden"    // 403: Outline refuses the reader, or no download right
	CodeRateLimited = "rate_limited" // 429: Outline rate-limits the reader
	CodeUnavailable = "unavailable"  // 502: Outline cannot be asked or fails
	CodeDeleted     = "deleted"      // 410: the document is in Outline's trash
)

// errOutlineOff answers the Outline routes when outline.url is not set.
var errOutlineOff = errors.New("outline is not configured")

// outlineRequest is an Outline document that passed the cheap checks of
// SPEC §4: the reader confirmed, the document read with their rights, its
// size and Binding checked. Nothing is held yet.
type outlineRequest struct {
	user    *outline.User
	doc     *outline.Document
	checked *render.Checked
}

// outlineCheck runs the cheap checks in the order of SPEC §4: the document
// id, the cookie, auth.info, documents.info, the download right, the
// Markdown size and the Binding. It fetches no image. Once Outline has
// confirmed the reader it counts them (enter): the parse of the document
// is CPU an Outline author can make costly, so it runs under the reader's
// count and within the check budget (guard.go). On success and on errors
// after the count, the returned admitted is set and the caller must call
// its done.
//
// When the document was read but cannot be rendered (no download right,
// too large, a Binding or math error), the returned request holds the
// user and document together with the error, so that /status can still
// name the document.
func (s *Server) outlineCheck(r *http.Request, enter func(identity) (*admitted, error)) (*outlineRequest, *admitted, error) {
	c := s.cfg.Outline
	if c == nil {
		return nil, nil, errOutlineOff
	}
	id := r.PathValue("documentId")
	if !outline.ValidDocumentID(id) {
		return nil, nil, &outline.APIError{Status: http.StatusBadRequest, Code: outline.CodeValidation,
			Message: "the document id is not a UUID, urlId or slug-urlId"}
	}
	token := outline.TokenFromRequest(r)
	if token == "" {
		return nil, nil, &outline.APIError{Status: http.StatusUnauthorized, Code: outline.CodeAuthenticationRequired,
			Message: "no valid accessToken cookie in the request"}
	}
	ctx := r.Context()
	user, err := c.AuthInfo(ctx, token)
	if err != nil {
		return nil, nil, err
	}
	a, err := enter(identity{user: user.ID, tenant: user.TeamID})
	if err != nil {
		return nil, nil, err
	}
	or := &outlineRequest{user: user}
	doc, err := c.Document(ctx, token, id)
	or.doc = doc
	if err != nil {
		// doc is set (and err wraps ErrNoDownload) when the reader may
		// read but not download the document.
		return or, a, err
	}
	if len(doc.Text) > limits.MaxMarkdownBytes {
		return or, a, limits.TooLarge(int64(len(doc.Text)))
	}
	name := doc.Title
	if name == "" {
		name = "Untitled"
	}
	or.checked, err = s.check(ctx, a, render.Request{
		Name:     name + ".md",
		Markdown: []byte(doc.Text),
		Outline: &render.OutlineDoc{
			URL:       c.BaseURL().String(),
			Title:     doc.Title,
			Author:    doc.CreatedBy.Name,
			UpdatedAt: doc.UpdatedAt,
			// Outline names languages like "en" or, from older
			// versions, "en_US"; BCP 47 wants a hyphen.
			Language: strings.ReplaceAll(doc.Language, "_", "-"),
		},
		Images: c.Images(token),
	})
	return or, a, err
}

// outlineHeaders marks every answer of the Outline routes: they live on
// Outline's origin and belong to one reader.
func outlineHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
}

// outlineRender is GET /render/{documentId}: the document as a PDF,
// rendered as the reader whose cookie came with the request. After the
// cheap checks it takes the same path as POST /v1/render: count the user
// (Outline's user id) → fetch and validate images (attachments with the
// reader's cookie) → take a slot → render.
func (s *Server) outlineRender(w http.ResponseWriter, r *http.Request) {
	outlineHeaders(w)
	if s.cfg.Web != nil && s.cfg.Jobs != nil && wantsHTML(r) {
		s.outlineBrowser(w, r)
		return
	}
	or, a, err := s.outlineCheck(r, s.enter)
	if a != nil {
		defer a.done()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.fetchAndRender(r, a, or.checked)
	a.done()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The file is named after Outline's title, which is what the reader
	// saw on the page.
	if or.doc.Title != "" {
		res.Title = or.doc.Title
	}
	writePDF(w, res)
}

// outlineStatus is GET /status/{documentId}: whether the reader could
// render the document now, after the cheap checks only. It fetches no
// image and takes no slot; its check counts under a key of the reader's
// own for status checks (enterStatus), so polling /status while a render
// runs is never refused user_limit, yet one reader cannot run many
// parses at once.
//
// A request that cannot name a document (no cookie, no access, no such
// document, Outline down) is answered with its error like /render. A
// document the reader can read but that cannot be rendered (no download
// right, too large, a metadata or math error) is a 200 with renderable
// false and the errors a render would answer.
func (s *Server) outlineStatus(w http.ResponseWriter, r *http.Request) {
	outlineHeaders(w)
	or, a, err := s.outlineCheck(r, s.enterStatus)
	if a != nil {
		defer a.done()
	}
	problems := []limits.Problem{}
	if err != nil {
		status, list, _ := errorAnswer(err)
		if or == nil || or.doc == nil || status >= 500 {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "status: not renderable", "request_id", requestID(r.Context()), "err", err)
		problems = list
	}
	st := s.cfg.Admission.Stats()
	// retryAfter says how long a render asked for now would likely wait:
	// 0 while a slot is free, otherwise the admission estimate.
	retry := 0
	if st.Running >= st.Slots {
		retry = int(math.Ceil(s.cfg.Admission.RetryAfter().Seconds()))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"documentId": or.doc.ID,
		"title":      or.doc.Title,
		"renderable": err == nil,
		"errors":     problems,
		"admission": map[string]any{
			"running":    st.Running,
			"queued":     st.Queued,
			"retryAfter": retry,
		},
	})
}

// outlineAnswer maps the errors of package outline (and of the Outline
// routes) to their answers; ok is false for any other error. Outline's
// refusals become ours: 401 stays 401, 403 stays 403, 404 stays 404; an
// Outline that cannot be asked is a 502 with source service, because
// nobody has to fix the document. Outline's own message is never shown:
// it is logged with the error.
func outlineAnswer(err error) (status int, problems []limits.Problem, retryAfter int, ok bool) {
	one := func(status int, p limits.Problem) (int, []limits.Problem, int, bool) {
		return status, []limits.Problem{p}, 0, true
	}
	var api *outline.APIError
	switch {
	case errors.Is(err, errOutlineOff):
		return one(http.StatusNotFound, limits.Problem{Source: limits.SourceRequest, Code: CodeNotFound,
			Message: "Outline documents are not served here: outline.url is not configured"})
	case errors.Is(err, outline.ErrNoDownload):
		return one(http.StatusForbidden, limits.Problem{Source: limits.SourceAuth, Code: CodeForbidden,
			Message: "you may read this document in Outline but not download it; printing it needs the download right, ask the document's owner"})
	case errors.Is(err, outline.ErrDeleted):
		return one(http.StatusGone, limits.Problem{Source: limits.SourceDocument, Code: CodeDeleted,
			Message: "this document is in Outline's trash; restore it in Outline to print it"})
	case errors.Is(err, outline.ErrTooLarge):
		return one(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceDocument, Code: limits.CodeTooLarge,
			Message: "the document is too large to render"})
	case errors.Is(err, outline.ErrUnavailable):
		return one(http.StatusBadGateway, limits.Problem{Source: limits.SourceService, Code: CodeUnavailable,
			Message: "Outline could not be reached or answered with an error; retry later"})
	case errors.As(err, &api):
		return apiAnswer(api)
	}
	return 0, nil, 0, false
}

// apiAnswer maps one refusal of Outline.
func apiAnswer(e *outline.APIError) (int, []limits.Problem, int, bool) {
	one := func(status int, p limits.Problem) (int, []limits.Problem, int, bool) {
		return status, []limits.Problem{p}, 0, true
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return one(http.StatusUnauthorized, limits.Problem{Source: limits.SourceAuth, Code: CodeUnauthorized,
			Message: "sign in to Outline first: the request has no valid Outline session (accessToken cookie)"})
	case http.StatusForbidden:
		msg := "you have no access to this document in Outline"
		if e.Code == outline.CodeUserSuspended {
			msg = "your Outline account is suspended"
		}
		return one(http.StatusForbidden, limits.Problem{Source: limits.SourceAuth, Code: CodeForbidden, Message: msg})
	case http.StatusNotFound:
		return one(http.StatusNotFound, limits.Problem{Field: "documentId", Source: limits.SourceRequest, Code: CodeNotFound,
			Message: "Outline has no such document"})
	case http.StatusBadRequest:
		return one(http.StatusBadRequest, limits.Problem{Field: "documentId", Source: limits.SourceRequest, Code: limits.CodeInvalid,
			Message: "the document id is not a UUID, urlId or slug-urlId"})
	case http.StatusPaymentRequired:
		// Outline's cloud answers 402 payment_required for every call of
		// a workspace whose plan has lapsed. Neither the reader nor a
		// retry can change that, and outprint is not at fault (no 5xx):
		// the reader may not print from this workspace until an admin
		// settles it.
		return one(http.StatusForbidden, limits.Problem{Source: limits.SourceAuth, Code: CodeForbidden,
			Message: "Outline refuses this workspace's requests until its plan is renewed (payment required); ask a workspace admin"})
	case http.StatusTooManyRequests:
		retry := max(1, int(math.Ceil(e.RetryAfter.Seconds())))
		return http.StatusTooManyRequests, []limits.Problem{{Source: limits.SourceService, Code: CodeRateLimited,
			Message: "Outline is limiting your requests; retry later"}}, retry, true
	}
	// Any other refusal (405, 422, …) means Outline and outprint disagree
	// about the API, not that the reader did something wrong.
	return one(http.StatusBadGateway, limits.Problem{Source: limits.SourceService, Code: CodeUnavailable,
		Message: "Outline answered in a way outprint does not understand; retry later or tell the operator"})
}
