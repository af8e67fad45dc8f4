package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/outprint/outprint/internal/store"
)

// Rasterizer draws one page of a PDF as a PNG of the given width in
// pixels. *raster.Rasterizer implements it in a sandboxed process.
type Rasterizer interface {
	Page(ctx context.Context, pdf []byte, page, width int) ([]byte, error)
}

// ErrNoSuchPage is a page number outside the result's pages.
var ErrNoSuchPage = errors.New("no such page")

// Thumbnail returns page (1-based) of a succeeded job's result as a PNG
// width pixels wide. A page drawn before is read from the job's folder;
// otherwise r draws it and it is stored there, so thumbnails expire and are
// deleted with the result (jobs.ttl). The errors are those of Result, and
// ErrNoSuchPage.
func (s *Service) Thumbnail(ctx context.Context, tenant, id string, page, width int, r Rasterizer) ([]byte, Job, error) {
	rc, job, err := s.Result(ctx, tenant, id)
	if err != nil {
		return nil, job, err
	}
	defer rc.Close()
	if page < 1 || (job.Pages > 0 && page > job.Pages) {
		return nil, job, ErrNoSuchPage
	}
	key := Keys{id}.Thumbnail(page, width)
	if cached, err := s.store.Get(ctx, key); err == nil {
		defer cached.Close()
		png, err := io.ReadAll(cached)
		if err != nil {
			return nil, job, fmt.Errorf("thumbnail %s: %w", key, err)
		}
		return png, job, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, job, fmt.Errorf("thumbnail %s: %w", key, err)
	}
	pdf, err := io.ReadAll(rc)
	if err != nil {
		return nil, job, fmt.Errorf("thumbnail of %s: read result: %w", id, err)
	}
	png, err := r.Page(ctx, pdf, page, width)
	if err != nil {
		return nil, job, err
	}
	// A failed write only costs the next request another drawing.
	if err := s.store.Put(ctx, key, bytes.NewReader(png)); err != nil {
		s.cfg.Logger.Warn("jobs: cache thumbnail", "job", id, "key", key, "err", err)
	}
	return png, job, nil
}
