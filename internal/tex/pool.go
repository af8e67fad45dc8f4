package tex

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testsignal"
)

// PoolConfig configures a Pool. The zero value is valid: every field has a
// default.
type PoolConfig struct {
	// Runner holds the program, scratch folder, timeout and rlimits, as
	// for a cold Runner (same defaults). Timeout bounds a render from
	// the moment Run is called, waiting for a process included.
	Runner RunnerConfig
	// Min is how many warm processes are kept ready for each preamble of
	// Preambles (default DefaultPoolMin; negative: none before the first
	// render).
	Min int
	// Max bounds the TeX processes alive at once: warming, warm and busy
	// (default DefaultPoolMax()).
	Max int
	// IdleTimeout stops a warm process nobody used for this long; if the
	// preamble still needs Min warm processes, a fresh one replaces it
	// (default DefaultPoolIdleTimeout).
	IdleTimeout time.Duration
	// WarmupTimeout bounds building a format and warming one process
	// (default 60 s).
	WarmupTimeout time.Duration
	// Preambles are warmed at once and kept at Min warm processes each.
	// Other preambles get warm processes from their first render on.
	Preambles []string
	// NoFormat turns off dumping the preamble's package part into a
	// format (for comparisons; formats cut the warm-up CPU about in half).
	NoFormat bool
	// Zygote configures forking warm processes from a zygote (see
	// zygote.go); on by default.
	Zygote ZygoteConfig
	// MaxFormats and MaxFormatBytes bound the dumped formats kept
	// (formats.go; defaults DefaultMaxFormats and DefaultMaxFormatBytes).
	MaxFormats     int
	MaxFormatBytes int64
	// Formats, when set, keeps the dumped formats instead of the pool,
	// shared with the other pools that use it; MaxFormats and
	// MaxFormatBytes are then Formats' bounds. Nil: the pool keeps
	// formats of its own and removes them on Close.
	Formats *Formats
	// FormatStore, when set, is a folder the processes of one machine
	// share, kept across their restarts: a format dumped by one is
	// published there, and a pool that needs it takes it instead of
	// dumping it again (formatstore.go). It is bounded by MaxFormats and
	// MaxFormatBytes. Empty: formats live only as long as the pool (or
	// Formats).
	FormatStore string
	// Memory is the budget, in bytes, of every TeX process the pool
	// keeps: zygotes, warm processes, spares and busy ones count against
	// it by their estimated memory (see processMemory). Spares, spare
	// zygotes and the zygotes of further profiles start only within it;
	// a render that finds no room evicts other profiles' idle processes
	// and zygotes first, and may always have one process (default
	// DefaultPoolMemory(): derived from the cgroup memory limit).
	Memory int64
	// Clock tells the time for idleness: when a profile was last used,
	// how long a process has waited (default the real clock; tests pass
	// one they advance).
	Clock Clock
	// Signals, set by tests only, receive the pool's events.
	Signals *PoolSignals
}

// Clock is the time the pool reads to retire idle profiles
// (testenv.Clock in tests).
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// PoolStats are the pool's figures for metrics. Warm and Busy are current
// counts; Started, Replaced and Failures count since the pool started.
type PoolStats struct {
	// Warm processes wait for a document; Busy ones typeset one;
	// Warming ones are starting up.
	Warm, Busy, Warming int
	// Started counts processes started.
	Started int
	// Replaced counts processes started in place of one that typeset
	// its document, died, or reached its idle timeout.
	Replaced int
	// Failures counts processes that failed to warm up or died while
	// idle, and formats that failed to build.
	Failures int
	// Retired counts warm processes the pool stopped because nobody
	// used them for IdleTimeout.
	Retired int
	// Dumped counts formats this pool dumped; Stored counts formats it
	// took from PoolConfig.FormatStore instead.
	Dumped, Stored int
	// Memory is the estimated memory of the pool's processes and
	// zygotes now; MemoryBudget is PoolConfig.Memory.
	Memory, MemoryBudget int64
	ZygoteStats
}

// ErrPoolClosed is returned by Run after Close.
var ErrPoolClosed = errors.New("tex pool closed")

