package tex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// RunnerConfig configures a Runner. The zero value is valid: every field has
// a default.
type RunnerConfig struct {
	// Program is the XeLaTeX binary, looked up in PATH (default "xelatex").
	Program string
	// TempDir is where scratch folders are made (default os.TempDir()).
	TempDir string
	// Timeout bounds one Run in addition to the context's deadline, and
	// sets the CPU-time rlimit (default limits.DefaultRenderTimeout).
	Timeout time.Duration
	// MaxPDFBytes is the PDF size limit (default limits.MaxPDFBytes).
	MaxPDFBytes int64
	// MemoryBytes is the address-space rlimit of each TeX process
	// (default limits.RenderMemoryBytes).
	MemoryBytes uint64
	// Processes is the RLIMIT_NPROC of each TeX process (default
	// limits.RenderProcesses). It counts every process of the user and
	// root ignores it; see sandbox.start.
	Processes uint64
	// ScratchBytes bounds every file TeX writes (RLIMIT_FSIZE) and the
	// scratch folder's total (default limits.ScratchBytes).
	ScratchBytes int64
}

func (c RunnerConfig) withDefaults() RunnerConfig {
	if c.Program == "" {
		c.Program = "xelatex"
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	if c.Timeout <= 0 {
		c.Timeout = limits.DefaultRenderTimeout
	}
	if c.MaxPDFBytes <= 0 {
		c.MaxPDFBytes = limits.MaxPDFBytes
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = limits.RenderMemoryBytes
	}
	if c.Processes == 0 {
		c.Processes = limits.RenderProcesses
	}
	if c.ScratchBytes <= 0 {
		c.ScratchBytes = limits.ScratchBytes
	}
	return c
}

// Runner runs XeLaTeX cold: a new process for every run. It is safe for
// concurrent use; it holds no processes between calls.
type Runner struct {
	cfg RunnerConfig
	sb  sandbox
}

// NewRunner checks the configuration and finds the program.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	cfg = cfg.withDefaults()
	sb, err := newSandbox(cfg)
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, sb: sb}, nil
}

func newSandbox(cfg RunnerConfig) (sandbox, error) {
	prog, err := exec.LookPath(cfg.Program)
	if err != nil {
		return sandbox{}, fmt.Errorf("tex program %q: %w", cfg.Program, err)
	}
	if prog, err = filepath.Abs(prog); err != nil {
		return sandbox{}, fmt.Errorf("tex program %q: %w", cfg.Program, err)
	}
	if fi, err := os.Stat(cfg.TempDir); err != nil || !fi.IsDir() {
		return sandbox{}, fmt.Errorf("tex temp dir %q: not a directory (%v)", cfg.TempDir, err)
	}
	// XeLaTeX starts xdvipdfmx through /bin/sh; both live next to it or
	// in the system directories.
	path := filepath.Dir(prog) + ":/usr/local/bin:/usr/bin:/bin"
	driver := ""
	for _, dir := range filepath.SplitList(path) {
		if fi, err := os.Stat(filepath.Join(dir, "xdvipdfmx")); err == nil && fi.Mode()&0o111 != 0 {
			driver = filepath.Join(dir, "xdvipdfmx")
			break
		}
	}
	fonts, err := prepareTextFonts(textFontsRoot())
	if err != nil {
		return sandbox{}, fmt.Errorf("tex fonts: %w", err)
	}
	return sandbox{
		program: prog, xdvipdfmx: driver, path: path, fonts: fonts, memoryBytes: cfg.MemoryBytes,
		processes: cfg.Processes, scratchBytes: cfg.ScratchBytes,
	}, nil
}

