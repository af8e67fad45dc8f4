package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/worker"
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

// Codes of the Outline routes' own answers, beside httperr's
// CodeUnauthorized (no or expired Outline session), CodeForbidden (Outline
// refuses the reader, or no download right) and CodeNotFound (no such
// document).
const (
	CodeRateLimited = "rate_limited" // 429: Outline rate-limits the reader
	CodeUnavailable = "unavailable"  // 502: Outline cannot be asked or fails
	CodeDeleted     = "deleted"      // 410: the document is in Outline's trash
)

// errOutlineOff answers the Outline routes when outline.url is not set.
var errOutlineOff = errors.New("outline is not configured")

// Refusals made before Outline is asked, answered as Outline's own would
// be (outlineAnswer).
var (
	errNoCookie     = fmt.Errorf("%w: no accessToken cookie in the request", outline.ErrNoSession)
	errDocumentID   = fmt.Errorf("%w: the document id is not a UUID, urlId or slug-urlId", outline.ErrBadID)
	errCollectionID = fmt.Errorf("%w: the collection id is not a UUID or urlId", outline.ErrBadID)
)

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
// after the count, the returned ticket is set and the caller must call
// its Done.
//
// When the document was read but cannot be rendered (no download right,
// too large, a Binding or math error), the returned request holds the
// user and document together with the error, so that /status can still
// name the document.
func (s *Server) outlineCheck(r *http.Request, enter func(identity) (*worker.Ticket, error)) (*outlineRequest, *worker.Ticket, error) {
	c := s.cfg.Outline
	if c == nil {
		return nil, nil, errOutlineOff
	}
	id := r.PathValue("documentId")
	if !outline.ValidDocumentID(id) {
		return nil, nil, errDocumentID
	}
	token := outline.TokenFromRequest(r)
	if token == "" {
		return nil, nil, errNoCookie
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
	or.checked, err = a.Check(ctx, render.Request{
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
		defer a.Done()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := a.Render(r.Context(), or.checked)
	a.Done()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The file is named after Outline's title, which is what the reader
	// saw on the page.
	if or.doc.Title != "" {
		res.Title = or.doc.Title
	}
	writePDF(w, res.PDF, res.Title, res.Pages)
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
		defer a.Done()
	}
	if err == nil && or.checked != nil {
		// The text's own problems, which a render reports with its
		// images'; the status stops before the images.
		err = or.checked.Err()
	}
	problems := []limits.Problem{}
	if err != nil {
		ans := answerOf(err)
		if or == nil || or.doc == nil || ans.Status >= 500 {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "status: not renderable", "request_id", httperr.RequestID(r.Context()), "err", err)
		problems = ans.Problems
	}
	adm := s.cfg.Capacity.Admission()
	st := adm.Stats()
	// retryAfter says how long a render asked for now would likely wait:
	// 0 while a slot is free, otherwise the admission estimate.
	retry := 0
	if st.Running >= st.Slots {
		retry = int(math.Ceil(adm.RetryAfter().Seconds()))
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]any{
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

// outlineAnswer maps the errors of package outline (its sentinels) and
// of the Outline routes to their answers; ok is false for any other
// error. Outline's refusals become ours: no session stays 401, no access
// 403, no such document 404; an Outline that cannot be asked is a 502
// with source service, because nobody has to fix the document. Outline's
// own message is never shown: it is logged with the error.
func outlineAnswer(err error) (httperr.Answer, bool) {
	one := func(status int, p limits.Problem) (httperr.Answer, bool) {
		return httperr.One(status, p), true
	}
	forbidden := func(msg string) (httperr.Answer, bool) {
		return one(http.StatusForbidden, limits.Problem{Source: limits.SourceAuth, Code: httperr.CodeForbidden, Message: msg})
	}
	switch {
	case errors.Is(err, errOutlineOff):
		return one(http.StatusNotFound, limits.Problem{Source: limits.SourceRequest, Code: httperr.CodeNotFound,
			Message: "Outline documents are not served here: outline.url is not configured"})
	case errors.Is(err, outline.ErrNoDownload):
		return forbidden("you may read this document in Outline but not download it; printing it needs the download right, ask the document's owner")
	case errors.Is(err, outline.ErrDeleted):
		return one(http.StatusGone, limits.Problem{Source: limits.SourceDocument, Code: CodeDeleted,
			Message: "this document is in Outline's trash; restore it in Outline to print it"})
	case errors.Is(err, outline.ErrTooLarge):
		return one(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceDocument, Code: limits.CodeTooLarge,
			Message: "the document is too large to render"})
	case errors.Is(err, outline.ErrUnavailable):
		return one(http.StatusBadGateway, limits.Problem{Source: limits.SourceService, Code: CodeUnavailable,
			Message: "Outline could not be reached or answered with an error; retry later"})
	case errors.Is(err, outline.ErrNoSession):
		return one(http.StatusUnauthorized, limits.Problem{Source: limits.SourceAuth, Code: httperr.CodeUnauthorized,
			Message: "sign in to Outline first: the request has no valid Outline session (accessToken cookie)"})
	case errors.Is(err, outline.ErrSuspended):
		return forbidden("your Outline account is suspended")
	case errors.Is(err, outline.ErrForbidden):
		return forbidden("you have no access to this document in Outline")
	case errors.Is(err, outline.ErrPaymentRequired):
		// Outline's cloud answers 402 payment_required for every call of
		// a workspace whose plan has lapsed. Neither the reader nor a
		// retry can change that, and outprint is not at fault (no 5xx):
		// the reader may not print from this workspace until an admin
		// settles it.
		return forbidden("Outline refuses this workspace's requests until its plan is renewed (payment required); ask a workspace admin")
	case errors.Is(err, outline.ErrNotFound):
		return one(http.StatusNotFound, limits.Problem{Field: "documentId", Source: limits.SourceRequest, Code: httperr.CodeNotFound,
			Message: "Outline has no such document"})
	case errors.Is(err, outline.ErrBadID):
		return one(http.StatusBadRequest, limits.Problem{Field: "documentId", Source: limits.SourceRequest, Code: limits.CodeInvalid,
			Message: "the document id is not a UUID, urlId or slug-urlId"})
	case errors.Is(err, outline.ErrRateLimited):
		a := httperr.One(http.StatusTooManyRequests, limits.Problem{Source: limits.SourceService, Code: CodeRateLimited,
			Message: "Outline is limiting your requests; retry later"})
		a.RetryAfter = max(1, int(math.Ceil(outline.RetryAfter(err).Seconds())))
		return a, true
	case errors.Is(err, outline.ErrUnexpected):
		// Any other refusal (405, 422, …) means Outline and outprint
		// disagree about the API, not that the reader did something wrong.
		return one(http.StatusBadGateway, limits.Problem{Source: limits.SourceService, Code: CodeUnavailable,
			Message: "Outline answered in a way outprint does not understand; retry later or tell the operator"})
	}
	return httperr.Answer{}, false
}
