// Package admission decides which renders may run (SPEC §4): a number of
// global slots, a FIFO queue of bounded depth in front of them, a bound on
// how many renders one user may have queued and running together, and a
// bound on how long a request may wait for a slot.
//
// Admission has two steps because the gateway counts the user before it
// fetches images (the expensive part of its own work) but takes a slot only
// right before the render, so that documents with errors never wait in the
// queue:
//
//	t, err := c.Enter(user)       // counts the user, or *Refusal user_limit
//	if err != nil {
//		return err
//	}
//	var took time.Duration        // render duration, 0 when nothing rendered
//	defer func() { t.Done(took) }() // gives everything back, on every path
//
//	... fetch and validate images (holds the user count, not a slot) ...
//
//	if err := t.Acquire(ctx); err != nil { // slot, or *Refusal busy,
//		return err                     // ctx error, or ErrClosed
//	}
//	start := time.Now()
//	res, err := renderer.Render(ctx, req)
//	took = time.Since(start)
//
// The deferred closure reads took when it runs, so a render that panics
// still gives its slot and user count back (with took 0, which records
// nothing into the Retry-After estimate), and a render that finished feeds
// its duration into the estimate. Done is idempotent, so calling it early
// (to free the slot before writing a large response) and again in the defer
// is fine.
//
// The queue is strictly FIFO: a freed slot is handed directly to the oldest
// waiter under the controller's lock, so a newcomer arriving at the same
// moment can never take it first. A waiter whose maxWait runs out is refused
// busy; a waiter whose context is cancelled (the client disconnected) leaves
// the queue and the next waiter moves up.
package admission

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// Sentinel errors. A *Refusal is the other error Enter and Acquire return.
var (
	// ErrClosed is returned by Enter and Acquire once Close was called,
	// including to requests that were waiting in the queue at that moment.
	// The gateway answers it with 503: the process is shutting down.
	ErrClosed = errors.New("admission: closed for shutdown")
	// ErrNoUser is returned by Enter for an empty user id. Every render
	// needs a confirmed user (SPEC §4); an empty one is a bug in the caller.
	ErrNoUser = errors.New("admission: no confirmed user")
	// ErrTicketUsed is returned by Acquire on a ticket that is already
	// done, already holds a slot, or is being acquired by another
	// goroutine. It is a bug in the caller.
	ErrTicketUsed = errors.New("admission: ticket used out of order")
)

// Defaults of the admission bounds (SPEC §4). They are the embedded
// configuration's values too (config.Default uses them). QueueDepth and
// MaxWait have a meaning at zero, so WithDefaults fills only Slots,
// PerUser and RenderLimit; the configuration sets the other two.
const (
	DefaultSlots      = 1
	DefaultQueueDepth = 4
	DefaultPerUser    = 1
	DefaultMaxWait    = 60 * time.Second
)

// Config holds the admission bounds. The config package validates the
// operator's values; New refuses values no valid configuration produces.
type Config struct {
	// Slots is how many renders may run at once (≥ 1; 0 means
	// DefaultSlots).
	Slots int
	// QueueDepth is how many requests may wait for a slot (≥ 0;
	// DefaultQueueDepth in the configuration). With 0 nothing waits: a
	// request that finds every slot taken is refused at once.
	QueueDepth int
	// PerUser is how many renders one user may have, queued and running
	// together (≥ 1; 0 means DefaultPerUser).
	PerUser int
	// MaxWait bounds the time a request waits in the queue
	// (DefaultMaxWait in the configuration). Zero or negative means the
	// wait is bounded only by the request's context.
	MaxWait time.Duration
	// RenderLimit is the render time limit; it caps Retry-After. Zero
	// means limits.DefaultRenderTimeout.
	RenderLimit time.Duration
}

// InitialEstimate is the render duration Retry-After assumes before any
// render has finished: a mid-size document on a cold engine.
const InitialEstimate = 5 * time.Second

// ewmaWeight is the weight of the newest render duration in the moving
// average. 0.3 lets the estimate follow a change of load within a handful
// of renders while one outlier moves it by less than a third.
const ewmaWeight = 0.3

// Controller is the admission state of one gateway process. It is safe for
// concurrent use. The zero value is not usable; call New.
type Controller struct {
	cfg Config

	mu       sync.Mutex
	running  int                // slots held
	queue    list.List          // of *waiter, oldest first
	users    map[string]int     // tickets not yet done, per user
	tickets  int                // tickets not yet done, all users
	closed   bool               // Close was called
	drained  chan struct{}      // closed once closed && tickets == 0
	estimate time.Duration      // moving average of render durations
	samples  int                // render durations recorded
	refused  [numReasons]uint64 // refusals by reason
}

