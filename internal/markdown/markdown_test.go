package markdown

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/testenv"
)

func mustParse(t *testing.T, src string, opts Options) *Document {
	t.Helper()
	d, err := Parse([]byte(src), opts)
	if err != nil {
		t.Fatalf("Parse(%.60q) = %.300v, want no error", src, err)
	}
	return d
}

func body(t *testing.T, src string, opts Options, meta Meta) *Output {
	t.Helper()
	out, err := mustParse(t, src, opts).LaTeX(meta, nil)
	if err != nil {
		t.Fatalf("LaTeX(%.60q) = %v", src, err)
	}
	return out
}

// TestParseMathErrors: every rejected formula is listed, with its line in
// the original file, in one 422.
func TestParseMathErrors(t *testing.T) {
	src := "# Math\n\nok $x^2$ bad $\\input{a}$\n\n$$\n\\write18{ls}\n$$\n\nand $^^5c$ and $x}$ and $a \\) b$\n"
	_, err := Parse([]byte(src), Options{LineOffset: 4})
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("Parse = %v, want *limits.Error", err)
	}
	if le.Kind != limits.KindDocument {
		t.Errorf("Parse kind = %q, want %q", le.Kind, limits.KindDocument)
	}
	var lines []int
	for _, p := range le.Problems {
		if p.Source != limits.SourceDocument || p.Code != limits.CodeMath || p.Message == "" {
			t.Errorf("problem %+v, want source document, code math, a message", p)
		}
		lines = append(lines, p.Line)
	}
	if want := []int{7, 9, 13, 13, 13}; !reflect.DeepEqual(lines, want) {
		t.Errorf("Parse problem lines = %v, want %v", lines, want)
	}
}

// TestMathHostileCorpus: the shared math-injection document is refused
// with one error per formula (the corpus README's expectation).
func TestMathHostileCorpus(t *testing.T) {
	shared := testenv.SharedDir(t, "../..")
	if shared == "" {
		testenv.Missing(t, "../shared/corpus")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "hostile", "math-injection.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(src, Options{})
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("Parse(math-injection.md) = %v, want a 422", err)
	}
	if len(le.Problems) != 6 {
		t.Errorf("Parse(math-injection.md) = %d problems, want 6: %v", len(le.Problems), le)
	}
}

