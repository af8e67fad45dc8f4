package office

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/limits"
)

//go:embed bridge.py
var bridgeScript []byte

// profileXCU is every profile's registrymodifications.xcu: macros never
// run, links are never updated, no lock files, no recovery, no update
// checks.
//
//go:embed profile.xcu
var profileXCU []byte

// DefaultEnabled is whether a rendering process converts Office
// documents when the configuration says nothing (office.enabled): yes,
// with a warm LibreOffice process per render slot where LibreOffice is
// installed. An operator turns it off to spare the memory (about 200 MiB
// a process) on workers that never see an Office document.
const DefaultEnabled = true

// Defaults of Config.
const (
	// DefaultMaxConversions is how many conversions one LibreOffice
	// process does before it is replaced: LibreOffice keeps caches and
	// leaks, and a fresh process costs a start in the background.
	DefaultMaxConversions = 200
	// DefaultMaxRSS is the resident memory past which a process is
	// replaced after its conversion (a fresh one holds about 150 MiB).
	DefaultMaxRSS = 1 << 30
	// DefaultStartTimeout bounds starting one LibreOffice process.
	DefaultStartTimeout = 120 * time.Second
)

// Restart causes: why a LibreOffice process was replaced (Stats.Restarts,
// a metric label).
const (
	CauseConversions = "conversions" // it reached Config.MaxConversions
	CauseMemory      = "memory"      // it held more than Config.MaxRSS
	CauseTimeout     = "timeout"     // a conversion ran past its deadline
	CauseCancel      = "cancel"      // a conversion's caller gave up
	CauseCrash       = "crash"       // it died or broke during a conversion
)

// Causes returns every restart cause: the bounded set of a metric label.
func Causes() []string {
	return []string{CauseConversions, CauseMemory, CauseTimeout, CauseCancel, CauseCrash}
}

// Config configures a Pool. Zero values mean the defaults.
type Config struct {
	// Slots is how many LibreOffice processes run (at least 1).
	Slots int
	// MaxConversions replaces a process after this many conversions
	// (DefaultMaxConversions).
	MaxConversions int
	// MaxRSS replaces a process once its group's resident memory is past
	// this many bytes after a conversion (DefaultMaxRSS).
	MaxRSS int64
	// Dir is the parent of the pool's folder (profiles, scratch folders,
	// sockets); "" is os.TempDir().
	Dir string
	// Soffice is LibreOffice's soffice; "" finds it.
	Soffice string
	// Python is a python3 that imports uno (Debian's python3-uno); ""
	// finds it.
	Python string
	// StartTimeout bounds one process's start (DefaultStartTimeout).
	StartTimeout time.Duration
	// Logger receives the pool's events; nil discards them.
	Logger *slog.Logger

	// noIsolate runs the processes without namespaces (tests of the
	// fallback).
	noIsolate bool
}

// Options are a conversion's overrides, where LibreOffice honours them:
// the paper and orientation of text documents and spreadsheets
// (presentations keep their slide size).
type Options struct {
	// Paper is "a4" or "letter"; "" keeps the document's.
	Paper string
	// Landscape, when set, turns every page style that way.
	Landscape *bool
}

// Stats are the pool's counters.
type Stats struct {
	// Processes has one entry per slot.
	Processes []ProcessStats
	// Conversions counts conversions a process answered (successes and
	// refusals of the document alike).
	Conversions int64
	// Restarts counts replaced processes by cause (Causes).
	Restarts map[string]int64
	// StartFailures counts processes that failed to start.
	StartFailures int64
	// Isolated says the last process started runs in a network namespace
	// of its own.
	Isolated bool
}

// ProcessStats is one slot's process.
type ProcessStats struct {
	Slot int
	// Pid is the bridge, leader of the process group; 0 when the slot
	// has no process (starting, or its start failed).
	Pid int
	// RSS is the group's resident memory in bytes.
	RSS int64
	// Conversions counts this process's conversions.
	Conversions int
	// Busy says a conversion holds it now.
	Busy bool
}

// slot is one unit of the pool's capacity. Whoever holds it (a
// conversion, or the pool's goroutine that starts its process) owns p;
// the mutex guards p for Stats and Ready.
type slot struct {
	id   int
	p    *proc
	busy bool
}