// reason says why a request was refused; it refines the code for Stats.
type reason int

const (
	reasonQueueFull reason = iota
	reasonMaxWait
	reasonUserLimit
	numReasons
)

// WithDefaults returns c with its zero values that mean "the default"
// filled in: Slots, PerUser and RenderLimit.
func (c Config) WithDefaults() Config {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.PerUser == 0 {
		c.PerUser = DefaultPerUser
	}
	if c.RenderLimit <= 0 {
		c.RenderLimit = limits.DefaultRenderTimeout
	}
	return c
}

// validate refuses bounds no valid configuration produces.
func (c Config) validate() error {
	switch {
	case c.Slots < 1:
		return fmt.Errorf("admission: Slots %d: want at least 1", c.Slots)
	case c.PerUser < 1:
		return fmt.Errorf("admission: PerUser %d: want at least 1", c.PerUser)
	case c.QueueDepth < 0:
		return fmt.Errorf("admission: QueueDepth %d: want 0 or more", c.QueueDepth)
	}
	return nil
}

// New returns a controller for cfg with its defaults filled in, or an
// error when Slots or PerUser is below 1 or QueueDepth is negative (the
// config package never produces such values).
func New(cfg Config) (*Controller, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Controller{
		cfg:      cfg,
		users:    make(map[string]int),
		drained:  make(chan struct{}),
		estimate: InitialEstimate,
	}, nil
}

// Config returns the bounds the controller was made with (RenderLimit
// filled in).
func (c *Controller) Config() Config { return c.cfg }

// Ticket is one request's place in admission: it holds the user count from
// Enter until Done, and a slot from a successful Acquire until Done. A
// ticket belongs to one request; Done may be called from any goroutine.
type Ticket struct {
	c    *Controller
	user string

	// Guarded by c.mu.
	state  ticketState
	w      *waiter // while waiting
	waited time.Duration
}

type ticketState int

const (
	stateEntered ticketState = iota // counted, no slot
	stateWaiting                    // in the queue
	stateHolding                    // holds a slot
	stateDone                       // everything given back
)

// waiter is a ticket's place in the queue. ready is closed when the waiter
// was granted a slot (granted true) or the controller closed (granted
// false); both are decided under c.mu, and the waiter is no longer in the
// queue by then.
type waiter struct {
	ready   chan struct{}
	granted bool
	elem    *list.Element
}

// Enter counts one render for user. It returns a *Refusal with code
// user_limit when the user already has PerUser renders queued or running,
// ErrClosed after Close, and ErrNoUser for an empty user. On success the
// caller must call Done on the ticket on every path, panics included,
// normally with a defer right after the error check (see the package
// documentation); until then the user stays counted.
func (c *Controller) Enter(user string) (*Ticket, error) {
	if user == "" {
		return nil, ErrNoUser
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.users[user] >= c.cfg.PerUser {
		c.refused[reasonUserLimit]++
		return nil, &Refusal{Code: limits.CodeUserLimit, RetryAfter: c.retryAfterLocked()}
	}
	c.users[user]++
	c.tickets++
	return &Ticket{c: c, user: user}, nil
}

// Acquire takes a slot for the ticket, waiting in the FIFO queue when every
// slot is taken. It returns nil once the slot is held; a *Refusal with code
// busy when the queue is full or MaxWait ran out; ctx.Err() when ctx ended
// first (the client disconnected), in which case the waiter has left the
// queue; ErrClosed when the controller closed. On any error the ticket
// holds no slot but still holds its user count until Done.
func (t *Ticket) Acquire(ctx context.Context) error {
	w, err := t.enqueue(ctx)
	if w == nil {
		return err
	}
	start := time.Now()
	cause := t.c.wait(ctx, w)
	return t.settle(w, cause, time.Since(start))
}

// enqueue takes a free slot when nobody waits, or else puts the ticket
// in the queue and returns its waiter; a nil waiter means Acquire is
// over, with the error it returns (nil: the slot is held).
func (t *Ticket) enqueue(ctx context.Context) (*waiter, error) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.state != stateEntered {
		return nil, ErrTicketUsed
	}
	if c.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A free slot may be taken directly only when nobody waits: the queue
	// is non-empty only while every slot is held (a freed slot goes
	// straight to the oldest waiter), but checking both keeps FIFO order
	// even if that ever changed.
	if c.running < c.cfg.Slots && c.queue.Len() == 0 {
		c.running++
		t.state = stateHolding
		return nil, nil
	}
	if c.queue.Len() >= c.cfg.QueueDepth {
		c.refused[reasonQueueFull]++
		return nil, &Refusal{Code: limits.CodeBusy, RetryAfter: c.retryAfterLocked()}
	}
	w := &waiter{ready: make(chan struct{})}
	w.elem = c.queue.PushBack(w)
	t.state = stateWaiting
	t.w = w
	return w, nil
}

