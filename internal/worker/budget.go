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
)

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