func TestDollarsStayText(t *testing.T) {
	for _, src := range []string{
		"It costs $5 and $10.", "$ 5 $", "a $b $c", "price: $3.50 or $4", "$x$5", "US$ and $US",
		"`$x$`", "\\$x\\$", "$$ not closed",
	} {
		d := mustParse(t, src, Options{})
		out, err := d.LaTeX(Meta{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.Body, `\(`) || strings.Contains(out.Body, `\[`) {
			t.Errorf("LaTeX(%q) has math:\n%s", src, out.Body)
		}
	}
	for _, src := range []string{"$x$", "a $x^2$ b", "$a$, $b$", "$$x$$", "$x$.", "($x$)"} {
		out := body(t, src, Options{}, Meta{})
		if !strings.Contains(out.Body, `\(`) && !strings.Contains(out.Body, `\[`) {
			t.Errorf("LaTeX(%q) has no math:\n%s", src, out.Body)
		}
	}
}

func TestDocumentAccessors(t *testing.T) {
	src := "# Handbook *v2*\n\nText ![a *b*](img/x.png \" =10x20\") and ![c](<y z.jpg>)\n\n## One\n\n### Two\n\n> ## Three\n"
	d := mustParse(t, src, Options{LineOffset: 2})
	if got, want := d.FirstHeading(), "Handbook v2"; got != want {
		t.Errorf("FirstHeading() = %q, want %q", got, want)
	}
	if got, want := d.Headings(), 3; got != want {
		t.Errorf("Headings() = %d, want %d", got, want)
	}
	want := []ImageRef{
		{URL: "img/x.png", Alt: "a b", Title: "=10x20", Line: 5},
		{URL: "y z.jpg", Alt: "c", Line: 5},
	}
	if got := d.Images(); !reflect.DeepEqual(got, want) {
		t.Errorf("Images() = %+v, want %+v", got, want)
	}
	if got := mustParse(t, "text only", Options{}).FirstHeading(); got != "" {
		t.Errorf("FirstHeading() = %q, want empty", got)
	}
	if got := mustParse(t, "## a\n\n# b\n", Options{}).Headings(); got != 2 {
		t.Errorf("Headings() = %d, want 2 (the first block is not a level-1 heading)", got)
	}
}

func TestScripts(t *testing.T) {
	for _, c := range []struct {
		src  string
		want script.Set
	}{
		{"plain ASCII", 0},
		{"日本語 text", script.CJK},
		{"مرحبا and שלום", script.Arabic | script.Hebrew},
		{"- [ ] task", script.Symbols},
		{"fire :fire:", script.Emoji},
	} {
		if got := mustParse(t, c.src, Options{}).Scripts(); got&c.want != c.want || (c.want == 0 && got != 0) {
			t.Errorf("Scripts(%q) = %b, want %b", c.src, got, c.want)
		}
	}
}

// TestLines: each body line knows its Markdown line, offset by the front
// matter.
func TestLines(t *testing.T) {
	src := "# Title\n\nfirst paragraph\n\n- item one\n- item two\n\n```\ncode\n```\n\nlast\n"
	out := body(t, src, Options{LineOffset: 10}, Meta{Title: "Title"})
	lines := strings.Split(strings.TrimSuffix(out.Body, "\n"), "\n")
	if len(lines) != len(out.Lines) {
		t.Fatalf("%d lines, %d Lines", len(lines), len(out.Lines))
	}
	find := func(s string) int {
		for i, l := range lines {
			if strings.Contains(l, s) {
				return out.Lines[i]
			}
		}
		t.Fatalf("no line with %q in\n%s", s, out.Body)
		return 0
	}
	for s, want := range map[string]int{"first paragraph": 13, "item one": 15, "item two": 16, "last": 22, "code": 19} {
		if got := find(s); got != want {
			t.Errorf("Lines for %q = %d, want %d", s, got, want)
		}
	}
}

func TestTitleHeadingOmitted(t *testing.T) {
	src := "# My Title\n\ntext\n\n## Part\n"
	if out := body(t, src, Options{}, Meta{Title: "My Title"}); strings.Contains(out.Body, `\section[\texorpdfstring{My Title}`) ||
		!strings.Contains(out.Body, `\section[\texorpdfstring{Part}`) {
		t.Errorf("title heading kept or Part not a section:\n%s", out.Body)
	}
	if out := body(t, src, Options{}, Meta{Title: "Other"}); !strings.Contains(out.Body, `\section[\texorpdfstring{My Title}`) ||
		!strings.Contains(out.Body, `\subsection[\texorpdfstring{Part}`) {
		t.Errorf("heading that is not the title omitted:\n%s", out.Body)
	}
}

func TestLinkWarnings(t *testing.T) {
	src := "a\n\n[x](run:/bin/sh) [y](https://ok) [z](mention://a/user/b)\n[w](/doc/abc) [v](#a)\n"
	out := body(t, src, Options{LineOffset: 1}, Meta{})
	var got []int
	for _, w := range out.Warnings {
		if w.Source != limits.SourceDocument {
			t.Errorf("warning %+v, want source document", w)
		}
		got = append(got, w.Line)
	}
	if want := []int{4, 5, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("warning lines = %v, want %v (%v)", got, want, out.Warnings)
	}
	out = body(t, src, Options{OutlineURL: "https://wiki.example.com/"}, Meta{})
	if !strings.Contains(out.Body, `\href{https://wiki.example.com/doc/abc}{w}`) {
		t.Errorf("Outline link not absolute:\n%s", out.Body)
	}
}

func TestHrefURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://example.com/a_b?x=1&y=2#top", `https://example.com/a\_b?x=1\&y=2\#top`},
		{"https://example.com/a}b{c\\d^e~f", `https://example.com/a\%7Db\%7Bc\%5Cd\%5Ee\%7Ef`},
		{"https://example.com/%20ok/%zz/%", `https://example.com/\%20ok/\%25zz/\%25`},
		{"https://example.com/ä b", `https://example.com/\%C3\%A4\%20b`},
		{"https://example.com/$(x)", `https://example.com/\%24\%28x\%29`},
		{"https://example.com/a#b#c", `https://example.com/a\#b\%23c`},
	} {
		if got := hrefURL(c.in); got != c.want {
			t.Errorf("hrefURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\x00b\x07c\x1bd\x7fe", "abcde"},
		{"a\r\nb\rc", "a\nb\nc"},
		{"\ufeffx\u0085y\ufffez\U0010FFFF", "xyz"},
		{"bad \xff\xfe utf", "bad \ufffd\ufffd utf"},
		{"tab\tkept\n", "tab\tkept\n"},
	} {
		if got := string(clean([]byte(c.in))); got != c.want {
			t.Errorf("clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`\ { } $ & # % _ ^ ~`, `\textbackslash{} \{ \} \$ \& \# \% \_ \textasciicircum{} \textasciitilde{}`},
		{`[ ] " < > | ` + "`", `{[} {]} \textquotedbl{} \textless{} \textgreater{} \textbar{} \textasciigrave{}`},
		{"^^5c --", `\textasciicircum{}\textasciicircum{}5c -{}-`},
		{"a ,, b '' c", `a ,{}, b '{}' c`},
		// A full-width stop carries its own space.
		{"ようこそ。 サポート。 Hi", `\opfontcjk{ようこそ。}\opfontcjk{サポート。}Hi`},
	} {
		var w texWriter
		w.text(c.in, modeText)
		if got := string(w.b); got != c.want {
			t.Errorf("text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestLongLines: no body line comes near TeX's input buffer, whatever the
// input's lines.
func TestLongLines(t *testing.T) {
	word := strings.Repeat("x", 300_000)
	for _, src := range []string{
		word, "# " + word, "| " + word + " |\n|---|\n| a |", "`" + word + "`", "```\n" + word + "\n```",
		"[" + word + "](https://example.com/" + word + ")", strings.Repeat("a ", 200_000),
		"$$\n" + strings.Repeat("x+", 1500) + "x\n$$", "- " + word, "__" + word + "__",
		strings.Repeat("| a ", 3000) + "|\n" + strings.Repeat("|---", 3000) + "|\n",
	} {
		out := body(t, src, Options{}, Meta{Title: word})
		if n := longestLine(out.Body); n > 20_000 {
			t.Errorf("longest line %d bytes for input %q…", n, src[:20])
		}
	}
}

// TestLongParagraph: a giant paragraph is set in parts.
func TestLongParagraph(t *testing.T) {
	out := body(t, strings.Repeat("lorem ipsum dolor sit amet ", 4000), Options{}, Meta{})
	if n := strings.Count(out.Body, `\opbrk{}`); n < 5 || n > 8 {
		t.Errorf("%d paragraph cuts in 108 KB, want about 6", n)
	}
	out = body(t, strings.Repeat("lorem ipsum dolor sit amet\n\n", 4000), Options{}, Meta{})
	if strings.Contains(out.Body, `\opbrk{}`) {
		t.Errorf("short paragraphs cut")
	}
}

// TestWideTable: a table wider than a page can hold becomes paragraphs.
func TestWideTable(t *testing.T) {
	n := maxTableColumns + 1
	src := strings.Repeat("| h ", n) + "|\n" + strings.Repeat("|---", n) + "|\n" + strings.Repeat("| c ", n) + "|\n"
	out := body(t, src, Options{}, Meta{})
	if strings.Contains(out.Body, "longtable") || strings.Count(out.Body, `\textbar{}`) != 2*(n-1) {
		t.Errorf("wide table not set as paragraphs:\n%s", out.Body)
	}
	n = maxTableColumns
	src = strings.Repeat("| h ", n) + "|\n" + strings.Repeat("|---", n) + "|\n"
	if out := body(t, src, Options{}, Meta{}); !strings.Contains(out.Body, "longtable") {
		t.Errorf("table of %d columns not a longtable", n)
	}
}

// TestDeepNesting: nesting beyond LaTeX's depth is flattened (up to
// MaxBlockDepth levels; deeper is refused, see TestNestingRefused).
func TestDeepNesting(t *testing.T) {
	src := strings.Repeat("> ", MaxBlockDepth) + "deep\n\n"
	for i := 0; i < MaxBlockDepth; i++ {
		src += strings.Repeat("  ", i) + "- item\n"
	}
	out := body(t, src, Options{}, Meta{})
	if n := strings.Count(out.Body, `\begin{opquote}`); n != maxListDepth {
		t.Errorf("%d quote levels, want %d", n, maxListDepth)
	}
	if n := strings.Count(out.Body, `\begin{itemize}`); n != maxListDepth {
		t.Errorf("%d list levels, want %d", n, maxListDepth)
	}
	if n := strings.Count(out.Body, `\opflatitem{`); n != MaxBlockDepth-maxListDepth {
		t.Errorf("%d flattened items, want %d", n, MaxBlockDepth-maxListDepth)
	}
}

func TestPreambleProfile(t *testing.T) {
	a4 := Preamble(Profile{Paper: "a4"})
	letter := Preamble(Profile{Paper: "letter", Scripts: script.CJK})
	if !strings.Contains(a4, "a4paper") || !strings.Contains(letter, "letterpaper") {
		t.Errorf("paper not in the preamble")
	}
	if a4 != Preamble(Profile{Paper: "a4"}) {
		t.Errorf("Preamble is not a function of the profile")
	}
	if !strings.Contains(letter, `\newfontfamily\opfamcjk`) || strings.Contains(a4, `\newfontfamily\opfamcjk`) {
		t.Errorf("CJK font not loaded only for the CJK profile")
	}
	for _, m := range []string{`\opbr`, `\opnl`, `\opimg`, `{opnotice}`, `{optoggle}`, `\setlistdepth{9}`, "@optotal"} {
		if !strings.Contains(a4, m) {
			t.Errorf("Preamble lacks %s", m)
		}
	}
}

func TestDocinfo(t *testing.T) {
	out := body(t, "x", Options{}, Meta{Title: "Tï)tle", Author: `A\B`, Language: "en-GB"})
	for _, want := range []string{
		`/Title <FEFF005400EF00290074006C0065>`, `/Author <FEFF0041005C0042>`, `<</Lang (en-GB)>>`,
	} {
		if !strings.Contains(out.Body, want) {
			t.Errorf("body lacks %s:\n%s", want, out.Body)
		}
	}
	if out := body(t, "x", Options{}, Meta{Language: "en) /JS (x"}); strings.Contains(out.Body, "/Lang") {
		t.Errorf("invalid language reached the catalog:\n%s", out.Body)
	}
}

// TestConcurrent: documents are parsed and written from many goroutines at
// once (the parser is shared), and one Document may be written twice at
// the same time; run with -race.
func TestConcurrent(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.md"))
	var srcs [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, b)
	}
	shared := mustParse(t, string(srcs[0]), Options{})
	want, err := shared.LaTeX(Meta{Title: "x"}, goldenImages)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			for _, src := range srcs {
				d, err := Parse(src, Options{})
				if err == nil {
					_, err = d.LaTeX(Meta{Title: "x"}, goldenImages)
				}
				if err != nil {
					done <- err
					return
				}
			}
			out, err := shared.LaTeX(Meta{Title: "x"}, goldenImages)
			if err == nil && out.Body != want.Body {
				err = errors.New("the same document written twice differs")
			}
			done <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
