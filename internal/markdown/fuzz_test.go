package markdown

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/texmath"
)

// vocabulary is every control word the writer itself emits in a body
// (besides the \opfont<key> macros of FontMacros and what HighlightCode
// puts inside Verbatim). A control word outside it in a body would be user
// text that became a command.
var vocabulary = func() map[string]bool {
	vocabulary := map[string]bool{}
	for _, w := range strings.Fields(`
		textbackslash textasciicircum textasciitilde textquotedbl textless textgreater
		textbar textasciigrave textbullet
		opbr opbrk opnl optt opurl opul opst ophl opfnmark opanchor opminorheading
		opcodelines opnewpage oprule opmissing opimg opcaption opflatitem opnoticelabel opheadbreak opitemhead opframefirst
		optoggletitle opthead opkbd ophlbox textsuperscript textsubscript textquotesingle opph opmathgap opactual opemoji opneed opcolinit opcolm opcoln opcolwidths opcw opcolgap opcelll opcellr opcellc optitle opsubtitle opbyline opcontentsline numberline opmark oplanguage opwrapfig opwrapstart opwrapend opsetrtl opsetltr opdocrtl opcs opcsl opcsr opcolp multicolumn dimexpr tabcolsep relax kill opcellr opcellc opcelll
		emph textbf href hyperlink footnote footnotetext item begin end
		section subsection subsubsection paragraph subparagraph texorpdfstring
		special setcounter par toprule midrule bottomrule endfirsthead endhead small footnotesize
		noindent linewidth textheight optw arabic null protect`) {
		vocabulary[w] = true
	}
	for _, m := range script.FontMacros() {
		vocabulary[strings.TrimPrefix(m, `\`)] = true
	}
	return vocabulary
}()

// controlSymbols are the one-character control sequences the writer emits.
const controlSymbols = "{}$&#%_\\ ()[]"

var environments = map[string]bool{
	"optitleblock": true, "optoc": true, "opquote": true, "optoggle": true, "opnotice": true, "itemize": true,
	"enumerate": true, "longtable": true, "tabular": true, "optable": true, "opfigure": true,
	"Verbatim": true,
}

// checkBody tokenizes a body the way TeX would (backslash escape, letters
// make control words, `%` comments to the end of the line) and reports the
// first thing user text could have turned into: a control sequence outside
// the vocabulary, `^^`, a special character outside the writer's own
// constructs, unbalanced braces, or an unknown environment. Formulas
// (between \( \) or \[ \]) must pass CheckMath as a whole; Verbatim blocks
// are HighlightCode's, checked by its own tests, and skipped here.
func checkBody(body string) error {
	if strings.Contains(body, "^^") {
		return errors.New("^^ in the body")
	}
	depth := 0
	inTable := 0
	lines := strings.SplitAfter(body, "\n")
	for li := 0; li < len(lines); li++ {
		line := lines[li]
		if strings.HasPrefix(line, `\begin{Verbatim}`) {
			for li++; li < len(lines) && lines[li] != "\\end{Verbatim}\n"; li++ {
			}
			if li == len(lines) {
				return errors.New("Verbatim without end")
			}
			continue
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch c {
			case '\\':
				if i+1 >= len(line) {
					return fmt.Errorf("line %d: backslash at the end of the line", li+1)
				}
				j := i + 1
				for j < len(line) && isLetter(line[j]) {
					j++
				}
				if j == i+1 { // control symbol
					sym := line[i+1]
					if strings.IndexByte(controlSymbols, sym) < 0 {
						return fmt.Errorf("line %d: control symbol \\%c", li+1, sym)
					}
					if sym == '(' || sym == '[' {
						closeSym := map[byte]string{'(': `\)`, '[': `\]`}[sym]
						rest := strings.Join(lines[li:], "")[i+2:]
						k := strings.Index(rest, closeSym)
						if k < 0 {
							return fmt.Errorf("line %d: unclosed math", li+1)
						}
						formula := strings.ReplaceAll(rest[:k], "%\n", "")
						// A heading's contents copy has \protect before
						// each command (protectMath); the formula is the rest.
						formula = strings.ReplaceAll(formula, `\protect\`, `\`)
						if err := texmath.Check(formula); err != nil {
							return fmt.Errorf("line %d: formula %q: %v", li+1, formula, err)
						}
						// Skip to after the closing delimiter.
						consumed := i + 2 + k + 2
						for consumed > len(lines[li]) {
							consumed -= len(lines[li])
							li++
						}
						line = lines[li]
						i = consumed - 1
						continue
					}
					if sym == ')' || sym == ']' {
						return fmt.Errorf("line %d: math close without open", li+1)
					}
					i++
					continue
				}
				word := line[i+1 : j]
				if !vocabulary[word] {
					return fmt.Errorf("line %d: control word \\%s is not the writer's", li+1, word)
				}
				if word == "begin" || word == "end" {
					k := strings.IndexByte(line[j:], '}')
					if !strings.HasPrefix(line[j:], "{") || k < 0 || !environments[line[j+1:j+k]] {
						return fmt.Errorf("line %d: environment in %q", li+1, line[i:min(len(line), j+20)])
					}
					env := line[j+1 : j+k]
					if env == "longtable" || env == "tabular" {
						if word == "begin" {
							inTable++
						} else {
							inTable--
						}
					}
				}
				i = j - 1
			case '%':
				if line[i+1:] != "\n" {
					return fmt.Errorf("line %d: %% that is not at the end of the line", li+1)
				}
				i = len(line)
			case '{':
				depth++
			case '}':
				depth--
				if depth < 0 {
					return fmt.Errorf("line %d: unbalanced }", li+1)
				}
			case '$', '#', '~', '_', '^':
				if !strings.HasPrefix(line, `\special{pdf:`) {
					return fmt.Errorf("line %d: bare %c", li+1, c)
				}
			case '&':
				if inTable == 0 {
					return fmt.Errorf("line %d: & outside a table", li+1)
				}
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced braces (%d open)", depth)
	}
	return nil
}

// checkDocument parses and writes src in both dialects and checks the
// bodies. A document may be refused only for its formulas or its nesting
// (bounds.go).
func checkDocument(t *testing.T, src []byte) {
	for _, dialect := range []Dialect{DialectCommonMark, DialectOutline} {
		checkDialect(t, src, dialect)
	}
}

func checkDialect(t *testing.T, src []byte, dialect Dialect) {
	d, err := Parse(src, Options{OutlineURL: "https://wiki.example.com", Dialect: dialect})
	if err != nil {
		var le *limits.Error
		if !errors.As(err, &le) || le.Kind != limits.KindDocument || len(le.Problems) == 0 {
			t.Fatalf("Parse = %v, want a 422 limits.Error or nil", err)
		}
		for _, p := range le.Problems {
			nesting := p.Code == limits.CodeInvalid && strings.Contains(p.Message, "nested too deeply")
			if p.Code != limits.CodeMath && !nesting || p.Line < 1 {
				t.Fatalf("Parse problem %+v, want code math or a nesting problem, with a line", p)
			}
		}
		return
	}
	images := map[string]Image{}
	for i, ref := range d.Images() {
		if i%2 == 0 {
			images[ref.URL] = Image{File: fmt.Sprintf("img%d.png", i), Width: 100, Height: 50}
		}
	}
	out, err := d.LaTeX(Meta{Title: string(src[:min(len(src), 40)]), Author: "x", TOC: true, Language: "en"}, images)
	if err != nil {
		t.Fatalf("LaTeX = %v", err)
	}
	if err := checkBody(out.Body); err != nil {
		t.Fatalf("body unsafe: %v", err)
	}
	if n := strings.Count(out.Body, "\n"); n != len(out.Lines) {
		t.Fatalf("%d body lines, %d Lines entries", n, len(out.Lines))
	}
	if n := longestLine(out.Body); n > 100_000 {
		t.Fatalf("body line of %d bytes", n)
	}
}

// FuzzLaTeX proves that user text never becomes a control sequence. Seeds:
// every hostile document of the shared corpus (required under CI), the
// golden documents and testdata/fuzz.
func FuzzLaTeX(f *testing.F) {
	if shared := testenv.SharedDir(f, "../.."); shared != "" {
		files, _ := filepath.Glob(filepath.Join(shared, "corpus", "hostile", "*.md"))
		files2, _ := filepath.Glob(filepath.Join(shared, "corpus", "*.md"))
		for _, p := range append(files, files2...) {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	golden, _ := filepath.Glob(filepath.Join("testdata", "*.md"))
	for _, p := range golden {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`\`, `^`, `^^`, `^^^^`, "$x$", "$$\n\\frac{a}{b}\n$$", "`\\`", "[a](b\\)", "[a](<{>)",
		"| a |\n|---|\n| \\ |", "- [ ] \\x", ":::info\n\\x\n:::", "+++ \\x\n\\y\n+++", "![\\x](\\y \"\\z\")",
		"a\\nb\\\\nc", "__\\x__", "==\\x==", "!!\\x!!", "[^1]\n\n[^1]: \\x", "<br>\\x", "&#92;input",
		"&bsol;input", "\\\ninput", "a  \n\\input",
		"שלום, **עולם**: (*אחת*) 12 __שתיים abc__ $x$ ![א](b) [ב](https://x.y)\\nג", "| مرحبا | 1 |\n|---|---|\n| بكم<br>x | ש |",
		"# כותרת $x^2$ **ב**\n\n+++ عنوان **ب**\nنص\n+++",
		"+++++\n\\x\n\n++++\n\\y\n++++\n+++++", "a. \\x\nb. y\n    a. z\naa. \\w", "A. x\nzz. y",
		":3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b: :thumbs_up: :\\x:", "::::layout\n:::layout_section\n\\x\n:::\n::::",
		"[\\x](date:2026-01-01) [\\y pdf:12](/api/attachments.redirect?id=x) [z 1x2](/api/attachments.redirect?id=y)",
		"$5 and $\\input$ $a$b$ $$x$$", ":::info\n:::tip\nx\n:::\n:::",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkDocument(t, src)
	})
}

// TestCheckBodyCatches makes sure the fuzz oracle itself fails on what it
// must catch.
func TestCheckBodyCatches(t *testing.T) {
	for _, bad := range []string{
		`\input{x}` + "\n", "^^5c\n", "a # b\n", "50 % of\n", "{\n", "}\n", "a & b\n", `\(\input\)` + "\n",
		`\begin{document}` + "\n", "a_b\n", "\\@\n",
	} {
		if checkBody(bad) == nil {
			t.Errorf("checkBody(%q) = nil, want an error", bad)
		}
	}
	for _, good := range []string{`\textbf{a} \% \# \(x^2\)` + "\n", "long%\nline\n"} {
		if err := checkBody(good); err != nil {
			t.Errorf("checkBody(%q) = %v, want nil", good, err)
		}
	}
}
