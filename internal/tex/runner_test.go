package tex

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

func TestRunMinimal(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	var mu sync.Mutex
	var seen []int
	res, err := r.Run(context.Background(), Job{
		Preamble: testPreamble,
		Body:     "Hello from outprint.\n",
		Progress: func(n int) { mu.Lock(); seen = append(seen, n); mu.Unlock() },
	})
	if err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := pdfPages(t, res.PDF); got != 1 {
		t.Errorf("pdfinfo pages = %d, want 1", got)
	}
	if res.Pages != 1 {
		t.Errorf("Result.Pages = %d, want 1", res.Pages)
	}
	if res.Runs != 1 {
		t.Errorf("Result.Runs = %d, want 1", res.Runs)
	}
	if got := pdfText(t, res.PDF); !strings.Contains(got, "Hello from outprint.") {
		t.Errorf("pdftotext = %q, want the body's text", got)
	}
	if res.CPU <= 0 || res.Engine <= 0 || res.Wall < res.Engine {
		t.Errorf("times: CPU %v, Engine %v, Wall %v; want CPU, Engine > 0 and Wall >= Engine", res.CPU, res.Engine, res.Wall)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != 1 {
		t.Errorf("Progress calls = %v, want to end with 1", seen)
	}
	if left := procsUnder(r.cfg.TempDir); len(left) > 0 {
		t.Errorf("processes left after Run: %v", left)
	}
	if ents, _ := os.ReadDir(r.cfg.TempDir); len(ents) > 0 {
		t.Errorf("scratch folders left after Run: %v", ents)
	}
}

func TestRunCompileError(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	tests := []struct {
		name     string
		preamble string
		body     string
		line     int
		message  string
	}{
		{"undefined in body", testPreamble, "First line.\n\nThird \\undefinedoutprintmacro line.\n", 3, "Undefined control sequence."},
		{"missing file in body", testPreamble, "a\nb\n\\input{no-such-file-here}\n", 3, "File `no-such-file-here.tex' not found."},
		{"error in preamble", testPreamble + "\\undefinedinpreamble\n", "Body.\n", 0, "Undefined control sequence."},
		{"unclosed environment", testPreamble, "\\begin{itemize}\n\\item x\n", 0, "\\begin{itemize} on input line 1 ended by \\end{document}."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), Job{Preamble: tt.preamble, Body: tt.body})
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Run = %v, want a *CompileError", err)
			}
			if ce.Line != tt.line {
				t.Errorf("Run: Line = %d, want %d (message %q)", ce.Line, tt.line, ce.Message)
			}
			if !strings.Contains(ce.Message, tt.message) {
				t.Errorf("Run: Message = %q, want it to contain %q", ce.Message, tt.message)
			}
			if strings.Contains(ce.Message, "/") {
				t.Errorf("Run: Message = %q contains a path", ce.Message)
			}
		})
	}
}

func TestRunPageLimit(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	body := strings.Repeat("\\null\\newpage\n", 700)
	var maxSeen atomic.Int64
	_, err := r.Run(context.Background(), Job{
		Preamble: testPreamble, Body: body,
		Progress: func(n int) {
			if int64(n) > maxSeen.Load() {
				maxSeen.Store(int64(n))
			}
		},
	})
	if !errors.Is(err, ErrPageLimit) {
		t.Fatalf("Run(700 pages) = %v, want ErrPageLimit", err)
	}
	if !strings.Contains(err.Error(), "stopped at page 501") {
		t.Errorf("Run(700 pages) = %q, want it to say it stopped at page 501", err)
	}
	if got := maxSeen.Load(); got != 501 {
		t.Errorf("last page reported = %d, want 501 (stopped at the limit, not after everything)", got)
	}

	// A lower limit stops earlier.
	_, err = r.Run(context.Background(), Job{Preamble: testPreamble, Body: body, MaxPages: 3})
	if !errors.Is(err, ErrPageLimit) || !strings.Contains(err.Error(), "page 4") {
		t.Errorf("Run(MaxPages 3) = %v, want ErrPageLimit at page 4", err)
	}
	// Exactly at the limit is fine.
	res, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: strings.Repeat("x\\newpage\n", 3), MaxPages: 3})
	if err != nil {
		t.Fatalf("Run(3 pages, MaxPages 3) = %v, want nil", err)
	}
	if got := pdfPages(t, res.PDF); got != 3 {
		t.Errorf("pdfinfo pages = %d, want 3", got)
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := r.Run(ctx, Job{Preamble: testPreamble, Body: "\\loop\\iftrue\\repeat\n"})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Run(endless loop) = %v, want ErrTimeout", err)
	}
	// Not a performance claim: a kill that did not happen would run for
	// the Runner's 60 s timeout.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Run(endless loop) returned after %v, want soon after the 3 s deadline", d)
	}
	if left := procsUnder(r.cfg.TempDir); len(left) > 0 {
		t.Errorf("processes left after the timeout: %v", left)
	}
}

