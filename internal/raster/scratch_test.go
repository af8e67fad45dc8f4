package raster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestPageScratch: a page is drawn with no usable temporary folder (TMPDIR
// names none, as a read-only /tmp would be in a container): the working
// folder is made in Config.TempDir and removed after.
func TestPageScratch(t *testing.T) {
	testenv.Require(t, "pdftoppm", "qpdf")
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	scratch := t.TempDir()
	r, err := New(Config{TempDir: scratch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Page(context.Background(), twoPages(t), 1, 100); err != nil {
		t.Fatalf("Page with TMPDIR missing and TempDir set = %v, want a PNG", err)
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("TempDir holds %v after the drawing, want nothing", left)
	}
}
