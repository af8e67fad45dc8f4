package markdown

import (
	"bytes"
	"encoding/json"
	"image"
	_ "image/jpeg" // decode the showcase's JPEG header
	_ "image/png"  // decode the showcase's PNG header
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestShowcase typesets examples/showcase.md, the project's example of
// every construct, with its real images (the SVG converted by
// rsvg-convert, as the images stage does), and checks the PDF's text.
func TestShowcase(t *testing.T) {
	testenv.Require(t, "xelatex", "rsvg-convert", "pdftotext", "pdfinfo", "qpdf")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	src, err := os.ReadFile("../../examples/showcase.md")
	if err != nil {
		t.Fatal(err)
	}
	// Drop the front matter (package binding's job), keeping its lines.
	offset := 0
	if bytes.HasPrefix(src, []byte("---\n")) {
		end := bytes.Index(src[4:], []byte("\n---\n"))
		if end < 0 {
			t.Fatal("unterminated front matter")
		}
		offset = bytes.Count(src[:end+9], []byte("\n"))
		src = src[end+9:]
	}
	d, err := Parse(src, Options{LineOffset: offset, Dialect: DialectOutline}) // its front matter says dialect: outline
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	images := map[string]Image{}
	for _, ref := range d.Images() {
		path := filepath.Join("../../examples", ref.URL)
		base := strings.ReplaceAll(filepath.Base(ref.URL), " ", "_")
		if strings.HasSuffix(base, ".svg") {
			base = strings.TrimSuffix(base, ".svg") + ".pdf"
			if out, err := exec.Command("rsvg-convert", "-f", "pdf", "-o", filepath.Join(dir, base), path).CombinedOutput(); err != nil {
				t.Fatalf("rsvg-convert %s: %v %s", path, err, out)
			}
			images[ref.URL] = Image{File: base, Width: 420, Height: 120}
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := os.WriteFile(filepath.Join(dir, base), data, 0o644); err != nil {
			t.Fatal(err)
		}
		images[ref.URL] = Image{File: base, Width: float64(cfg.Width), Height: float64(cfg.Height)}
	}
	meta := Meta{Title: "outprint showcase", Subtitle: "Every construct outprint typesets, in one document",
		Author: "The outprint team", Version: "1.0", Date: "2026-11-29", Language: "en", TOC: true, NumberSections: true}
	out, err := d.LaTeX(meta, images)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Warnings) != 3 {
		t.Errorf("showcase warnings = %v, want 3 (javascript:, the attachment and the /doc/ link without an Outline URL)", out.Warnings)
	}
	doc := Preamble(Profile{Paper: "a4", Scripts: d.Scripts()}) + "\\begin{document}\n" + out.Body + "\\end{document}\n"
	pdf, log := compileTeX(t, dir, "showcase", doc)
	if strings.Contains(log, "Missing character") {
		i := strings.Index(log, "Missing character")
		t.Errorf("showcase: %s", log[i:min(len(log), i+120)])
	}
	if keep := os.Getenv("OUTPRINT_SHOWCASE_PDF"); keep != "" {
		// For looking at the result by hand.
		if data, err := os.ReadFile(pdf); err == nil {
			_ = os.WriteFile(keep, data, 0o644)
		}
	}
	if out, err := exec.Command("qpdf", "--check", pdf).CombinedOutput(); err != nil {
		t.Errorf("qpdf --check: %v\n%s", err, out)
	}
	info, err := exec.Command("pdfinfo", pdf).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Title:           outprint showcase", "Author:          The outprint team"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("pdfinfo lacks %q:\n%s", want, info)
		}
	}
	// The catalog's language comes from Meta.Language.
	if js, err := exec.Command("qpdf", "--json", "--json-key=qpdf", pdf).Output(); err != nil || !strings.Contains(string(js), `"/Lang": "u:en"`) {
		t.Errorf("no /Lang (en) in the catalog (%v)", err)
	}
	// Bookmarks come from the headings in this one run (package bookmark).
	js, err := exec.Command("qpdf", "--json", "--json-key=outlines", pdf).Output()
	if err != nil {
		t.Fatal(err)
	}
	var outlines struct {
		Outlines []struct{ Title string } `json:"outlines"`
	}
	if err := json.Unmarshal(js, &outlines); err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, o := range outlines.Outlines {
		titles = append(titles, o.Title)
	}
	if len(titles) != 13 || titles[0] != "1 Text" || titles[9] != "10 Images" {
		t.Errorf("bookmarks = %q, want 13 numbered sections", titles)
	}
	text := strings.Join(strings.Fields(pdftotext(t, pdf)), " ")
	for _, want := range []string{
		"outprint showcase", "strike-through", "to be filled in", "Jane Doe", "handbook.pdf (471 KB)",
		"Task lists show their state", "A nested quotation", "Info", "Tip", "Warning", "Success",
		"A nested toggle", "Backoff", "greet", "Availability", "A bar chart", "The pipeline",
		"A short footnote", "After a page break", "The end.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("showcase PDF lacks %q", want)
		}
	}
}
