package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestTableIsCurrent regenerates the table from the installed fonts and
// compares it with the committed one: a font update that changes coverage
// must come with a regenerated table (go generate ./internal/script).
func TestTableIsCurrent(t *testing.T) {
	got, err := Generate("/usr/share/fonts")
	if err != nil {
		if strings.Contains(err.Error(), "is not installed") {
			testenv.Missing(t, err.Error()+" (run scripts/setup.sh)")
		}
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../fontcoverage_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Generate(/usr/share/fonts) differs from fontcoverage_gen.go; run go generate ./internal/script")
	}
}

// TestGenerateFailsClearly checks that a missing font is named.
func TestGenerateFailsClearly(t *testing.T) {
	_, err := Generate(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "NotoSerif-Regular.ttf is not installed") {
		t.Errorf("Generate(empty folder) = %v, want an error naming NotoSerif-Regular.ttf", err)
	}
}
