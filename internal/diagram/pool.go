package diagram

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// poolConfig is what the pool needs of the Drawer's Config.
type poolConfig struct {
	chromium        string
	max             int
	pagesPerBrowser int
	idle            time.Duration
	isolate         bool
	script          string
	tempDir         string // "" is os.TempDir()
	observer        Observer
}

// Stats are the pool's counters.
type Stats struct {
	// Browsers is how many Chromium processes run or start now; Idle how
	// many of their pages are prepared and waiting for a document.
	Browsers, Idle int
	// Started, Retired count Chromium processes over the pool's life;
	// Crashed counts those found dead or stopped by a diagram's bound.
	Started, Retired, Crashed int64
	// Pages counts pages handed out: one per document with Mermaid
	// diagrams not in the cache (a page serves many documents in turn).
	Pages int64
	// Refused counts requests pages made and interception refused.
	Refused int64
	// Isolated says the last Chromium started runs in a network
	// namespace of its own.
	Isolated bool
	// Pids are the browser processes (leaders of their groups) now.
	Pids []int
}

// errPoolClosed: Draw after Close.
var errPoolClosed = errors.New("diagram pool closed")

// pool keeps warm Chromium processes, each with one page prepared (TeX's
// pool keeps warm processes the same way): Mermaid loaded and set up when
// the browser starts, its code compiled after the first document. A document takes an idle page, draws its
// diagrams in it and gives it back; the page is reset off the render's
// path (page.go says why that keeps documents apart) and waits for the
// next document. A browser is replaced after pagesPerBrowser documents,
// when it died, or when a diagram's bound stopped it (its group is killed
// at once); browsers nobody used for idle end. No browser starts before
// the first document with a Mermaid diagram.
type pool struct {
	cfg poolConfig

	mu       sync.Mutex
	closed   bool
	live     int                   // browsers running or starting
	browsers map[*browser]struct{} // running
	idle     []*page               // prepared pages
	// wake is closed and replaced whenever a page is parked or a browser
	// start failed or ended: acquire waits on it.
	wake chan struct{}
	// failures counts failed starts; lastErr is the last one's error.
	failures int
	lastErr  error
	// startFailed: the last browser started failed to start or to
	// prepare its page, and none has started since (ready).
	startFailed bool
	isolated    bool
	reaping     bool // the reaper runs

	// bg is done at close; it bounds the background starts.
	bg       context.Context
	cancelBg context.CancelFunc
	// wg counts the pool's goroutines: starts, page preparations, the
	// reaper. close waits for them.
	wg sync.WaitGroup

	refused                         atomic.Int64
	started, retired, crashed, used atomic.Int64
}

func newPool(cfg poolConfig) *pool {
	bg, cancel := context.WithCancel(context.Background())
	return &pool{cfg: cfg, browsers: map[*browser]struct{}{}, wake: make(chan struct{}), bg: bg, cancelBg: cancel}
}

// isClosed reports whether close was called.
func (p *pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// broadcast wakes every waiter. Call with mu held.
func (p *pool) broadcast() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// acquire returns a prepared page for one document, starting a browser
// when none is ready and fewer than max run. It waits for ctx otherwise.
func (p *pool) acquire(ctx context.Context) (*page, error) {
	p.mu.Lock()
	failures := p.failures
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, errPoolClosed
		}
		for len(p.idle) > 0 {
			pg := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			if !pg.b.alive() || pg.ctx.Err() != nil {
				// Died while it waited (a crash, the CPU backstop, a
				// kill from outside): replace it.
				p.dropLocked(pg.b, RetireCrashed)
				p.mu.Unlock()
				pg.close()
				pg.b.kill()
				p.mu.Lock()
				continue
			}
			pg.b.uses++
			pg.b.lastUsed = time.Now()
			p.used.Add(1)
			p.mu.Unlock()
			return pg, nil
		}
		if p.failures != failures {
			err := p.lastErr
			p.mu.Unlock()
			return nil, err
		}
		if p.live < p.cfg.max {
			p.live++
			p.startLocked()
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
}

// startLocked starts a browser and its first page in the background; the
// page is parked in idle. Call with mu held, live already counted.
func (p *pool) startLocked() {
	if !p.reaping && p.cfg.idle > 0 {
		p.reaping = true
		p.wg.Add(1)
		go p.reap()
	}
	p.wg.Add(1)
	// The start goroutine is owned by the pool; it ends when the page is
	// parked or the start failed, bounded by browserStart and by close.
	go func() {
		defer p.wg.Done()
		b, err := startBrowser(p.bg, p.cfg.chromium, p.cfg.tempDir, p.cfg.isolate)
		if err != nil {
			// The failure is told before the waiters wake, so that a
			// Draw that fails for it finds it already counted.
			p.mu.Lock()
			p.live--
			if !p.closed {
				p.failures++
				p.lastErr = err
				p.startFailed = true
				p.cfg.observer.BrowserRetired(RetireFailedStart)
			}
			p.broadcast()
			p.mu.Unlock()
			return
		}
		p.started.Add(1)
		p.mu.Lock()
		p.browsers[b] = struct{}{}
		p.isolated = b.netns
		closed := p.closed
		p.mu.Unlock()
		if closed {
			p.retire(b, "")
			return
		}
		p.prepare(b)
	}()
}

// prepare prepares b's page and parks it; a browser that cannot prepare
// one is retired, and its failed start told to the waiters.
func (p *pool) prepare(b *browser) {
	pg, err := preparePage(p.bg, b, p.cfg.script, &p.refused)
	if err != nil {
		// One critical section: a waiter that sees the failure finds
		// the browser already retired and told.
		p.mu.Lock()
		if !p.closed {
			p.failures++
			p.lastErr = err
			p.startFailed = true
		}
		p.dropLocked(b, RetireFailedStart)
		p.mu.Unlock()
		b.kill()
		return
	}
	p.mu.Lock()
	p.startFailed = false
	p.mu.Unlock()
	p.park(pg)
}

// ready is nil unless the last browser the pool started failed to start
// or to prepare its page, and none started since: then it is that
// failure, and a browser is started again in the background (when fewer
// than max run) so that the answer changes once one can start. A pool
// that never started a browser is ready: no document needed one yet, and
// none is started to find out.
func (p *pool) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return errPoolClosed
	case !p.startFailed:
		return nil
	}
	if p.live < p.cfg.max {
		p.live++
		p.startLocked()
	}
	return fmt.Errorf("no browser can start: %w", p.lastErr)
}