// Run typesets job: once, or twice when the first run says so.
func (r *Runner) Run(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()

	dir, err := os.MkdirTemp(r.cfg.TempDir, "outprint-tex-")
	if err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	inputs, err := placeFiles(dir, job.Files)
	if err != nil {
		return nil, err
	}
	nonce := newNonce()
	if err := writeFile(dir, "main.tex", coldDocument(job.Preamble, nonce, job.maxPages())); err != nil {
		return nil, err
	}
	if err := writeFile(dir, "body.tex", bodyFile(job.Body)); err != nil {
		return nil, err
	}

	res := &Result{}
	var li logInfo
	for run := 1; ; run++ {
		before := snapshotTOCs(dir)
		var rr runResult
		rr, li, err = r.once(ctx, dir, nonce, inputs, job.Progress)
		res.Runs = run
		res.CPU += rr.cpu
		res.MaxRSS = max(res.MaxRSS, rr.maxRSS)
		res.Engine += rr.engine
		res.Log = rr.log
		if err != nil {
			return nil, err
		}
		if run >= limits.MaxTeXRuns || !needsRerun(dir, li, before) {
			break
		}
	}
	if err := readPDF(dir, r.cfg.MaxPDFBytes, li, res); err != nil {
		return nil, err
	}
	res.Wall = time.Since(start)
	return res, nil
}

// runResult is what one TeX run leaves besides its log.
type runResult struct {
	// maxRSS is the peak resident memory of the run\'s processes, in bytes.
	maxRSS int64
	cpu    time.Duration
	engine time.Duration
	log    string
}

// once runs XeLaTeX once in dir and classifies the outcome.
func (r *Runner) once(ctx context.Context, dir, nonce string, inputs map[string]bool, progress func(int)) (runResult, logInfo, error) {
	rep := newReporter(progress)
	var docStart time.Time
	startMark := marker(nonce) + "start"
	lines := &lineWatcher{nonce: nonce, pages: rep.report, onStart: func() { docStart = time.Now() }, startMark: startMark}
	p, err := r.sb.start(dir, r.sb.args("", ""), cpuSeconds(r.cfg.Timeout), lines.line)
	if err != nil {
		rep.close()
		return runResult{}, logInfo{}, err
	}
	state, cause := p.wait(ctx, dir, r.cfg.ScratchBytes, inputs, nil)
	end := time.Now()
	rep.close()
	rr := runResult{cpu: p.cpu(), maxRSS: p.maxRSS()}
	lines.mu.Lock()
	if !docStart.IsZero() {
		rr.engine = end.Sub(docStart)
	}
	lines.mu.Unlock()
	li, logText := readLog(dir, nonce)
	rr.log = logText
	return rr, li, classify(cause, state, li, p.output(), dir)
}

// cpuSeconds is the CPU-time rlimit for a process that may run timeout
// long: a busy TeX uses one core, so CPU time never exceeds wall time.
func cpuSeconds(timeout time.Duration) uint64 {
	return uint64(timeout/time.Second) + 2
}

// classify turns how a TeX run ended into the package's errors. cause is
// why we killed it (nil if it exited by itself).
func classify(cause error, state *os.ProcessState, li logInfo, output, dir string) error {
	switch {
	case cause == nil:
	case errors.Is(cause, errScratchFull):
		return fmt.Errorf("%w: the scratch folder outgrew its limit", ErrResource)
	default:
		return ctxError(cause)
	}
	if li.pageLimit {
		return fmt.Errorf("%w: stopped at page %d", ErrPageLimit, li.lastPage)
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalError(ws.Signal(), output)
	}
	if li.capacity {
		return fmt.Errorf("%w: %s", ErrResource, sanitize(li.errMsg, dir))
	}
	if resourceTrouble(output) {
		return fmt.Errorf("%w: %s", ErrResource, lastLines(output, 3))
	}
	if li.errMsg != "" {
		ce := &CompileError{Message: sanitize(li.errMsg, dir)}
		if li.errFile == "./body.tex" || li.errFile == "body.tex" {
			ce.Line = li.errLine
		}
		return ce
	}
	if !state.Success() {
		return fmt.Errorf("xelatex failed (%v): %s", state, lastLines(output, 5))
	}
	if li.overflow > maxOverflow {
		// A PDF that lacks part of the document is never delivered.
		return &CompileError{Message: fmt.Sprintf(
			"page %d cannot hold its content: %.0f pt of it would be cut off at the bottom (a block taller than a page that cannot be split)",
			li.overflowPage, li.overflow)}
	}
	return nil
}

