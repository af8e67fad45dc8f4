package render

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// newDiagramPipeline is newPipeline with a Drawer of cfg, closed when the
// test ends.
func newDiagramPipeline(t *testing.T, cfg diagram.Config) (*Pipeline, *diagram.Drawer) {
	t.Helper()
	testenv.Require(t, "xelatex", "pdfinfo", "pdftotext", "pdffonts", "pdfimages", "qpdf", "prlimit")
	if cfg.MermaidDir == "" {
		if _, err := os.Stat(filepath.Join(diagram.DefaultMermaidDir, "mermaid.min.js")); err != nil {
			testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
		}
		if _, err := exec.LookPath("chromium"); err != nil {
			testenv.Missing(t, "chromium is not installed (run scripts/setup.sh)")
		}
	}
	d, err := diagram.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return newPipelineWith(t, d), d
}

// newPipelineWith is newPipeline drawing with d.
func newPipelineWith(t *testing.T, d *diagram.Drawer) *Pipeline {
	t.Helper()
	return New(Config{Engine: testEngine(t), TempDir: t.TempDir(), Diagrams: d})
}

// sharedDrawer is the Drawer of newSharedDiagramPipeline: one warm
// browser for the tests that only need diagrams drawn, instead of a
// Chromium started and Mermaid loaded for each (some 7.5 CPU seconds
// each). It has no cache, so each diagram reaches the browser, and an idle
// timeout longer than the tests. Made on first use, closed by TestMain.
var sharedDrawer struct {
	once sync.Once
	d    *diagram.Drawer
	err  error
}

// newSharedDiagramPipeline is newDiagramPipeline on sharedDrawer, for
// tests that do not look at the Drawer.
func newSharedDiagramPipeline(t *testing.T) *Pipeline {
	t.Helper()
	cfg := diagram.Config{CacheBytes: -1, IdleTimeout: time.Hour}
	// The checks of newDiagramPipeline, without a Drawer of the test's own.
	testenv.Require(t, "xelatex", "pdfinfo", "pdftotext", "pdffonts", "pdfimages", "qpdf", "prlimit")
	if _, err := os.Stat(filepath.Join(diagram.DefaultMermaidDir, "mermaid.min.js")); err != nil {
		testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		testenv.Missing(t, "chromium is not installed (run scripts/setup.sh)")
	}
	sharedDrawer.once.Do(func() { sharedDrawer.d, sharedDrawer.err = diagram.New(cfg) })
	if sharedDrawer.err != nil {
		t.Fatal(sharedDrawer.err)
	}
	return newPipelineWith(t, sharedDrawer.d)
}

const flowAndSequence = "# Release\n\nHow a release goes.\n\n" +
	"```mermaid\nflowchart LR\n    Ingest --> Typeset --> Publish\n```\n\n" +
	"Who talks to whom:\n\n" +
	"```mermaidjs\nsequenceDiagram\n    Alice->>Bob: Hello Bob\n    Bob-->>Alice: Greetings\n```\n\nThe end.\n"

// pdfImages returns the lines of `pdfimages -list` after its header: one
// per raster image of the PDF.
func pdfImages(t *testing.T, pdf []byte) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "images.pdf")
	if err := os.WriteFile(path, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfimages", "-list", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfimages -list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) <= 2 {
		return nil
	}
	return lines[2:]
}

