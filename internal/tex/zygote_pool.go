package tex

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// The Pool's side of zygotes: which profile has which, when they start and
// retire, and the slots their children fill.

// ZygoteConfig configures the zygotes of a Pool. The zero value is valid:
// every field has a default.
type ZygoteConfig struct {
	// Off turns zygotes off: every warm process warms up by itself (as
	// before zygotes; for comparisons and as the fallback's proof).
	Off bool
	// Forks retires a zygote after this many children (default 500).
	// Children share the zygote's address layout and stack canary, so a
	// document probing for them must not get unlimited tries.
	Forks int
	// Lifetime retires a zygote this long after it was ready (default 30
	// minutes), so the clock-dependent state it holds stays recent.
	Lifetime time.Duration
}

// Defaults of ZygoteConfig.
const (
	DefaultZygoteForks    = 500
	DefaultZygoteLifetime = 30 * time.Minute
)

func (c ZygoteConfig) withDefaults() ZygoteConfig {
	if c.Forks <= 0 {
		c.Forks = DefaultZygoteForks
	}
	if c.Lifetime <= 0 {
		c.Lifetime = DefaultZygoteLifetime
	}
	return c
}

// zygoteRetry is how long a profile whose zygote failed to start gets warm
// processes of its own before a zygote is tried again.
const zygoteRetry = time.Minute

// ZygoteStats are the zygotes' figures in PoolStats.
type ZygoteStats struct {
	// Zygotes are ready to fork; ZygotesStarting are warming up.
	Zygotes, ZygotesStarting int
	// Forked counts children forked from zygotes (renders that skipped
	// a warm-up); ZygotesRetired counts zygotes ended after their fork
	// count, lifetime, a crashed child, their own death or idleness;
	// ZygoteFailures counts zygotes that failed to start.
	Forked, ZygotesRetired, ZygoteFailures int
	// ZygoteCPU is the CPU time of every zygote so far, ended or alive:
	// their warm-ups and the forks (page tables are copied by the
	// zygote). A render's Result.CPU does not include it.
	ZygoteCPU time.Duration
	// ZygoteOff says why warm processes are not forked from zygotes
	// ("" when they may be): zygotes are off, the shim could not be
	// built, no xdvipdfmx.
	ZygoteOff string
}

// zygotes is the Pool's zygote state; its fields are under Pool.mu.
type zygotes struct {
	shimDone bool
	shim     string
	shimErr  error
	stats    ZygoteStats
	deadCPU  time.Duration
}

// profileZygotes is a profile's zygotes, under Pool.mu.
type profileZygotes struct {
	ready    []*zygote // oldest first: ready[0] serves, the next is the spare
	starting int
	failedAt time.Time
	lastErr  error
}

// zygoteOffLocked says why the pool does not use zygotes, "" when it does.
func (p *Pool) zygoteOffLocked() string {
	switch {
	case p.cfg.Zygote.Off:
		return "off by configuration"
	case p.sb.xdvipdfmx == "":
		return "no xdvipdfmx beside the TeX program"
	case p.zyg.shimErr != nil:
		return p.zyg.shimErr.Error()
	}
	return ""
}

// ensureZygotesLocked starts zygotes for prof: one while a profile is in
// use (Min > 0 or a render within the idle timeout), and a spare warming
// once that one is ready, so a retirement never leaves renders without.
func (p *Pool) ensureZygotesLocked(prof *profile) {
	z := &prof.zygotes
	if p.closed || p.zygoteOffLocked() != "" || time.Since(z.failedAt) < zygoteRetry {
		return
	}
	want := 0
	if prof.min > 0 || time.Since(prof.lastUsed) < p.cfg.IdleTimeout {
		want = 1
		if len(z.ready) > 0 {
			want = 2
		}
	}
	for len(z.ready)+z.starting < want {
		z.starting++
		p.wg.Add(1)
		go p.tendZygote(prof)
	}
}

// zygoteReady reports whether prof has a zygote to fork from.
func (p *Pool) zygoteReady(prof *profile) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(prof.zygotes.ready) > 0
}

// tendZygote starts a zygote for prof and watches it until it retires. It
// is the Pool's goroutine (counted in its WaitGroup) and ends when the
// zygote is gone.
func (p *Pool) tendZygote(prof *profile) {
	defer p.wg.Done()
	p.mu.Lock()
	build := !p.zyg.shimDone
	p.zyg.shimDone = true
	p.mu.Unlock()
	if build {
		// The first zygote of the pool builds the shim; others started
		// meanwhile find shim == "" and give up this once.
		path, err := buildShim(p.fmtDir)
		p.mu.Lock()
		p.zyg.shim, p.zyg.shimErr = path, err
		p.mu.Unlock()
	}
	fmtPath, releaseFormat := p.format(prof)
	p.mu.Lock()
	shim := p.zyg.shim
	if prof.fmtBroken {
		fmtPath = ""
	}
	p.mu.Unlock()
	var z *zygote
	err := errors.New("the zygote shim is still being built")
	if shim != "" {
		z, err = p.startZygote(prof, shim, fmtPath, p.stop)
	}
	releaseFormat() // a started zygote has loaded it (formats.go)

	p.mu.Lock()
	prof.zygotes.starting--
	if err != nil {
		if !p.closed && shim != "" {
			p.zyg.stats.ZygoteFailures++
			prof.zygotes.failedAt = time.Now()
			prof.zygotes.lastErr = err
		}
		p.notifyLocked()
		p.mu.Unlock()
		return
	}
	if p.closed {
		p.mu.Unlock()
		z.close()
		return
	}
	prof.zygotes.ready = append(prof.zygotes.ready, z)
	p.replenishLocked(prof) // the spare
	p.notifyLocked()
	p.mu.Unlock()

	life := time.NewTimer(p.cfg.Zygote.Lifetime)
	defer life.Stop()
	// A profile nobody used for the idle timeout (and without Min)
	// keeps no zygote, as it keeps no warm process.
	idle := time.NewTicker(p.cfg.IdleTimeout / 2)
	defer idle.Stop()
watch:
	for {
		select {
		case <-z.p.exited:
		case <-z.retire:
		case <-life.C:
		case <-p.stop:
		case <-idle.C:
			p.mu.Lock()
			unused := prof.min == 0 && time.Since(prof.lastUsed) >= p.cfg.IdleTimeout
			p.mu.Unlock()
			if !unused {
				continue
			}
		}
		break watch
	}
	p.retireZygote(z)

	z.mu.Lock() // a fork under way ends first
	z.close()
	z.mu.Unlock()
	p.mu.Lock()
	p.zyg.deadCPU += cpuTime(z.p.state)
	p.mu.Unlock()
}