// signalError is classify's error for a TeX run that a signal ended:
// the signals of the CPU and file size rlimits, or another (the kernel's
// OOM killer's SIGKILL, say) with the output telling why.
func signalError(sig syscall.Signal, output string) error {
	switch sig {
	case syscall.SIGXCPU:
		return fmt.Errorf("%w: CPU time limit", ErrTimeout)
	case syscall.SIGXFSZ:
		return fmt.Errorf("%w: a file outgrew the file size limit", ErrResource)
	}
	if resourceTrouble(output) {
		return fmt.Errorf("%w: killed by %v", ErrResource, sig)
	}
	return fmt.Errorf("xelatex killed by %v: %s", sig, lastLines(output, 5))
}

// lostContent checks, from the log of a run that succeeded, that the PDF
// holds the whole document, as the product promises (a shorter PDF is
// never delivered): the end of the body was shipped out, the footers'
// page total is the number of pages, and no float was taller than its
// page. It costs a few log lines per render, no look at the PDF. The
// page overflow of classify is the fourth such check.
func lostContent(li logInfo) error {
	pages := li.pages
	if pages < 0 {
		pages = li.lastPage
	}
	switch {
	case !li.ended:
		return &CompileError{Message: "the end of the document never reached the PDF: TeX stopped before it or dropped the part that holds it"}
	case li.total >= 0 && li.total != pages:
		return &CompileError{Message: fmt.Sprintf(
			"the PDF's footers count %d pages but it has %d: pages were added after the footers' total was set, or it counts a page that never came", li.total, pages)}
	case li.floatTooLarge > maxOverflow:
		return &CompileError{Message: fmt.Sprintf(
			"a figure or table is %.0f pt taller than a page: its bottom would be cut off", li.floatTooLarge)}
	}
	return nil
}

// maxOverflow is how far (pt) a page's content may run past the text
// area before the render fails: about a line, which would already print
// over the footer. TeX sets what does not fit below the page's bottom
// edge, where nobody sees it.
const maxOverflow = 10.0

