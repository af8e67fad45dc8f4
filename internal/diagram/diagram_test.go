package diagram

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// The diagram types of Mermaid 11 that Outline offers, each written after
// the examples of Mermaid's own syntax pages (docs/syntax/*.md), with the
// words pdftotext must find in the drawing.
var mermaidTypes = []struct {
	file   string
	labels []string
}{
	{"flowchart.mmd", []string{"Customer order", "In stock?", "Pack parcel", "Backorder", "Shipping log", "yes", "no"}},
	{"sequence.mmd", []string{"Browser", "Server", "Render request", "Accepted job", "Typesetting pages", "Finished document"}},
	{"class.mmd", []string{"Vehicle", "Truck", "Trailer", "pulls"}},
	{"state.mmd", []string{"Queued", "Running", "Finished", "Failed", "claimed", "retry"}},
	{"er.mmd", []string{"AUTHOR", "BOOK", "SHELF", "writes", "stands on", "surname"}},
	{"gantt.mmd", []string{"Printing schedule", "Manuscript", "Proofreading", "Typesetting", "Drafting", "Production"}},
	{"pie.mmd", []string{"Paper stock", "Recycled", "Coated", "Linen"}},
	{"mindmap.mmd", []string{"Publishing", "Authors", "Contracts", "Editors", "Proofs", "Printers", "Bindery"}},
	{"timeline.mmd", []string{"Movable type", "1440", "Gutenberg press", "Lithography", "Linotype machine"}},
	{"journey.mmd", []string{"Ordering a book", "Search catalogue", "Compare editions", "Pay invoice", "Reader"}},
	{"quadrant.mmd", []string{"Reach and effort", "Expand", "Promote", "Newsletter", "Podcast"}},
	{"gitgraph.mmd", []string{"Draft", "Edits", "Release", "main", "review"}},
	{"sankey.mmd", []string{"Paper", "Ink", "Printing", "Books", "Waste"}},
	{"xychart.mmd", []string{"Copies sold", "January", "April", "Thousands"}},
	{"block.mmd", []string{"Input", "Output", "Storage"}},
	{"architecture.mmd", []string{"Cluster", "Gateway", "Worker", "Storage"}},
}

// TestMermaidTypes draws one diagram of every type in one document and
// checks each with poppler: a page of the document's one PDF (one print
// for the document) whose labels pdftotext finds inside the page, no
// raster image, none of the source's syntax printed.
func TestMermaidTypes(t *testing.T) {
	tb := setup(t, Config{})
	var ds []Diagram
	for i, mt := range mermaidTypes {
		ds = append(ds, Diagram{Kind: Mermaid, Source: readTestdata(t, "mermaid/"+mt.file), Line: 10 * (i + 1)})
	}
	drs, err := tb.d.Draw(tb.ctx, ds)
	if err != nil {
		t.Fatalf("Draw: %v", err)
	}
	if pdfs, _ := DistinctPDFs(drs); len(pdfs) != 1 {
		t.Errorf("the document's %d diagrams are in %d PDFs, want one", len(drs), len(pdfs))
	}
	if out, err := exec.Command("pdfinfo", writeTemp(t, drs[0].PDF)).Output(); err != nil || !strings.Contains(string(out), fmt.Sprintf("Pages:           %d\n", len(drs))) {
		t.Errorf("pdfinfo of the document's PDF (%v):\n%s\nwant %d pages", err, out, len(drs))
	}
	for i, mt := range mermaidTypes {
		dr := drs[i]
		if dr.Page != i+1 {
			t.Errorf("%s: page %d of the PDF, want %d", mt.file, dr.Page, i+1)
		}
		if !bytes.HasPrefix(dr.PDF, []byte("%PDF-")) {
			t.Errorf("%s: not a PDF", mt.file)
			continue
		}
		if dr.Width <= 0 || dr.Height <= 0 {
			t.Errorf("%s: size %v × %v", mt.file, dr.Width, dr.Height)
		}
		checkLabels(t, mt.file, pageOf(t, dr), mt.labels)
		if imgs := rasterImages(t, pageOf(t, dr)); len(imgs) > 0 {
			t.Errorf("%s: pdfimages -list finds raster images: %q", mt.file, imgs)
		}
		text := pdfText(t, pageOf(t, dr))
		header := strings.Fields(ds[i].Source)[0]
		for _, syntax := range []string{"-->", "->>", header} {
			if strings.Contains(text, syntax) {
				t.Errorf("%s: the PDF's text has the source's %q: %q", mt.file, syntax, text)
			}
		}
	}
	if s := tb.d.Stats(); s.Pages != 1 || s.Started != 1 {
		t.Errorf("one document took %d pages of %d browsers, want 1 of 1", s.Pages, s.Started)
	}
}

