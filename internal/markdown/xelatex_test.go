package markdown

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// writeTestImages writes the files goldenImages names into dir: a PNG, a
// JPEG and a one-page PDF.
func writeTestImages(t *testing.T, dir string) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 60, 30))
	for x := 0; x < 60; x++ {
		for y := 0; y < 30; y++ {
			img.Set(x, y, color.RGBA{uint8(x * 4), 120, uint8(y * 8), 255})
		}
	}
	var p, j bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"chart.png": p.Bytes(), "photo.jpg": j.Bytes(), "diagram.pdf": minimalPDF()}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// minimalPDF returns a valid one-page PDF with a filled rectangle.
func minimalPDF() []byte {
	content := "0.2 0.4 0.8 rg 10 10 280 180 re f"
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents 4 0 R /Resources << >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// compileTeX runs XeLaTeX the way render does (no shell escape, nonstop,
// halt on error) and returns the PDF's path and the log.
func compileTeX(t *testing.T, dir, name, doc string) (string, string) {
	t.Helper()
	tex := filepath.Join(dir, name+".tex")
	if err := os.WriteFile(tex, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "xelatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", name+".tex")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "openin_any=p", "openout_any=p", fontEnv(t))
	out, err := cmd.CombinedOutput()
	logText, _ := os.ReadFile(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatalf("xelatex %s: %v\n%s", name, err, tail(string(out), 3000))
	}
	return filepath.Join(dir, name+".pdf"), string(logText)
}

// fontEnv is the environment entry that lets XeLaTeX find tex's font
// copies (the Arabic font the preamble loads by file name).
func fontEnv(t testing.TB) string {
	t.Helper()
	env, err := tex.FontEnv()
	if err != nil {
		t.Fatalf("tex.FontEnv: %v", err)
	}
	return env
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func pdftotext(t *testing.T, pdf string) string {
	t.Helper()
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", pdf, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext %s: %v", pdf, err)
	}
	return string(out)
}

// TestXeLaTeXGolden compiles the golden documents with the preamble of
// their profile and checks the PDFs with poppler: every document typesets,
// no glyph is missing, and a few phrases of each appear in the text.
func TestXeLaTeXGolden(t *testing.T) {
	testenv.Require(t, "xelatex", "pdftotext", "pdfinfo")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	want := map[string][]string{
		"inline":      {"underline", "report.pdf (100 KB)", "Jane Doe", "run action", `\backslash`, "{braces}"},
		"blocks":      {"nested quote", "starts at seven", "HTML block printed literally", `\end{Verbatim}`},
		"dialect":     {"Info", "Warning", "Tip", "Success", "A nested toggle", "After the page break"},
		"tables":      {"Centre", "empty first", "Averyveryveryver"},
		"images":      {"A chart with a size hint", "Missing image prints its text"},
		"footnotes":   {"The first note", "{unbalanced", "A heading inside a note"},
		"hostile":     {`\input{/etc/passwd}`, `^^5cinput`, `\end{document}`, "quote twelve deep", "12"},
		"scripts":     {"Größere", "Καλώς", "Добро"},
		"title":       {"The Title", "A subtitle", "Only section"},
		"decorations": {"underlined", "forever/and/ever/index.html", "footnote1", "Heading with code"},
		"nesting":     {"in a list", "code in a quote", "Heading in a notice", "notice in a toggle", "notice in a quote in an item"},
	}
	dir := t.TempDir()
	writeTestImages(t, dir)
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", c.name+".md"))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Parse(src, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			out, err := d.LaTeX(c.meta, goldenImages)
			if err != nil {
				t.Fatal(err)
			}
			doc := Preamble(Profile{Paper: "a4", Scripts: d.Scripts()}) + "\\begin{document}\n" + out.Body + "\\end{document}\n"
			pdf, log := compileTeX(t, dir, c.name, doc)
			if strings.Contains(log, "Missing character") {
				i := strings.Index(log, "Missing character")
				t.Errorf("xelatex %s: %s", c.name, log[i:min(len(log), i+120)])
			}
			text := strings.Join(strings.Fields(pdftotext(t, pdf)), " ")
			for _, w := range want[c.name] {
				if !strings.Contains(text, w) {
					t.Errorf("pdftotext(%s) lacks %q", c.name, w)
				}
			}
			if _, err := os.Stat("/tmp/outprint-pwned"); err == nil {
				t.Errorf("/tmp/outprint-pwned exists after %s", c.name)
			}
		})
	}
}

