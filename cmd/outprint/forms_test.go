package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestFillCommand fills the README's example form as a new user would and
// checks the result with pdfinfo and pdftotext.
func TestFillCommand(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "qpdf", "prlimit", "pdfinfo", "pdftotext")
	dir := t.TempDir()
	out := filepath.Join(dir, "filled.pdf")
	stdout, stderr, code := runCLI(t, "fields", "../../examples/onboarding-form.pdf", "--json")
	if code != exitOK {
		t.Fatalf("fields: exit %d: %s", code, stderr)
	}
	var fields struct {
		Fields []struct{ Name, Type string } `json:"fields"`
	}
	if err := json.Unmarshal([]byte(stdout), &fields); err != nil || len(fields.Fields) != 8 {
		t.Fatalf("fields --json = %s (%v), want 8 fields", stdout, err)
	}
	_, stderr, code = runCLI(t, "fill", "../../examples/onboarding-form.pdf", "../../examples/onboarding-values.json", "-o", out)
	if code != exitOK {
		t.Fatalf("fill: exit %d: %s", code, stderr)
	}
	info, _ := exec.Command("pdfinfo", out).Output()
	if !strings.Contains(string(info), "Pages:           2") || !strings.Contains(string(info), "Form:            none") {
		t.Errorf("pdfinfo = %s, want 2 pages and no form", info)
	}
	text, _ := exec.Command("pdftotext", out, "-").Output()
	for _, want := range []string{"Zoë Müller", "東京", "A1234567", "Engineering", "Second line of notes."} {
		if !strings.Contains(string(text), want) {
			t.Errorf("text of the filled form lacks %q:\n%s", want, text)
		}
	}
}

// TestFillCommandErrors: every problem is reported with the values file's
// lines, and no output file is left behind.
func TestFillCommandErrors(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "qpdf", "prlimit")
	dir := t.TempDir()
	values := filepath.Join(dir, "values.json")
	if err := os.WriteFile(values, []byte("{\n  \"name\": \"ok\",\n  \"nope\": 1,\n  \"remote\": \"maybe\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pdf")
	stdout, _, code := runCLI(t, "fill", "../../examples/onboarding-form.pdf", values, "-o", out, "--json")
	if code != exitDocument {
		t.Fatalf("exit = %d, want %d", code, exitDocument)
	}
	var v struct {
		Errors []struct {
			Field, Code string
			Line        *int
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || len(v.Errors) != 2 {
		t.Fatalf("stdout = %s, want 2 errors", stdout)
	}
	if e := v.Errors[0]; e.Field != "nope" || e.Code != "unknown_field" || e.Line == nil || *e.Line != 3 {
		t.Errorf("first error = %+v, want unknown_field nope on line 3", e)
	}
	if e := v.Errors[1]; e.Field != "remote" || e.Code != "invalid_value" || e.Line == nil || *e.Line != 4 {
		t.Errorf("second error = %+v, want invalid_value remote on line 4", e)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files after a failed fill: %v, want only the values", entries)
	}
}
