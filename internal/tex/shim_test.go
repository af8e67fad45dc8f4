package tex

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestPrebuiltShim: scripts/shim.sh (what `make build` and the Dockerfile
// run) compiles the shim with warnings as errors under the name the pool
// looks for, and the pool takes a prebuilt shim of that name only.
func TestPrebuiltShim(t *testing.T) {
	testenv.Require(t, "gcc")
	dir := t.TempDir()
	if out, err := exec.Command("bash", "../../scripts/shim.sh", "zygote/shim.c", dir).CombinedOutput(); err != nil {
		t.Fatalf("scripts/shim.sh: %v\n%s", err, out)
	}
	want := filepath.Join(dir, shimName())
	if fi, err := os.Stat(want); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("scripts/shim.sh made no %s: %v", shimName(), err)
	}
	if got := prebuiltShim(shimName(), []string{filepath.Join(dir, "missing"), dir}); got != want {
		t.Errorf("prebuiltShim(%s) = %q, want %q", shimName(), got, want)
	}
	// A shim of another source, or a folder of the name, is not taken.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "zygote-0000000000000000.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(other, shimName()), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := prebuiltShim(shimName(), []string{other}); got != "" {
		t.Errorf("prebuiltShim in a folder of other shims = %q, want none", got)
	}
	// The binary's folders: beside it, and ../lib/outprint.
	dirs := shimDirs()
	if len(dirs) != 2 || filepath.Base(dirs[1]) != "outprint" {
		t.Errorf("shimDirs() = %v, want the binary's folder and ../lib/outprint", dirs)
	}
}
