package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/outprint/outprint/internal/admission"
)

// Page previews (GET /v1/jobs/{id}/pages/{n}.png) are the lowest-priority
// work of a process: a picture of a page someone may look at, never worth
// delaying a render for. They are drawn in a pool of their own, an
// admission controller apart from the render slots with the same rules —
// the reader counted per user (admission.perUser: 429 user_limit), a FIFO
// queue of admission.queueDepth, admission.maxWait (429 busy) — and
// PreviewSlots drawings at once. A preview never takes a render slot, so
// however many previews are asked for, a render waits only for renders
// (issue 24: one user's forty previews held the one slot a bystander's
// render needed). The drawing itself runs at a lower CPU priority than TeX
// (raster.Nice), so on a busy machine the kernel gives TeX the processor
// first.

// DefaultPreviewSlots is how many previews may be drawn at once on procs
// processors: one per two (at least one). pdftoppm is one thread, so this
// leaves at least half the processors to TeX and the server however many
// previews are asked for.
func DefaultPreviewSlots(procs int) int { return max(procs/2, 1) }

// newPreviews is the preview pool beside the render admission adm: adm's
// queue, per-user bound and wait, and slots drawings at once.
func newPreviews(adm *admission.Controller, slots int) (*admission.Controller, error) {
	ac := adm.Config()
	p, err := admission.New(admission.Config{
		Slots: slots, QueueDepth: ac.QueueDepth, PerUser: ac.PerUser, MaxWait: ac.MaxWait, RenderLimit: ac.RenderLimit,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: preview pool: %w", err)
	}
	return p, nil
}

// Previews is the preview pool (its figures for /readyz and tests; the
// process closes it at shutdown with the render admission).
func (c *Capacity) Previews() *admission.Controller { return c.previews }

// Preview draws a page preview for the reader key in the preview pool:
// the reader is counted (a *admission.Refusal user_limit when they have
// admission.perUser previews queued or drawing), then draw runs once a
// preview slot is free (FIFO; busy when the queue is full or maxWait runs
// out; ctx's error when the client left). draw's duration feeds the
// pool's Retry-After estimate. Refusals are not the Observer's, whose
// counts are about renders (an alert pages on renders refused busy); the
// request metrics count them by route.
func (c *Capacity) Preview(ctx context.Context, key string, draw func(ctx context.Context) error) error {
	t, err := c.previews.Enter(key)
	if err != nil {
		return err
	}
	var took time.Duration
	defer func() { t.Done(took) }() // also when draw panics
	if err := t.Acquire(ctx); err != nil {
		return err
	}
	start := time.Now()
	err = draw(ctx)
	if err == nil {
		took = time.Since(start)
	}
	return err
}