// Pool keeps one warm LibreOffice process per slot.
type Pool struct {
	cfg             Config
	python, soffice string
	dir, bridge     string
	sockDir         string // dir, or a shorter one for the sockets
	log             *slog.Logger

	// idle holds the free slots: a channel's receivers are served in
	// the order they came (FIFO).
	idle  chan *slot
	slots []*slot

	mu      sync.Mutex
	closed  bool
	lastErr error // the last start's failure, nil after a success

	closing chan struct{} // closed by Close: waiters return
	bg      context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // background starts and conversions in flight
	seq     atomic.Int64   // process folder names

	conversions, startFailures atomic.Int64
	restarts                   [5]atomic.Int64 // by index in Causes
	isolated                   atomic.Bool
}

// NewPool checks LibreOffice and python3-uno and starts Slots processes
// ahead in the background (Ready reports when one is warm, Warm waits for
// all). ctx bounds the checks only.
func NewPool(ctx context.Context, cfg Config) (*Pool, error) {
	if cfg.Slots < 1 {
		return nil, fmt.Errorf("office pool: %d slots, want at least 1", cfg.Slots)
	}
	if cfg.MaxConversions <= 0 {
		cfg.MaxConversions = DefaultMaxConversions
	}
	if cfg.MaxRSS <= 0 {
		cfg.MaxRSS = DefaultMaxRSS
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	soffice, err := findSoffice(cfg.Soffice)
	if err != nil {
		return nil, err
	}
	python, err := findPython(ctx, cfg.Python)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.Dir, "lo-") // short: the sockets may go in it
	if err != nil {
		return nil, fmt.Errorf("office pool: %w", err)
	}
	sockDir, err := socketDir(dir)
	if err != nil {
		_ = os.RemoveAll(dir) // just made, empty
		return nil, err
	}
	if n := sweepSockets("/tmp"); n > 0 {
		log.Info("removed the LibreOffice sockets of outprint processes that are gone", "sockets", n)
	}
	bridge := filepath.Join(dir, "bridge.py")
	if err := os.WriteFile(bridge, bridgeScript, 0o600); err != nil {
		_ = os.RemoveAll(dir)     // nothing else in it yet
		_ = os.RemoveAll(sockDir) // nor in this one
		return nil, fmt.Errorf("office pool: %w", err)
	}
	bg, cancel := context.WithCancel(context.Background())
	p := &Pool{
		cfg: cfg, python: python, soffice: soffice, dir: dir, sockDir: sockDir, bridge: bridge, log: log,
		idle: make(chan *slot, cfg.Slots), closing: make(chan struct{}), bg: bg, cancel: cancel,
	}
	for i := range cfg.Slots {
		s := &slot{id: i}
		p.slots = append(p.slots, s)
		p.replace(s)
	}
	return p, nil
}

// slotCPU is the CPU the process of slot is kept on, or -1 for any. While
// the pool has at least two slots and no more than the CPUs this process
// may use, slot i's process group keeps to a CPU of its own (one slot
// keeps them all): left to the
// scheduler, two LibreOffice processes converting at once were moved
// between the cores, and four conversions on two slots reached 1.5–1.7×
// the throughput of one at a time, against 1.97× with each group on a
// core of its own (bench/office).
func slotCPU(slot, slots int) int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return -1
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if slots < 2 || slots > len(cpus) {
		return -1
	}
	return cpus[slot%len(cpus)]
}

// maxSocketDir is the longest folder LibreOffice's sockets fit in: a
// socket's path has at most 107 bytes, and the longest name,
// "/s1234567/OSL_PIPE_<uid>_SingleOfficeIPC_<hash>" (the uid in a user
// namespace is 65534, the hash 30 hex digits), must fit after it.
var maxSocketDir = 107 - len("/s1234567/OSL_PIPE__SingleOfficeIPC_") - max(len(strconv.Itoa(os.Getuid())), len("65534")) - 32

