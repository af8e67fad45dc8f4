package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/outprint/outprint/internal/collection"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/render"
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
	user, checked, name, err := s.outlineCollectionCheck(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.admitAndRender(r, identity{user: user.ID, tenant: user.TeamID}, checked)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res.Title = name
	writePDF(w, res)
}

// errEmptyCollection answers a collection with nothing the reader may
// print.
var errEmptyCollection = limits.Invalid(limits.Problem{Field: "collectionId", Source: limits.SourceRequest,
	Code: limits.CodeInvalid, Message: "the collection has no document you may download"})

// outlineCollectionCheck reads the collection and every document of it as
// the reader and assembles them, without fetching images or counting
// anything.
func (s *Server) outlineCollectionCheck(r *http.Request) (*outline.User, *render.Checked, string, error) {
	c := s.cfg.Outline
	if c == nil {
		return nil, nil, "", errOutlineOff
	}
	id := r.PathValue("collectionId")
	if !outline.ValidCollectionID(id) {
		return nil, nil, "", &outline.APIError{Status: http.StatusBadRequest, Code: outline.CodeValidation,
			Message: "the collection id is not a UUID or urlId"}
	}
	token := outline.TokenFromRequest(r)
	if token == "" {
		return nil, nil, "", &outline.APIError{Status: http.StatusUnauthorized, Code: outline.CodeAuthenticationRequired,
			Message: "no valid accessToken cookie in the request"}
	}
	ctx := r.Context()
	user, err := c.AuthInfo(ctx, token)
	if err != nil {
		return nil, nil, "", err
	}
	col, err := c.Collection(ctx, token, id)
	if err != nil {
		return nil, nil, "", err
	}
	docs, skipped, err := readTree(ctx, c, token, col.Tree)
	if err != nil {
		return nil, nil, "", err
	}
	if len(docs) == 0 {
		if len(skipped) > 0 {
			return nil, nil, "", outline.ErrNoDownload
		}
		return nil, nil, "", errEmptyCollection
	}
	if err := collection.Check(docs); err != nil {
		return nil, nil, "", err
	}
	name := col.Name
	if strings.TrimSpace(name) == "" {
		name = "Untitled collection"
	}
	checked, err := s.cfg.Pipeline.Check(render.Request{
		Name:     name + ".md",
		Markdown: collection.Markdown(docs, skipped),
		Metadata: []byte(`{"toc":true}`),
		Outline:  &render.OutlineDoc{URL: c.BaseURL().String(), Title: name},
		Images:   c.Images(token),
		Parts:    len(docs),
	})
	return user, checked, name, err
}

// readTree reads the documents of a collection's tree in order, as the
// reader: those they may download become chapters, those they may only
// read are skipped with the reason, and one they cannot read at all
// (access changed since the tree was read, or deleted meanwhile) is left
// out. Reading stops with 413 once the texts pass
// limits.MaxCollectionBytes.
func readTree(ctx context.Context, c *outline.Client, token string, tree []outline.TreeNode) ([]collection.Doc, []collection.Skipped, error) {
	var docs []collection.Doc
	var skipped []collection.Skipped
	total := 0
	var walk func(nodes []outline.TreeNode, depth int) error
	walk = func(nodes []outline.TreeNode, depth int) error {
		for _, n := range nodes {
			doc, err := c.Document(ctx, token, n.ID)
			var api *outline.APIError
			switch {
			case errors.Is(err, outline.ErrNoDownload):
				skipped = append(skipped, collection.Skipped{Title: doc.Title, Why: "you may read it but not download it"})
			case errors.Is(err, outline.ErrDeleted),
				errors.As(err, &api) && (api.Status == http.StatusForbidden && api.Code == outline.CodeAuthorization || api.Status == http.StatusNotFound):
			case err != nil:
				return err
			default:
				total += len(doc.Text)
				if total > limits.MaxCollectionBytes {
					return limits.TooLargeThan(int64(total), limits.MaxCollectionBytes)
				}
				docs = append(docs, collection.Doc{Title: doc.Title, Depth: depth, Text: doc.Text})
			}
			if err := walk(n.Children, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return docs, skipped, walk(tree, 0)
}
