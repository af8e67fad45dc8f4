package tex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// newTestPool starts a pool on cfg, closed when the test ends, whose
// formats are the test binary's shared ones (testFormats) unless cfg sets
// Formats.
func newTestPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	if cfg.Formats == nil && !cfg.NoFormat {
		cfg.Formats = testFormats(t)
	}
	return startTestPool(t, cfg)
}

// startTestPool is newTestPool without the shared formats: with
// cfg.Formats nil the pool keeps formats of its own, as the service's.
func startTestPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	testenv.Require(t, "xelatex", "pdfinfo", "pdftotext")
	if cfg.Runner.TempDir == "" {
		cfg.Runner.TempDir = t.TempDir()
	}
	if cfg.Max == 0 {
		cfg.Max = 2
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// waitFor polls cond until it holds or 60 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running reports whether pid is a live process: it exists and is not a
// zombie (a killed xdvipdfmx whose parent died first waits a moment for
// init to reap it).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

// idleTeX returns the pids of warm processes named comm (any when ""):
// processes whose folder has no body.tex yet.
func idleTeX(root, comm string) []int {
	var pids []int
	for _, proc := range procsUnder(root) {
		if comm != "" && !strings.HasSuffix(proc, " "+comm) {
			continue
		}
		pid := pidsOf([]string{proc})[0]
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil {
			continue
		}
		// A zygote's probe typesets outprint's own page, not a
		// user's document, and ends by itself.
		_, err = os.Stat(filepath.Join(cwd, "body.tex"))
		if err != nil || strings.Contains(filepath.Base(cwd), "outprint-probe-") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestPoolReplacementAfterUse(t *testing.T) {
	// Warm processes of their own: the fallback when no zygote forks.
	p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}, Zygote: ZygoteConfig{Off: true}})
	waitFor(t, "a warm process", func() bool { return p.Stats().Warm == 1 })

	seen := map[uint64]bool{}
	for i := range 3 {
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: fmt.Sprintf("Warm document %d.\n", i)})
		if err != nil {
			t.Fatalf("Run %d = %v", i, err)
		}
		if len(res.Processes) != 1 || seen[res.Processes[0]] {
			t.Fatalf("Run %d: Processes = %v, want one process never used before (used: %v)", i, res.Processes, seen)
		}
		seen[res.Processes[0]] = true
		if got := pdfText(t, res.PDF); !strings.Contains(got, fmt.Sprintf("Warm document %d.", i)) {
			t.Errorf("Run %d: pdftotext = %q", i, got)
		}
		if got := pdfPages(t, res.PDF); got != 1 || res.Pages != 1 {
			t.Errorf("Run %d: pdfinfo pages = %d, Result.Pages = %d, want 1", i, got, res.Pages)
		}
		if res.WarmCPU <= 0 || res.CPU <= res.WarmCPU {
			t.Errorf("Run %d: CPU %v, WarmCPU %v; want 0 < WarmCPU < CPU", i, res.CPU, res.WarmCPU)
		}
		// The replacement warms up in the background.
		waitFor(t, "the replacement", func() bool { s := p.Stats(); return s.Warm == 1 && s.Busy == 0 })
	}
	s := p.Stats()
	if s.Replaced < 3 || s.Started < 4 || s.Failures != 0 {
		t.Errorf("Stats = %+v, want Replaced >= 3, Started >= 4, no failures", s)
	}
}

// TestPoolDeathWhileIdle kills a warm process (XeLaTeX, or the xdvipdfmx
// waiting beside it): the pool notices, replaces it, and renders fine.
func TestPoolDeathWhileIdle(t *testing.T) {
	for _, victim := range []string{"xelatex", "xdvipdfmx"} {
		t.Run(victim, func(t *testing.T) {
			// Warm processes of their own: the fallback when no zygote forks.
			p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}, Zygote: ZygoteConfig{Off: true}})
			root := p.cfg.Runner.TempDir
			var victims []int
			waitFor(t, "a warm "+victim, func() bool {
				victims = idleTeX(root, victim)
				return p.Stats().Warm == 1 && len(victims) == 1
			})
			if err := syscall.Kill(victims[0], syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s: %v", victim, err)
			}
			waitFor(t, "the failure to be noticed", func() bool { return p.Stats().Failures == 1 })
			waitFor(t, "a new warm process", func() bool { return p.Stats().Warm == 1 })
			for _, pid := range idleTeX(root, "") {
				if pid == victims[0] {
					t.Errorf("killed process %d is still there", pid)
				}
			}
			res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "After a death.\n"})
			if err != nil {
				t.Fatalf("Run after the death = %v", err)
			}
			if got := pdfText(t, res.PDF); !strings.Contains(got, "After a death.") {
				t.Errorf("pdftotext = %q", got)
			}
		})
	}
}

