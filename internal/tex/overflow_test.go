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

// TestRunLostContent: a document TeX typesets without an error but with a
// part of it missing from the PDF fails with a CompileError saying what
// was lost, through the cold runner and a zygote's child alike; the same
// documents without the loss render.
func TestRunLostContent(t *testing.T) {
	// A preamble that reports its footer's total as the Markdown
	// preamble does (markdown/preamble.go).
	totalPreamble := testPreamble + `\AtEndDocument{\ifdefined\OutprintTotal\OutprintTotal{\the\value{page}}\fi}` + "\n"
	figure := func(spec, height string) string {
		return `\begin{figure}[` + spec + `]\rule{1pt}{` + height + `}\caption{The caption}\end{figure}` + "\n"
	}
	tests := []struct {
		name, preamble, body string
		want                 string // in the CompileError's message; "" renders
	}{
		{"stops before the end", testPreamble, "Kept.\n\\end{document}\nLost text after the end.\n", "end of the document never reached the PDF"},
		{"ends", testPreamble, "Kept.\n\nKept too.\n", ""},
		{"ends with a page break", testPreamble, "Kept.\\newpage\n", ""},
		// The footers would say "Page 1 of 2".
		{"total after a final page break", totalPreamble, "Kept.\\newpage\n", "footers count 2 pages but it has 1"},
		{"pages after the total", totalPreamble, "One.\\newpage Two.\n" + figure("p", "3cm") + figure("p", "3cm"), "footers count 2 pages but it has 3"},
		{"total right", totalPreamble, "One.\\newpage Two.\n" + figure("h", "3cm"), ""},
		{"float taller than a page", testPreamble, "Text.\n" + figure("h", "1.5\\textheight") + "More.\n", "taller than a page"},
		{"float that fits", testPreamble, "Text.\n" + figure("h", "0.5\\textheight") + "More.\n", ""},
	}
	r := newTestRunner(t, RunnerConfig{})
	p, _ := newZygotePool(t, PoolConfig{})
	for _, run := range []struct {
		name string
		fn   func(context.Context, Job) (*Result, error)
	}{{"cold", r.Run}, {"zygote", p.Run}} {
		for _, tt := range tests {
			res, err := run.fn(context.Background(), Job{Preamble: tt.preamble, Body: tt.body})
			if tt.want == "" {
				if err != nil {
					t.Errorf("%s Run(%s) = %v, want a PDF", run.name, tt.name, err)
				}
				continue
			}
			var ce *CompileError
			if !errors.As(err, &ce) || !strings.Contains(ce.Message, tt.want) {
				pages := -1
				if res != nil {
					pages = res.Pages
				}
				t.Errorf("%s Run(%s) = %v (%d pages), want a CompileError containing %q", run.name, tt.name, err, pages, tt.want)
			}
		}
	}
}
