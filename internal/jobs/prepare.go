package jobs

import (
	"context"
	"sync"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/render"
)

// Acceptance runs the same cheap checks as a synchronous render (size,
// Binding, math) and fetches and validates the images, so that a broken
// document is refused with its 4xx at once instead of becoming a failed
// job. What passes is stored with the job (Submit) before the 202 answer:
// the Markdown, the metadata and the bytes of every image the document
// references, uploaded or fetched — for Outline documents with the
// reader's cookie, which is never stored. The worker renders from those
// bytes alone.

// PrepareFunc checks a document and fetches its images as acceptance asks:
// worker.Ticket.Prepare, within the caller's admission count and check
// budget.
type PrepareFunc func(ctx context.Context, req render.Request) (*render.Prepared, error)

// Prepare runs acceptance on req through prepare and returns the input to
// Submit (without tenant, user, key and callback). Every image the
// document references is kept, with the bytes it was validated with,
// keyed by the URL the Markdown uses; images the document does not
// reference are not. The job is named after the title the PDF will carry,
// so that its download is named as a synchronous render's is. digest is
// the request's idempotency digest (UploadDigest), "" to let Submit derive
// it from the input (RequestDigest: the document of an Outline job).
func Prepare(ctx context.Context, req render.Request, prepare PrepareFunc, digest string) (Input, error) {
	rec := &recordingSource{src: req.Images, got: map[string][]byte{}}
	if rec.src == nil {
		rec.src = images.Assets{}
	}
	req.Images = rec
	prepared, err := prepare(ctx, req)
	if err != nil {
		return Input{}, err
	}
	// The worker's render falls back to the name only when the document
	// has no title and no heading, and then the title came from this same
	// name.
	return Input{
		Name:     prepared.Title() + ".md",
		Markdown: req.Markdown,
		Metadata: req.Metadata,
		Assets:   rec.assets(),
		Digest:   digest,
	}, nil
}

// recordingSource keeps the bytes of every image it opened successfully,
// keyed by the URL the Markdown uses: images.Assets with those keys gives
// the worker exactly these bytes back (a key equal to the URL always
// matches). images.Load opens images from several goroutines.
type recordingSource struct {
	src images.Source
	mu  sync.Mutex
	got map[string][]byte
}

func (r *recordingSource) Open(ctx context.Context, url string) ([]byte, error) {
	b, err := r.src.Open(ctx, url)
	if err == nil {
		r.mu.Lock()
		r.got[url] = b
		r.mu.Unlock()
	}
	return b, err
}

func (r *recordingSource) assets() map[string][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// Doc is what package render needs of an Outline source.
func (o *OutlineSource) Doc() *render.OutlineDoc {
	if o == nil {
		return nil
	}
	return &render.OutlineDoc{URL: o.URL, Title: o.Title, Author: o.Author, UpdatedAt: o.UpdatedAt, Language: o.Language}
}

// Request is the render request of a stored Markdown job: what the worker
// checks and renders again, its images only those stored with it.
func (in RenderInput) Request() render.Request {
	req := render.Request{
		Name:     in.Name,
		Markdown: in.Markdown,
		Metadata: in.Metadata,
		Images:   images.Assets(in.Assets),
		Outline:  in.Outline.Doc(),
	}
	if in.Outline != nil {
		req.Parts = in.Outline.Parts
	}
	return req
}
