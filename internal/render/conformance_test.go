package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// specExamples reads the examples of the CommonMark specification: the
// Markdown between a line of 32 backticks followed by " example" and a line
// holding a single ".", with → standing for a tab.
func specExamples(t *testing.T) []string {
	t.Helper()
	shared := testenv.SharedDir(t, moduleRoot())
	if shared == "" {
		testenv.Missing(t, "../shared/conformance is not present")
	}
	src, err := os.ReadFile(filepath.Join(shared, "conformance", "commonmark-spec.txt"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^`{32} example\n(.*?)^\\.\n")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		out = append(out, strings.ReplaceAll(m[1], "→", "\t"))
	}
	return out
}

// TestCommonMarkExamples renders every example of the CommonMark spec. The
// examples are converted one by one and typeset in batches (one TeX run per
// batch keeps CI fast); each example starts with its own marker, and the
// marker of every example must be in the PDF text, so each is checked. A
// batch that fails is split to name the example that broke it.
func TestCommonMarkExamples(t *testing.T) {
	examples := specExamples(t)
	if len(examples) != 655 {
		t.Fatalf("found %d examples, want 655", len(examples))
	}
	testenv.Require(t, "xelatex", "pdftotext")
	// The shared warm pool: each batch is a fork, not a cold XeLaTeX.
	engine := testEngine(t)
	type converted struct {
		n       int
		body    string
		scripts script.Set
	}
	var all []converted
	for i, ex := range examples {
		doc, err := markdown.Parse([]byte(ex), markdown.Options{})
		if err != nil {
			var le *limits.Error
			if errors.As(err, &le) {
				t.Errorf("example %d refused: %v\n%s", i+1, err, ex)
				continue
			}
			t.Fatalf("example %d: %v", i+1, err)
		}
		out, err := doc.LaTeX(markdown.Meta{Title: fmt.Sprintf("Example %d", i+1), Language: "en"}, nil)
		if err != nil {
			t.Errorf("example %d: LaTeX: %v\n%s", i+1, err, ex)
			continue
		}
		all = append(all, converted{i + 1, out.Body, doc.Scripts()})
	}

	var typeset func(batch []converted) error
	typeset = func(batch []converted) error {
		var body strings.Builder
		var scripts script.Set
		for _, c := range batch {
			fmt.Fprintf(&body, "\\clearpage\nOPEXAMPLE%dEND\\par\n%s\n", c.n, c.body)
			scripts |= c.scripts
		}
		res, err := engine.Run(context.Background(), tex.Job{
			Preamble: markdown.Preamble(markdown.Profile{Paper: "a4", Scripts: scripts}),
			Body:     body.String(),
		})
		if err != nil {
			return err
		}
		path := filepath.Join(t.TempDir(), "batch.pdf")
		if err := os.WriteFile(path, res.PDF, 0o644); err != nil {
			return err
		}
		text := inspectPDFPath(t, path)
		for _, c := range batch {
			if !strings.Contains(text, fmt.Sprintf("OPEXAMPLE%dEND", c.n)) {
				return fmt.Errorf("example %d is not in the PDF", c.n)
			}
		}
		return nil
	}
	const size = 110
	for start := 0; start < len(all); start += size {
		batch := all[start:min(start+size, len(all))]
		if err := typeset(batch); err != nil {
			// Name the culprits: typeset the batch's examples one by one.
			for _, c := range batch {
				if err := typeset([]converted{c}); err != nil {
					t.Errorf("example %d: %v\n%s", c.n, err, examples[c.n-1])
				}
			}
		}
	}
}