// Pool keeps XeLaTeX processes warm: each is started ahead of time in a
// scratch folder of its own, loads a preamble, passes \begin{document},
// loads fonts, and blocks reading a FIFO until it is given a document. It
// typesets exactly that one document and exits; a replacement is started
// in the background. Processes are keyed by preamble, and each preamble
// gets a format and warm processes of its own, so preambles must come from
// a small set (the profiles). Run is safe for concurrent use.
//
// With zygotes (the default, see zygote.go) a warm process is not warmed
// by itself: it is forked, when its document is there, from the profile's
// zygote, which did the warm-up once. While the profile's zygote starts,
// a process waits for it (waitZygote); when none can run (zygotes off, a
// failed start, no memory for one), processes warm up by themselves as
// described here.
//
// A document that needs a second run (table of contents, references) gets
// a second process: the first run's .aux and .toc files are copied into its
// folder; it reads the .aux by hand after the wait, because its
// \begin{document}, which reads the .aux in a cold run, is already past
// (see warmDocument). The result is the cold runner's, page for page
// (TestPoolMatchesCold).
//
// Goroutines: every process has one tending goroutine, owned by the Pool
// and counted in its WaitGroup; it warms the process up and watches it while
// it is idle, and ends when a render takes the process, the process dies or
// idles out, or the pool closes. A render (Run) owns the process it took
// and reaps it before it returns. The proc's own reader and waiter
// goroutines end when its process group is gone (see sandbox.start).
type Pool struct {
	cfg     PoolConfig
	sb      sandbox
	fmtDir  string        // the shim and, without PoolConfig.Formats, the formats
	formats *formatCache  // PoolConfig.Formats' or the pool's own
	store   *formatStore  // PoolConfig.FormatStore, nil without
	stop    chan struct{} // closed by Close: tending goroutines stop their processes
	wg      sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	hardStop bool          // Close's context ended: busy renders are canceled
	changed  chan struct{} // closed and replaced whenever the state below changes
	profiles map[string]*profile
	alive    int                              // processes not yet reaped: warming, warm, busy
	busy     map[*warmProc]context.CancelFunc // taken processes; the cancel of their render, nil until typeset sets it
	nextID   uint64
	stats    PoolStats
	// mem is the estimated memory of every process alive and every
	// zygote (ready or starting); memPeak its highest value so far.
	mem, memPeak int64

	zyg zygotes // the zygotes' shim and figures

	signals *PoolSignals // PoolConfig.Signals, or signals that do nothing
}

// PoolSignals are the events of a Pool a test can wait on instead of
// sleeping (package testsignal): a warm process ready, a zygote ready, a
// child forked. A test makes them, calls Init and passes them in
// PoolConfig.Signals, since a pool starts working in NewPool.
type PoolSignals struct {
	Warmed       testsignal.Signal[struct{}]
	ZygoteWarmed testsignal.Signal[struct{}]
	Forked       testsignal.Signal[struct{}]
	// WarmupFailed carries the error of each failed warm-up.
	WarmupFailed testsignal.Signal[error]
}

// Init makes every signal record its events for tb.
func (s *PoolSignals) Init(tb testsignal.TB) {
	s.Warmed.Init(tb)
	s.ZygoteWarmed.Init(tb)
	s.Forked.Init(tb)
	s.WarmupFailed.Init(tb)
}

// profile is the pool's state for one preamble.
type profile struct {
	key      string
	preamble string
	min      int
	warm     []*warmProc // ready, oldest first
	starting int
	waiting  int
	ahead    int // second runs expected soon (see Run)
	lastUsed time.Time
	lastTwo  time.Time // the last render that needed a second run
	// failGen counts warm-up failures; lastErr is the latest. A waiting
	// render gives up when a warm-up failed after it started waiting and
	// nothing else is on its way.
	failGen int
	lastErr error
	// failing stops background replenishing after a failed warm-up until
	// one succeeds (a broken preamble must not loop); failStreak counts
	// the warm-ups that failed in a row, failedAt is the last one's time.
	failing    bool
	failStreak int
	failedAt   time.Time

	fmtBroken bool // a process failed with the format: start without (under Pool.mu)

	zygotes profileZygotes // under Pool.mu
}

type procState int

const (
	stateWarming procState = iota
	stateWarm
	stateBusy
	stateDead
)

// warmProc is one pooled process.
type warmProc struct {
	id     uint64
	prof   *profile
	dir    string
	nonce  string
	p      *proc
	fifo   *os.File // our end of go.tex, opened read-write so TeX's open never blocks
	ready  chan struct{}
	taken  chan struct{} // closed when a render takes the process
	state  procState     // under Pool.mu
	format bool          // started with the profile's format
	cost   int64         // its share of Pool.mem (under Pool.mu)
	warmAt time.Time     // when it became warm, by the pool's clock (under Pool.mu)

	warmCPU  time.Duration
	hooks    atomic.Pointer[runHooks] // set by the render that took the process
	readyOne sync.Once
	// goW is set when p is a zygote's child (see warmSlot): the write end
	// of the pipe it waits on for its document; zyg is its zygote.
	goW *os.File
	zyg *zygote
}

