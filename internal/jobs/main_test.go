package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
)

// tinyPDF is a one-page PDF made once by real XeLaTeX in TestMain, for the
// renderer of the burst test, where acceptance and queue mechanics are
// measured and 10,000 TeX runs would only measure TeX.
var tinyPDF []byte

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(crashChild())
	}
	if _, err := exec.LookPath("xelatex"); err == nil {
		dir, err := os.MkdirTemp("", "outprint-jobs-")
		if err == nil {
			tinyPDF, err = runTeX(context.Background(), dir, texDocument("tiny", 1, false), nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, "jobs tests: making the tiny PDF:", err)
			}
			_ = os.RemoveAll(dir)
		}
	}
	os.Exit(m.Run())
}

// kinds are the two engines every test runs on.
var kinds = []string{"sqlite", "postgres"}

// testDatabase returns the URL of a fresh, empty database of kind, removed
// when the test ends.
func testDatabase(t testing.TB, kind string) string {
	t.Helper()
	if kind == "sqlite" {
		return "sqlite://" + filepath.Join(t.TempDir(), "db", "outprint.db")
	}
	return testenv.PostgresDatabase(t, "outprint_test")
}

func openTestDB(t testing.TB, databaseURL string) *DB {
	t.Helper()
	db, err := Open(context.Background(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func quietLogger() *slog.Logger {
	if os.Getenv("OUTPRINT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a Config with short intervals so that tests wait little.
func testConfig() Config {
	return Config{
		MaxWorkers:        2,
		JobTimeout:        30 * time.Second,
		BudgetWait:        5 * time.Second,
		RescueAfter:       45 * time.Second,
		MaxAttempts:       3,
		RetryBase:         20 * time.Millisecond,
		RetryMax:          100 * time.Millisecond,
		SweepInterval:     time.Hour,
		CancelPoll:        100 * time.Millisecond,
		ProgressInterval:  200 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		Logger:            quietLogger(),
	}
}

// harness is one Service on a fresh database and store, its clock one the
// test moves. A test that waits on the service's events calls
// svc.TestSignals.Init before it starts the service.
type harness struct {
	t     testing.TB
	url   string
	db    *DB
	store *store.FS
	svc   *Service
	clock *testenv.Clock
}

func newHarness(t testing.TB, kind string, r Renderer, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, url: testDatabase(t, kind), clock: &testenv.Clock{}}
	h.db = openTestDB(t, h.url)
	st, err := store.NewFS(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	h.store = st
	h.svc = h.service(r, cfg)
	return h
}

// service makes another Service on the harness's database and store, as a
// second process would. It is stopped when the test ends.
func (h *harness) service(r Renderer, cfg Config) *Service {
	h.t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = h.clock
	}
	svc, err := New(h.db, h.store, r, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = svc.Stop(ctx)
	})
	return svc
}

func (h *harness) start(svc *Service) {
	h.t.Helper()
	if err := svc.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// wait polls the job's row until cond holds or timeout passes (a guard
// against hangs, not a performance assertion): the row may be written by
// another process (a crash child), whose events this one cannot hear.
func (h *harness) wait(tenant, id string, timeout time.Duration, cond func(Job) bool) Job {
	h.t.Helper()
	var j Job
	testenv.EventuallyWithin(h.t, timeout, "job "+id+" to get there", func() bool {
		var err error
		j, err = h.svc.Get(context.Background(), tenant, id)
		if err != nil {
			h.t.Fatalf("Get(%s) = %v", id, err)
		}
		return cond(j)
	})
	return j
}

// riverJobID returns the River job the job's row names now.
func (h *harness) riverJobID(id string) int64 {
	h.t.Helper()
	var rid int64
	if err := h.db.pool().queryRow(context.Background(), `SELECT river_job_id FROM outprint_jobs WHERE id = $1`, id).Scan(&rid); err != nil {
		h.t.Fatalf("river_job_id of %s: %v", id, err)
	}
	return rid
}

func (h *harness) waitTerminal(tenant, id string) Job {
	h.t.Helper()
	return h.wait(tenant, id, 2*time.Minute, func(j Job) bool { return j.Terminal() })
}

// jobFiles lists the files stored for a job, relative to its folder.
func (h *harness) jobFiles(id string) []string {
	h.t.Helper()
	root := filepath.Join(h.store.Root(), "jobs", id)
	var out []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		h.t.Fatal(err)
	}
	return out
}

// checkPDF checks a PDF with poppler: it parses, has pages pages and its
// text contains want.
func checkPDF(t testing.TB, pdf []byte, pages int, want string) {
	t.Helper()
	testenv.Require(t, "pdfinfo", "pdftotext")
	p := filepath.Join(t.TempDir(), "check.pdf")
	if err := os.WriteFile(p, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfinfo", p).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(out)
	if m == nil || string(m[1]) != strconv.Itoa(pages) {
		t.Errorf("pdfinfo pages = %q, want %d", m, pages)
	}
	txt, err := exec.Command("pdftotext", p, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	if !strings.Contains(string(txt), want) {
		t.Errorf("pdftotext = %q, want it to contain %q", txt, want)
	}
}

// texRenderer is the queue tests' renderer: a real XeLaTeX process in its
// own process group, killed with its group when the context ends. It is not
// outprint's pipeline (package render, which the integrator tests through
// this package); it renders a fixed document naming the job, shaped by
// directives in the Markdown:
//
//	pages: N        N pages (over maxPages fails with limits.TooManyPages)
//	loop            ship two pages, then loop forever (until killed)
//	loop-first      loop on the first call for the job, render normally after
//	transient: N    fail with a transient error on attempts 1..N
//
// It records per job how often it ran, when it saw its context end and
// when the TeX process was reaped.
type texRenderer struct {
	maxPages int

	mu       sync.Mutex
	calls    map[string]int
	ctxDone  map[string]time.Time
	reaped   map[string]time.Time
	started  chan string // job ids whose TeX process started
	progress map[string][]string
}

func newTeXRenderer(t testing.TB) *texRenderer {
	t.Helper()
	testenv.Require(t, "xelatex")
	return &texRenderer{
		maxPages: 3,
		calls:    map[string]int{}, ctxDone: map[string]time.Time{}, reaped: map[string]time.Time{},
		started: make(chan string, 100), progress: map[string][]string{},
	}
}

func directive(md []byte, name string) (string, bool) {
	for _, line := range strings.Split(string(md), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name); ok && (v == "" || v[0] == ':') {
			return strings.TrimSpace(strings.TrimPrefix(v, ":")), true
		}
	}
	return "", false
}

func (r *texRenderer) Render(ctx context.Context, in RenderInput, progress func(string, int)) ([]byte, error) {
	r.mu.Lock()
	r.calls[in.JobID]++
	call := r.calls[in.JobID]
	r.mu.Unlock()
	report := func(phase string, pages int) {
		r.mu.Lock()
		r.progress[in.JobID] = append(r.progress[in.JobID], fmt.Sprintf("%s:%d", phase, pages))
		r.mu.Unlock()
		progress(phase, pages)
	}
	report(PhasePreparing, 0)

	if v, ok := directive(in.Markdown, "transient"); ok {
		n, _ := strconv.Atoi(v)
		if in.Attempt <= n {
			return nil, fmt.Errorf("scratch space unavailable (attempt %d)", in.Attempt)
		}
	}
	pages := 1
	if v, ok := directive(in.Markdown, "pages"); ok {
		pages, _ = strconv.Atoi(v)
	}
	_, loop := directive(in.Markdown, "loop")
	if _, ok := directive(in.Markdown, "loop-first"); ok && call == 1 {
		loop = true
	}
	dir, err := os.MkdirTemp("", "outprint-jobs-tex-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	report(PhaseRendering, 0)
	select {
	case r.started <- in.JobID:
	default:
	}
	pdf, err := runTeX(ctx, dir, texDocument(in.JobID, pages, loop), func(p int) { report(PhaseRendering, p) })
	r.mu.Lock()
	r.reaped[in.JobID] = time.Now()
	r.mu.Unlock()
	if ctx.Err() != nil {
		r.mu.Lock()
		r.ctxDone[in.JobID] = time.Now()
		r.mu.Unlock()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if pages > r.maxPages {
		return nil, limits.TooManyPages(r.maxPages)
	}
	report(PhasePackaging, pages)
	return pdf, nil
}

// texDocument is a document naming the job (its id is hex and dashes, safe
// in TeX) with pages pages, optionally looping forever after them.
func texDocument(id string, pages int, loop bool) string {
	var b strings.Builder
	b.WriteString("\\documentclass{article}\n\\begin{document}\n")
	for i := 1; i <= pages; i++ {
		if i > 1 {
			b.WriteString("\\newpage\n")
		}
		fmt.Fprintf(&b, "outprint job %s page %d\n", id, i)
	}
	if loop {
		b.WriteString("\\newpage extra\\newpage\n\\loop\\iftrue\\repeat\n")
	}
	b.WriteString("\\end{document}\n")
	return b.String()
}

var pageMark = regexp.MustCompile(`\[(\d+)[\]\s]`)

// runTeX runs XeLaTeX on doc in dir, in its own process group that is
// killed whole when ctx ends, and returns the PDF. pages is told the page
// numbers TeX ships, as its log shows them.
func runTeX(ctx context.Context, dir, doc string, pages func(int)) ([]byte, error) {
	if err := os.WriteFile(filepath.Join(dir, "doc.tex"), []byte(doc), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("xelatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "doc.tex")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()
	// TeX writes "[N" when it ships page N; a mark may straddle two
	// reads, so the end of the previous read is kept.
	var carry []byte
	last := 0
	buf := make([]byte, 4096)
	for {
		n, rerr := out.Read(buf)
		chunk := append(carry, buf[:n]...)
		for _, m := range pageMark.FindAllSubmatch(chunk, -1) {
			if p, _ := strconv.Atoi(string(m[1])); p > last && pages != nil {
				last = p
				pages(p)
			}
		}
		carry = append([]byte(nil), chunk[max(0, len(chunk)-8):]...)
		if rerr != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("xelatex: %w", err)
	}
	return os.ReadFile(filepath.Join(dir, "doc.pdf"))
}

// cannedPDFRenderer returns tinyPDF at once: the burst test's renderer,
// which measures acceptance and queue mechanics, not TeX.
type cannedPDFRenderer struct{}

func (cannedPDFRenderer) Render(ctx context.Context, in RenderInput, progress func(string, int)) ([]byte, error) {
	progress(PhasePreparing, 0)
	progress(PhaseRendering, 1)
	progress(PhasePackaging, 1)
	return tinyPDF, ctx.Err()
}

// recorder is a metrics Observer that keeps what it was told.
type recorder struct {
	mu       sync.Mutex
	delays   []time.Duration
	finished map[string]int // "state/code"
	renders  []time.Duration
	retried  int
}

func newRecorder() *recorder { return &recorder{finished: map[string]int{}} }

func (r *recorder) Started(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delays = append(r.delays, d)
}

func (r *recorder) Finished(state, code string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished[state+"/"+code]++
	if state == StateSucceeded {
		r.renders = append(r.renders, d)
	}
}

func (r *recorder) Retried(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retried++
}

func (r *recorder) snapshot() (finished map[string]int, retried, started int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := make(map[string]int, len(r.finished))
	for k, v := range r.finished {
		f[k] = v
	}
	return f, r.retried, len(r.delays)
}