// TestDiagramsPrint: Mermaid fences in both of Outline's dialects print as
// vector drawings whose labels are text, and no diagram source is printed.
func TestDiagramsPrint(t *testing.T) {
	p, d := newDiagramPipeline(t, diagram.Config{})
	res, err := p.Do(context.Background(), Request{Name: "release.md", Markdown: []byte(flowAndSequence)}, nil)
	if err != nil {
		t.Fatalf("Do(flowchart and sequence) = %v, want a PDF", err)
	}
	f := inspectPDF(t, res.PDF)
	text := squash(f.Text)
	for _, label := range []string{"Ingest", "Typeset", "Publish", "Alice", "Bob", "HelloBob", "Greetings", "Theend"} {
		if !strings.Contains(text, label) {
			t.Errorf("PDF text lacks the label %q:\n%s", label, f.Text)
		}
	}
	for _, src := range []string{"-->", "flowchart", "sequenceDiagram", "->>"} {
		if strings.Contains(f.Text, src) {
			t.Errorf("PDF text has the diagram source %q:\n%s", src, f.Text)
		}
	}
	if imgs := pdfImages(t, res.PDF); len(imgs) > 0 {
		t.Errorf("pdfimages -list = %q, want no raster image", imgs)
	}
	if st := d.Stats(); st.Pages != 1 {
		t.Errorf("Stats().Pages = %d, want 1 (one page handed out per document)", st.Pages)
	}
}