// lineWatcher reads wp's TeX output for the render that takes wp: its
// page and table-of-contents hooks are set by that render (wp.hooks).
func (wp *warmProc) lineWatcher() *lineWatcher {
	return &lineWatcher{nonce: wp.nonce,
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
}

// runHooks are what a render wants to hear from its process's output.
type runHooks struct {
	pages func(int) // Job.Progress, through a reporter
	toc   func()    // the document reads a table of contents
}

// Defaults of PoolConfig (pool.min and pool.idleTimeout of the
// configuration).
const (
	// DefaultPoolMin keeps one warm process for each preamble the service
	// warms ahead, so the first render of the usual profile is warm.
	DefaultPoolMin = 1
	// DefaultPoolIdleTimeout retires a warm process nobody used for five
	// minutes: idle memory goes back soon after a burst.
	DefaultPoolIdleTimeout = 5 * time.Minute
)

// WithDefaults returns c with every unset field at its default; a
// negative Min stays negative (none).
func (c PoolConfig) WithDefaults() PoolConfig {
	c.Runner = c.Runner.withDefaults()
	if c.Max <= 0 {
		c.Max = DefaultPoolMax()
	}
	if c.Min == 0 {
		c.Min = DefaultPoolMin
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultPoolIdleTimeout
	}
	if c.WarmupTimeout <= 0 {
		c.WarmupTimeout = 60 * time.Second
	}
	if c.Memory <= 0 {
		c.Memory = DefaultPoolMemory()
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	c.Zygote = c.Zygote.withDefaults()
	return c
}

// NewPool starts a pool and warms Min processes for each of cfg.Preambles
// in the background.
func NewPool(cfg PoolConfig) (*Pool, error) {
	cfg = cfg.WithDefaults()
	sb, err := newSandbox(cfg.Runner)
	if err != nil {
		return nil, err
	}
	fmtDir, err := os.MkdirTemp(cfg.Runner.TempDir, "outprint-formats-")
	if err != nil {
		return nil, fmt.Errorf("format folder: %w", err)
	}
	p := &Pool{
		cfg: cfg, sb: sb, fmtDir: fmtDir, stop: make(chan struct{}),
		changed: make(chan struct{}), profiles: map[string]*profile{},
		busy: map[*warmProc]context.CancelFunc{}, signals: cfg.Signals,
	}
	if p.signals == nil {
		p.signals = &PoolSignals{}
	}
	if cfg.FormatStore != "" {
		if p.store, err = openFormatStore(cfg.FormatStore, cfg.MaxFormats, cfg.MaxFormatBytes); err != nil {
			_ = os.RemoveAll(fmtDir) // our own, empty, folder
			return nil, err
		}
	}
	if cfg.Formats != nil {
		p.formats = cfg.Formats.c
	} else {
		p.formats = newFormatCache(fmtDir, cfg.MaxFormats, cfg.MaxFormatBytes)
	}
	p.mu.Lock()
	for _, pre := range cfg.Preambles {
		p.profileLocked(pre).min = max(cfg.Min, 0)
	}
	for _, prof := range p.profiles {
		p.replenishLocked(prof)
	}
	p.mu.Unlock()
	p.wg.Add(1)
	go p.janitor()
	return p, nil
}

// Stats returns the pool's current figures.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Warm, s.Busy, s.Warming = 0, len(p.busy), 0
	for _, prof := range p.profiles {
		s.Warm += len(prof.warm)
		s.Warming += prof.starting
	}
	s.ZygoteStats = p.zygoteStatsLocked()
	s.Memory, s.MemoryBudget = p.mem, p.cfg.Memory
	return s
}

// Run typesets job with warm processes: one per TeX run, each used for
// this document only.
func (p *Pool) Run(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Runner.Timeout)
	defer cancel()

	res := &Result{}
	prevDir := ""
	// The run folders here are scratch space: a removal that fails
	// costs only disk space, never the document, so its error is dropped.
	defer func() {
		if prevDir != "" {
			_ = os.RemoveAll(prevDir)
		}
	}()
	// A document that reads a table of contents will most likely need a
	// second run: as soon as the first run says so, one more process of
	// this preamble starts warming, so the second run need not wait for a
	// whole warm-up after the first.
	var reserved atomic.Bool
	onTOC := func() {
		if reserved.CompareAndSwap(false, true) {
			p.reserve(job.Preamble, 1)
		}
	}
	for run := 1; ; run++ {
		tocHook := onTOC
		if run > 1 {
			tocHook = nil
		}
		out, err := p.runOnce(ctx, job, prevDir, tocHook, run < limits.MaxTeXRuns)
		if run == 1 && reserved.Load() {
			// The reserved process now serves the second run, or stays
			// warm as a spare until its idle timeout.
			p.reserve(job.Preamble, -1)
		}
		if out != nil {
			res.Runs = run
			res.CPU += out.cpu
			res.MaxRSS = max(res.MaxRSS, out.maxRSS)
			res.WarmCPU += out.warmCPU
			res.Engine += out.engine
			res.Log = out.log
			res.Processes = append(res.Processes, out.id)
			if out.forked {
				res.Forked++
			}
		}
		if prevDir != "" {
			_ = os.RemoveAll(prevDir)
			prevDir = ""
		}
		if err != nil {
			if out != nil {
				_ = os.RemoveAll(out.dir)
			}
			return nil, err
		}
		prevDir = out.dir
		if !out.rerun {
			if err := readPDF(out.dir, p.cfg.Runner.MaxPDFBytes, out.li, res); err != nil {
				return nil, err
			}
			res.Wall = time.Since(start)
			return res, nil
		}
		p.noteTwoRuns(job.Preamble)
	}
}