// socketDir returns the folder of the pool's UNO sockets (used where
// neither /tmp nor /var/tmp is writable, OSL_SOCKET_PATH): the pool's own
// folder dir when it is short enough, else a new folder in the first of
// the temporary folder and /dev/shm that is short enough and writable (a
// container's data folder may be deep, its /tmp read-only).
func socketDir(dir string) (string, error) {
	if len(dir) <= maxSocketDir {
		return dir, nil
	}
	var errs []error
	for _, parent := range []string{os.TempDir(), "/dev/shm"} {
		if len(parent)+len("/lo-1234567890") > maxSocketDir {
			errs = append(errs, fmt.Errorf("%s is too deep", parent))
			continue
		}
		d, err := os.MkdirTemp(parent, "lo-")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return d, nil
	}
	return "", fmt.Errorf("office pool: no folder for LibreOffice's sockets: %s is too deep (at most %d bytes; set a shorter dataDir) and %w",
		dir, maxSocketDir, errors.Join(errs...))
}

func findSoffice(path string) (string, error) {
	if path == "" {
		path = "soffice"
	}
	found, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("office pool: LibreOffice: %w", err)
	}
	// Debian's /usr/bin/soffice is a link to the launcher script, which
	// runs oosplash, which runs soffice.bin. The bridge starts
	// soffice.bin itself (and starts it again when its first start on a
	// new profile asks for that, as oosplash would): oosplash refuses to
	// start at all where neither /tmp nor /var/tmp is writable ("no
	// valid pipe path found"), as in the container image, while
	// soffice.bin then puts its sockets where OSL_SOCKET_PATH says.
	if real, err := filepath.EvalSymlinks(found); err == nil {
		found = real
	}
	if bin := filepath.Join(filepath.Dir(found), "soffice.bin"); isExecutable(bin) {
		return bin, nil
	}
	return found, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// findPython returns a python3 that imports uno: path, or the first of
// /usr/bin/python3 (Debian's, which python3-uno is built for) and the
// python3 on PATH.
func findPython(ctx context.Context, path string) (string, error) {
	candidates := []string{path}
	if path == "" {
		candidates = []string{"/usr/bin/python3", "python3"}
	}
	var last error
	for _, c := range candidates {
		found, err := exec.LookPath(c)
		if err != nil {
			last = err
			continue
		}
		cmd := exec.CommandContext(ctx, found, "-I", "-c", "import uno")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
		if out, err := cmd.CombinedOutput(); err != nil {
			last = fmt.Errorf("%s cannot import uno (install python3-uno): %w: %s", found, err, firstLine(out))
			continue
		}
		return found, nil
	}
	return "", fmt.Errorf("office pool: python3-uno: %w", last)
}

func firstLine(b []byte) string {
	s := string(b)
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// replace starts a new process for slot s in the background and hands
// the slot out when it is up (or without a process when the start failed:
// the next conversion tries again). The caller holds s, and gives it up.
func (p *Pool) replace(s *slot) {
	p.wg.Add(1)
	// The start goroutine is owned by the pool: Close cancels bg, which
	// ends the start, and waits for it.
	go func() {
		defer p.wg.Done()
		pr, err := p.start(p.bg, s.id)
		p.mu.Lock()
		s.p = pr
		s.busy = false
		p.mu.Unlock()
		if err != nil && p.bg.Err() == nil {
			p.log.Warn("LibreOffice did not start", "slot", s.id, "error", err)
		}
		p.idle <- s
	}()
}

// start starts the process of slot in a fresh folder.
func (p *Pool) start(ctx context.Context, slot int) (*proc, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	n := p.seq.Add(1)
	dir := filepath.Join(p.dir, fmt.Sprintf("p%d", n))
	sock := filepath.Join(p.sockDir, fmt.Sprintf("s%d", n))
	for _, d := range []string{dir, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, p.startFailed(fmt.Errorf("start LibreOffice: %w", err))
		}
	}
	begin := time.Now()
	pr, err := startProc(ctx, procSpec{python: p.python, bridge: p.bridge, soffice: p.soffice, dir: dir, sock: sock, isolate: !p.cfg.noIsolate, cpu: slotCPU(slot, p.cfg.Slots)})
	if err != nil {
		_ = os.RemoveAll(dir)  // best effort: Close removes the pool's folder
		_ = os.RemoveAll(sock) // and the sockets' folder
		return nil, p.startFailed(err)
	}
	p.isolated.Store(pr.isolated)
	p.mu.Lock()
	p.lastErr = nil
	p.mu.Unlock()
	p.log.Debug("LibreOffice started", "pid", pr.pid, "isolated", pr.isolated, "took", time.Since(begin))
	return pr, nil
}