func TestPoolIdleTimeout(t *testing.T) {
	p := newTestPool(t, PoolConfig{IdleTimeout: 500 * time.Millisecond})
	if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "x\n"}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	// The replacement warms up, idles out and is not replaced (Min 0).
	waitFor(t, "the replacement to start", func() bool { return p.Stats().Started >= 2 })
	waitFor(t, "no process left", func() bool {
		s := p.Stats()
		return s.Warm == 0 && s.Busy == 0 && len(procsUnder(p.cfg.Runner.TempDir)) == 0
	})
}

func TestPoolHangKilledByTimeout(t *testing.T) {
	p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_, err := p.Run(ctx, Job{Preamble: testPreamble, Body: "\\loop\\iftrue\\repeat\n"})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Run(endless loop) = %v, want ErrTimeout", err)
	}
	// Only warm processes are left; none has a document.
	waitFor(t, "the pool to settle", func() bool { return p.Stats().Busy == 0 })
	if busy := len(procsUnder(p.cfg.Runner.TempDir)) - len(idleTeX(p.cfg.Runner.TempDir, "")); busy != 0 {
		t.Errorf("%d TeX processes with a document left after the timeout: %v", busy, procsUnder(p.cfg.Runner.TempDir))
	}
	res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "Still fine.\n"})
	if err != nil || !strings.Contains(pdfText(t, res.PDF), "Still fine.") {
		t.Fatalf("Run after the timeout = %v", err)
	}
}

func TestPoolCancelKillsGroup(t *testing.T) {
	p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startHungRender(t, ctx, p.Run, 60*time.Second)
	all := pidsOf(procsUnder(p.cfg.Runner.TempDir))
	idle := map[int]bool{}
	for _, pid := range idleTeX(p.cfg.Runner.TempDir, "") {
		idle[pid] = true
	}
	var busy []int
	for _, pid := range all {
		if !idle[pid] {
			busy = append(busy, pid)
		}
	}
	if len(busy) == 0 {
		t.Fatal("found no busy TeX process")
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrCanceled) {
		t.Errorf("Run(canceled) = %v, want ErrCanceled", err)
	}
	for _, pid := range busy {
		if running(pid) {
			t.Errorf("busy process %d still runs after cancel", pid)
		}
	}
}

func TestPoolCloseLeavesNothing(t *testing.T) {
	testenv.Require(t, "xelatex")
	root := t.TempDir()
	p, err := NewPool(PoolConfig{Runner: RunnerConfig{TempDir: root}, Min: 2, Max: 3, Preambles: []string{testPreamble}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "x\n"}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	// A render still running when Close's context ends is canceled.
	done := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := p.Run(context.Background(), Job{
			Preamble: testPreamble, Body: "a\\newpage\n\\loop\\iftrue\\repeat\n",
			Progress: func(int) { once.Do(func() { close(started) }) },
		})
		done <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline (a render had to be canceled)", err)
	}
	if err := <-done; !errors.Is(err, ErrCanceled) {
		t.Errorf("Run during Close = %v, want ErrCanceled", err)
	}
	if left := procsUnder(root); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if ents, _ := os.ReadDir(root); len(ents) > 0 {
		t.Errorf("folders left after Close: %v", ents)
	}
	if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "x\n"}); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Run after Close = %v, want ErrPoolClosed", err)
	}
}

