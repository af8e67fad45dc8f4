package render

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// TestPageTotalBatch renders CommonMark spec examples 241–280, each under a
// "## Context heading", as one document, many times: through a zygote pool
// (its first renders by processes warmed by themselves, the rest by
// zygotes' children), a pool without zygotes and the cold runner, from
// three clients at once on a machine with fewer cores. Every render must
// give a PDF whose footers count its pages ("Page i of N" on page i, N
// the page count pdfinfo reads) and hold the last example.
//
// A run of the foreign suites once refused this batch ("the PDF's footers
// count 5 pages but it has 6"). The cause was TeX's page builder, not a
// process: it breaks a page only at a breakpoint, so when the body's last
// lines no longer fit — or fitted but for the glue a list leaves at its
// end — they moved to a new page only at \end{document}'s \clearpage,
// after the preamble's \AtEndDocument had taken the total. Two variants
// that put the batch's last lines right there (more items or quotes
// before its last example) were refused every time; the tex harness now
// settles the pages first (tex's TestRunLostContent has the TeX cases).
func TestPageTotalBatch(t *testing.T) {
	examples := specExamples(t)
	testenv.Require(t, "xelatex", "gcc", "pdfinfo", "pdftotext", "qpdf")
	var b strings.Builder
	for _, ex := range examples[240:280] {
		b.WriteString("## Context heading\n\n" + ex + "\n")
	}
	batch := b.String()
	last := strings.LastIndex(batch, "## Context heading\n\n") + len("## Context heading\n\n")
	padded := func(pad string, n int) string {
		return batch[:last] + strings.Repeat(pad, n) + batch[last:]
	}
	docs := []struct{ name, md string }{
		{"examples 241-280", batch},
		{"nine items before the last example", padded("- item\n\n", 9)},
		{"thirty quotes before the last example", padded("> quoted\n\n", 30)},
	}

	runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	newPool := func(cfg tex.PoolConfig) *tex.Pool {
		cfg.Runner.TempDir = t.TempDir()
		cfg.Max = 3
		cfg.Formats = testFormats(t)
		p, err := tex.NewPool(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	engines := []struct {
		name   string
		engine Engine
		rounds int
	}{
		{"zygote", newPool(tex.PoolConfig{}), 8},
		{"warm", newPool(tex.PoolConfig{Zygote: tex.ZygoteConfig{Off: true}}), 4},
		{"cold", runner, 2},
	}

	type render struct {
		doc, engine int
	}
	var renders []render
	for round := 0; round < 8; round++ {
		for e := range engines {
			if round < engines[e].rounds {
				for d := range docs {
					renders = append(renders, render{d, e})
				}
			}
		}
	}
	// The renders run from three clients at once; their PDFs are judged
	// afterwards, on the test's goroutine.
	type outcome struct {
		render
		pdf []byte
		err error
	}
	work := make(chan render)
	done := make(chan outcome)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				p := New(Config{Engine: engines[r.engine].engine, TempDir: t.TempDir()})
				res, err := p.Do(context.Background(), Request{Name: "batch.md", Markdown: []byte(docs[r.doc].md)}, nil)
				o := outcome{render: r, err: err}
				if err == nil {
					o.pdf = res.PDF
				}
				done <- o
			}
		}()
	}
	go func() {
		for _, r := range renders {
			work <- r
		}
		close(work)
		wg.Wait()
		close(done)
	}()
	pages := map[int]map[int]int{} // doc → page count → renders
	for o := range done {
		doc, eng := docs[o.doc], engines[o.engine]
		if o.err != nil {
			t.Errorf("%s, %s: render = %v, want a PDF", doc.name, eng.name, o.err)
			continue
		}
		f := inspectPDF(t, o.pdf)
		if err := footersCount(f); err != nil {
			t.Errorf("%s, %s: %v", doc.name, eng.name, err)
		}
		if !strings.Contains(f.Text, "baz") {
			t.Errorf("%s, %s: the last example (\"baz\") is not in the PDF", doc.name, eng.name)
		}
		if pages[o.doc] == nil {
			pages[o.doc] = map[int]int{}
		}
		pages[o.doc][f.Pages]++
	}
	for d, counts := range pages {
		if len(counts) != 1 {
			t.Errorf("%s: page counts (pages → renders) %v, want one for every render", docs[d].name, counts)
		}
	}
}

// footersCount checks that page i of a PDF's text says "Page i of N",
// N being its page count.
func footersCount(f pdfFacts) error {
	texts := strings.Split(strings.TrimRight(f.Text, "\f"), "\f")
	if len(texts) != f.Pages {
		return fmt.Errorf("pdftotext gives %d pages, pdfinfo %d", len(texts), f.Pages)
	}
	for i, text := range texts {
		want := fmt.Sprintf("Page %d of %d", i+1, f.Pages)
		if !strings.Contains(text, want) {
			return fmt.Errorf("page %d of %d lacks the footer %q:\n%s", i+1, f.Pages, want, lastLines(text, 3))
		}
	}
	return nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