func TestRunRunnerTimeout(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{Timeout: 2 * time.Second})
	_, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: "\\loop\\iftrue\\repeat\n"})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Run(endless loop, Timeout 2s) = %v, want ErrTimeout", err)
	}
}

// TestRunCancelKillsGroup cancels a render while TeX runs, after checking
// the rlimits of the live process.
func TestRunCancelKillsGroup(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startHungRender(t, ctx, r.Run, 30*time.Second)
	procs := procsUnder(r.cfg.TempDir)
	if len(procs) == 0 {
		t.Fatal("no TeX process found while the render runs")
	}
	for _, pid := range pidsOf(procs) {
		lim, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
		if err != nil {
			continue
		}
		for _, want := range []string{
			"Max address space         1073741824",
			fmt.Sprintf("Max processes             %d", limits.RenderProcesses),
			"Max file size             268435456",
			"Max core file size        0",
		} {
			if !strings.Contains(string(lim), want) {
				t.Errorf("/proc/%d/limits lacks %q:\n%s", pid, want, lim)
			}
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCanceled) {
			t.Errorf("Run(canceled) = %v, want ErrCanceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if left := procsUnder(r.cfg.TempDir); len(left) > 0 {
		t.Errorf("processes left after cancel: %v", left)
	}
}

// TestRunSandbox: TeX reads no file outside its folder, writes none, runs
// nothing.
func TestRunSandbox(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.tex")
	if err := os.WriteFile(secret, []byte("SECRETCONTENT\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("input absolute", func(t *testing.T) {
		for _, body := range []string{"\\input{/etc/passwd}\n", "\\input{" + secret + "}\n", "\\input{../../secret}\n"} {
			res, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: body})
			if err == nil {
				t.Errorf("Run(%q) rendered (%q), want an error", body, pdfText(t, res.PDF))
				continue
			}
			var ce *CompileError
			if !errors.As(err, &ce) || ce.Line != 1 {
				t.Errorf("Run(%q) = %v, want a CompileError at line 1", body, err)
			}
		}
	})
	t.Run("openin absolute", func(t *testing.T) {
		body := "\\newread\\r \\openin\\r=" + secret + " \\ifeof\\r OPENIN-REFUSED\\else\\read\\r to\\x OPENIN-READ \\x\\fi\n"
		res, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: body})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		text := pdfText(t, res.PDF)
		if !strings.Contains(text, "OPENIN-REFUSED") || strings.Contains(text, "SECRETCONTENT") {
			t.Errorf("pdftotext = %q, want OPENIN-REFUSED and no secret", text)
		}
	})
	t.Run("openout absolute", func(t *testing.T) {
		target := filepath.Join(outside, "written.tex")
		body := "\\newwrite\\w \\immediate\\openout\\w=" + target + " \\immediate\\write\\w{x}\\immediate\\closeout\\w ok\n"
		_, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: body})
		if _, serr := os.Stat(target); serr == nil {
			t.Errorf("TeX wrote %s (Run = %v)", target, err)
		}
	})
	t.Run("write18", func(t *testing.T) {
		target := filepath.Join(outside, "pwned")
		body := "\\immediate\\write18{touch " + target + "}ok\n"
		_, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: body})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		if _, serr := os.Stat(target); serr == nil {
			t.Errorf("\\write18 ran a command: %s exists", target)
		}
	})
}

