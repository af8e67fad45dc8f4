package tex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Idleness and health: the janitor retires what nobody uses, retries a
// preamble the pool keeps warm whose warm-ups failed, and Ready says
// whether the pool can render.

// readyFailures is how many warm-ups of a preamble the pool keeps warm
// must fail in a row before the pool says it is not ready: one failure
// may be chance (a warm-up cut off under load), two in a row are not.
const readyFailures = 2

// warmRetry is how long after a failed warm-up the janitor tries a
// preamble the pool keeps warm (Min) again.
const warmRetry = 30 * time.Second

// janitorEvery is how often the janitor sweeps: a quarter of the idle
// timeout, between 10 ms and 15 s.
func (p *Pool) janitorEvery() time.Duration {
	return min(max(p.cfg.IdleTimeout/4, 10*time.Millisecond), 15*time.Second)
}

// janitor sweeps the pool until it closes. It is the Pool's goroutine,
// counted in its WaitGroup.
func (p *Pool) janitor() {
	defer p.wg.Done()
	tick := time.NewTicker(p.janitorEvery())
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			p.sweep()
		}
	}
}

func (p *Pool) now() time.Time { return p.cfg.Clock.Now() }

// inUseLocked reports whether a render of prof came within IdleTimeout.
func (p *Pool) inUseLocked(prof *profile) bool {
	return p.now().Sub(prof.lastUsed) < p.cfg.IdleTimeout
}

// sweep retires, by the pool's clock, the warm processes that waited
// IdleTimeout (a preamble that still wants them gets fresh ones, forked
// from its zygote) and the zygotes a profile no longer wants: all of an
// unused profile's, the spare of one kept warm only by Min; so an idle
// server holds one zygote and Min warm processes per preamble it warms
// ahead. It retries a preamble kept warm whose warm-ups failed.
func (p *Pool) sweep() {
	now := p.now()
	var zs []*zygote
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	for _, prof := range p.profiles {
		for i := 0; i < len(prof.warm); {
			wp := prof.warm[i]
			if now.Sub(wp.warmAt) < p.cfg.IdleTimeout {
				i++
				continue
			}
			prof.warm = slices.Delete(prof.warm, i, i+1)
			wp.state = stateDead
			wp.p.killGroup() // its tending goroutine discards it
			p.stats.Retired++
		}
		if extra := len(prof.zygotes.ready) - p.zygoteWantLocked(prof); extra > 0 {
			// The newest go: the oldest serves.
			zs = append(zs, prof.zygotes.ready[len(prof.zygotes.ready)-extra:]...)
		}
		if prof.failing && prof.min > 0 && prof.starting == 0 && now.Sub(prof.failedAt) >= warmRetry && p.alive < p.cfg.Max {
			p.startLocked(prof, true)
		}
	}
	p.mu.Unlock()
	for _, z := range zs {
		p.retireZygote(z)
	}
}

// Ready reports whether the pool can render: nil, or why not. A pool is
// not ready when it is closed, or when the warm-ups of a preamble it keeps
// warm (Min, the service's usual profile) failed readyFailures times in a
// row and none succeeded since. Other preambles do not count: their
// profile comes from a document (its paper, its scripts), and one
// document must not make the server unready for every other. It reads
// the pool's state and starts nothing, so /readyz may call it each time.
func (p *Pool) Ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrPoolClosed
	}
	var errs []error
	keys := make([]string, 0, len(p.profiles))
	for k := range p.profiles {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		prof := p.profiles[k]
		if prof.failStreak < readyFailures || prof.min == 0 {
			continue
		}
		errs = append(errs, fmt.Errorf("TeX profile %s: %d warm-ups failed in a row: %w", prof.key, prof.failStreak, prof.lastErr))
	}
	return errors.Join(errs...)
}
