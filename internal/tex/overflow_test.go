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
	// markdown's: the total is also a zero-height box after the body.
	totalBoxPreamble := testPreamble + `\AtEndDocument{\ifdefined\OutprintTotal\OutprintTotal{\the\value{page}}\fi\par\nointerlineskip\vbox to 0pt{\hbox{}\vss}}` + "\n"
	// A rule that fills the text area but for a few points.
	nearlyFull := `\noindent\rule{1pt}{\dimexpr\textheight-\topskip-3pt\relax}\par` + "\n"
	figure := func(spec, height string) string {
		return `\begin{figure}[` + spec + `]\rule{1pt}{` + height + `}\caption{The caption}\end{figure}` + "\n"
	}
	tests := []struct {
		name, preamble, body string
		want                 string // in the CompileError's message; "" renders
		pages                int    // the pages of a render (0: not checked)
	}{
		{"stops before the end", testPreamble, "Kept.\n\\end{document}\nLost text after the end.\n", "end of the document never reached the PDF", 0},
		{"ends", testPreamble, "Kept.\n\nKept too.\n", "", 0},
		{"ends with a page break", testPreamble, "Kept.\\newpage\n", "", 0},
		// The footers would say "Page 1 of 2".
		{"total after a final page break", totalPreamble, "Kept.\\newpage\n", "footers count 2 pages but it has 1", 0},
		{"pages after the total", totalPreamble, "One.\\newpage Two.\n" + figure("p", "3cm") + figure("p", "3cm"), "footers count 2 pages but it has 3", 0},
		{"total right", totalPreamble, "One.\\newpage Two.\n" + figure("h", "3cm"), "", 0},
		// TeX breaks a page only at a breakpoint: the last line, which no
		// longer fits, went to page 2 at \end{document}'s \clearpage,
		// after the total was taken, and the trailing glue of a list or
		// quote, or the depth the total's box folds in, pushed the last
		// lines (or the box alone) onto a page of their own. The harness
		// settles the pages before the total (TestPageTotalBatch in
		// render has the Markdown that was refused so).
		{"last line on a page of its own", totalBoxPreamble, `\noindent\rule{1pt}{\dimexpr\textheight-3pt\relax}\par\strut The last line.` + "\n", "", 2},
		{"trailing glue", totalBoxPreamble, nearlyFull + "\\addvspace{20pt}\n", "", 1},
		{"trailing glue after a line", totalBoxPreamble, `\noindent\rule{1pt}{\dimexpr\textheight-\topskip-\baselineskip-1pt\relax}\par\strut Line.\par\addvspace{6pt}` + "\n", "", 1},
		{"float taller than a page", testPreamble, "Text.\n" + figure("h", "1.5\\textheight") + "More.\n", "taller than a page", 0},
		{"float that fits", testPreamble, "Text.\n" + figure("h", "0.5\\textheight") + "More.\n", "", 0},
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
				} else if tt.pages > 0 && res.Pages != tt.pages {
					t.Errorf("%s Run(%s) = %d pages, want %d", run.name, tt.name, res.Pages, tt.pages)
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
