package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/outprint/outprint/internal/raster"
	"github.com/outprint/outprint/internal/store"
)

// Rasterizer draws one page of a PDF as a PNG of the given width in
// pixels. *raster.Rasterizer implements it in a sandboxed process.
type Rasterizer interface {
	Page(ctx context.Context, pdf []byte, page, width int) ([]byte, error)
}

// ErrNoSuchPage is a page number outside the result's pages.
var ErrNoSuchPage = errors.New("no such page")

// ErrThumbnailRefused is a page that was found too costly to draw before
// (a drawing of it ran out of its bounds): the refusal is kept beside the
// result, so a client asking again costs a read, not another drawing.
// It wraps raster.ErrTooCostly.
var ErrThumbnailRefused = fmt.Errorf("%w (refused before)", raster.ErrTooCostly)

// Gate admits the drawing of a thumbnail that is not stored yet: it runs
// draw (reading the result and drawing the page) when the reader's turn
// comes, or returns why it does not. httpapi passes the preview pool
// (worker.Capacity.Preview); nil runs draw at once.
type Gate func(ctx context.Context, draw func(ctx context.Context) error) error

// Thumbnail returns page (1-based) of a succeeded job's result as a PNG
// width pixels wide. A page drawn before is read from the job's folder;
// otherwise, once gate admits it, the result is read and r draws the page,
// which is stored there, so thumbnails expire and are deleted with the
// result (jobs.ttl). The result is read only under the gate, so readers
// the gate refuses or keeps waiting hold no copy of it (issue 24: forty
// requests each read the whole result before they were refused). A
// drawing r refuses as too costly (raster.ErrTooCostly) is recorded there
// too and answered ErrThumbnailRefused from then on. The errors are those
// of Result, ErrNoSuchPage, the gate's and r's.
func (s *Service) Thumbnail(ctx context.Context, tenant, id string, page, width int, r Rasterizer, gate Gate) ([]byte, Job, error) {
	job, err := s.readable(ctx, tenant, id)
	if err != nil {
		return nil, job, err
	}
	if page < 1 || (job.Pages > 0 && page > job.Pages) {
		return nil, job, ErrNoSuchPage
	}
	png, found, err := s.storedThumbnail(ctx, id, page, width)
	if err != nil || found {
		return png, job, err
	}
	draw := func(ctx context.Context) error {
		// Another reader may have drawn it while this one waited.
		var found bool
		if png, found, err = s.storedThumbnail(ctx, id, page, width); err != nil || found {
			return err
		}
		png, err = s.drawThumbnail(ctx, id, page, width, r)
		return err
	}
	if gate == nil {
		err = draw(ctx)
	} else {
		err = gate(ctx, draw)
	}
	if err != nil {
		return nil, job, err
	}
	return png, job, nil
}

// storedThumbnail reads the drawing of page at width kept beside job id's
// result: found false when there is none, ErrThumbnailRefused when it was
// refused before.
func (s *Service) storedThumbnail(ctx context.Context, id string, page, width int) (png []byte, found bool, err error) {
	key := Keys{id}.Thumbnail(page, width)
	if cached, err := s.store.Get(ctx, key); err == nil {
		png, err := io.ReadAll(cached)
		_ = cached.Close() // read to its end or failed: nothing is lost
		if err != nil {
			return nil, false, fmt.Errorf("thumbnail %s: %w", key, err)
		}
		return png, true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, fmt.Errorf("thumbnail %s: %w", key, err)
	}
	if refused, err := s.store.Get(ctx, Keys{id}.ThumbnailRefused(page, width)); err == nil {
		_ = refused.Close() // only its existence counts
		return nil, false, ErrThumbnailRefused
	}
	return nil, false, nil
}

// drawThumbnail reads job id's result, has r draw page at width and keeps
// the drawing (or r's refusal of it) beside the result.
func (s *Service) drawThumbnail(ctx context.Context, id string, page, width int, r Rasterizer) ([]byte, error) {
	rc, err := s.store.Get(ctx, Keys{id}.Result())
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrExpired
	}
	if err != nil {
		return nil, fmt.Errorf("result %s: %w", id, err)
	}
	pdf, err := io.ReadAll(rc)
	_ = rc.Close() // read to its end or failed: nothing is lost
	if err != nil {
		return nil, fmt.Errorf("thumbnail of %s: read result: %w", id, err)
	}
	png, err := r.Page(ctx, pdf, page, width)
	if errors.Is(err, raster.ErrTooCostly) && ctx.Err() == nil {
		refusedKey := Keys{id}.ThumbnailRefused(page, width)
		if perr := s.store.Put(ctx, refusedKey, strings.NewReader(err.Error())); perr != nil {
			s.cfg.Logger.Warn("jobs: record refused thumbnail", "job", id, "key", refusedKey, "err", perr)
		}
	}
	if err != nil {
		return nil, err
	}
	// A failed write only costs the next request another drawing.
	key := Keys{id}.Thumbnail(page, width)
	if err := s.store.Put(ctx, key, bytes.NewReader(png)); err != nil {
		s.cfg.Logger.Warn("jobs: cache thumbnail", "job", id, "key", key, "err", err)
	}
	return png, nil
}
