// Package worker is the render capacity of outprint: the budgeted render
// that `serve`'s local job workers and `outprint worker` share. A worker
// process has one capacity (worker.capacity, or derived from the cgroup CPU
// and memory limits, tex.DefaultCapacity), an admission controller whose
// slots synchronous renders sent by gateways and River jobs both draw from
// (Budget): a job worker holds one slot while it renders, as a synchronous
// render does. JobRenderer renders a stored job through the same pipeline,
// checking its input again (a worker does not trust the gateway).
//
// The worker's HTTP listener, which maps its errors to statuses, lives in
// httpapi (worker.go) like every other HTTP surface.
package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/render"
)

// Renderer runs the Render stage of a prepared document (the part that
// holds a slot). *render.Pipeline implements it.
type Renderer interface {
	Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error)
}

func outlineDoc(o *jobs.OutlineSource) *render.OutlineDoc {
	if o == nil {
		return nil
	}
	return &render.OutlineDoc{URL: o.URL, Title: o.Title, Author: o.Author, UpdatedAt: o.UpdatedAt, Language: o.Language}
}

// JobRenderer renders jobs through the render pipeline, as the worker side
// of a job: the stored input is checked again (the worker does not trust
// the gateway), its stored images loaded and validated, and the Render
// stage run with progress. It implements jobs.Renderer.
type JobRenderer struct {
	pipeline *render.Pipeline
	renderer Renderer
}

// NewJobRenderer returns a JobRenderer on p; r runs the Render stage
// (nil: p itself).
func NewJobRenderer(p *render.Pipeline, r Renderer) *JobRenderer {
	if r == nil {
		r = p
	}
	return &JobRenderer{pipeline: p, renderer: r}
}

// Render renders one job. Problems of the document are *limits.Error, as
// package jobs wants for failing at once; anything else is transient.
func (jr *JobRenderer) Render(ctx context.Context, in jobs.RenderInput, progress func(phase string, pages int)) ([]byte, error) {
	req := render.Request{
		Name:     in.Name,
		Markdown: in.Markdown,
		Metadata: in.Metadata,
		Images:   images.Assets(in.Assets),
		Outline:  outlineDoc(in.Outline),
	}
	if in.Outline != nil {
		req.Parts = in.Outline.Parts
	}
	checked, err := jr.pipeline.Check(req)
	if err != nil {
		return nil, err
	}
	prepared, err := jr.pipeline.Fetch(ctx, checked)
	if err != nil {
		return nil, err
	}
	res, err := jr.renderer.Render(ctx, prepared, func(p render.Progress) {
		if progress != nil {
			progress(p.Phase, p.Pages)
		}
	})
	if err != nil {
		return nil, err
	}
	return res.PDF, nil
}

// Budget makes job workers draw from the admission slots that
// synchronous renders take (SPEC §7: one budget): a worker holds one slot
// while it renders, waiting in the same FIFO queue as HTTP requests. It
// implements jobs.Budget.
//
// Each Acquire enters admission as a user of its own, so the per-user
// bound, which is about people, never holds a worker back. When the queue
// is full or the wait runs out, the worker tries again after a pause
// instead of failing its job. Once admission is closed for shutdown,
// Acquire waits for its context, which the job service cancels when its
// drain ends, so that the job is given back to the queue rather than
// failed.
type Budget struct {
	adm  *admission.Controller
	seq  atomic.Uint64
	mu   sync.Mutex
	held []*admission.Ticket
}

// NewBudget returns a budget drawing from adm.
func NewBudget(adm *admission.Controller) *Budget {
	return &Budget{adm: adm}
}

// budgetPause bounds the pause between two tries of a worker that found
// the admission queue full.
const budgetPause = time.Second

// Acquire takes a slot, waiting as long as ctx allows.
func (b *Budget) Acquire(ctx context.Context) error {
	for {
		// The NUL byte keeps these users apart from every user a key or
		// Outline can name.
		t, err := b.adm.Enter(fmt.Sprintf("\x00job-worker-%d", b.seq.Add(1)))
		if err == nil {
			err = t.Acquire(ctx)
			if err == nil {
				b.mu.Lock()
				b.held = append(b.held, t)
				b.mu.Unlock()
				return nil
			}
			t.Done(0)
		}
		var ref *admission.Refusal
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, admission.ErrClosed):
			<-ctx.Done()
			return ctx.Err()
		case !errors.As(err, &ref):
			return err
		}
		pause := time.Duration(float64(budgetPause) * (0.5 + rand.Float64()/2))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// Release gives a slot back. The tickets are alike, so any one goes; its
// duration is not recorded into the Retry-After estimate (Done(0)), since
// which render it timed is not known.
func (b *Budget) Release() {
	b.mu.Lock()
	n := len(b.held)
	if n == 0 {
		b.mu.Unlock()
		panic("worker: Budget.Release without Acquire")
	}
	t := b.held[n-1]
	b.held = b.held[:n-1]
	b.mu.Unlock()
	t.Done(0)
}
