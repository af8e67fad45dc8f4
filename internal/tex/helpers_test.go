package tex

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// testPreamble is a neutral preamble: article, fontspec with Noto Serif,
// hyperref (with the bookmark package and without page labels, so a plain
// document needs one run). The packages come before the endofdump line so
// the pool can dump them into a format; the font after it.
const testPreamble = `\documentclass{article}
\usepackage{fontspec}
\usepackage[pdfpagelabels=false]{hyperref}
\usepackage{bookmark}
\csname endofdump\endcsname
\setmainfont{Noto Serif}
`

func newTestRunner(t testing.TB, cfg RunnerConfig) *Runner {
	t.Helper()
	testenv.Require(t, "xelatex", "pdfinfo", "pdftotext")
	if cfg.TempDir == "" {
		cfg.TempDir = t.TempDir()
	}
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

// pdfPages returns the page count pdfinfo reads from pdf.
func pdfPages(t testing.TB, pdf []byte) int {
	t.Helper()
	cmd := exec.Command("pdfinfo", "-")
	cmd.Stdin = bytes.NewReader(pdf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("pdfinfo printed no page count:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// pdfText returns pdftotext's text of pdf.
func pdfText(t testing.TB, pdf []byte) string {
	t.Helper()
	cmd := exec.Command("pdftotext", "-", "-")
	cmd.Stdin = bytes.NewReader(pdf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	return string(out)
}

// procsUnder lists the processes whose working directory is inside root
// (every TeX process of a Runner or Pool with TempDir root is).
func procsUnder(root string) []string {
	ents, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range ents {
		pid := e.Name()
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", pid, "cwd"))
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if strings.HasPrefix(cwd, root) {
			comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
			found = append(found, pid+" "+strings.TrimSpace(string(comm)))
		}
	}
	return found
}

// pidsOf returns the pids of procsUnder's result.
func pidsOf(procs []string) []int {
	var pids []int
	for _, p := range procs {
		n, _ := strconv.Atoi(strings.Fields(p)[0])
		pids = append(pids, n)
	}
	return pids
}

// startHungRender runs a document that ships page one and then loops
// forever, and returns once TeX has shipped that page, so that a test can
// cancel a render that is surely running. done receives Run's error.
func startHungRender(t *testing.T, ctx context.Context, run func(context.Context, Job) (*Result, error), wait time.Duration) (done <-chan error) {
	t.Helper()
	shipped := make(chan struct{})
	var once sync.Once
	errs := make(chan error, 1)
	go func() {
		_, err := run(ctx, Job{
			Preamble: testPreamble,
			Body:     "page one\\newpage\n\\loop\\iftrue\\repeat\n",
			Progress: func(int) { once.Do(func() { close(shipped) }) },
		})
		errs <- err
	}()
	select {
	case <-shipped:
	case err := <-errs:
		t.Fatalf("Run ended before it was canceled: %v", err)
	case <-time.After(wait):
		t.Fatalf("TeX shipped no page within %s", wait)
	}
	return errs
}
