// Package testenv lets tests demand the real tools they run (XeLaTeX,
// pdfinfo, PostgreSQL, ...). Outside CI a missing tool skips the test with a
// reason; under CI=true it fails it, because a green CI run that skipped its
// real dependencies would prove nothing.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Require fails (under CI) or skips (elsewhere) the test when one of the
// named programs is not on PATH.
func Require(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			Missing(t, p+" is not installed (run scripts/setup.sh)")
		}
	}
}

// Missing fails (under CI) or skips (elsewhere) the test because a
// dependency described by why is not available.
func Missing(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required under CI=true: %s", why)
	}
	t.Skip("dependency missing, not under CI: " + why)
}

// SharedDir returns the path of ../shared relative to the module root, or
// "" when it is absent. Under CI it must be present.
func SharedDir(t testing.TB, moduleRoot string) string {
	t.Helper()
	dir := moduleRoot + "/../shared"
	if _, err := os.Stat(dir + "/corpus/README.md"); err != nil {
		if InCI() {
			t.Fatalf("../shared is required under CI=true: %v", err)
		}
		return ""
	}
	return dir
}
