package tex

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRunContentOverflow: a page whose content is taller than the page
// (here a rule one and a half pages high that cannot be split) fails the
// render with a CompileError that names the page, instead of a PDF whose
// page lacks what TeX set below its bottom edge. A slightly overfull page
// still renders.
func TestRunContentOverflow(t *testing.T) {
	r := newTestRunner(t, RunnerConfig{})
	_, err := r.Run(context.Background(), Job{Preamble: testPreamble,
		Body: "First page.\\newpage\n\\noindent\\rule{1pt}{1.5\\textheight}\n\nAfter the rule.\n"})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("Run(rule taller than a page) = %v, want a *CompileError", err)
	}
	if !strings.Contains(ce.Message, "page 2 cannot hold its content") {
		t.Errorf("Run(rule taller than a page): Message = %q, want it to name page 2", ce.Message)
	}
	if _, err := r.Run(context.Background(), Job{Preamble: testPreamble,
		Body: "\\noindent\\rule{1pt}{\\dimexpr\\textheight+2pt\\relax}\n"}); err != nil {
		t.Errorf("Run(rule 2 pt taller than the text area) = %v, want a PDF", err)
	}
}