// resourceTrouble reports whether TeX's or xdvipdfmx's output shows an
// rlimit being hit: memory (RLIMIT_AS makes malloc fail) or processes
// (RLIMIT_NPROC makes fork fail).
func resourceTrouble(output string) bool {
	for _, s := range []string{
		"memory exhausted", "Cannot allocate memory", "out of memory", "Out of memory",
		"Resource temporarily unavailable", "fork: retry",
		"File size limit exceeded",
	} {
		if strings.Contains(output, s) {
			return true
		}
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// ctxError maps a context's error to ErrTimeout or ErrCanceled.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %v", ErrCanceled, err)
}

// logTail bounds Result.Log.
const logTail = 64 << 10

// readLog parses main.log and returns its tail.
func readLog(dir, nonce string) (logInfo, string) {
	f, err := os.Open(filepath.Join(dir, "main.log"))
	if err != nil {
		return logInfo{pages: -1}, ""
	}
	defer func() { _ = f.Close() }()
	tail := &tailWriter{max: logTail}
	li := parseLog(io.TeeReader(f, tail), nonce)
	return li, string(tail.bytes())
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	return t.buf
}

// tocExts are the files \@starttoc may read that the runner snapshots.
var tocExts = []string{"toc", "lof", "lot"}

// snapshotTOCs reads the table-of-contents files of dir as they are before
// a run (a missing file is "").
func snapshotTOCs(dir string) map[string]string {
	s := map[string]string{}
	for _, ext := range tocExts {
		b, _ := os.ReadFile(filepath.Join(dir, "main."+ext))
		s[ext] = string(b)
	}
	return s
}

// needsRerun decides whether a second run is needed: a warning asked for
// it, or the document read a table of contents that the run changed (it
// printed the old one).
//
// hyperref asks for a rerun on every first run to put a /PageLabels entry
// in the catalog. When the .aux shows one page-label range, decimal from
// the first page, that entry would only repeat what a viewer shows without
// it, so it is no reason for a second run.
func needsRerun(dir string, li logInfo, before map[string]string) bool {
	if li.rerun {
		return true
	}
	if li.pageLabels && !defaultPageLabels(dir) {
		return true
	}
	for _, ext := range li.tocs {
		old, known := before[ext]
		if !known {
			// A list we do not snapshot: rerun to be safe.
			return true
		}
		now, _ := os.ReadFile(filepath.Join(dir, "main."+ext))
		if string(now) != old {
			return true
		}
	}
	return false
}

// defaultPageLabels reports whether main.aux records exactly one page
// label range, decimal numbers from the first page: \HyPL@Entry{0<</S/D>>}.
func defaultPageLabels(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "main.aux"))
	if err != nil {
		return false
	}
	var entries []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `\HyPL@Entry{`) {
			entries = append(entries, strings.TrimSpace(line))
		}
	}
	return len(entries) == 1 && entries[0] == `\HyPL@Entry{0<</S/D>>}`
}

// readPDF checks the PDF's size against the limit, then reads it.
func readPDF(dir string, max int64, li logInfo, res *Result) error {
	if err := lostContent(li); err != nil {
		return err
	}
	path := filepath.Join(dir, "main.pdf")
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("xelatex wrote no PDF: %w", err)
	}
	if fi.Size() > max {
		return &PDFTooLargeError{Size: fi.Size(), Limit: max}
	}
	pdf, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read PDF: %w", err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return fmt.Errorf("xelatex wrote a broken PDF (%d bytes)", len(pdf))
	}
	res.PDF = pdf
	res.Pages = li.pages
	if res.Pages < 0 {
		res.Pages = li.lastPage
	}
	res.MissingGlyphs = li.missing
	return nil
}

func (j Job) maxPages() int {
	if j.MaxPages > 0 {
		return j.MaxPages
	}
	return limits.DefaultMaxPages
}

// reservedNames are the runner's own files in the scratch folder.
var reservedNames = map[string]bool{
	"main.tex": true, "body.tex": true, "main.log": true, "main.aux": true,
	"main.pdf": true, "main.xdv": true, "main.toc": true, "main.lof": true,
	"main.lot": true, "main.out": true, "go.tex": true, "prev.aux": true,
	"limit.tex": true,
}

// placeFiles copies the Job's files into the scratch folder and returns
// their names. Copies, not links: TeX may write files in its folder, and
// must never reach the caller's originals through a link.
func placeFiles(dir string, files map[string]string) (map[string]bool, error) {
	names := map[string]bool{}
	for name, src := range files {
		clean := filepath.Clean(name)
		if !filepath.IsLocal(clean) || reservedNames[clean] || hasDotComponent(clean) {
			return nil, fmt.Errorf("job file name %q: not a plain relative name", name)
		}
		dst := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, fmt.Errorf("job file %q: %w", name, err)
		}
		if err := copyFile(dst, src); err != nil {
			return nil, fmt.Errorf("job file %q: %w", name, err)
		}
		names[clean] = true
	}
	return names, nil
}

// hasDotComponent reports a path component starting with a dot, which
// openin_any=p would refuse to read anyway.
func hasDotComponent(p string) bool {
	for _, c := range strings.Split(p, string(filepath.Separator)) {
		if strings.HasPrefix(c, ".") {
			return true
		}
	}
	return false
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func writeFile(dir, name, content string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
