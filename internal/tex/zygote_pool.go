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
	// Forked counts children forked from zygotes (each a warm process
	// that skipped its warm-up); ZygotesRetired counts zygotes ended after their fork
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

// zygoteWantLocked is how many zygotes prof keeps: two while renders use
// it (the spare warms once the first is ready, so a retirement never
// leaves renders without), one when only Min keeps it warm, none when it
// is unused (the janitor retires the rest, sweep).
func (p *Pool) zygoteWantLocked(prof *profile) int {
	switch {
	case p.inUseLocked(prof):
		return 2
	case prof.min > 0:
		return 1
	}
	return 0
}

// ensureZygotesLocked starts the zygotes prof wants (zygoteWantLocked),
// within the memory budget: a spare only with room left for a process
// of its own beside it, since a spare is worth less than a render.
func (p *Pool) ensureZygotesLocked(prof *profile) {
	z := &prof.zygotes
	if p.closed || p.zygoteOffLocked() != "" || p.now().Sub(z.failedAt) < zygoteRetry {
		return
	}
	starved := p.starvedLocked()
	want := p.zygoteWantLocked(prof)
	if len(z.ready) == 0 {
		want = min(want, 1)
	}
	for len(z.ready)+z.starting < want {
		need := int64(zygoteBytes)
		if len(z.ready)+z.starting > 0 {
			need += ownBytes
		}
		if starved {
			// A render waits for a process: the zygote must leave
			// room for it (under saturation renders wait all the time,
			// and zygotes must still start where memory allows).
			need += ownBytes
		}
		if !p.fitsLocked(need) {
			return
		}
		z.starting++
		p.addMemLocked(zygoteBytes)
		p.wg.Add(1)
		go p.tendZygote(prof)
	}
}

// waitZygote waits while prof has no zygote ready but one is starting,
// and reports whether one is ready. A process that warmed up by itself
// meanwhile would cost a whole warm-up of CPU (0.5 to 0.9 s here) and be
// stopped as soon as the zygote is ready, whose children replace it: at
// every start of a pool, and at the first render of every profile, for a
// process that is ready hardly sooner than the zygote's first child (both
// are one warm-up, on the same cores). It returns at once when no zygote
// is starting (zygotes off, failed lately, or no memory for one).
func (p *Pool) waitZygote(prof *profile) bool {
	p.mu.Lock()
	for len(prof.zygotes.ready) == 0 && prof.zygotes.starting > 0 && !p.closed {
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.stop:
			return false
		}
		p.mu.Lock()
	}
	ready := len(prof.zygotes.ready) > 0
	p.mu.Unlock()
	return ready
}

// tendZygote starts a zygote for prof and watches it until it retires. It
// is the Pool's goroutine (counted in its WaitGroup) and ends when the
// zygote is gone.
func (p *Pool) tendZygote(prof *profile) {
	defer p.wg.Done()
	defer func() {
		// Its memory is free: a render waiting for room goes on, else
		// what it made room for starts (its replacement, a spare).
		p.mu.Lock()
		p.mem -= zygoteBytes
		if !p.closed {
			p.replenishAll()
		}
		p.notifyLocked()
		p.mu.Unlock()
	}()
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
			prof.zygotes.failedAt = p.now()
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
	// Processes of their own that warmed while the zygote started (one
	// whose start began before it, or after its last start failed) hold
	// as much memory as it does; its children, which share its pages,
	// replace them (discard replenishes).
	for i := 0; i < len(prof.warm); {
		if wp := prof.warm[i]; wp.goW == nil {
			prof.warm = append(prof.warm[:i], prof.warm[i+1:]...)
			wp.state = stateDead
			wp.p.killGroup()
			continue
		}
		i++
	}
	p.replenishLocked(prof) // the spare
	p.notifyLocked()
	p.mu.Unlock()
	p.signals.ZygoteWarmed.Signal(struct{}{})

	// The janitor retires a zygote its profile no longer wants (sweep)
	// through z.retire.
	life := time.NewTimer(p.cfg.Zygote.Lifetime)
	defer life.Stop()
	select {
	case <-z.p.exited:
	case <-z.drv.p.exited:
	case <-z.retire:
	case <-life.C:
	case <-p.stop:
	}
	p.retireZygote(z)

	z.mu.Lock() // a fork under way ends first
	z.close()
	z.mu.Unlock()
	p.mu.Lock()
	p.zyg.deadCPU += z.cpu()
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
	p.retireZygoteLocked(z)
}

func (p *Pool) retireZygoteLocked(z *zygote) {
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
		p.replenishLocked(prof)
	}
	p.notifyLocked()
}

