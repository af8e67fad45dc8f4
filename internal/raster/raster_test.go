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
	"testing"
	"time"

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
	// A drawing over its bounds is refused as too costly: out of time,
	// and out of output.
	slow, _ := New(Config{Timeout: time.Nanosecond})
	if _, err := slow.Page(context.Background(), pdf, 1, 200); !errors.Is(err, ErrTooCostly) {
		t.Errorf("Page with no time = %v, want ErrTooCostly", err)
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