// warmRun is one warm TeX run's outcome; dir is the process's scratch
// folder, which the caller removes.
type warmRun struct {
	runResult
	id      uint64
	dir     string
	li      logInfo
	before  map[string]string
	warmCPU time.Duration
	// rerun: the document needs another run; driverDropped: so this
	// run's xdvipdfmx was killed, not waited for (see typeset).
	rerun, driverDropped bool
	forked               bool // the TeX process was a zygote's child
}

// errProcGone: the process taken died before it was given the document.
var errProcGone = errors.New("warm process died before its document")

// runOnce takes a warm process (retrying when one died just before it was
// used) and typesets job with it.
func (p *Pool) runOnce(ctx context.Context, job Job, prevDir string, onTOC func(), mayRerun bool) (*warmRun, error) {
	for attempt := 0; ; attempt++ {
		wp, err := p.acquire(ctx, job.Preamble)
		if err != nil {
			return nil, err
		}
		out, err := p.typeset(ctx, wp, job, prevDir, onTOC, mayRerun)
		if errors.Is(err, errProcGone) && attempt < 3 {
			_ = os.RemoveAll(out.dir) // scratch, as in Do
			continue
		}
		return out, err
	}
}

// typeset gives the document to the warm process wp, which the caller
// took, waits for it and reaps it. When mayRerun is set and the run turns
// out to need another one (its table of contents changed, say), the PDF
// of this run would be thrown away: TeX's part is done when XeLaTeX
// exits, so xdvipdfmx, which only then starts converting the whole XDV
// (a pipe cannot be read from its end), is killed instead of waited for.
// That saves its conversion, a third of a two-run document's first run.
func (p *Pool) typeset(ctx context.Context, wp *warmProc, job Job, prevDir string, onTOC func(), mayRerun bool) (*warmRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	p.busy[wp] = cancel // Close cancels renders that outlast its context
	if p.hardStop {
		cancel()
	}
	p.mu.Unlock()
	out := &warmRun{id: wp.id, dir: wp.dir, warmCPU: wp.warmCPU, forked: wp.zyg != nil}
	defer p.release(wp)
	// Closing a pipe reports nothing about what went through it (the
	// writes are checked where they happen): its error is dropped.
	defer func() { _ = wp.fifo.Close() }()
	if wp.goW != nil {
		defer func() { _ = wp.goW.Close() }()
	}

	if wp.p.gone() {
		wp.p.killGroup()
		wp.p.reap()
		p.mu.Lock()
		p.stats.Failures++
		p.mu.Unlock()
		return out, errProcGone
	}
	inputs, err := placeFiles(wp.dir, job.Files)
	if err == nil && prevDir != "" {
		err = carryOver(prevDir, wp.dir)
	}
	if err == nil {
		err = writeFile(wp.dir, "body.tex", bodyFile(job.Body))
	}
	if err != nil {
		wp.p.killGroup()
		wp.p.reap()
		return out, err
	}
	out.before = snapshotTOCs(wp.dir)
	rep := newReporter(job.Progress)
	wp.hooks.Store(&runHooks{pages: rep.report, toc: onTOC})

	if err := writeFile(wp.dir, "limit.tex", fmt.Sprintf("%d\n", job.maxPages())); err != nil {
		wp.p.killGroup()
		wp.p.reap()
		rep.close()
		return out, err
	}
	goAt := time.Now()
	pr := wp.p
	if wp.goW != nil {
		if err := goChild(wp.dir, wp.nonce, wp.goW, job.maxPages()); err != nil {
			wp.p.killGroup()
			wp.p.reap()
			rep.close()
			return out, err
		}
	} else if _, err := wp.fifo.Write([]byte("outprint go go\n")); err != nil {
		// One write of more bytes than XeTeX's byte-order-mark sniffing
		// reads (it must not block waiting for more); our end stays open
		// until TeX is done, so the bytes are there whenever TeX's open
		// happens.
		wp.p.killGroup()
		wp.p.reap()
		rep.close()
		return out, fmt.Errorf("tell warm process to go: %w", err)
	}
	var dropDriver func() bool
	if mayRerun {
		dropDriver = func() bool {
			li, _ := readLog(wp.dir, wp.nonce)
			out.rerun = li.errMsg == "" && !li.pageLimit && !li.capacity && needsRerun(wp.dir, li, out.before)
			return out.rerun
		}
	}
	state, cause := pr.wait(ctx, wp.dir, p.cfg.Runner.ScratchBytes, inputs, dropDriver)
	out.engine = time.Since(goAt)
	out.driverDropped = pr.followerDropped
	rep.close()
	out.cpu = pr.cpu()
	out.maxRSS = pr.maxRSS()
	if wp.zyg != nil && crashed(state) {
		p.retireCrashed(wp.zyg)
	}
	li, logText := readLog(wp.dir, wp.nonce)
	out.li, out.log = li, logText
	if err := classify(cause, state, li, pr.output(), wp.dir); err != nil {
		return out, err
	}
	return out, pr.followerError()
}