// retireCrashed retires z, one of whose children died of a signal that may
// mean probing (see crashed), and ends its idle children too: they share
// its layout and stack canary, so a prober gets no more tries on them.
// Their tending goroutines see them gone and start replacements.
func (p *Pool) retireCrashed(z *zygote) {
	p.retireZygote(z)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, wp := range z.prof.warm {
		if wp.zyg == z {
			wp.p.killGroup()
		}
	}
}

// warmSlot readies wp as a zygote's child waiting for its document, with
// a driver child waiting for the child's output: both forked from the
// profile's serving zygote pair, detached, in a scratch folder of their
// own, waiting on their go pipes (see shim.c). Like a warm process the
// slot is ready before the render, so the forks and the children's start
// are not on the render's path. A zygote that is gone is retired and the
// next one tried; with none left, errZygoteGone: the slot then warms a
// process of its own.
func (p *Pool) warmSlot(wp *warmProc) error {
	wp.format = false
	dir, err := os.MkdirTemp(p.cfg.Runner.TempDir, "outprint-warm-")
	if err != nil {
		return fmt.Errorf("scratch folder: %w", err)
	}
	for range 3 {
		p.mu.Lock()
		var z *zygote
		if r := wp.prof.zygotes.ready; len(r) > 0 {
			z = r[0]
		}
		p.mu.Unlock()
		if z == nil {
			break
		}
		child, goW, err := p.forkPair(z, dir, wp.lineWatcher().line, false)
		if errors.Is(err, errZygoteGone) {
			p.retireZygote(z)
			continue
		}
		if err != nil {
			_ = os.RemoveAll(dir) // err is the error; dir is scratch
			return err
		}
		p.mu.Lock()
		p.zyg.stats.Forked++
		p.mu.Unlock()
		p.signals.Forked.Signal(struct{}{})
		z.mu.Lock()
		n := z.forks
		z.mu.Unlock()
		if n >= p.cfg.Zygote.Forks {
			p.retireZygote(z)
		}
		wp.dir, wp.p, wp.goW, wp.zyg = dir, child, goW, z
		wp.warmCPU = procCPU(child.pid) + procCPU(child.follower.pid)
		return nil
	}
	_ = os.RemoveAll(dir) // scratch: a failure costs only disk
	return errZygoteGone
}

// forkPair forks a driver child of z's driver zygote and then a TeX child
// of z in dir (the probe pair with probe, see Pool.probe). It returns the TeX child, whose follower is the driver
// child (started by wait, see proc.followerGo), and the TeX child's go
// pipe.
func (p *Pool) forkPair(z *zygote, dir string, onLine func(string), probe bool) (*proc, *os.File, error) {
	cpu := cpuSeconds(p.cfg.Runner.Timeout)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	// Our copies of /dev/null and of the pipes' ends go once the children
	// hold theirs; their Closes report nothing about the children.
	defer func() { _ = null.Close() }()
	dgoR, dgoW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("go pipe: %w", err)
	}
	drv, err := p.spawn(z.drv, dir, null, dgoR, cpu, probe, nil)
	_ = dgoR.Close()
	if err != nil {
		_ = dgoW.Close()
		return nil, nil, err
	}
	dropDriver := func() {
		_ = dgoW.Close() // unwritten: the driver child exits
		drv.killGroup()
		drv.reap()
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		dropDriver()
		return nil, nil, fmt.Errorf("go pipe: %w", err)
	}
	child, err := p.spawn(z, dir, null, goR, cpu, probe, onLine)
	_ = goR.Close()
	if err != nil {
		_ = goW.Close()
		dropDriver()
		return nil, nil, err
	}
	child.follower, child.followerGo = drv, dgoW
	return child, goW, nil
}

// goChild lets the zygote's child waiting in dir typeset the document
// there: go.tex (the clock, the page limit, the nonce), then a byte on its
// go pipe goW, which it closes.
func goChild(dir, nonce string, goW *os.File, maxPages int) error {
	// The write below is checked; a pipe's Close after it reports nothing.
	defer func() { _ = goW.Close() }()
	if err := writeFile(dir, "go.tex", childGo(time.Now(), nonce, maxPages)); err != nil {
		return err
	}
	if _, err := goW.Write([]byte{'g'}); err != nil {
		return fmt.Errorf("tell the zygote's child to go: %w", err)
	}
	return nil
}

// zygoteStatsLocked returns the zygotes' figures.
func (p *Pool) zygoteStatsLocked() ZygoteStats {
	s := p.zyg.stats
	s.ZygoteCPU = p.zyg.deadCPU
	for _, prof := range p.profiles {
		s.Zygotes += len(prof.zygotes.ready)
		s.ZygotesStarting += prof.zygotes.starting
		for _, z := range prof.zygotes.ready {
			s.ZygoteCPU += z.cpu()
		}
	}
	s.ZygoteOff = p.zygoteOffLocked()
	return s
}