// TestSandboxEnv runs /usr/bin/env through the sandbox: the child sees the
// environment we built and nothing of ours.
func TestSandboxEnv(t *testing.T) {
	t.Setenv("FAKE_SECRET", "hunter2")
	env, err := NewRunner(RunnerConfig{Program: "env", TempDir: t.TempDir()})
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("env program: %v", err))
	}
	dir := t.TempDir()
	var mu sync.Mutex
	var lines []string
	p, err := env.sb.start(dir, nil, 5, func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	st, cause := p.wait(context.Background(), dir, 1<<20, nil, nil)
	if cause != nil || !st.Success() {
		t.Fatalf("env: %v %v", cause, st)
	}
	mu.Lock()
	defer mu.Unlock()
	got := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	for _, k := range []string{"FAKE_SECRET", "TEXMFOUTPUT", "TEXINPUTS", "GOPATH", "USER"} {
		if _, ok := got[k]; ok {
			t.Errorf("child environment has %s", k)
		}
	}
	for k, want := range map[string]string{"HOME": dir, "openin_any": "p", "openout_any": "p", "shell_escape": "f", "MKTEXTFM": "0"} {
		if got[k] != want {
			t.Errorf("child environment %s = %q, want %q", k, got[k], want)
		}
	}
	// The constructed environment itself, entry by entry.
	for _, kv := range env.sb.env(dir) {
		if strings.Contains(kv, "hunter2") || strings.HasPrefix(kv, "FAKE_SECRET=") {
			t.Errorf("sandbox env has %q", kv)
		}
	}
}

func TestRunReruns(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	tests := []struct {
		name string
		body string
		runs int
		want []string
	}{
		{"plain", "\\section{Alpha}Just text.\n", 1, []string{"Alpha", "Just text."}},
		{"toc", "\\tableofcontents\n\\section{Alpha}a\n\\newpage\n\\section{Beta}b\n", 2, []string{"Contents", "1 Alpha", "2 Beta"}},
		{"empty toc", "\\tableofcontents\nNo sections.\n", 1, []string{"Contents", "No sections."}},
		{"forward reference", "See section~\\ref{b}.\n\\section{Alpha}a\n\\section{Beta}\\label{b}b\n", 2, []string{"See section 2."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: tt.body})
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if res.Runs != tt.runs {
				t.Errorf("Run: Runs = %d, want %d", res.Runs, tt.runs)
			}
			text := pdfText(t, res.PDF)
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("pdftotext = %q, want %q", text, w)
				}
			}
		})
	}
}

// TestRunPageLabels: hyperref with page labels on asks for a rerun on every
// first run; only documents whose labels are not plain page numbers get it.
func TestRunPageLabels(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	preamble := strings.Replace(testPreamble, "[pdfpagelabels=false]{hyperref}", "{hyperref}", 1)
	tests := []struct {
		name string
		body string
		runs int
	}{
		{"decimal pages", "One.\\newpage Two.\n", 1},
		{"roman front matter", "\\pagenumbering{roman}Front.\\newpage\\pagenumbering{arabic}Main.\n", 2},
	}
	for _, tt := range tests {
		res, err := r.Run(context.Background(), Job{Preamble: preamble, Body: tt.body})
		if err != nil {
			t.Fatalf("%s: Run = %v", tt.name, err)
		}
		if res.Runs != tt.runs {
			t.Errorf("%s: Runs = %d, want %d", tt.name, res.Runs, tt.runs)
		}
	}
}