// carryOver copies what a second run needs from the first run's folder:
// the .aux (as prev.aux, read by hand after the wait) and the table of
// contents files.
func carryOver(from, to string) error {
	names := map[string]string{"main.aux": "prev.aux"}
	for _, ext := range tocExts {
		names["main."+ext] = "main." + ext
	}
	names["main.out"] = "main.out"
	for src, dst := range names {
		if _, err := os.Stat(filepath.Join(from, src)); err != nil {
			continue
		}
		if err := copyFile(filepath.Join(to, dst), filepath.Join(from, src)); err != nil {
			return fmt.Errorf("carry %s to the second run: %w", src, err)
		}
	}
	return nil
}

// release gives back the slot of a process a render took and reaped.
func (p *Pool) release(wp *warmProc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.busy, wp)
	wp.state = stateDead
	p.alive--
	p.mem -= wp.cost
	if !p.closed {
		p.replenishAll()
	}
	p.notifyLocked()
}

// acquire returns a warm process for preamble, taken for the caller, or
// starts one and waits for it.
func (p *Pool) acquire(ctx context.Context, preamble string) (*warmProc, error) {
	p.mu.Lock()
	prof := p.profileLocked(preamble)
	prof.lastUsed = p.now()
	gen := prof.failGen
	prof.waiting++
	defer func() {
		prof.waiting--
		p.mu.Unlock()
	}()
	for {
		if p.closed {
			return nil, ErrPoolClosed
		}
		if n := len(prof.warm); n > 0 {
			// The newest: older ones then idle out when demand drops.
			wp := prof.warm[n-1]
			prof.warm = prof.warm[:n-1]
			wp.state = stateBusy
			p.busy[wp] = nil
			prof.lastUsed = p.now()
			close(wp.taken)
			prof.waiting--
			p.replenishLocked(prof)
			prof.waiting++
			return wp, nil
		}
		if prof.failGen != gen && prof.starting == 0 {
			return nil, prof.lastErr
		}
		if prof.starting < prof.waiting {
			cost := p.costLocked(prof)
			if p.alive >= p.cfg.Max || !p.fitsLocked(cost) {
				if !p.evictLocked(prof) && !p.fitsLocked(cost) {
					// No idle process of another profile left to
					// stop: a zygote of another profile makes room.
					p.shedZygoteLocked(prof)
				}
			}
			// A render may always have one process, whatever the
			// budget: the budget bounds what the pool keeps, not
			// whether it renders.
			if p.alive < p.cfg.Max && (p.fitsLocked(cost) || p.alive == 0) {
				p.startLocked(prof, false)
			}
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			return nil, ctxError(ctx.Err())
		}
		p.mu.Lock()
	}
}

func (p *Pool) profileLocked(preamble string) *profile {
	sum := sha256.Sum256([]byte(preamble))
	key := hex.EncodeToString(sum[:8])
	prof := p.profiles[key]
	if prof == nil {
		prof = &profile{key: key, preamble: preamble}
		p.profiles[key] = prof
	}
	return prof
}

func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// noteTwoRuns records that a document of preamble needs a second run.
func (p *Pool) noteTwoRuns(preamble string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.profileLocked(preamble).lastTwo = p.now()
}

// reserve changes how many processes renders expect to need soon for
// preamble (a second run) and starts them within Max.
func (p *Pool) reserve(preamble string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prof := p.profileLocked(preamble)
	prof.ahead += n
	p.replenishLocked(prof)
}

// wantLocked is how many processes prof should have warm or warming: its
// Min, and for a preamble used within the idle timeout one spare (two if
// its documents lately needed second runs) besides the renders waiting
// and the second runs expected.
func (p *Pool) wantLocked(prof *profile) int {
	want := prof.waiting + prof.ahead
	if p.inUseLocked(prof) {
		want++
	}
	if p.now().Sub(prof.lastTwo) < p.cfg.IdleTimeout {
		// Documents of this preamble lately needed two runs: keep one
		// more warm, so a second run finds its process ready.
		want++
	}
	return max(want, prof.min)
}

// replenishLocked starts processes for prof up to what it wants, within
// Max and the memory budget. A preamble whose last warm-up failed is not
// replenished in the background; the next render (or the janitor, for a
// preamble kept warm) retries it.
func (p *Pool) replenishLocked(prof *profile) {
	if p.closed {
		return
	}
	p.ensureZygotesLocked(prof)
	if prof.failing {
		return
	}
	if prof.waiting <= len(prof.warm)+prof.starting && p.starvedLocked() {
		// A render of another preamble waits for room: what frees up is
		// its, not a spare's (else a preamble kept warm by Min takes the
		// room back each time the render evicts it).
		return
	}
	for len(prof.warm)+prof.starting < p.wantLocked(prof) && p.alive < p.cfg.Max && p.fitsLocked(p.costLocked(prof)) {
		p.startLocked(prof, true)
	}
}