// TestScripts: Chinese, Arabic and Devanagari labels print in the
// document's Noto faces, as text, in Mermaid and in Graphviz.
func TestScripts(t *testing.T) {
	tb := setupShared(t)
	labels := []string{"你好世界", "مرحبا", "नमस्ते"}
	ds := []Diagram{
		{Kind: Mermaid, Line: 1, Source: "flowchart LR\n  A[你好世界] --> B[مرحبا]\n  B --> C[नमस्ते]"},
		{Kind: Graphviz, Line: 9, Source: `digraph { a [label="你好世界"]; b [label="مرحبا"]; c [label="नमस्ते"]; a -> b -> c }`},
	}
	drs, err := tb.d.Draw(tb.ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	for i, dr := range drs {
		fonts := pdfFonts(t, pageOf(t, dr))
		for _, f := range []string{"NotoSansCJK", "NotoNaskhArabic", "NotoSansDevanagari"} {
			// Chromium's printer (Skia) embeds the CJK faces, OpenType
			// collections with CFF outlines, as nameless Type 3 fonts:
			// still outlines, still text.
			if !strings.Contains(fonts, f) && !(f == "NotoSansCJK" && i == 0 && strings.Contains(fonts, "Type 3")) {
				t.Errorf("diagram %d: no %s among the PDF's fonts:\n%s", i, f, fonts)
			}
		}
		text := pdfText(t, pageOf(t, dr))
		for _, l := range labels {
			// pdftotext marks right-to-left runs with embedding marks.
			plain := strings.NewReplacer("\u202b", "", "\u202c", "").Replace(text)
			if !strings.Contains(plain, l) {
				t.Errorf("diagram %d: pdftotext does not find %q in %q", i, l, text)
			}
		}
		if imgs := rasterImages(t, pageOf(t, dr)); len(imgs) > 0 {
			t.Errorf("diagram %d: raster images %q", i, imgs)
		}
	}
}

// TestGraphviz: dot's drawings have text labels, no raster, a page the
// drawing's size; a graph cannot draw a file of the server's.
func TestGraphviz(t *testing.T) {
	tb := setup(t, Config{})
	ds := []Diagram{
		{Kind: Graphviz, Line: 1, Source: "digraph Build {\n  rankdir=LR;\n  Parse -> Typeset -> Print;\n  Parse [shape=box];\n  Typeset -> Check [label=\"pages\"];\n}"},
		{Kind: Graphviz, Line: 9, Source: "graph { Left -- Right }"},
		// A server's file as a node's image, an image path and a shape file:
		// Graphviz refuses to load any (SERVER_NAME).
		{Kind: Graphviz, Line: 20, Source: "digraph { imagepath=\"/usr/share\"; a [label=\"Pictured\" image=\"/usr/share/pixmaps/debian-logo.png\"]; b [shape=epsf shapefile=\"/etc/passwd\" label=\"Shaped\"]; a -> b }"},
	}
	drs, err := tb.d.Draw(tb.ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	checkLabels(t, "build", pageOf(t, drs[0]), []string{"Parse", "Typeset", "Print", "Check", "pages"})
	checkLabels(t, "graph", pageOf(t, drs[1]), []string{"Left", "Right"})
	checkLabels(t, "files", pageOf(t, drs[2]), []string{"Pictured"})
	for i, dr := range drs {
		if imgs := rasterImages(t, pageOf(t, dr)); len(imgs) > 0 {
			t.Errorf("diagram %d: raster images %q", i, imgs)
		}
		if _, w, h := pdfWords(t, pageOf(t, dr)); w != dr.Width || h != dr.Height {
			t.Errorf("diagram %d: Drawing says %v × %v pt, pdftotext %v × %v", i, dr.Width, dr.Height, w, h)
		}
		if strings.Contains(pdfText(t, pageOf(t, dr)), "root:") {
			t.Errorf("diagram %d prints /etc/passwd", i)
		}
	}
	if s := tb.d.Stats(); s.Started != 0 {
		t.Errorf("Graphviz diagrams started Chromium: %s", s)
	}
}