// TestDiagramsGraphviz: dot and graphviz fences print through dot.
func TestDiagramsGraphviz(t *testing.T) {
	testenv.Require(t, "dot")
	p, _ := newDiagramPipeline(t, diagram.Config{MermaidDir: "-"})
	md := "# Graph\n\n```dot\ndigraph { Parser -> Writer }\n```\n\n```graphviz\ngraph { Left -- Right }\n```\n"
	res, err := p.Do(context.Background(), Request{Name: "graph.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("Do(dot) = %v, want a PDF", err)
	}
	f := inspectPDF(t, res.PDF)
	for _, label := range []string{"Parser", "Writer", "Left", "Right"} {
		if !strings.Contains(f.Text, label) {
			t.Errorf("PDF text lacks the label %q:\n%s", label, f.Text)
		}
	}
	if strings.Contains(f.Text, "->") || strings.Contains(f.Text, "digraph") {
		t.Errorf("PDF text has the diagram source:\n%s", f.Text)
	}
}

// TestDiagramsOff: without a Drawer (diagrams.enabled: false) a Mermaid
// fence prints as the code it is, on purpose.
func TestDiagramsOff(t *testing.T) {
	p := newPipeline(t)
	res, err := p.Do(context.Background(), Request{Name: "release.md", Markdown: []byte(flowAndSequence)}, nil)
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	f := inspectPDF(t, res.PDF)
	if !strings.Contains(f.Text, "Ingest --> Typeset") {
		t.Errorf("PDF text lacks the listing %q:\n%s", "Ingest --> Typeset", f.Text)
	}
}

// TestDiagramProblems: a diagram that cannot be drawn is a 422 problem
// naming the fence's line, with the document's other problems (the cheap
// ones from Check together), never a TeX error or a listing.
func TestDiagramProblems(t *testing.T) {
	p := newSharedDiagramPipeline(t)
	tests := []struct {
		name     string
		md       string
		cfg      *diagram.Config
		kind     limits.Kind
		lines    []int
		contains []string
	}{
		{
			name:     "parse error at the document's line",
			md:       "# T\n\ntext\n\n```mermaid\nflowchart LR\n  A --> B\n  B --> (((\n```\n",
			kind:     limits.KindDocument,
			lines:    []int{8},
			contains: []string{"mermaid diagram at line 5", "line 8"},
		},
		{
			name:     "a bad formula and a 65 KiB diagram, together",
			md:       "# T\n\n$\\input{x}$\n\n```mermaid\nflowchart LR\n" + strings.Repeat("  A --> B\n", 65<<10/10+1) + "```\n",
			kind:     limits.KindDocument,
			lines:    []int{3, 5},
			contains: []string{"formula", "64 KiB"},
		},
		{
			name:     "51 diagrams",
			md:       "# T\n\n" + strings.Repeat("```mermaid\nflowchart LR\n  A --> B\n```\n\n", 51),
			kind:     limits.KindDocument,
			lines:    []int{3 + 50*5},
			contains: []string{"51 diagrams, at most 50"},
		},
		{
			name:     "not installed",
			md:       "# T\n\n```mermaidjs\ngraph TD; A-->B;\n```\n",
			cfg:      &diagram.Config{MermaidDir: "-"},
			kind:     limits.KindDocument,
			lines:    []int{3},
			contains: []string{"diagrams are not installed on this server"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := p
			if tc.cfg != nil {
				pl, _ = newDiagramPipeline(t, *tc.cfg)
			}
			_, err := pl.Do(context.Background(), Request{Name: "bad.md", Markdown: []byte(tc.md)}, nil)
			le := limitsError(t, err)
			if le.Kind != tc.kind {
				t.Errorf("Do(%s) kind = %v, want %v (%v)", tc.name, le.Kind, tc.kind, err)
			}
			var lines []int
			var all strings.Builder
			for _, pr := range le.Problems {
				lines = append(lines, pr.Line)
				all.WriteString(pr.Message + "\n")
				if pr.Code == limits.CodeTeX {
					t.Errorf("problem %q is a TeX error", pr.Message)
				}
			}
			if len(lines) != len(tc.lines) {
				t.Fatalf("Do(%s) problem lines = %v, want %v:\n%s", tc.name, lines, tc.lines, all.String())
			}
			for i := range lines {
				if lines[i] != tc.lines[i] {
					t.Errorf("Do(%s) problem lines = %v, want %v:\n%s", tc.name, lines, tc.lines, all.String())
					break
				}
			}
			for _, s := range tc.contains {
				if !strings.Contains(all.String(), s) {
					t.Errorf("Do(%s) problems lack %q:\n%s", tc.name, s, all.String())
				}
			}
		})
	}
}

// TestNoDiagramNoBrowser: a document without diagrams starts no Chromium.
func TestNoDiagramNoBrowser(t *testing.T) {
	p, d := newDiagramPipeline(t, diagram.Config{})
	if _, err := p.Do(context.Background(), Request{Name: "plain.md", Markdown: []byte("# Plain\n\n```go\nfunc main() {}\n```\n")}, nil); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Started != 0 {
		t.Errorf("Stats().Started = %d after a document without diagrams, want 0", st.Started)
	}
}

// paddedPNG is a 4×4 PNG of exactly size bytes: an ancillary tEXt chunk
// fills it out (PNG decoders skip it; outprint keeps a PNG's bytes as its
// canonical image, so they all count).
func paddedPNG(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	small := buf.Bytes()
	iend := small[len(small)-12:] // the IEND chunk
	// A chunk is length, type, data, CRC: 12 bytes around its data.
	n := size - len(small) - 12
	if n < len("pad")+1 {
		t.Fatalf("paddedPNG(%d): smaller than the image", size)
	}
	data := append([]byte("pad\x00"), bytes.Repeat([]byte{'x'}, n-4)...)
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, "tEXt"...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	out := append(append(append([]byte(nil), small[:len(small)-12]...), chunk...), iend...)
	if len(out) != size {
		t.Fatalf("paddedPNG(%d) made %d bytes", size, len(out))
	}
	return out
}

// TestGraphicsTotal: a document's images and diagrams count together
// toward the one bound of limits.MaxTotalImageBytes (50 MiB) of graphics.
// Five images 1,000 bytes short of it print; with a Graphviz diagram too,
// whose PDF alone is far below the bound, the document is refused with
// the documented answer for the total (422, SPEC §3 "all canonical
// images"; the README's diagram bounds): one problem naming both shares.
func TestGraphicsTotal(t *testing.T) {
	p, d := newDiagramPipeline(t, diagram.Config{})
	assets := images.Assets{}
	var md strings.Builder
	md.WriteString("# Pictures\n\n")
	left := int(limits.MaxTotalImageBytes) - 1000
	for i := 0; left > 0; i++ {
		size := min(left, limits.MaxImageBytes)
		name := fmt.Sprintf("p%d.png", i)
		assets[name] = paddedPNG(t, size)
		fmt.Fprintf(&md, "![picture %d](%s)\n\n", i, name)
		left -= size
	}
	doc := md.String()
	if _, err := p.Do(context.Background(), Request{Name: "images.md", Markdown: []byte(doc), Images: assets}, nil); err != nil {
		t.Fatalf("Do(images 1,000 bytes under the bound) = %v, want a PDF", err)
	}
	if st := d.Stats(); st.Started != 0 {
		t.Fatalf("a document without diagrams started %d browsers", st.Started)
	}

	// A Graphviz diagram: its PDF (a few KiB) is what passes the bound;
	// Mermaid's count the same way (diagram.DistinctPDFs).
	withDiagram := doc + "```dot\ndigraph { Camera -> Picture }\n```\n"
	_, err := p.Do(context.Background(), Request{Name: "both.md", Markdown: []byte(withDiagram), Images: assets}, nil)
	le := limitsError(t, err)
	if le.Kind != limits.KindDocument || len(le.Problems) != 1 {
		t.Fatalf("Do(images and a diagram over the bound) = %v (kind %v), want one 422 problem", err, le.Kind)
	}
	msg := le.Problems[0].Message
	want := fmt.Sprintf("the document's images (%d bytes) and diagrams (", limits.MaxTotalImageBytes-1000)
	if !strings.Contains(msg, want) || !strings.Contains(msg, fmt.Sprintf("exceed the %d bytes of graphics", limits.MaxTotalImageBytes)) {
		t.Errorf("problem %q, want it to name the images' %d bytes, the diagrams' and the bound", msg, limits.MaxTotalImageBytes-1000)
	}
}

// pageText is pdftotext's text of page n of pdf.
func pageText(t *testing.T, pdf []byte, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "doc.pdf")
	if err := os.WriteFile(path, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", "-f", strconv.Itoa(n), "-l", strconv.Itoa(n), path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext page %d: %v", n, err)
	}
	return string(out)
}