func (p *Pool) replenishAll() {
	for _, prof := range p.profiles {
		p.replenishLocked(prof)
	}
}

// evictLocked stops the oldest warm process of another preamble to make
// room for prof and reports whether there was one. Its tending goroutine
// sees it die and cleans up.
func (p *Pool) evictLocked(prof *profile) bool {
	var victim *warmProc
	for _, other := range p.profiles {
		if other == prof || len(other.warm) == 0 {
			continue
		}
		if victim == nil || other.warm[0].id < victim.id {
			victim = other.warm[0]
		}
	}
	if victim == nil {
		return false
	}
	victim.prof.warm = victim.prof.warm[1:]
	victim.state = stateDead
	victim.p.killGroup()
	// The victim's preamble lost its spare to demand elsewhere: it gets
	// no spare in the background again until a render asks for it.
	// Otherwise each release would warm a spare for it that the next
	// render of the busy preamble evicts: a whole warm-up wasted per
	// render under mixed load (bench/pool saw 14 in 116 renders).
	victim.prof.lastUsed, victim.prof.lastTwo = time.Time{}, time.Time{}
	return true
}

// startLocked starts a process for prof; its tending goroutine warms it.
func (p *Pool) startLocked(prof *profile, replacement bool) {
	p.nextID++
	wp := &warmProc{
		id: p.nextID, prof: prof, nonce: newNonce(),
		ready: make(chan struct{}), taken: make(chan struct{}),
		cost: p.costLocked(prof),
	}
	prof.starting++
	p.alive++
	p.addMemLocked(wp.cost)
	p.stats.Started++
	if replacement {
		p.stats.Replaced++
	}
	p.wg.Add(1)
	go p.tend(wp)
}

// tend warms wp up, then watches it while it is idle. It is the Pool's
// goroutine for wp until a render takes it.
func (p *Pool) tend(wp *warmProc) {
	defer p.wg.Done()
	if err := p.warmUp(wp); err != nil {
		p.mu.Lock()
		prof := wp.prof
		prof.starting--
		p.alive--
		p.mem -= wp.cost
		wp.state = stateDead
		if !p.closed {
			p.stats.Failures++
			prof.failGen++
			prof.lastErr = fmt.Errorf("warm up: %w", err)
			prof.failing = true
			prof.failStreak++
			prof.failedAt = p.now()
			if wp.format {
				// Perhaps the format is at fault: the next try goes
				// without it.
				prof.fmtBroken = true
			}
			if prof.min > 0 && prof.failStreak < readyFailures && prof.starting == 0 && p.alive < p.cfg.Max {
				// A preamble the pool keeps warm is tried again at
				// once: one failure may be chance (readiness waits
				// for readyFailures in a row); later tries are the
				// janitor's, every warmRetry.
				p.startLocked(prof, true)
			}
		}
		p.notifyLocked()
		p.mu.Unlock()
		p.signals.WarmupFailed.Signal(err)
		return
	}

	p.mu.Lock()
	prof := wp.prof
	prof.starting--
	prof.failing, prof.failStreak = false, 0
	if p.closed {
		wp.state = stateDead
		p.mu.Unlock()
		p.discard(wp)
		return
	}
	wp.state = stateWarm
	wp.warmAt = p.now()
	prof.warm = append(prof.warm, wp)
	p.notifyLocked()
	p.mu.Unlock()
	p.signals.Warmed.Signal(struct{}{})

	// The janitor stops it when it idles out (sweep).
	died := false
	select {
	case <-wp.taken:
		return
	case <-wp.p.exited:
		died = true
	case <-wp.p.followerExited():
		died = true
	case <-p.stop:
	}

	p.mu.Lock()
	switch wp.state {
	case stateBusy:
		// Taken at the same moment: the render owns it and will find
		// out if it died.
		p.mu.Unlock()
		return
	case stateWarm:
		for i, w := range prof.warm {
			if w == wp {
				prof.warm = append(prof.warm[:i], prof.warm[i+1:]...)
				break
			}
		}
		wp.state = stateDead
		if died && !p.closed {
			p.stats.Failures++
		}
	}
	// stateDead: evicted or retired, already out of the warm list.
	p.mu.Unlock()
	p.discard(wp)
}

// discard kills and reaps an idle process, removes its folder and gives
// its slot back.
func (p *Pool) discard(wp *warmProc) {
	wp.p.killGroup()
	wp.p.reap()
	// The process is gone: its pipes' Close reports nothing, and its
	// folder is scratch space (a failed removal costs only disk).
	_ = wp.fifo.Close()
	if wp.goW != nil {
		_ = wp.goW.Close()
	}
	_ = os.RemoveAll(wp.dir)
	p.mu.Lock()
	p.alive--
	p.mem -= wp.cost
	if !p.closed {
		p.replenishAll()
	}
	p.notifyLocked()
	p.mu.Unlock()
}

