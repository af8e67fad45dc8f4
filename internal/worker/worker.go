// Package worker is outprint's render capacity and the work that runs
// under it, the same in every role that renders: `serve` (HTTP renders
// and its own job workers), `outprint worker` (renders sent by gateways
// and queued jobs) and, for the counting and the checks only, `gateway`.
//
// One admission controller is the capacity (SPEC §4, §7). Synchronous work
// takes it through a Capacity: Enter counts the user, Check runs the cheap
// checks within their budget, Render fetches the images, takes a slot and
// renders, Do runs other work (a form) under a slot — the order of SPEC §4
// kept in one place for every handler, in httpapi and in cluster. Page
// previews are drawn in a pool of their own that never takes a render
// slot (Preview, preview.go). Queued jobs take the same slots through a
// Budget (jobs.Config.Budget), and a Jobs renders each kind of stored job
// (jobs.Kind): Markdown through the render pipeline, forms through
// forms.Filler, Office documents through a Converter (office.go). A new
// kind of work is one more case of Jobs.Render and one file here.
package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// Renderer runs the Render stage of a prepared document: the part that
// holds an admission slot. *render.Pipeline implements it, and a gateway's
// cluster.Remote takes its place.
type Renderer interface {
	Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error)
}

// Observer is told what admission and the renders did, for metrics.
// *metrics.Metrics implements it. All methods must be cheap and safe for
// concurrent use.
type Observer interface {
	// Refused counts one 429, by code (busy, user_limit).
	Refused(code string)
	// ObserveQueueWait records how long one request waited for a slot,
	// whatever the outcome of the wait.
	ObserveQueueWait(d time.Duration)
	// ObserveRender records one render that held a slot; result is "ok"
	// or the error code it ended with.
	ObserveRender(d time.Duration, result string)
	// ObserveRenderMemory records the peak resident memory of one
	// render's TeX processes, in bytes.
	ObserveRenderMemory(bytes int64)
	// ObserveConversion records one Office conversion by its format (a
	// name of office.Format) and result (as ObserveRender's), and the
	// time it took once it had a slot (0 for one refused before it ran:
	// counted, not timed); ObserveConversionQueue how long one waited
	// for its slot.
	ObserveConversion(format, result string, d time.Duration)
	ObserveConversionQueue(d time.Duration)
}

// DefaultCheckBudget bounds the cheap checks of one request: parsing a
// 1 MiB document takes well under a second, so a document that needs
// longer is hostile or pathological.
const DefaultCheckBudget = 5 * time.Second