func TestRunPDFTooLarge(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{MaxPDFBytes: 1000})
	_, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: "Some text.\n"})
	var tl *PDFTooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrPDFTooLarge) {
		t.Fatalf("Run = %v, want a *PDFTooLargeError", err)
	}
	if tl.Limit != 1000 || tl.Size <= 1000 {
		t.Errorf("PDFTooLargeError = %+v, want Limit 1000 and Size over it", tl)
	}
}

func TestRunScratchLimit(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{ScratchBytes: 256 << 10})
	// Every \typeout line lands in main.log, which outgrows 256 KiB.
	body := "\\newcount\\n \\loop\\typeout{" + strings.Repeat("x", 200) + "}\\advance\\n 1 \\ifnum\\n<100000 \\repeat\n"
	_, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: body})
	if !errors.Is(err, ErrResource) {
		t.Fatalf("Run(log over the scratch limit) = %v, want ErrResource", err)
	}
}

func TestRunMemoryLimit(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{MemoryBytes: 48 << 20})
	_, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: "x\n"})
	if !errors.Is(err, ErrResource) {
		t.Fatalf("Run(48 MiB address space) = %v, want ErrResource", err)
	}
}

func TestRunFilesAndGlyphs(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	src := filepath.Join(t.TempDir(), "source.png")
	img := image.NewRGBA(image.Rect(0, 0, 20, 10))
	for x := 0; x < 20; x++ {
		img.Set(x, 5, color.RGBA{255, 0, 0, 255})
	}
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	_ = png.Encode(f, img)
	_ = f.Close()

	preamble := strings.Replace(testPreamble, "\\usepackage{bookmark}", "\\usepackage{bookmark}\n\\usepackage{graphicx}", 1)
	res, err := r.Run(context.Background(), Job{
		Preamble: preamble,
		Body:     "\\includegraphics[width=2cm]{img-1.png}\n\nSnowman: ☃.\n",
		Files:    map[string]string{"img-1.png": src},
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(res.MissingGlyphs) != 1 || !strings.HasPrefix(res.MissingGlyphs[0], "U+2603 ☃ in font Noto Serif") {
		t.Errorf("MissingGlyphs = %q, want the snowman in Noto Serif", res.MissingGlyphs)
	}

	for _, bad := range []string{"../x.png", "/abs.png", ".hidden.png", "main.tex", "sub/../../x.png"} {
		_, err := r.Run(context.Background(), Job{Preamble: preamble, Body: "x\n", Files: map[string]string{bad: src}})
		if err == nil || !strings.Contains(err.Error(), "not a plain relative name") {
			t.Errorf("Run(Files %q) = %v, want a refused name", bad, err)
		}
	}
}

// TestRunSlowProgress: a Progress that blocks does not hold TeX up; it
// still hears the final count, and never after Run returned.
func TestRunSlowProgress(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	var mu sync.Mutex
	var calls []int
	returned := false
	res, err := r.Run(context.Background(), Job{
		Preamble: testPreamble,
		Body:     strings.Repeat("page\\newpage\n", 30),
		Progress: func(n int) {
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if returned {
				t.Errorf("Progress(%d) called after Run returned", n)
			}
			calls = append(calls, n)
		},
	})
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(calls) == 0 || calls[len(calls)-1] != 30 || res.Pages != 30 {
		t.Errorf("Progress calls = %v, Pages = %d; want the last call to be 30", calls, res.Pages)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] <= calls[i-1] {
			t.Errorf("Progress counts go backwards: %v", calls)
		}
	}
}

func TestRunConcurrent(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	texts := make([]string, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(context.Background(), Job{Preamble: testPreamble, Body: fmt.Sprintf("Document number %d.\n", i)})
			errs[i] = err
			if err == nil {
				texts[i] = pdfText(t, res.PDF)
			}
		}()
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Errorf("Run %d = %v", i, errs[i])
		} else if want := fmt.Sprintf("Document number %d.", i); !strings.Contains(texts[i], want) {
			t.Errorf("Run %d text = %q, want %q", i, texts[i], want)
		}
	}
}
