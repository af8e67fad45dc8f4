// Package thirdparty_test checks that the goldmark copy outprint builds
// with is upstream's module plus the patches of goldmark-patches, nothing
// else (scripts/goldmark.sh, goldmark/OUTPRINT.md).
package thirdparty_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// check runs scripts/goldmark.sh check in the repository at root.
func check(t *testing.T, root string) (string, error) {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(root, "scripts", "goldmark.sh"), "check").CombinedOutput()
	return string(out), err
}

// TestGoldmarkIsPristinePlusPatches: third_party/goldmark is exactly
// github.com/yuin/goldmark at the version go.mod requires (with the hash
// go.sum pins) with third_party/goldmark-patches/*.diff applied.
func TestGoldmarkIsPristinePlusPatches(t *testing.T) {
	testenv.Require(t, "bash", "go", "git", "diff")
	if out, err := check(t, ".."); err != nil {
		t.Fatalf("scripts/goldmark.sh check = %v:\n%s", err, out)
	}
}

// TestGoldmarkCheckCatches: the check fails on a copy of the repository
// whose tree was changed by hand, or whose patch was left out.
func TestGoldmarkCheckCatches(t *testing.T) {
	testenv.Require(t, "bash", "go", "git", "diff", "cp")
	for _, tc := range []struct {
		name   string
		change func(root string) error
		want   string
	}{
		{"tree edited", func(root string) error {
			p := filepath.Join(root, "third_party", "goldmark", "parser", "link.go")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, append(b, "\n// edited by hand\n"...), 0o644)
		}, "parser/link.go"},
		{"file added", func(root string) error {
			return os.WriteFile(filepath.Join(root, "third_party", "goldmark", "extra.go"), []byte("package goldmark\n"), 0o644)
		}, "extra.go"},
		{"patch left out", func(root string) error {
			// A patch no later one builds on: leaving out one that a later
			// patch's context includes (0005 adds to extra_test.go, which
			// 0007 changes) makes that one fail to apply instead.
			ps, err := filepath.Glob(filepath.Join(root, "third_party", "goldmark-patches", "*gofmt-generated*.diff"))
			if err != nil || len(ps) != 1 {
				return err
			}
			return os.Remove(ps[0])
		}, "util/html5entities.gen.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range []string{"go.mod", "go.sum", "scripts", "third_party"} {
				dst := filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("cp", "-R", filepath.Join("..", p), dst).CombinedOutput(); err != nil {
					t.Fatalf("cp %s: %v\n%s", p, err, out)
				}
			}
			if out, err := check(t, root); err != nil {
				t.Fatalf("check of the unchanged copy = %v:\n%s", err, out)
			}
			if err := tc.change(root); err != nil {
				t.Fatal(err)
			}
			out, err := check(t, root)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("check after %s = %v, want a failure naming %s:\n%s", tc.name, err, tc.want, out)
			}
		})
	}
}