// TestDiagramKeepsItsIntroduction: a sentence that introduces a diagram
// never stays alone at the foot of a page while the diagram goes to the
// next. A first render finds how many one-line paragraphs fill page 1;
// the document then has one fewer, the introducing sentence (the last
// line page 1 holds) and a diagram that cannot fit there: the sentence
// goes to page 2 with its diagram, and page 1 ends with the paragraph
// before it.
func TestDiagramKeepsItsIntroduction(t *testing.T) {
	p := newSharedDiagramPipeline(t)
	filler := func(n int) string {
		var b strings.Builder
		b.WriteString("# Keeping\n\n")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "Filler F%03d of the page.\n\n", i)
		}
		return b.String()
	}
	probe, err := p.Do(context.Background(), Request{Name: "probe.md", Markdown: []byte(filler(120))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, m := range regexp.MustCompile(`F(\d{3})`).FindAllStringSubmatch(pageText(t, probe.PDF, 1), -1) {
		last = max(last, atoi(t, m[1]))
	}
	if last < 10 || last >= 120 {
		t.Fatalf("page 1 of the probe ends with filler %d", last)
	}
	t.Logf("page 1 holds %d one-line paragraphs", last)

	// A tall Graphviz diagram (the keeping is the same for Mermaid's).
	md := filler(last-1) + "The flow of an order:\n\n```dot\ndigraph {\n" +
		"  Receive -> Check -> Pick -> Pack -> Label -> Ship -> Deliver\n}\n```\n"
	res, err := p.Do(context.Background(), Request{Name: "keep.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	page1, page2 := pageText(t, res.PDF, 1), pageText(t, res.PDF, 2)
	if strings.Contains(page1, "flow of an order") {
		t.Errorf("the introducing sentence ends page 1 without its diagram:\n%s", page1)
	}
	if !strings.Contains(page2, "flow of an order") || !strings.Contains(page2, "Receive") || !strings.Contains(page2, "Deliver") {
		t.Errorf("page 2 lacks the sentence or its diagram:\n%s", page2)
	}
	if want := fmt.Sprintf("F%03d", last-1); !strings.Contains(page1, want) {
		t.Errorf("page 1 does not end with %s (the paragraph before the sentence):\n%s", want, page1)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