func (p *Pool) startFailed(err error) error {
	p.startFailures.Add(1)
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
	return err
}

// errClosed: Convert after Close.
var errClosed = errors.New("office pool closed")

// acquire takes the first free slot, in the order callers came.
func (p *Pool) acquire(ctx context.Context) (*slot, error) {
	select {
	case <-p.closing:
		return nil, errClosed
	default:
	}
	select {
	case s := <-p.idle:
		p.mu.Lock()
		closed := p.closed
		if !closed {
			s.busy = true
		}
		p.mu.Unlock()
		if closed {
			p.idle <- s
			return nil, errClosed
		}
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.closing:
		return nil, errClosed
	}
}

// release gives slot s back: as it is, or after killing its process and
// starting a new one (cause != "").
func (p *Pool) release(s *slot, cause string) {
	p.mu.Lock()
	closed := p.closed
	pr := s.p
	if cause != "" || closed {
		s.p = nil
	}
	if cause == "" || closed {
		s.busy = false
	}
	p.mu.Unlock()
	if cause != "" {
		for i, c := range Causes() {
			if c == cause {
				p.restarts[i].Add(1)
			}
		}
		if pr != nil {
			p.log.Info("LibreOffice replaced", "slot", s.id, "pid", pr.pid, "cause", cause, "conversions", pr.uses)
		}
	}
	if (cause != "" || closed) && pr != nil {
		pr.kill()
	}
	if cause != "" && !closed {
		p.replace(s)
		return
	}
	p.idle <- s
}

// Convert converts doc, of format f (Detect's), to a PDF on the first free
// process. The caller already holds a render slot; ctx is the deadline.
// Its errors are *limits.Error for the document's problems (damaged,
// too many pages, PDF too large, timeout), others internal.
func (p *Pool) Convert(ctx context.Context, doc []byte, f Format, o Options) ([]byte, error) {
	p.wg.Add(1)
	defer p.wg.Done()
	begin := time.Now()
	deadline, hasDeadline := ctx.Deadline()
	ctxErr := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) && hasDeadline {
			return limits.ConvertTimeout(deadline.Sub(begin).Round(time.Second))
		}
		return fmt.Errorf("convert %s: %w", f.Name, err)
	}
	if len(doc) > limits.MaxOfficeBytes {
		return nil, tooLarge(fmt.Sprintf("the file is too large to convert: %d bytes, at most %d (50 MiB)", len(doc), limits.MaxOfficeBytes))
	}
	req, err := request(doc, f, o)
	if err != nil {
		return nil, err
	}
	s, err := p.acquire(ctx)
	if err != nil {
		if errors.Is(err, errClosed) {
			return nil, fmt.Errorf("convert %s: %w", f.Name, err)
		}
		return nil, ctxErr(err)
	}
	if s.p == nil || !s.p.alive() {
		// The start after the last replacement failed, or the process
		// died while it waited: start one now, under the caller's time.
		if s.p != nil {
			p.release(s, CauseCrash)
			if s, err = p.acquire(ctx); err != nil {
				return nil, ctxErr(err)
			}
		}
		if s.p == nil {
			pr, err := p.start(ctx, s.id)
			if err != nil {
				p.release(s, "")
				if ctx.Err() != nil {
					return nil, ctxErr(ctx.Err())
				}
				return nil, fmt.Errorf("convert %s: %w", f.Name, err)
			}
			p.mu.Lock()
			s.p = pr
			p.mu.Unlock()
		}
	}
	pdf, cause, err := p.convert(ctx, s.p, doc, f, req)
	if ctx.Err() != nil && cause != "" {
		err = ctxErr(ctx.Err())
	}
	if cause == "" {
		p.mu.Lock()
		s.p.uses++
		uses := s.p.uses
		p.mu.Unlock()
		switch {
		case uses >= p.cfg.MaxConversions:
			cause = CauseConversions
		case s.p.rss() > p.cfg.MaxRSS:
			cause = CauseMemory
		}
	}
	p.release(s, cause)
	return pdf, err
}