// retireZygote retires z at once, whatever the reason: its fork count,
// a crashed child, its own death, its lifetime, its profile's idleness or
// the pool's closing. z leaves its profile's ready list and is counted in
// ZygotesRetired (unless the pool is closing) here, under the pool's lock
// and exactly once however many reasons come together, so the count has
// moved when the render that saw a crash returns. Its tending goroutine
// then ends the process and starts no other; replenishing starts the
// replacement.
func (p *Pool) retireZygote(z *zygote) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if z.retired {
		return
	}
	z.retired = true
	z.doRetire()
	prof := z.prof
	zs := &prof.zygotes
	for i, r := range zs.ready {
		if r == z {
			zs.ready = append(zs.ready[:i], zs.ready[i+1:]...)
			break
		}
	}
	if !p.closed {
		p.zyg.stats.ZygotesRetired++
		if len(zs.ready) == 0 {
			// Idle slots wait for a zygote that is gone: their
			// xdvipdfmx is stopped, their tending goroutines
			// discard them and warm processes of their own replace
			// them until a new zygote is ready.
			for _, wp := range prof.warm {
				if wp.driverW != nil {
					wp.p.killGroup()
				}
			}
		}
		p.replenishLocked(prof)
	}
	p.notifyLocked()
}

// warmSlot readies wp as a slot for a zygote's child: a scratch folder
// and a pre-started xdvipdfmx waiting on a pipe, whose write end becomes
// the child's fd 3. Its TeX process is forked when the document is there
// (forkChild); the slot costs the few milliseconds of xdvipdfmx's start.
func (p *Pool) warmSlot(wp *warmProc) error {
	wp.format = false
	dir, err := os.MkdirTemp(p.cfg.Runner.TempDir, "outprint-warm-")
	if err != nil {
		return fmt.Errorf("scratch folder: %w", err)
	}
	wp.dir = dir
	r, w, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("driver pipe: %w", err)
	}
	dv, err := p.sb.startProgram(dir, p.sb.xdvipdfmx, []string{"-q", "-E", "-o", "main.pdf"},
		cpuSeconds(p.cfg.WarmupTimeout+p.cfg.Runner.Timeout), nil, spawn{stdin: r})
	r.Close()
	if err != nil {
		w.Close()
		os.RemoveAll(dir)
		return err
	}
	wp.p, wp.driverW = dv, w
	wp.warmCPU = procCPU(dv.pid)
	return nil
}

// forkChild forks the TeX process of the slot wp, whose folder holds the
// document, from its profile's serving zygote. A zygote that is gone is
// retired and the next one tried; with none left, the render retries with
// another process (errProcGone), which is then one warmed by itself.
func (p *Pool) forkChild(wp *warmProc, maxPages int) (*proc, *zygote, error) {
	if err := writeFile(wp.dir, "go.tex", childGo(time.Now(), wp.nonce, maxPages)); err != nil {
		return nil, nil, err
	}
	lw := &lineWatcher{nonce: wp.nonce,
		pages: func(n int) {
			if h := wp.hooks.Load(); h != nil {
				h.pages(n)
			}
		},
		onTOC: func() {
			if h := wp.hooks.Load(); h != nil && h.toc != nil {
				h.toc()
			}
		},
	}
	for range 3 {
		p.mu.Lock()
		var z *zygote
		if r := wp.prof.zygotes.ready; len(r) > 0 {
			z = r[0]
		}
		p.mu.Unlock()
		if z == nil {
			return nil, nil, errProcGone
		}
		child, err := p.spawn(z, wp.dir, wp.driverW, cpuSeconds(p.cfg.Runner.Timeout), lw.line)
		if err == nil {
			// The child has its copy: xdvipdfmx must see the end of
			// its input when TeX (and cat) close theirs.
			wp.driverW.Close()
		}
		if errors.Is(err, errZygoteGone) {
			p.retireZygote(z)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		p.mu.Lock()
		p.zyg.stats.Forked++
		p.mu.Unlock()
		z.mu.Lock()
		n := z.forks
		z.mu.Unlock()
		if n >= p.cfg.Zygote.Forks {
			p.retireZygote(z)
		}
		child.follower = wp.p
		return child, z, nil
	}
	return nil, nil, errProcGone
}

// zygoteStatsLocked returns the zygotes' figures.
func (p *Pool) zygoteStatsLocked() ZygoteStats {
	s := p.zyg.stats
	s.ZygoteCPU = p.zyg.deadCPU
	for _, prof := range p.profiles {
		s.Zygotes += len(prof.zygotes.ready)
		s.ZygotesStarting += prof.zygotes.starting
		for _, z := range prof.zygotes.ready {
			s.ZygoteCPU += procCPU(z.p.pid)
		}
	}
	s.ZygoteOff = p.zygoteOffLocked()
	return s
}