// warmUp starts wp's process and waits until it is ready for a document.
func (p *Pool) warmUp(wp *warmProc) error {
	prof := wp.prof
	fmtPath, releaseFormat := p.format(prof)
	defer releaseFormat() // the process has loaded it by the time warmUp returns
	p.mu.Lock()
	if prof.fmtBroken {
		fmtPath = ""
	}
	p.mu.Unlock()
	wp.format = fmtPath != ""
	select {
	case <-p.stop:
		return ErrPoolClosed
	default:
	}
	if p.waitZygote(prof) {
		err := p.warmSlot(wp)
		if !errors.Is(err, errZygoteGone) {
			return err
		}
		// The zygotes went meanwhile: a process of its own.
	}
	p.mu.Lock()
	if wp.cost < ownBytes {
		p.addMemLocked(ownBytes - wp.cost)
		wp.cost = ownBytes
	}
	p.mu.Unlock()

	dir, err := os.MkdirTemp(p.cfg.Runner.TempDir, "outprint-warm-")
	if err != nil {
		return fmt.Errorf("scratch folder: %w", err)
	}
	wp.dir = dir
	// err is the error; the folder is scratch space and the fifo a pipe,
	// whose Close reports nothing.
	fail := func(err error) error {
		_ = os.RemoveAll(dir)
		return err
	}
	fifo := filepath.Join(dir, "go.tex")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return fail(fmt.Errorf("mkfifo: %w", err))
	}
	if wp.fifo, err = os.OpenFile(fifo, os.O_RDWR, 0); err != nil {
		return fail(fmt.Errorf("open fifo: %w", err))
	}
	if err := writeFile(dir, "main.tex", warmDocument(prof.preamble, wp.nonce, wp.format)); err != nil {
		_ = wp.fifo.Close()
		return fail(err)
	}
	readyMark := marker(wp.nonce) + "ready"
	lw := wp.lineWatcher()
	onLine := func(s string) {
		if strings.Contains(s, readyMark) {
			wp.readyOne.Do(func() { close(wp.ready) })
			return
		}
		lw.line(s)
	}
	timeout := cpuSeconds(p.cfg.WarmupTimeout + p.cfg.Runner.Timeout)
	var proc *proc
	if p.sb.xdvipdfmx != "" {
		proc, err = p.startWithDriver(dir, fmtPath, timeout, onLine)
	} else {
		proc, err = p.sb.start(dir, p.sb.args(fmtPath, ""), timeout, onLine)
	}
	if err != nil {
		_ = wp.fifo.Close()
		return fail(err)
	}
	wp.p = proc
	timer := time.NewTimer(p.cfg.WarmupTimeout)
	defer timer.Stop()
	var cause error
	select {
	case <-wp.ready:
		wp.warmCPU = procCPU(proc.pid)
		if proc.follower != nil {
			wp.warmCPU += procCPU(proc.follower.pid)
		}
		return nil
	case <-proc.exited:
	case <-proc.followerExited():
	case <-timer.C:
		cause = fmt.Errorf("not warm after %v", p.cfg.WarmupTimeout)
	case <-p.stop:
		cause = ErrPoolClosed
	}
	proc.killGroup()
	state := proc.reap()
	_ = wp.fifo.Close()
	if cause == nil {
		li, _ := readLog(dir, wp.nonce)
		cause = classify(nil, state, li, proc.output(), dir)
		if cause == nil {
			cause = fmt.Errorf("xelatex exited while warming up: %s", lastLines(proc.output(), 3))
		}
	}
	return fail(cause)
}

// startWithDriver starts XeLaTeX with xdvipdfmx already running beside
// it. XeLaTeX normally starts xdvipdfmx at the first page it ships, and
// xdvipdfmx then spends tens of milliseconds reading its configuration,
// font maps and glyph lists: render time. Started with the warm process, it
// does that while the process warms up and then waits on its stdin, a pipe.
// XeLaTeX's output driver becomes `cat >&3`, which copies the XDV into the
// pipe (fd 3); the rest of the command XeLaTeX builds (-o "main.pdf") is a
// shell comment. xdvipdfmx is a follower in XeLaTeX's process group, so it
// is killed with it, and it ends when XeLaTeX (and cat) close the pipe.
func (p *Pool) startWithDriver(dir, fmtPath string, cpu uint64, onLine func(string)) (*proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("driver pipe: %w", err)
	}
	tex, err := p.sb.startProgram(dir, p.sb.program, p.sb.args(fmtPath, "cat >&3 #"), cpu, onLine, spawn{extra: []*os.File{w}})
	// Our copies of the pipe's ends go once the children hold theirs;
	// closing a pipe reports nothing about what goes through it.
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	dv, err := p.sb.startProgram(dir, p.sb.xdvipdfmx, []string{"-q", "-E", "-o", "main.pdf"}, cpu, nil, spawn{stdin: r, pgid: tex.pid})
	_ = r.Close()
	if err != nil {
		tex.killGroup()
		tex.reap()
		return nil, err
	}
	tex.follower = dv
	return tex, nil
}