// park puts a prepared page in idle, where acquire finds it; at close it
// ends the page's browser instead.
func (p *pool) park(pg *page) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pg.close()
		p.retire(pg.b, "")
		return
	}
	pg.b.lastUsed = time.Now()
	p.idle = append(p.idle, pg)
	p.broadcast()
	p.mu.Unlock()
}

// release takes a document's page back. A broken page (a diagram's bound
// stopped it, ctx ended while it drew, an internal failure) ends its
// browser before release returns; so does a browser that served
// pagesPerBrowser documents, and a replacement warms. Otherwise the page
// is reset in the background (nothing of the document stays in it; after
// its first document it is warmed too) and parked for the next document.
func (p *pool) release(pg *page, broken bool) {
	if pg == nil {
		return
	}
	b := pg.b
	p.mu.Lock()
	done := broken || p.closed || !b.alive() || b.uses >= p.cfg.pagesPerBrowser
	b.lastUsed = time.Now()
	p.mu.Unlock()
	if done {
		pg.close()
		cause := ""
		switch {
		case broken:
			cause = RetireStopped
		case !b.alive():
			cause = RetireCrashed
		case !p.isClosed():
			cause = RetireWorn
		}
		p.retire(b, cause)
		// A replacement warms now, off the next render's path, as TeX's
		// pool warms a process for the one it retires.
		p.mu.Lock()
		if !p.closed && p.live < p.cfg.max {
			p.live++
			p.startLocked()
		}
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	// Owned by the pool; ends when the page is parked or its browser
	// retired, bounded by pageReset and by close.
	go func() {
		defer p.wg.Done()
		reset := pg.reset
		if !pg.warmed {
			reset = pg.warm
		}
		if err := reset(p.bg); err != nil {
			pg.close()
			cause := RetireCrashed
			if p.isClosed() {
				cause = ""
			}
			p.retire(b, cause)
			return
		}
		p.park(pg)
	}()
}

// retire ends b (its whole process group, its folder) and forgets it, for
// cause (one of RetireCauses; "" at close, which is not reported).
func (p *pool) retire(b *browser, cause string) {
	p.mu.Lock()
	p.dropLocked(b, cause)
	p.mu.Unlock()
	b.kill()
}

// dropLocked forgets b, retired for cause. Call with mu held.
func (p *pool) dropLocked(b *browser, cause string) {
	if _, ok := p.browsers[b]; !ok {
		return
	}
	delete(p.browsers, b)
	p.live--
	p.retired.Add(1)
	if cause == RetireStopped || cause == RetireCrashed || cause == RetireFailedStart && !b.alive() {
		p.crashed.Add(1)
	}
	if cause != "" {
		p.cfg.observer.BrowserRetired(cause)
	}
	p.broadcast()
}

// reap ends browsers whose page waited unused longer than idle. Owned by
// the pool, it ends at close.
func (p *pool) reap() {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.cfg.idle/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.bg.Done():
			return
		case <-tick.C:
		}
		var stale []*page
		p.mu.Lock()
		keep := p.idle[:0]
		for _, pg := range p.idle {
			if time.Since(pg.b.lastUsed) > p.cfg.idle {
				stale = append(stale, pg)
			} else {
				keep = append(keep, pg)
			}
		}
		p.idle = keep
		p.mu.Unlock()
		for _, pg := range stale {
			pg.close()
			p.retire(pg.b, RetireIdle)
		}
	}
}

// close ends every browser, those whose pages are in use too, and waits
// for the pool's goroutines.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.broadcast()
	p.mu.Unlock()
	p.cancelBg()
	for _, pg := range idle {
		pg.close()
	}
	p.wg.Wait()
	p.mu.Lock()
	var all []*browser
	for b := range p.browsers {
		all = append(all, b)
	}
	p.mu.Unlock()
	for _, b := range all {
		p.retire(b, "")
	}
}

func (p *pool) stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Browsers: p.live, Idle: len(p.idle), Started: p.started.Load(), Retired: p.retired.Load(), Crashed: p.crashed.Load(),
		Pages: p.used.Load(), Refused: p.refused.Load(), Isolated: p.isolated,
	}
	for b := range p.browsers {
		s.Pids = append(s.Pids, b.pid)
	}
	return s
}

// String describes the pool for logs.
func (s Stats) String() string {
	return fmt.Sprintf("%d browsers (%d started, %d retired, %d crashed), %d pages, %d requests refused",
		s.Browsers, s.Started, s.Retired, s.Crashed, s.Pages, s.Refused)
}