// wait waits until w is granted a slot, ctx ends or MaxWait runs out,
// and returns ctx's error in the second case, nil in the others.
func (c *Controller) wait(ctx context.Context, w *waiter) error {
	var timeout <-chan time.Time
	if c.cfg.MaxWait > 0 {
		timer := time.NewTimer(c.cfg.MaxWait)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		return ctx.Err()
	case <-timeout:
	}
	return nil
}

// settle ends the wait of waiter w, which took waited, for the reason
// cause (ctx's error, or nil when granted, timed out or closed): the
// slot is kept, passed on or never came, and the ticket leaves the
// queue.
func (t *Ticket) settle(w *waiter, cause error, waited time.Duration) error {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	t.waited = waited
	t.w = nil
	if t.state != stateWaiting {
		// Done was called from another goroutine while we waited; it
		// removed the waiter (or gave back the slot it was granted).
		return ErrTicketUsed
	}
	if w.granted {
		if cause != nil {
			// Granted in the same instant the client went away: pass
			// the slot on rather than hold it for nobody.
			c.releaseLocked()
			t.state = stateEntered
			return cause
		}
		// Granted, possibly in the same instant MaxWait ran out: the
		// slot came within the wait, so keep it.
		t.state = stateHolding
		return nil
	}
	t.state = stateEntered
	if w.elem != nil {
		c.queue.Remove(w.elem)
		w.elem = nil
	}
	switch {
	case c.closed && cause == nil:
		return ErrClosed
	case cause != nil:
		return cause
	default:
		c.refused[reasonMaxWait]++
		return &Refusal{Code: limits.CodeBusy, RetryAfter: c.retryAfterLocked(), Waited: t.waited}
	}
}

// Waited returns how long the last Acquire waited in the queue (0 when it
// found a free slot). It feeds the queue wait histogram.
func (t *Ticket) Waited() time.Duration {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.waited
}

// User returns the user the ticket counts against.
func (t *Ticket) User() string { return t.user }

// Done gives back the ticket's slot (if it holds one) and its user count,
// and records d, the render's duration, into the moving average behind
// Retry-After; d ≤ 0 records nothing (no render ran, or it panicked).
// Done is idempotent and safe to call from a deferred function; a nil
// ticket is ignored so that `defer t.Done(...)` before the error check
// cannot panic.
func (t *Ticket) Done(d time.Duration) {
	if t == nil {
		return
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch t.state {
	case stateDone:
		return
	case stateHolding:
		c.releaseLocked()
	case stateWaiting:
		// Another goroutine is blocked in Acquire; take the waiter out
		// (or pass on a slot granted to it) so Acquire returns promptly.
		w := t.w
		if w.granted {
			c.releaseLocked()
		} else if w.elem != nil {
			c.queue.Remove(w.elem)
			w.elem = nil
			close(w.ready)
		}
	}
	t.state = stateDone
	if n := c.users[t.user] - 1; n > 0 {
		c.users[t.user] = n
	} else {
		delete(c.users, t.user)
	}
	c.tickets--
	if d > 0 {
		c.recordLocked(d)
	}
	if c.closed && c.tickets == 0 {
		closeOnce(c.drained)
	}
}

// releaseLocked gives one held slot back: straight to the oldest waiter
// when there is one (running stays the same), otherwise to the pool.
func (c *Controller) releaseLocked() {
	if front := c.queue.Front(); front != nil {
		w := c.queue.Remove(front).(*waiter)
		w.elem = nil
		w.granted = true
		close(w.ready)
		return
	}
	c.running--
}

// recordLocked feeds one render duration into the moving average.
func (c *Controller) recordLocked(d time.Duration) {
	if c.samples == 0 {
		c.estimate = d
	} else {
		c.estimate = time.Duration(ewmaWeight*float64(d) + (1-ewmaWeight)*float64(c.estimate))
	}
	c.samples++
}

// RetryAfter returns the Retry-After estimate: about one render, from the
// moving average of recent render durations (InitialEstimate before the
// first), rounded up to whole seconds, at least 1 s and at most the render
// time limit (itself rounded up to whole seconds).
func (c *Controller) RetryAfter() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retryAfterLocked()
}