// format returns the path of prof's format (without ".fmt") to pass to
// -fmt, building it on first use, and pins it until release; "" when the
// preamble has no dump marker, formats are off, or the build failed (then
// processes load the preamble the slow way). Formats are shared by every
// preamble with the same package part and bounded (formats.go).
func (p *Pool) format(prof *profile) (path string, release func()) {
	if p.cfg.NoFormat {
		return "", func() {}
	}
	head, _, ok := splitAtDump(prof.preamble)
	if !ok {
		return "", func() {}
	}
	key := formatKey(&p.sb, head)
	return p.formats.acquire(key, p.stop, func(dir string) (string, error) { return p.loadFormat(dir, key, head) })
}

// loadFormat puts the format of head, whose key is key, into the new
// folder dir: from the format store when it has it, dumped otherwise (and
// then published to the store).
func (p *Pool) loadFormat(dir, key, head string) (string, error) {
	name := ""
	if p.store != nil {
		name = p.store.name(context.Background(), &p.sb, key)
	}
	if name != "" {
		if path, ok := p.store.take(name, dir); ok {
			p.mu.Lock()
			p.stats.Stored++
			p.mu.Unlock()
			return path, nil
		}
	}
	path, err := p.buildFormat(dir, head)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.stats.Dumped++
	p.mu.Unlock()
	if name != "" {
		p.store.publish(name, path)
	}
	return path, nil
}

// buildFormat dumps head (the package part of a preamble) into a format
// in the new folder dir with mylatexformat, in the same sandbox as every
// TeX run.
func (p *Pool) buildFormat(dir, head string) (path string, err error) {
	defer func() {
		if err != nil {
			p.mu.Lock()
			if !p.closed {
				p.stats.Failures++
			}
			p.mu.Unlock()
		}
	}()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("format folder: %w", err)
	}
	if err := writeFile(dir, "dump.tex", dumpDocument(head)); err != nil {
		return "", err
	}
	args := []string{
		"-ini", "-jobname=outprint", "-no-shell-escape", "-no-mktex=tfm", "-no-mktex=tex",
		"-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
		"&xelatex", "mylatexformat.ltx", "dump.tex",
	}
	proc, err := p.sb.start(dir, args, cpuSeconds(p.cfg.WarmupTimeout), nil)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.WarmupTimeout)
	defer cancel()
	// This goroutine cancels the build when the pool closes; it ends with
	// the build (cancel is deferred above).
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	state, cause := proc.wait(ctx, dir, p.cfg.Runner.ScratchBytes, nil, nil)
	select {
	case <-p.stop:
		// Not a broken preamble: a pool sharing the format builds it.
		return "", fmt.Errorf("dump format: %w", errFormatCanceled)
	default:
	}
	if cause != nil {
		return "", fmt.Errorf("dump format: %w", cause)
	}
	if !state.Success() {
		return "", fmt.Errorf("dump format: %v: %s", state, lastLines(proc.output(), 3))
	}
	if err := inflateFormat(filepath.Join(dir, "outprint.fmt")); err != nil {
		return "", err
	}
	return filepath.Join(dir, "outprint"), nil
}

// inflateFormat stores a dumped format uncompressed. TeX Live writes
// formats gzip-compressed and every process that loads one inflates it
// again: a quarter of a warm-up's CPU time went to zlib (perf, 9 MB
// compressed, 33 MB plain). The engines read formats through zlib's
// gzread, which passes a file without a gzip header through unchanged, so
// the plain format loads as is and costs only page cache.
func inflateFormat(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("inflate format: %w", err)
	}
	defer func() { _ = f.Close() }() // only read
	br := bufio.NewReader(f)
	if magic, err := br.Peek(2); err == nil && (magic[0] != 0x1f || magic[1] != 0x8b) {
		return nil // a TeX built without format compression: plain already
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return fmt.Errorf("inflate format %s: %w", path, err)
	}
	tmp := path + ".plain"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("inflate format: %w", err)
	}
	if _, err = io.Copy(out, zr); err == nil {
		err = zr.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp) // err is the error; tmp is a half-written copy
		return fmt.Errorf("inflate format %s: %w", path, err)
	}
	return nil
}

// Close stops the pool: no new renders, idle and warming processes are
// stopped at once, busy renders may finish until ctx ends and are then
// canceled. It returns when no process of the pool is left.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	p.notifyLocked()
	p.mu.Unlock()

	var err error
	for {
		p.mu.Lock()
		n := len(p.busy)
		ch := p.changed
		if n == 0 {
			p.mu.Unlock()
			break
		}
		done := ctx.Done()
		if ctx.Err() != nil {
			p.hardStop = true
			for _, cancel := range p.busy {
				if cancel != nil {
					cancel()
				}
			}
			err = ctx.Err()
			done = nil // canceled renders end soon; wait for them only
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-done:
		}
	}
	p.wg.Wait()
	// The formats are a cache: a folder left behind costs only disk, and
	// err already says the renders did not end in time.
	_ = os.RemoveAll(p.fmtDir)
	return err
}
