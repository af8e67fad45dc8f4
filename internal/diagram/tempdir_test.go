package diagram

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestDeepTempDir: browsers start under a deep, private scratch folder
// (the service's is its data folder's, mode 0700), isolated or not:
// Chromium's process-singleton socket must not take the folder's path,
// which passes the 107 bytes a socket's path may have.
func TestDeepTempDir(t *testing.T) {
	testenv.Require(t, "prlimit")
	if _, err := findChromium(""); err != nil {
		testenv.Missing(t, "chromium is not installed (run scripts/setup.sh)")
	}
	if _, err := os.Stat(filepath.Join(DefaultMermaidDir, "mermaid.min.js")); err != nil {
		testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
	}
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), "data", "tmp", "serve-123456789")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, isolate := range []bool{true, false} {
		d, err := New(Config{TempDir: dir, noIsolate: !isolate})
		if err != nil {
			t.Fatal(err)
		}
		drs, err := d.Draw(context.Background(), []Diagram{{Kind: Mermaid, Source: "graph TD\n Deep --> Folder", Line: 1}})
		if err != nil || len(drs) != 1 || !strings.HasPrefix(string(drs[0].PDF), "%PDF-") {
			t.Errorf("Draw with TempDir %s (%d bytes), isolate %v = %v, want a PDF", dir, len(dir), isolate, err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("TempDir keeps %d entries after Close, want none", len(left))
	}
}
