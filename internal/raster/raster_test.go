package raster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/testenv"
)

// twoPages is a minimal valid PDF of two pages, A5 portrait and landscape,
// written by hand so that the test depends on no producer; qpdf --check
// confirms it in the test.
func twoPages(t *testing.T) []byte {
	t.Helper()
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 420 595] /Contents 5 0 R >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 420] /Contents 5 0 R >>",
		"<< /Length 28 >>\nstream\n0 0 1 rg 20 20 100 100 re f\nendstream",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	if _, err := exec.LookPath("qpdf"); err == nil {
		f := filepath.Join(t.TempDir(), "two.pdf")
		if err := os.WriteFile(f, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("qpdf", "--check", f).CombinedOutput(); err != nil {
			t.Fatalf("the test PDF is broken: %v\n%s", err, out)
		}
	}
	return b.Bytes()
}

func TestPage(t *testing.T) {
	testenv.Require(t, "pdftoppm", "qpdf")
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	pdf := twoPages(t)
	for _, tc := range []struct {
		page, width int
		wantH       int // height in pixels, ±1
	}{
		{1, 200, 283},
		{2, 300, 212},
	} {
		out, err := r.Page(context.Background(), pdf, tc.page, tc.width)
		if err != nil {
			t.Fatalf("Page(%d, %d): %v", tc.page, tc.width, err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("Page(%d, %d) is no PNG: %v", tc.page, tc.width, err)
		}
		if cfg.Width != tc.width || cfg.Height < tc.wantH-1 || cfg.Height > tc.wantH+1 {
			t.Errorf("Page(%d, %d) = %dx%d, want %dx%d", tc.page, tc.width, cfg.Width, cfg.Height, tc.width, tc.wantH)
		}
	}
}

func TestPageRefusals(t *testing.T) {
	testenv.Require(t, "pdftoppm", "qpdf")
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	pdf := twoPages(t)
	for _, tc := range []struct {
		name        string
		pdf         []byte
		page, width int
	}{
		{"page beyond the end", pdf, 3, 200},
		{"not a PDF", []byte("%PDF-1.4 garbage"), 1, 200},
		{"too narrow", pdf, 1, MinWidth - 1},
		{"too wide", pdf, 1, MaxWidth + 1},
	} {
		if out, err := r.Page(context.Background(), tc.pdf, tc.page, tc.width); err == nil {
			t.Errorf("%s: Page = %d bytes, want an error", tc.name, len(out))
		}
	}
	// A drawing out of wall-clock time is busy, which says nothing about
	// the page (TestWaitIsNotCost); one over its output bound is refused
	// as too costly.
	slow, _ := New(Config{Timeout: time.Nanosecond})
	if _, err := slow.Page(context.Background(), pdf, 1, 200); !errors.Is(err, ErrBusy) || errors.Is(err, ErrTooCostly) {
		t.Errorf("Page with no time = %v, want ErrBusy", err)
	}
	small, _ := New(Config{MaxPNG: 100})
	if _, err := small.Page(context.Background(), pdf, 1, 1000); !errors.Is(err, ErrTooCostly) {
		t.Errorf("Page over MaxPNG = %v, want ErrTooCostly", err)
	}
	// A cancelled caller gets its context's error, not a drawing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Page(ctx, pdf, 1, 200); !errors.Is(err, context.Canceled) {
		t.Errorf("Page with a cancelled context = %v, want context.Canceled", err)
	}
}

// tallPage is a one-page PDF of 123×14,400 pt, the page of issue 24 that
// cost pdftoppm about 1.2 GB drawn 1,600 px wide.
func tallPage(t *testing.T) []byte {
	t.Helper()
	content := "0 0 1 rg 10 10 100 14380 re f"
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 123 14400] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// TestTallPageCropped: a very tall page is drawn from its top within
// MaxPixels (issue 24: its whole drawing is a 1,600×187,318 bitmap, which
// six requests at once turned into 2.6 GB). Under an address-space limit
// of 256 MiB the whole drawing cannot be made; the cropped one is.
func TestTallPageCropped(t *testing.T) {
	testenv.Require(t, "pdftoppm")
	r, err := New(Config{Memory: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Page(context.Background(), tallPage(t), 1, 1600)
	if err != nil {
		t.Fatalf("Page(tall, 1600) = %v, want a cropped drawing", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != 1600 || cfg.Width*cfg.Height > DefaultMaxPixels || cfg.Height < 2000 {
		t.Errorf("Page(tall, 1600) = %dx%d, want 1600 wide within %d pixels", cfg.Width, cfg.Height, DefaultMaxPixels)
	}
	// An ordinary page is not cropped (TestPage checks its proportions).
}

// TestBelowTeX: pdftoppm, started as Page starts it (sandbox and all) and
// bounded as Page bounds it before it is sent a byte, runs at Nice, below
// TeX's childproc.Nice (issue 24: previews ran at TeX's priority, so a
// bystander's render shared the processor evenly with them).
func TestBelowTeX(t *testing.T) {
	testenv.Require(t, "pdftoppm")
	if Nice <= childproc.Nice {
		t.Fatalf("raster.Nice = %d, want above TeX's childproc.Nice %d", Nice, childproc.Nice)
	}
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, isolate := range []bool{true, false} {
		cmd := r.command(ctx, t.TempDir(), 1, 100, isolate)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			if isolate && namespaceRefused(err) {
				continue // no namespaces here: Page falls back to the other case
			}
			t.Fatal(err)
		}
		// pdftoppm waits for its PDF on stdin meanwhile.
		err = r.bound(cmd.Process.Pid)
		got, nerr := childproc.NiceOf(cmd.Process.Pid)
		if err != nil || nerr != nil || got != Nice {
			t.Errorf("pdftoppm (namespaces %v) after bound: %v; nice %d (%v), want %d", isolate, err, got, nerr, Nice)
		}
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// childNamed returns the pid of a child of this process named name, or 0.
func childNamed(name string) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if i < 0 || j < i || string(b[i+1:j]) != name {
			continue
		}
		var ppid, pid int
		var state string
		// A line that does not parse leaves ppid 0, never our pid.
		_, _ = fmt.Sscanf(string(b[j+2:]), "%s %d", &state, &ppid)
		_, _ = fmt.Sscanf(string(b), "%d", &pid)
		if ppid == os.Getpid() {
			return pid
		}
	}
	return 0
}

// TestWaitIsNotCost: a drawing that runs out of wall-clock time without
// spending its CPU time — here pdftoppm is stopped (SIGSTOP), as a
// process that never gets a processor beside busier work — is ErrBusy,
// not ErrTooCostly, which a caller would remember as the page's (issue
// 24: previews run below TeX's priority and may wait for a processor).
func TestWaitIsNotCost(t *testing.T) {
	testenv.Require(t, "pdftoppm")
	r, err := New(Config{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { // ends when the drawing does
		_, err := r.Page(context.Background(), tallPage(t), 1, 1600)
		errc <- err
	}()
	var pid int
	testenv.Eventually(t, "pdftoppm to start", func() bool {
		pid = childNamed("pdftoppm")
		return pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	if !errors.Is(err, ErrBusy) || errors.Is(err, ErrTooCostly) {
		t.Errorf("Page with pdftoppm stopped = %v, want ErrBusy and not ErrTooCostly", err)
	}
}
