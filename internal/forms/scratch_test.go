package forms

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// TestFieldsScratch: a form is read with no usable temporary folder
// (TMPDIR names none, as a read-only /tmp would be in a container): the
// scratch folder is made in Config.TempDir and removed after.
func TestFieldsScratch(t *testing.T) {
	testenv.Require(t, "xelatex", "qpdf", "prlimit")
	r, err := tex.NewRunner(tex.RunnerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	f, err := New(Config{TempDir: scratch}, r)
	if err != nil {
		t.Fatal(err)
	}
	form, err := os.ReadFile("../../examples/onboarding-form.pdf")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	fields, err := f.Fields(context.Background(), form)
	if err != nil || len(fields) == 0 {
		t.Fatalf("Fields with TMPDIR missing and TempDir set = %d fields, %v, want the form's fields", len(fields), err)
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("TempDir holds %v after the read, want nothing", left)
	}
}

// TestNewFindsPrograms: New finds qpdf and prlimit, or says which package
// to install, instead of failing every request later.
func TestNewFindsPrograms(t *testing.T) {
	testenv.Require(t, "xelatex", "qpdf", "prlimit")
	r, err := tex.NewRunner(tex.RunnerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{}, r)
	if err != nil || f.qpdf == "" || f.prlimit == "" {
		t.Fatalf("New = %+v, %v, want qpdf and prlimit found", f, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := New(Config{}, r); err == nil {
		t.Error("New with no qpdf in PATH = nil error, want one naming the package")
	}
}