// bridgeRequest is one conversion as the bridge reads it.
type bridgeRequest struct {
	In        string `json:"in"`
	Out       string `json:"out"`
	Filter    string `json:"filter,omitempty"`
	Options   string `json:"options,omitempty"`
	Paper     []int  `json:"paper"`
	Landscape *bool  `json:"landscape"`
	MaxPages  int    `json:"maxPages"`
}

// Paper sizes in 1/100 mm, LibreOffice's unit.
var papers = map[string][]int{"a4": {21000, 29700}, "letter": {21590, 27940}}

// request is the bridge's request for doc, without the paths.
func request(doc []byte, f Format, o Options) (bridgeRequest, error) {
	r := bridgeRequest{Landscape: o.Landscape, MaxPages: limits.DefaultMaxPages}
	if o.Paper != "" {
		size, ok := papers[o.Paper]
		if !ok {
			return r, limits.Invalid(limits.Problem{Field: "paper", Source: limits.SourceMetadata, Code: limits.CodeInvalid,
				Message: "paper must be a4 or letter"})
		}
		r.Paper = size
	}
	if f.Name == "csv" {
		// Separator, text delimiter ("), character set (76 UTF-8, else
		// 1 Windows-1252), first line.
		charset := 76
		if !utf8.Valid(doc) {
			charset = 1
		}
		r.Filter = "Text - txt - csv (StarCalc)"
		r.Options = fmt.Sprintf("%d,34,%d,1", csvSeparator(doc), charset)
	}
	return r, nil
}

// pageObject matches a page object's dictionary in LibreOffice's PDFs
// (uncompressed object dictionaries, one /Type /Page per page).
var pageObject = regexp.MustCompile(`/Type\s*/Page[^s]`)

