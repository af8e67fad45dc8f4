package markdown

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenImages is the image map the golden documents are written with: the
// URLs of testdata/images.md and their TeX files.
var goldenImages = map[string]Image{
	"images/chart.png":   {File: "chart.png", Width: 600, Height: 300},
	"images/photo.jpg":   {File: "photo.jpg", Width: 640, Height: 480},
	"images/diagram.svg": {File: "diagram.pdf", Width: 300, Height: 200},
}

// goldenCases lists every document under testdata with the options and
// metadata it is written with.
var goldenCases = []struct {
	name string
	opts Options
	meta Meta
}{
	{"inline", Options{Dialect: DialectOutline, OutlineURL: "https://wiki.example.com"}, Meta{Title: "Inline", Language: "en"}},
	{"blocks", Options{Dialect: DialectOutline, LineOffset: 3}, Meta{Title: "Blocks", Author: "Ann Author", Version: "1.0", Date: "2026-01-02", NumberSections: true, TOC: true}},
	{"dialect", Options{Dialect: DialectOutline}, Meta{Title: "Dialect", TOC: true}},
	{"tables", Options{}, Meta{Title: "Tables"}},
	{"images", Options{}, Meta{Title: "Images"}},
	{"footnotes", Options{Dialect: DialectOutline}, Meta{Title: "Footnotes"}},
	{"hostile", Options{}, Meta{Title: `Hostile \input{x} ^^5c`, Author: "Mallory {", Language: "de-DE) /Evil"}},
	{"scripts", Options{Dialect: DialectOutline}, Meta{Title: "Scripts 日本語", Language: "ja"}},
	{"title", Options{}, Meta{Title: "The Title", Subtitle: "A subtitle", TOC: true}},
	{"nesting", Options{Dialect: DialectOutline}, Meta{Title: "Nesting"}},
	{"decorations", Options{Dialect: DialectOutline}, Meta{Title: "Decorations"}},
}

// render writes a golden document's body followed by its warnings as TeX
// comments.
func renderGolden(t *testing.T, name string, opts Options, meta Meta) (string, *Output) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name+".md"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(src, opts)
	if err != nil {
		t.Fatalf("Parse(%s) = %v, want no error", name, err)
	}
	out, err := d.LaTeX(meta, goldenImages)
	if err != nil {
		t.Fatalf("LaTeX(%s) = %v, want no error", name, err)
	}
	var b strings.Builder
	b.WriteString(out.Body)
	fmt.Fprintf(&b, "%% toc: %v, scripts: %b\n", out.TOC, d.Scripts())
	for _, w := range out.Warnings {
		fmt.Fprintf(&b, "%% warning line %d: %s\n", w.Line, w.Message)
	}
	return b.String(), out
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			got, out := renderGolden(t, c.name, c.opts, c.meta)
			if n := strings.Count(out.Body, "\n"); n != len(out.Lines) {
				t.Errorf("LaTeX(%s): %d body lines, %d entries in Lines", c.name, n, len(out.Lines))
			}
			path := filepath.Join("testdata", c.name+".tex")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("LaTeX(%s) differs from %s (run go test -run TestGolden -update and review the diff)\n%s", c.name, path, firstDiff(got, string(want)))
			}
		})
	}
}

// firstDiff shows the first differing line of two texts.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got %q\nwant %q", i+1, gl, wl)
		}
	}
	return ""
}

// TestGoldenCoversConstructs makes sure the golden documents keep covering
// every construct the writer knows: each needle must appear in some body.
func TestGoldenCoversConstructs(t *testing.T) {
	var all bytes.Buffer
	for _, c := range goldenCases {
		got, _ := renderGolden(t, c.name, c.opts, c.meta)
		all.WriteString(got)
	}
	for _, needle := range []string{
		`\emph{`, `\textbf{`, `\opul{`, `\opst{`, `\ophl{`, `\optt{`, `\href{`, `\hyperlink{`, `\opurl{`,
		`\opnl`, `\(`, `\[`, `\begin{opnotice}{info}`, `\begin{opnotice}{warning}`, `\begin{opnotice}{tip}`,
		`\begin{opnotice}{success}`, `\begin{optoggle}`, `\opnewpage`, `\oprule`, `\begin{Verbatim}`,
		`\opcodelines{`, `\begin{longtable}`, `\begin{tabular}`, `\opcellr`, `\opcellc`, `\opcelll`,
		`\endhead`, `\opimg{`, `\begin{opfigure}`, `\opcaption{`, `\opmissing{`, `\footnote[`, `\footnotetext[`, `\opfnmark{`,
		`\begin{itemize}`, `\begin{enumerate}[start=7,label=\arabic*)`, `\item[{`, `\begin{opquote}`,
		`\opflatitem{`, `\section[`, `\subsection[`, `\subsubsection[`, `\paragraph[`, `\subparagraph[`,
		`\opanchor{`, `\texorpdfstring{`, `\opbr{}`, `\opfont`, `\beginR`, `\special{pdf:docinfo`,
		`\special{pdf:put @catalog`, `\optitle{`, `\opsubtitle{`, `\opbyline{`, `\begin{optoc}`, `\opcontentsline{`, `\numberline{`, `\opmark{`,
		`\setcounter{secnumdepth}{5}`, `report.pdf (100 KB)`, `big.zip (5.0 MB)`, `Jane Doe`, "🔥",
		`\textbackslash{}`, `\textasciicircum{}`, `\textasciitilde{}`, `\opminorheading{`, `\(\protect\`,
	} {
		if !strings.Contains(all.String(), needle) {
			t.Errorf("no golden document produces %q", needle)
		}
	}
}