// TestPoolOneDocumentPerProcess renders many documents from many
// goroutines: every render has a process of its own, and every PDF holds
// its own text and no other's.
func TestPoolOneDocumentPerProcess(t *testing.T) {
	p := newTestPool(t, PoolConfig{Max: 4, Min: 1, Preambles: []string{testPreamble}})
	const clients, each = 4, 4
	type rendered struct {
		n     int
		procs []uint64
		text  string
		err   error
	}
	results := make(chan rendered, clients*each)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := c*each + i
				body := fmt.Sprintf("Secret of document %d.\n", n)
				if n%4 == 0 {
					body = "\\tableofcontents\n\\section{Part}" + body
				}
				res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: body})
				r := rendered{n: n, err: err}
				if err == nil {
					r.procs = res.Processes
					r.text = pdfText(t, res.PDF)
				}
				results <- r
			}
		}()
	}
	wg.Wait()
	close(results)
	owner := map[uint64]int{}
	for r := range results {
		if r.err != nil {
			t.Errorf("document %d: %v", r.n, r.err)
			continue
		}
		for _, id := range r.procs {
			if prev, dup := owner[id]; dup {
				t.Errorf("process %d typeset documents %d and %d", id, prev, r.n)
			}
			owner[id] = r.n
		}
		for m := range clients * each {
			has := strings.Contains(r.text, fmt.Sprintf("Secret of document %d.", m))
			if has != (m == r.n) {
				t.Errorf("document %d: text of document %d present = %v", r.n, m, has)
			}
		}
	}
	if s := p.Stats(); s.Failures != 0 || s.Busy != 0 {
		t.Errorf("Stats = %+v, want no failures and nothing busy", s)
	}
}

