package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/outprint/outprint/internal/collection"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/worker"
)

// outlineCollectionRender is GET /render/collection/{collectionId}: every
// document of an Outline collection the reader may download, in the
// collection's tree order, as one PDF (package collection): one title
// page, one table of contents over all documents with their nesting, each
// document a chapter, images fetched as the reader. Documents the reader
// may read but not download are listed as not printed on the contents
// page.
//
// The limits are a document's: pages and PDF size for the whole, the
// Markdown size and image count per document, and at most
// limits.MaxCollectionBytes of Markdown together (413 too_large as soon as
// the documents read so far pass it). Admission is a document's too: one
// slot and one count of the reader's per-user limit for the whole
// collection.
func (s *Server) outlineCollectionRender(w http.ResponseWriter, r *http.Request) {
	outlineHeaders(w)
	var a *worker.Ticket
	defer func() {
		if a != nil {
			a.Done()
		}
	}()
	enter := func(id identity) (*worker.Ticket, error) {
		var err error
		a, err = s.enter(id)
		return a, err
	}
	req, err := s.outlineCollectionRequest(r, r.PathValue("collectionId"), enter)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	checked, err := a.Check(r.Context(), req.Request)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := a.Render(r.Context(), checked)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res.Title = req.Collection.Title
	writePDF(w, res.PDF, res.Title, res.Pages)
}

// errEmptyCollection answers a collection with nothing the reader may
// print.
var errEmptyCollection = limits.Invalid(limits.Problem{Field: "collectionId", Source: limits.SourceRequest,
	Code: limits.CodeInvalid, Message: "the collection has no document you may download"})

// collectionPrefix marks a job's Outline source as a collection
// (jobs.OutlineSource.DocumentID).
const collectionPrefix = "collection:"

// outlineCollectionJob is POST /v1/jobs with {"source":{"outline":
// {"collectionId":"…"}}}: the collection read and assembled as for GET
// /render/collection, its images fetched with the reader's cookie at
// acceptance, rendered later by a worker. A download asks Outline again
// whether the reader of that request can read the collection.
func (s *Server) outlineCollectionJob(r *http.Request, a *worker.Ticket, id string) (jobs.Input, error) {
	// The job's caller was counted already (a).
	req, err := s.outlineCollectionRequest(r, id, func(identity) (*worker.Ticket, error) { return a, nil })
	if err != nil {
		return jobs.Input{}, err
	}
	src := &jobs.OutlineSource{
		DocumentID: collectionPrefix + req.Collection.ID,
		Parts:      req.Parts,
		URL:        req.Collection.URL,
		Title:      req.Collection.Title,
	}
	in, err := s.prepareJob(r.Context(), a, req.Request, "")
	in.Outline = src
	return in, err
}

// collectionRequest is a collection read and assembled: the render
// request, and the collection's id.
type collectionRequest struct {
	render.Request
	Collection struct {
		ID, URL, Title string
	}
}

// outlineCollectionRequest reads the collection and every document of it as
// the reader and assembles them, without fetching images. Once Outline
// confirmed the reader it counts them (enter), before the documents are
// read and checked.
func (s *Server) outlineCollectionRequest(r *http.Request, id string, enter func(identity) (*worker.Ticket, error)) (collectionRequest, error) {
	var cr collectionRequest
	c := s.cfg.Outline
	if c == nil {
		return cr, errOutlineOff
	}
	if !outline.ValidCollectionID(id) {
		return cr, errCollectionID
	}
	token := outline.TokenFromRequest(r)
	if token == "" {
		return cr, errNoCookie
	}
	ctx := r.Context()
	user, err := c.AuthInfo(ctx, token)
	if err != nil {
		return cr, err
	}
	if _, err := enter(identity{user: user.ID, tenant: user.TeamID}); err != nil {
		return cr, err
	}
	col, err := c.Collection(ctx, token, id)
	if err != nil {
		return cr, err
	}
	docs, skipped, err := collection.Read(ctx, col.Tree, func(ctx context.Context, id string) (*outline.Document, error) {
		return c.Document(ctx, token, id)
	})
	if err != nil {
		return cr, err
	}
	if len(docs) == 0 {
		if len(skipped) > 0 {
			return cr, outline.ErrNoDownload
		}
		return cr, errEmptyCollection
	}
	if err := collection.Check(docs); err != nil {
		return cr, err
	}
	name := col.Name
	if strings.TrimSpace(name) == "" {
		name = "Untitled collection"
	}
	cr.Request = render.Request{
		Name:     name + ".md",
		Markdown: collection.Markdown(docs, skipped),
		Metadata: []byte(`{"toc":true}`),
		Outline:  &render.OutlineDoc{URL: c.BaseURL().String(), Title: name},
		Images:   c.Images(token),
		Parts:    len(docs),
	}
	cr.Collection.ID, cr.Collection.URL, cr.Collection.Title = col.ID, c.BaseURL().String(), name
	return cr, nil
}
