package render

import (
	"context"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// TestEveryProblemAtOnce: a document with a bad Binding field, a formula
// outside the allowlist and a missing image is refused with all three in
// one error list (SPEC §5), by line, and the formula's message shows it
// as typed (one backslash, not Go's quoting).
func TestEveryProblemAtOnce(t *testing.T) {
	p := newPipeline(t)
	src := "---\ndate: yesterday\n---\n# Report\n\nA formula $\\frac{1}{$ here.\n\n![chart](missing-chart.png)\n"
	c, err := p.Check(Request{Name: "report.md", Markdown: []byte(src)})
	if err != nil {
		t.Fatalf("Check = %v, want the problems reported by Fetch with the images'", err)
	}
	_, err = p.Fetch(context.Background(), c)
	le := limitsError(t, err)
	if le.Kind != limits.KindDocument {
		t.Errorf("kind = %q, want %q", le.Kind, limits.KindDocument)
	}
	var got []string
	for _, pr := range le.Problems {
		got = append(got, string(pr.Source)+"/"+string(pr.Code))
	}
	want := []string{"metadata/invalid", "document/math", "image/image"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("problems = %q (%+v), want %q", got, le.Problems, want)
	}
	if m := le.Problems[1]; m.Line != 6 || !strings.Contains(m.Message, `formula "\frac{1}{"`) {
		t.Errorf("math problem = %+v, want line 6 and the formula as typed, \\frac{1}{", m)
	}
	if im := le.Problems[2]; im.Line != 8 || !strings.Contains(im.Message, "missing-chart.png") {
		t.Errorf("image problem = %+v, want line 8 naming missing-chart.png", im)
	}
	// Do, as the command line and the job workers call it, says the same.
	_, err = p.Do(context.Background(), Request{Name: "report.md", Markdown: []byte(src)}, nil)
	if n := len(limitsError(t, err).Problems); n != 3 {
		t.Errorf("Do: %d problems, want 3: %v", n, err)
	}
}
