package markdown

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// specExamples returns the Markdown of every example of the CommonMark
// specification (../shared/conformance), with → turned back into tabs.
func specExamples(t testing.TB) []string {
	shared := testenv.SharedDir(t, "../..")
	if shared == "" {
		testenv.Missing(t, "../shared/conformance/commonmark-spec.txt")
	}
	b, err := os.ReadFile(filepath.Join(shared, "conformance", "commonmark-spec.txt"))
	if err != nil {
		t.Fatal(err)
	}
	fence := strings.Repeat("`", 32)
	var out []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != fence+" example" {
			continue
		}
		var md []string
		for i++; i < len(lines) && lines[i] != "."; i++ {
			md = append(md, lines[i])
		}
		for i < len(lines) && lines[i] != fence {
			i++
		}
		out = append(out, strings.ReplaceAll(strings.Join(md, "\n")+"\n", "→", "\t"))
	}
	return out
}

// TestCommonMarkExamples writes every example of the specification: none
// may be refused (an ordinary `$` is text, not a formula), and every body
// passes the fuzz oracle. Compiling them all with XeLaTeX is package
// render's conformance test.
func TestCommonMarkExamples(t *testing.T) {
	examples := specExamples(t)
	if len(examples) != 655 {
		t.Fatalf("found %d examples, want 655", len(examples))
	}
	for i, md := range examples {
		d, err := Parse([]byte(md), Options{})
		if err != nil {
			t.Errorf("example %d: Parse(%q) = %v, want no error", i+1, md, err)
			continue
		}
		out, err := d.LaTeX(Meta{Title: "Example"}, nil)
		if err != nil {
			t.Errorf("example %d: LaTeX = %v", i+1, err)
			continue
		}
		if err := checkBody(out.Body); err != nil {
			t.Errorf("example %d (%q): %v\n%s", i+1, md, err, out.Body)
		}
	}
}