func short(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// outlineTitles returns the PDF's bookmark titles, read by qpdf.
func outlineTitles(t *testing.T, pdf []byte) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "o.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qpdf", "--json", "--json-key=outlines", path).Output()
	if err != nil {
		t.Fatalf("qpdf --json: %v", err)
	}
	var doc struct {
		Outlines []struct {
			Title string `json:"title"`
		} `json:"outlines"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("qpdf json: %v", err)
	}
	var titles []string
	for _, o := range doc.Outlines {
		titles = append(titles, o.Title)
	}
	return titles
}

// TestPoolMatchesCold: documents that need two runs come out of the pool
// exactly as a cold render makes them: same text, pages, bookmarks.
func TestPoolMatchesCold(t *testing.T) {
	testenv.Require(t, "qpdf")
	// Warm processes of their own; TestZygoteMatchesCold has forked ones.
	p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}, Zygote: ZygoteConfig{Off: true}})
	matchesCold(t, p, false)
}

// matchesCold renders one- and two-run documents with p and with a cold
// runner and compares them. forked: every TeX run must be a zygote's child.
func matchesCold(t *testing.T, p *Pool, forked bool) {
	r := newTestRunner(t, RunnerConfig{})
	long := strings.Repeat("Filler text that makes the sections long enough to move across pages. ", 60)
	tests := []struct {
		name string
		body string
		runs int
	}{
		{"plain", "\\section{Only}Just one run.\n", 1},
		{"toc", "\\tableofcontents\n\\section{Alpha}" + long + "\n\\section{Beta}\\label{beta}" + long + "\n\\subsection{Gamma}x\n", 2},
		{"references", "See section~\\ref{far} on page~\\pageref{far}.\n\\section{Near}" + long + long + "\n\\section{Far}\\label{far}here\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := Job{Preamble: testPreamble, Body: tt.body}
			cold, err := r.Run(context.Background(), job)
			if err != nil {
				t.Fatalf("cold Run = %v", err)
			}
			if forked {
				waitFor(t, "a slot", func() bool { return newestIsSlot(p) })
			}
			warm, err := p.Run(context.Background(), job)
			if err != nil {
				t.Fatalf("warm Run = %v", err)
			}
			if want := map[bool]int{true: warm.Runs}[forked]; warm.Forked != want {
				t.Errorf("%d of %d TeX runs were forked from a zygote, want %d", warm.Forked, warm.Runs, want)
			}
			if cold.Runs != tt.runs || warm.Runs != tt.runs {
				t.Errorf("Runs: cold %d, warm %d, want %d", cold.Runs, warm.Runs, tt.runs)
			}
			if len(warm.Processes) != warm.Runs || (warm.Runs == 2 && warm.Processes[0] == warm.Processes[1]) {
				t.Errorf("warm Processes = %v, want one new process per run", warm.Processes)
			}
			ct, wt := pdfText(t, cold.PDF), pdfText(t, warm.PDF)
			if ct != wt {
				t.Errorf("pdftotext differs:\ncold: %q\nwarm: %q", short(ct), short(wt))
			}
			if cp, wp := pdfPages(t, cold.PDF), pdfPages(t, warm.PDF); cp != wp {
				t.Errorf("pages: cold %d, warm %d", cp, wp)
			}
			if co, wo := outlineTitles(t, cold.PDF), outlineTitles(t, warm.PDF); strings.Join(co, "|") != strings.Join(wo, "|") {
				t.Errorf("bookmarks: cold %q, warm %q", co, wo)
			}
			if strings.Contains(wt, "??") {
				t.Errorf("warm text has unresolved references: %q", short(wt))
			}
		})
	}
}

func TestPoolCloseWhileWarming(t *testing.T) {
	testenv.Require(t, "xelatex")
	root := t.TempDir()
	p, err := NewPool(PoolConfig{Runner: RunnerConfig{TempDir: root}, Min: 2, Max: 2, Preambles: []string{testPreamble}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the format build or the warm-ups are under way
	if err := p.Close(context.Background()); err != nil {
		t.Errorf("Close = %v", err)
	}
	if left := procsUnder(root); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if ents, _ := os.ReadDir(root); len(ents) > 0 {
		t.Errorf("folders left after Close: %v", ents)
	}
}

func TestPoolFiles(t *testing.T) {
	p := newTestPool(t, PoolConfig{})
	src := filepath.Join(t.TempDir(), "plot.pdf")
	// A one-page PDF made by XeLaTeX itself, included as an image.
	r := newTestRunner(t, RunnerConfig{})
	img, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: "IMAGE-TEXT\n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, img.PDF, 0o600); err != nil {
		t.Fatal(err)
	}
	preamble := strings.Replace(testPreamble, "\\usepackage{bookmark}", "\\usepackage{bookmark}\n\\usepackage{graphicx}", 1)
	res, err := p.Run(context.Background(), Job{
		Preamble: preamble,
		Body:     "Before.\n\n\\includegraphics[width=5cm]{figures/plot.pdf}\n",
		Files:    map[string]string{"figures/plot.pdf": src},
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if text := pdfText(t, res.PDF); !strings.Contains(text, "Before.") || !strings.Contains(text, "IMAGE-TEXT") {
		t.Errorf("pdftotext = %q, want the body and the included PDF's text", text)
	}
}

func TestPoolErrors(t *testing.T) {
	p := newTestPool(t, PoolConfig{})
	t.Run("page limit", func(t *testing.T) {
		_, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: strings.Repeat("\\null\\newpage\n", 700)})
		if !errors.Is(err, ErrPageLimit) || !strings.Contains(err.Error(), "page 501") {
			t.Errorf("Run(700 pages) = %v, want ErrPageLimit at page 501", err)
		}
		_, err = p.Run(context.Background(), Job{Preamble: testPreamble, Body: strings.Repeat("\\null\\newpage\n", 10), MaxPages: 5})
		if !errors.Is(err, ErrPageLimit) || !strings.Contains(err.Error(), "page 6") {
			t.Errorf("Run(10 pages, MaxPages 5) = %v, want ErrPageLimit at page 6", err)
		}
	})
	t.Run("body error", func(t *testing.T) {
		_, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "ok\n\\undefinedoutprint\n"})
		var ce *CompileError
		if !errors.As(err, &ce) || ce.Line != 2 {
			t.Errorf("Run = %v, want a CompileError at line 2", err)
		}
	})
	t.Run("preamble error", func(t *testing.T) {
		before := p.Stats().Failures
		_, err := p.Run(context.Background(), Job{Preamble: testPreamble + "\\undefinedinpreamble\n", Body: "x\n"})
		var ce *CompileError
		if !errors.As(err, &ce) || ce.Line != 0 {
			t.Errorf("Run = %v, want a CompileError outside the body", err)
		}
		time.Sleep(500 * time.Millisecond)
		if got := p.Stats().Failures - before; got < 1 || got > 2 {
			t.Errorf("failures after a broken preamble = %d, want 1 or 2 (no retry loop)", got)
		}
	})
}

// TestPoolWarmupHang: a process that never gets warm is killed at the
// warm-up timeout; the render that waited for it fails instead of hanging.
func TestPoolWarmupHang(t *testing.T) {
	// Warm processes of their own: the fallback when no zygote forks.
	p := newTestPool(t, PoolConfig{WarmupTimeout: 3 * time.Second, Zygote: ZygoteConfig{Off: true}})
	_, err := p.Run(context.Background(), Job{Preamble: testPreamble + "\\loop\\iftrue\\repeat\n", Body: "x\n"})
	if err == nil || !strings.Contains(err.Error(), "not warm after 3s") {
		t.Fatalf("Run(hanging preamble) = %v, want a warm-up timeout", err)
	}
	if s := p.Stats(); s.Failures != 1 || s.Warming != 0 {
		t.Errorf("Stats = %+v, want one failure and nothing warming", s)
	}
	if left := procsUnder(p.cfg.Runner.TempDir); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// TestPoolEviction: with room for one process, a render of another
// preamble takes the place of the idle one.
func TestPoolEviction(t *testing.T) {
	// Warm processes of their own: the fallback when no zygote forks.
	p := newTestPool(t, PoolConfig{Max: 1, Min: 1, Preambles: []string{testPreamble}, Zygote: ZygoteConfig{Off: true}})
	waitFor(t, "a warm process", func() bool { return p.Stats().Warm == 1 })
	other := strings.Replace(testPreamble, "{article}", "[12pt]{article}", 1)
	res, err := p.Run(context.Background(), Job{Preamble: other, Body: "Other preamble.\n"})
	if err != nil {
		t.Fatalf("Run(other preamble) = %v", err)
	}
	if !strings.Contains(pdfText(t, res.PDF), "Other preamble.") {
		t.Errorf("wrong text")
	}
	var tex []string
	for _, proc := range procsUnder(p.cfg.Runner.TempDir) {
		if strings.HasSuffix(proc, " xelatex") {
			tex = append(tex, proc)
		}
	}
	if len(tex) > 1 {
		t.Errorf("TeX processes alive: %v, want at most Max 1", tex)
	}
}

func TestPoolMax(t *testing.T) {
	gib := int64(1 << 30)
	tests := []struct {
		name  string
		files map[string]string
		cpus  int
		want  int
	}{
		{"machine only", map[string]string{"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10)}, 8, 16},
		{"machine memory bound", map[string]string{"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 3*gib>>10)}, 8, 2},
		{"v2 quota", map[string]string{
			"cgroup/cpu.max": "150000 100000\n", "cgroup/memory.max": "max\n",
			"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, 8, 4},
		{"v2 memory", map[string]string{
			"cgroup/cpu.max": "max 100000\n", "cgroup/memory.max": fmt.Sprint(2*gib + 600<<20),
			"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, 4, 2},
		{"v2 own cgroup", map[string]string{
			"self": "0::/svc/outprint\n", "cgroup/svc/outprint/cpu.max": "100000 100000\n",
			"cgroup/svc/outprint/memory.max": fmt.Sprint(8 * gib),
			"meminfo":                        fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, 16, 2},
		{"v1", map[string]string{
			"self":                                "4:memory:/\n3:cpu,cpuacct:/\n",
			"cgroup/cpu/cpu.cfs_quota_us":         "300000\n",
			"cgroup/cpu/cpu.cfs_period_us":        "100000\n",
			"cgroup/memory/memory.limit_in_bytes": fmt.Sprint(5 * gib),
			"meminfo":                             fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, 8, 4},
		{"v1 unlimited", map[string]string{
			"cgroup/cpu/cpu.cfs_quota_us":         "-1\n",
			"cgroup/cpu/cpu.cfs_period_us":        "100000\n",
			"cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"meminfo":                             fmt.Sprintf("MemTotal: %d kB\n", 24*gib>>10),
		}, 2, 4},
		{"tiny", map[string]string{"meminfo": "MemTotal: 524288 kB\n"}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fakeMachine(t, tt.files, tt.cpus)
			if got := poolMax(m); got != tt.want {
				t.Errorf("poolMax(%v, %d CPUs) = %d, want %d", tt.files, tt.cpus, got, tt.want)
			}
		})
	}
	if got := DefaultPoolMax(); got < 1 {
		t.Errorf("DefaultPoolMax() = %d, want at least 1", got)
	}
}

// TestPoolFormatUncompressed checks that the dumped format is stored
// without gzip compression (processes load it without inflating it) and
// that a process loads it: its log names the format.
func TestPoolFormatUncompressed(t *testing.T) {
	p := startTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}})
	res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "Format check.\n"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Log, `CUSTOMISED FORMAT: "outprint"`) {
		t.Errorf("log does not name the dumped format; the process loaded the preamble the slow way:\n%s", short(res.Log))
	}
	fmts, _ := filepath.Glob(filepath.Join(p.fmtDir, "*", "outprint.fmt"))
	if len(fmts) != 1 {
		t.Fatalf("formats in %s = %v, want one", p.fmtDir, fmts)
	}
	b, err := os.ReadFile(fmts[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || (b[0] == 0x1f && b[1] == 0x8b) {
		t.Errorf("format %s starts with % x, want an uncompressed format (no gzip magic)", fmts[0], b[:min(len(b), 2)])
	}
}

// TestPoolFirstRunDropsDriver checks that the first run of a document
// that needs two ends when TeX does: its xdvipdfmx is not waited for (the
// conversion would be thrown away; whether it was already done by then
// depends on timing), while a run that may not rerun makes the PDF.
func TestPoolFirstRunDropsDriver(t *testing.T) {
	p := newTestPool(t, PoolConfig{Min: 2, Preambles: []string{testPreamble}})
	job := Job{Preamble: testPreamble, Body: "\\tableofcontents\n\\section{Alpha}x\n"}
	first, err := p.runOnce(context.Background(), job, "", nil, true)
	if err != nil {
		t.Fatalf("first run = %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(first.dir); err != nil {
			t.Error(err)
		}
	})
	if !first.rerun {
		t.Fatal("first run of a document with a new table of contents: rerun = false, want true")
	}
	if !first.driverDropped {
		t.Error("first run that needs another: its xdvipdfmx was waited for, want it dropped")
	}
	second, err := p.runOnce(context.Background(), job, first.dir, nil, false)
	if err != nil {
		t.Fatalf("second run = %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(second.dir); err != nil {
			t.Error(err)
		}
	})
	b, err := os.ReadFile(filepath.Join(second.dir, "main.pdf"))
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if second.rerun || second.driverDropped {
		t.Errorf("second run (may not rerun): rerun %v, driver dropped %v; want neither", second.rerun, second.driverDropped)
	}
	if text := pdfText(t, b); !strings.Contains(text, "Contents") || strings.Count(text, "Alpha") < 2 {
		t.Errorf("second run's PDF text = %q, want the contents listing Alpha", short(text))
	}
}

// TestPoolEvictionNoChurn: once a preamble's spare was evicted for another
// preamble's renders, the pool does not warm it again in the background
// (where the next render would evict it again), so each render of the busy
// preamble costs exactly one warm-up.
func TestPoolEvictionNoChurn(t *testing.T) {
	// Formats of its own: a format another test left in the shared store
	// is ready at once and changes when the pool starts processes, which
	// this test counts.
	p := startTestPool(t, PoolConfig{Max: 1})
	other := strings.Replace(testPreamble, "{article}", "[12pt]{article}", 1)
	if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "First preamble.\n"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first preamble's spare", func() bool { s := p.Stats(); return s.Warm == 1 && s.Warming == 0 })
	const renders = 4
	started := p.Stats().Started
	for i := range renders {
		if _, err := p.Run(context.Background(), Job{Preamble: other, Body: fmt.Sprintf("Other %d.\n", i)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a settled pool", func() bool { s := p.Stats(); return s.Busy == 0 && s.Warming == 0 })
	}
	// One process for the first render of the other preamble, then one
	// replacement per render; the first preamble gets none.
	if got := p.Stats().Started - started; got != renders+1 {
		t.Errorf("processes started for %d renders = %d, want %d", renders, got, renders+1)
	}
	p.mu.Lock()
	first := p.profileLocked(testPreamble)
	n := len(first.warm) + first.starting
	p.mu.Unlock()
	if n != 0 {
		t.Errorf("the evicted preamble has %d processes warm or starting, want 0", n)
	}
}

func TestCapacity(t *testing.T) {
	gib := int64(1 << 30)
	tests := []struct {
		name  string
		files map[string]string
		cpus  int
		want  int
	}{
		// The worker container of the Compose file: 1 CPU, 1 GiB.
		{"container of SPEC §3", map[string]string{
			"cgroup/cpu.max": "100000 100000\n", "cgroup/memory.max": fmt.Sprint(gib),
			"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, 16, 1},
		{"machine only", map[string]string{"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10)}, 4, 4},
		{"memory bound", map[string]string{"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 3*gib>>10)}, 8, 2},
		{"fractional quota rounds up", map[string]string{
			"cgroup/cpu.max": "250000 100000\n", "cgroup/memory.max": "max\n",
			"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, 8, 3},
	}
	for _, tt := range tests {
		m := fakeMachine(t, tt.files, tt.cpus)
		if got := capacity(m); got != tt.want {
			t.Errorf("capacity(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// fakeMachine is a machine whose cgroup files and /proc/meminfo are files
// (path relative to a temporary root → content) and with cpus CPUs.
func fakeMachine(t *testing.T, files map[string]string, cpus int) machine {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return machine{
		cgroupRoot: filepath.Join(root, "cgroup"), selfCgroup: filepath.Join(root, "self"),
		meminfo: filepath.Join(root, "meminfo"), numCPU: cpus,
	}
}