// TestXeLaTeXLongURL: a URL long enough to be cut over several lines
// reaches the PDF's link annotation whole, at top level and inside an
// argument (where TeX has read the `%` line ends already).
func TestXeLaTeXLongURL(t *testing.T) {
	testenv.Require(t, "xelatex", "qpdf")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	var segs []string
	for i := 0; i < 50; i++ {
		segs = append(segs, fmt.Sprintf("seg%d_%%41&q=%d", i, i))
	}
	url := "https://example.com/" + strings.Join(segs, "/") + "#frag"
	src := "[plain](" + url + ")\n\n**[in bold](" + url + ")**\n"
	d, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{Title: "URL"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Body, "%\n") {
		t.Fatalf("the URL was not cut into lines:\n%s", out.Body)
	}
	dir := t.TempDir()
	pdf, _ := compileTeX(t, dir, "url", Preamble(Profile{})+"\\begin{document}\n"+out.Body+"\\end{document}\n")
	qdf := filepath.Join(dir, "qdf.pdf")
	if out, err := exec.Command("qpdf", "--qdf", "--object-streams=disable", pdf, qdf).CombinedOutput(); err != nil {
		t.Fatalf("qpdf: %v %s", err, out)
	}
	b, err := os.ReadFile(qdf)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("/URI ("+url+")")); n != 2 {
		t.Errorf("%d link annotations with the whole URL, want 2", n)
	}
}

// TestXeLaTeXEmpty: an empty document without a title still makes a PDF.
func TestXeLaTeXEmpty(t *testing.T) {
	testenv.Require(t, "xelatex", "pdfinfo")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	d, err := Parse(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := compileTeX(t, t.TempDir(), "empty", Preamble(Profile{})+"\\begin{document}\n"+out.Body+"\\end{document}\n")
	info, err := exec.Command("pdfinfo", pdf).Output()
	if err != nil || !strings.Contains(string(info), "Pages:           1") {
		t.Errorf("pdfinfo empty.pdf = %v\n%s", err, info)
	}
}

// TestXeLaTeXHeadingsInTOC: headings with formulas and every kind of
// inline markup go into the table of contents (typeset in the same run)
// and through the .aux file (LaTeX still writes each heading's copy there)
// without a TeX error, and the contents list shows them.
func TestXeLaTeXHeadingsInTOC(t *testing.T) {
	testenv.Require(t, "xelatex", "pdftotext")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	src := "# Document\n\n" +
		"## Budget $\\sum\\limits_{i=1}^n x_i$ and $x^\\checkmark$ and $\\hat\\checkmark$\n\n" +
		"## Text $\\text{max}$ and $\\big( x \\big)$ and $\\widetilde{abc}$\n\n" +
		"## Matrix $\\begin{pmatrix} a & b \\\\ c & d \\end{pmatrix}$ and $\\sqrt[3]{x}$ and $\\left( \\frac{a}{b} \\right]$\n\n" +
		"## Cases $f(x) = \\begin{cases} 1 & x > 0 \\\\ 0 & \\text{else} \\end{cases}$ and $\\hat{x} \\mathbb{R} \\operatorname{argmax}$\n\n" +
		"## **Bold** *italic* `code {x} \\y` and [a link](https://example.com/a_b#c) <https://example.org/x_y>\n\n" +
		"## Specials \\\\ \\{ \\} \\$ & \\# ^ \\_ ~ % [x] ] and averyveryveryveryverylongwordwithoutanyspacesinit\n\n" +
		"## Scripts 日本語 مرحبا بكم שלום עולם 🚀 :tada: ∑ ☕\n\n" +
		"## Decorated __under__ ==mark== ~~strike~~ and a note[^1] and ![alt text](x.png) and !!placeholder!!\n\n" +
		"Body text.\n\n[^1]: The note.\n"
	d, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{Title: "Document", TOC: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out.TOC {
		t.Fatal("LaTeX: Output.TOC = false, want true")
	}
	doc := Preamble(Profile{Scripts: d.Scripts()}) + "\\begin{document}\n" + out.Body + "\\end{document}\n"
	dir := t.TempDir()
	if n := strings.Count(out.Body, `\opcontentsline{`); n != 8 {
		t.Errorf("body has %d contents entries, want 8", n)
	}
	pdf, _ := compileTeX(t, dir, "toc", doc)
	text := strings.Join(strings.Fields(pdftotext(t, pdf)), " ")
	for _, want := range []string{"Budget", "Text", "Matrix", "Cases", "Bold", "Specials", "Scripts", "Decorated", "placeholder"} {
		if n := strings.Count(text, want); n < 2 {
			t.Errorf("pdftotext shows %q %d times, want 2 (contents and heading):\n%s", want, n, text)
		}
	}
}