// convert runs one conversion on pr. cause says whether pr must be
// replaced (the conversion was stopped or pr broke).
func (p *Pool) convert(ctx context.Context, pr *proc, doc []byte, f Format, req bridgeRequest) (pdf []byte, cause string, err error) {
	scratch, err := os.MkdirTemp(p.dir, "convert-")
	if err != nil {
		return nil, "", fmt.Errorf("convert %s: %w", f.Name, err)
	}
	defer func() { _ = os.RemoveAll(scratch) }() // best effort: Close removes the pool's folder
	in := filepath.Join(scratch, "document."+f.Name)
	out := filepath.Join(scratch, "document.pdf")
	if err := os.WriteFile(in, doc, 0o600); err != nil {
		return nil, "", fmt.Errorf("convert %s: %w", f.Name, err)
	}
	req.In, req.Out = fileURL(in), fileURL(out)
	line, err := json.Marshal(req)
	if err != nil {
		return nil, "", fmt.Errorf("convert %s: %w", f.Name, err)
	}
	if _, err := pr.stdin.Write(append(line, '\n')); err != nil {
		return nil, CauseCrash, fmt.Errorf("convert %s: LibreOffice: %w", f.Name, err)
	}
	ans, err := pr.answer(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, CauseTimeout, err
	case err != nil && ctx.Err() != nil:
		return nil, CauseCancel, err
	case err != nil:
		// LibreOffice died on this document (a crash, or a bound of its
		// rlimits): the document is what it could not take.
		p.log.Warn("LibreOffice stopped during a conversion", "format", f.Name, "pid", pr.pid, "stderr", pr.stderrTail())
		return nil, CauseCrash, limits.Resource(fmt.Sprintf("LibreOffice stopped while converting the %s file", f.upper()))
	}
	p.conversions.Add(1)
	var res struct {
		OK      bool   `json:"ok"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(ans, &res); err != nil {
		return nil, CauseCrash, fmt.Errorf("convert %s: bridge answered %q: %w", f.Name, ans, err)
	}
	if res.Error != "" {
		p.log.Info("LibreOffice refused a document", "format", f.Name, "stage", res.Error, "message", res.Message)
	}
	switch res.Error {
	case "":
	case "load":
		return nil, "", limits.Corrupt(f.upper(), "LibreOffice cannot read it")
	case "export":
		return nil, "", limits.Corrupt(f.upper(), "LibreOffice cannot print it")
	default:
		// The bridge lost soffice mid-way (it died) and exits.
		p.log.Warn("LibreOffice stopped during a conversion", "format", f.Name, "pid", pr.pid, "message", res.Message)
		return nil, CauseCrash, limits.Resource(fmt.Sprintf("LibreOffice stopped while converting the %s file", f.upper()))
	}
	st, err := os.Stat(out)
	if err != nil {
		return nil, "", fmt.Errorf("convert %s: no PDF: %w", f.Name, err)
	}
	if st.Size() > limits.MaxPDFBytes {
		return nil, "", limits.PDFTooLarge(st.Size(), limits.MaxPDFBytes)
	}
	pdf, err = os.ReadFile(out)
	if err != nil {
		return nil, "", fmt.Errorf("convert %s: %w", f.Name, err)
	}
	if len(pdf) < 5 || string(pdf[:5]) != "%PDF-" {
		return nil, "", fmt.Errorf("convert %s: LibreOffice wrote no PDF", f.Name)
	}
	if n := len(pageObject.FindAllIndex(pdf, limits.DefaultMaxPages+2)); n > limits.DefaultMaxPages {
		return nil, "", limits.TooManyPages(limits.DefaultMaxPages)
	}
	return pdf, "", nil
}

// Ready reports whether a conversion can be served: nil while at least one
// process runs, else the last start's error.
func (p *Pool) Ready(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errClosed
	}
	for _, s := range p.slots {
		if s.p != nil && s.p.alive() {
			return nil
		}
	}
	if p.lastErr != nil {
		return p.lastErr
	}
	return errors.New("LibreOffice is starting")
}

// Warm waits until every slot has a running process, or until ctx is
// done; it returns the last start's error when a slot's start failed.
func (p *Pool) Warm(ctx context.Context) error {
	for {
		p.mu.Lock()
		up, failed := 0, p.lastErr
		for _, s := range p.slots {
			if s.p != nil && s.p.alive() {
				up++
			}
		}
		p.mu.Unlock()
		if up == len(p.slots) {
			return nil
		}
		if failed != nil {
			return failed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stats returns the pool's counters and each process's memory.
func (p *Pool) Stats() Stats {
	st := Stats{
		Conversions: p.conversions.Load(), StartFailures: p.startFailures.Load(),
		Isolated: p.isolated.Load(), Restarts: map[string]int64{},
	}
	for i, c := range Causes() {
		st.Restarts[c] = p.restarts[i].Load()
	}
	p.mu.Lock()
	type view struct {
		ps ProcessStats
		pr *proc
	}
	views := make([]view, len(p.slots))
	for i, s := range p.slots {
		views[i] = view{ProcessStats{Slot: s.id, Busy: s.busy}, s.p}
		if s.p != nil {
			views[i].ps.Pid = s.p.pid
			views[i].ps.Conversions = s.p.uses
		}
	}
	p.mu.Unlock()
	for _, v := range views {
		if v.pr != nil {
			v.ps.RSS = v.pr.rss()
		}
		st.Processes = append(st.Processes, v.ps)
	}
	return st
}

// Close stops every process (their whole groups) and removes the pool's
// folder. Conversions in flight fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	var procs []*proc
	for _, s := range p.slots {
		if s.p != nil {
			procs = append(procs, s.p)
		}
	}
	p.mu.Unlock()
	p.cancel()
	// Kill what runs now (a conversion in flight sees its process end),
	// then wait for the starts and conversions, then kill what a start
	// finished meanwhile.
	for _, pr := range procs {
		pr.kill()
	}
	p.wg.Wait()
	for _, s := range p.slots {
		if s.p != nil {
			s.p.kill()
			s.p = nil
		}
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("office pool: %w", err)
	}
	if err := os.RemoveAll(p.sockDir); err != nil {
		return fmt.Errorf("office pool: %w", err)
	}
	return nil
}