// Config configures a Capacity. Pipeline and Admission are required.
type Config struct {
	// Pipeline runs the cheap checks and the image fetch.
	Pipeline *render.Pipeline
	// Renderer runs the Render stage under a slot (default Pipeline).
	Renderer Renderer
	// Admission is the capacity: slots, queue, per-user counts.
	Admission *admission.Controller
	// Observer is told about refusals, waits and renders (default: none).
	Observer Observer
	// CheckBudget bounds the cheap checks of one request (default
	// DefaultCheckBudget).
	CheckBudget time.Duration
	// CheckSlots is how many cheap checks may run at once, for all users
	// together (default: one fewer than GOMAXPROCS, at least one).
	CheckSlots int
	// PreviewSlots is how many page previews may be drawn at once, in a
	// pool apart from the render slots (preview.go; default
	// DefaultPreviewSlots of the machine's processors,
	// admission.previewSlots).
	PreviewSlots int
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Renderer == nil && c.Pipeline != nil {
		c.Renderer = c.Pipeline
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.CheckBudget <= 0 {
		c.CheckBudget = DefaultCheckBudget
	}
	if c.CheckSlots <= 0 {
		c.CheckSlots = checkSlots(runtime.GOMAXPROCS(0))
	}
	if c.PreviewSlots <= 0 {
		c.PreviewSlots = DefaultPreviewSlots(runtime.NumCPU())
	}
	return c
}

// validate refuses a configuration the capacity cannot work with (a
// wiring bug, found at startup).
func (c Config) validate() error {
	if c.Pipeline == nil || c.Admission == nil {
		return errors.New("worker: Pipeline and Admission are required")
	}
	return nil
}

// checkSlots is how many cheap checks may run at once with procs Go
// processors: one fewer than procs (at least one), so that however many
// hostile documents are being parsed, one processor is left for the
// server's other goroutines (accepting connections, /healthz, refusals)
// and none of them waits for the scheduler to preempt a parse.
func checkSlots(procs int) int { return max(procs-1, 1) }

type nopObserver struct{}

func (nopObserver) Refused(string)                                  {}
func (nopObserver) ObserveQueueWait(time.Duration)                  {}
func (nopObserver) ObserveRender(time.Duration, string)             {}
func (nopObserver) ObserveRenderMemory(int64)                       {}
func (nopObserver) ObserveConversion(string, string, time.Duration) {}
func (nopObserver) ObserveConversionQueue(time.Duration)            {}

// Capacity runs synchronous work in the order of SPEC §4. It is safe for
// concurrent use.
type Capacity struct {
	cfg      Config
	checks   chan struct{}         // one token per cheap check running
	previews *admission.Controller // the preview pool (preview.go)
}

// New returns the capacity cfg describes.
func New(cfg Config) (*Capacity, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	previews, err := newPreviews(cfg.Admission, cfg.PreviewSlots)
	if err != nil {
		return nil, err
	}
	return &Capacity{cfg: cfg, checks: make(chan struct{}, cfg.CheckSlots), previews: previews}, nil
}

// Admission is the controller the capacity draws from (readiness and
// status pages show its figures).
func (c *Capacity) Admission() *admission.Controller { return c.cfg.Admission }

// Pipeline is the render pipeline of the cheap checks and the fetch.
func (c *Capacity) Pipeline() *render.Pipeline { return c.cfg.Pipeline }

// Ticket is one request counted against its user: the admission ticket
// and what Done records. Every Ticket that Enter returned must be Done, on
// every path (a deferred Done also runs while a panic unwinds).
type Ticket struct {
	c *Capacity
	t *admission.Ticket
	// took is the duration of the render the ticket held a slot for,
	// recorded by Done into the Retry-After estimate; 0 records nothing.
	took time.Duration
	// detached is set when a check that outlived its budget took the
	// ticket over (Check).
	detached bool
	done     bool
}

// Enter counts a request against key (a user, keyed by the caller) before
// its body is read: SPEC §4's first step. A refusal is an
// *admission.Refusal (429 user_limit) or admission.ErrClosed.
func (c *Capacity) Enter(key string) (*Ticket, error) {
	t, err := c.cfg.Admission.Enter(key)
	if err != nil {
		c.refused(err)
		return nil, err
	}
	return &Ticket{c: c, t: t}, nil
}

// Done gives the ticket back, unless a check that outlives the request
// owns it (Check); it may be called more than once.
func (t *Ticket) Done() {
	if t.done || t.detached {
		return
	}
	t.done = true
	t.t.Done(t.took)
}

// Check runs the pipeline's cheap checks within the check budget. Parsing
// is pure CPU and cannot be stopped from outside, so when the budget (or
// ctx) runs out first the request is answered at once and the check goes
// on in its goroutine, which then owns the ticket and gives it back when
// the parse returns: the user stays counted for as long as their document
// costs CPU, so one user can never run more checks at once than
// admission.perUser allows. Checks of all users together take at most
// CheckSlots processors; a check that finds no place within its budget is
// refused busy.
func (t *Ticket) Check(ctx context.Context, req render.Request) (*render.Checked, error) {
	c := t.c
	type result struct {
		c   *render.Checked
		err error
	}
	timer := time.NewTimer(c.cfg.CheckBudget)
	defer timer.Stop()
	// A free place is taken first, before the budget is looked at.
	select {
	case c.checks <- struct{}{}:
	default:
		select {
		case c.checks <- struct{}{}:
		case <-timer.C:
			c.cfg.Observer.Refused(limits.CodeBusy)
			return nil, &admission.Refusal{Code: limits.CodeBusy, RetryAfter: time.Second}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ch := make(chan result, 1)
	go func() { // ends when Check returns; owns t.t once detached
		defer func() { <-c.checks }()
		checked, err := c.cfg.Pipeline.Check(req)
		ch <- result{checked, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	if !t.done {
		t.detached = true
		at := t.t
		go func() { // ends when the check above does
			<-ch
			at.Done(0)
		}()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, limits.Resource(fmt.Sprintf("its Markdown takes longer than %s to read", c.cfg.CheckBudget))
}

// CheckWith runs a check that starts a child process on the request's
// input (qpdf reading a form at a job's acceptance) as Check runs a parse:
// in one of the CheckSlots places, within the check budget counted from
// the call. The child is given a context that ends with the budget, so it
// is killed then (issue 24: qpdf ran outside the slots and the budget at
// acceptance, two users 1.87 GB at once). what names the input in the
// refusal ("its form"). A check that finds no place within the budget is
// refused busy; one that runs out of it is a limits.Resource error.
func (t *Ticket) CheckWith(ctx context.Context, what string, check func(ctx context.Context) error) error {
	c := t.c
	deadline := time.Now().Add(c.cfg.CheckBudget)
	timer := time.NewTimer(c.cfg.CheckBudget)
	defer timer.Stop()
	select {
	case c.checks <- struct{}{}:
	default:
		select {
		case c.checks <- struct{}{}:
		case <-timer.C:
			c.cfg.Observer.Refused(limits.CodeBusy)
			return &admission.Refusal{Code: limits.CodeBusy, RetryAfter: time.Second}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-c.checks }()
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := check(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return limits.Resource(fmt.Sprintf("%s takes longer than %s to read", what, c.cfg.CheckBudget))
	}
	return err
}

// Prepare is what acceptance asks of a job's document: the cheap checks
// (Check) and the images fetched and validated, without a slot.
func (t *Ticket) Prepare(ctx context.Context, req render.Request) (*render.Prepared, error) {
	checked, err := t.Check(ctx, req)
	if err != nil {
		return nil, err
	}
	return t.c.cfg.Pipeline.Fetch(ctx, checked)
}

// Render is the rest of SPEC §4 for a checked document: its images
// fetched and validated, a slot taken (FIFO queue, maxWait: 429 busy), the
// Render stage run under it. The ticket records the render's duration for
// the Retry-After estimate, unless no render ran, it panicked or the
// client left, since none of those says how long a render takes.
func (t *Ticket) Render(ctx context.Context, checked *render.Checked) (*render.Result, error) {
	prepared, err := t.c.cfg.Pipeline.Fetch(ctx, checked)
	if err != nil {
		return nil, err
	}
	var res *render.Result
	err = t.Do(ctx, func(ctx context.Context) (int64, error) {
		var err error
		res, err = t.c.cfg.Renderer.Render(ctx, prepared, nil)
		if res == nil {
			return 0, err
		}
		return res.MaxRSS, err
	})
	return res, err
}

// Do takes a slot and runs work under it, recorded as a render (forms).
// Page previews never come here: they have a pool of their own (Preview).
// work returns the peak resident memory of the processes it ran (0 for
// none) and its error.
func (t *Ticket) Do(ctx context.Context, work func(ctx context.Context) (maxRSS int64, err error)) error {
	c := t.c
	err := t.t.Acquire(ctx)
	c.cfg.Observer.ObserveQueueWait(t.t.Waited())
	if err != nil {
		c.refused(err)
		return err
	}
	start := time.Now()
	finished := false
	defer func() {
		if !finished { // work panicked; the panic goes on unwinding
			c.cfg.Observer.ObserveRender(time.Since(start), resultInternal)
		}
	}()
	rss, err := work(ctx)
	finished = true
	d := time.Since(start)
	result := Result(ctx, err)
	c.cfg.Observer.ObserveRender(d, result)
	if rss > 0 {
		c.cfg.Observer.ObserveRenderMemory(rss)
	}
	if result != ResultCanceled && result != resultInternal {
		t.took = d
	}
	return err
}

// Render results recorded besides the limits codes: a render that
// succeeded, one whose client went away mid-render, one that failed in a
// way that is ours.
const (
	ResultOK       = "ok"
	ResultCanceled = "canceled"
	resultInternal = limits.CodeInternal
)

// Result is the metrics label of a render's outcome: "ok", the code of a
// client-facing error, "canceled" or "internal". The set is bounded.
func Result(ctx context.Context, err error) string {
	var le *limits.Error
	switch {
	case err == nil:
		return ResultOK
	case ctx.Err() != nil:
		return ResultCanceled
	case errors.As(err, &le) && le.Code() != "":
		return le.Code()
	}
	return resultInternal
}

// refused counts a 429 for metrics.
func (c *Capacity) refused(err error) {
	var ref *admission.Refusal
	if errors.As(err, &ref) {
		c.cfg.Observer.Refused(ref.Code)
	}
}