func (c *Controller) retryAfterLocked() time.Duration {
	return retryAfter(c.estimate, c.cfg.RenderLimit)
}

// retryAfter rounds estimate up to whole seconds within [1 s, limit].
func retryAfter(estimate, limit time.Duration) time.Duration {
	ceil := func(d time.Duration) time.Duration {
		return time.Duration(math.Ceil(d.Seconds())) * time.Second
	}
	r, max := ceil(estimate), ceil(limit)
	if r > max {
		r = max
	}
	if r < time.Second {
		r = time.Second
	}
	return r
}

// Stats is a snapshot of the admission state for metrics, /status and
// tests.
type Stats struct {
	Slots      int // configured slots
	QueueDepth int // configured queue depth
	Running    int // slots held
	Queued     int // requests waiting for a slot
	Tickets    int // requests counted against their user (entered, not done)
	Users      int // distinct users with at least one ticket

	// Refusals since New, by cause. Busy refusals are RefusedQueueFull +
	// RefusedMaxWait.
	RefusedQueueFull uint64 // code busy: no slot and no place in the queue
	RefusedMaxWait   uint64 // code busy: the wait ran out
	RefusedUserLimit uint64 // code user_limit
}

// Stats returns a consistent snapshot of the admission state.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Slots:            c.cfg.Slots,
		QueueDepth:       c.cfg.QueueDepth,
		Running:          c.running,
		Queued:           c.queue.Len(),
		Tickets:          c.tickets,
		Users:            len(c.users),
		RefusedQueueFull: c.refused[reasonQueueFull],
		RefusedMaxWait:   c.refused[reasonMaxWait],
		RefusedUserLimit: c.refused[reasonUserLimit],
	}
}

// Close starts shutdown: every queued waiter gets ErrClosed at once, and
// later Enter and Acquire calls get ErrClosed. Tickets that hold a slot
// keep it until Done, so running renders can finish; Drained reports when
// they have. Close is idempotent.
func (c *Controller) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for e := c.queue.Front(); e != nil; {
		next := e.Next()
		w := c.queue.Remove(e).(*waiter)
		w.elem = nil
		close(w.ready)
		e = next
	}
	if c.tickets == 0 {
		closeOnce(c.drained)
	}
}

// Closed reports whether Close was called: the process is shutting down
// and takes no new render (a worker's /readyz then answers not ready, so
// gateways stop sending to it before a call fails).
func (c *Controller) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Drained returns a channel that is closed once Close was called and every
// ticket is done: no render runs and no user is counted any more. A
// shutdown waits on it, bounded by its grace period.
func (c *Controller) Drained() <-chan struct{} { return c.drained }

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Refusal is a request admission turned away: code busy (no slot and no
// place in the queue, or the wait ran out) or user_limit (the user already
// has PerUser renders). Waiting helps, so the answer is 429 with
// Retry-After.
type Refusal struct {
	// Code is limits.CodeBusy or limits.CodeUserLimit.
	Code string
	// RetryAfter is the estimate for the Retry-After header, whole
	// seconds, at least 1 s.
	RetryAfter time.Duration
	// Waited is how long the request waited in the queue before MaxWait
	// ran out; 0 for a refusal at once.
	Waited time.Duration
}

// Error describes the refusal for logs.
func (r *Refusal) Error() string {
	if r.Waited > 0 {
		return fmt.Sprintf("admission refused (%s) after waiting %s, retry after %s", r.Code, r.Waited.Round(time.Millisecond), r.RetryAfter)
	}
	return fmt.Sprintf("admission refused (%s), retry after %s", r.Code, r.RetryAfter)
}

// Messages of the refusal bodies (SPEC §4). Clients see them.
const (
	BusyMessage      = "busy, retry later: the renderer is at capacity"
	UserLimitMessage = "too many renders, retry later: you already have as many renders queued or running as one user may have"
)

// LimitsError returns the client answer: a KindBusy error (the HTTP
// layer answers 429) with the one-problem error list of SPEC §4, source
// service. The HTTP layer adds the Retry-After header from
// RetryAfterSeconds.
func (r *Refusal) LimitsError() *limits.Error {
	msg := BusyMessage
	if r.Code == limits.CodeUserLimit {
		msg = UserLimitMessage
	}
	return &limits.Error{Kind: limits.KindBusy, Problems: []limits.Problem{{
		Source: limits.SourceService, Code: r.Code, Message: msg,
	}}}
}

// RetryAfterSeconds returns the value of the Retry-After header: whole
// seconds, at least 1.
func (r *Refusal) RetryAfterSeconds() int {
	s := int(math.Ceil(r.RetryAfter.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
