package highlight

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/chroma/v2/lexers"

	"github.com/outprint/outprint/internal/latextest"
	"github.com/outprint/outprint/internal/script"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/highlight")

// highlightCases are the golden cases: testdata/highlight/<name>.txt is
// the code, <name>.tex what Code makes of it.
var highlightCases = []struct{ name, lang string }{
	{"go", "go"},
	{"python", "python"},
	{"bash", "bash"},
	{"hostile", "latex"},
	{"plain", "no-such-language"},
}

func TestHighlightGolden(t *testing.T) {
	for _, c := range highlightCases {
		t.Run(c.name, func(t *testing.T) {
			code, err := os.ReadFile(filepath.Join("testdata", "highlight", c.name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			got := Code(c.lang, string(code))
			path := filepath.Join("testdata", "highlight", c.name+".tex")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestHighlightGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("Code(%q, %s.txt) differs from %s (run go test -run TestHighlightGolden -update and review the diff):\n%s", c.lang, c.name, path, got)
			}
		})
	}
}

func TestHighlightCode(t *testing.T) {
	tests := []struct {
		lang, code string
		want       []string // substrings of the output
		not        []string // substrings that must not be there
	}{
		{"go", "func f() {}", []string{`\optkkw{func}`, `\optkfn{f}`, `\oplb{}\oprb{}`}, []string{"{}}"}},
		{"python", "x = 'a' # c", []string{`\optkst{'a'}`, `\optkco{# c}`}, nil},
		{"bash", "echo $HOME", []string{`\optkbi{echo}`, `\optkva{$HOME}`}, nil},
		{"", `\input{x}`, []string{`\opvb{}input\oplb{}x\oprb{}`}, []string{`\input`}},
		{"unknown", "^^5c", []string{`\opcaret{}\opcaret{}5c`}, []string{"^"}},
		{"text", "\\end{Verbatim}\n\\end{Verbatim}", []string{"\\opvb{}end\\oplb{}Verbatim\\oprb{}\n\\opvb{}end"}, nil},
		{"", "a\tb\n\tc\n  \td", []string{"a   b\n    c\n    d"}, []string{"\t"}},
		{"", "a\x00b\x1bc\x7fd\r\ne\rf", []string{"abcd\ne\nf"}, []string{"\x00", "\x1b", "\x7f", "\r"}},
		{"", "x\u202ey\u2066z", []string{"xyz"}, nil},
		{"go", "// 日本語 ok", []string{`\opfontcjk{日本語}`}, nil},
		{"", "code\n\n\n", []string{"code\n\\end{Verbatim}"}, nil},
		{"GO", "package x", []string{`\optkkw{package}`}, nil},
		{"", strings.Repeat("a", maxWordCols), []string{verbatimBegin + "\n"}, nil},
		{"", strings.Repeat("a", maxWordCols+1), []string{verbatimBeginAnywhere + "\n"}, nil},
	}
	for _, tt := range tests {
		got := Code(tt.lang, tt.code)
		body := blockBody(t, got)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("Code(%q, %q) = %q, want it to contain %q", tt.lang, tt.code, got, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(body, n) {
				t.Errorf("Code(%q, %q) = %q, want no %q in the body", tt.lang, tt.code, got, n)
			}
		}
	}
}

func TestHighlightCutsWideLines(t *testing.T) {
	code := "x\n\t" + strings.Repeat("ab ", maxVerbatimCols)
	body := blockBody(t, Code("", code))
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	for _, l := range lines {
		if n := len([]rune(l)); n > maxVerbatimCols {
			t.Errorf("Code: a line of %d columns, want at most %d", n, maxVerbatimCols)
		}
	}
	want := "x\n    " + strings.Repeat("ab ", maxVerbatimCols)
	if got := strings.Join(lines, ""); len(lines) != 5 || got != strings.ReplaceAll(want, "\n", "") {
		t.Errorf("Code cut %q into %d lines %q, want 5 lines with the same text", code, len(lines), lines)
	}
}

// TestHighlightBodyIsSafe checks the property the escaping promises on
// every golden input and on every printable ASCII character: inside the
// block, a backslash only starts one of our macros, braces only belong to
// them, and no ^ is left.
func TestHighlightBodyIsSafe(t *testing.T) {
	inputs := []string{}
	var all strings.Builder
	for c := 0x20; c < 0x7f; c++ {
		all.WriteByte(byte(c))
	}
	inputs = append(inputs, all.String(), "\\end{Verbatim}\n}{\\\\{{", strings.Repeat("{\\", 50))
	for _, c := range highlightCases {
		code, err := os.ReadFile(filepath.Join("testdata", "highlight", c.name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(code))
	}
	allowed := map[string]bool{}
	for _, m := range append(Macros(), script.FontMacros()...) {
		allowed[m] = true
	}
	for _, in := range inputs {
		for _, lang := range []string{"", "go", "latex", "bash", "python", "c"} {
			body := blockBody(t, Code(lang, in))
			if strings.Contains(body, "^") {
				t.Errorf("Code(%q, %q) leaves a ^: %q", lang, in, body)
			}
			depth := 0
			for i := 0; i < len(body); i++ {
				switch body[i] {
				case '\\':
					j := i + 1
					for j < len(body) && (body[j] >= 'a' && body[j] <= 'z' || body[j] >= 'A' && body[j] <= 'Z') {
						j++
					}
					if name := body[i:j]; !allowed[name] || name == `\begin` || name == `\end` {
						t.Fatalf("Code(%q, %q) writes %q into the block: %q", lang, in, name, body)
					}
					if j >= len(body) || body[j] != '{' {
						t.Fatalf("Code(%q, %q): macro %s without its braces: %q", lang, in, body[i:j], body)
					}
				case '{':
					depth++
				case '}':
					depth--
					if depth < 0 {
						t.Fatalf("Code(%q, %q): unbalanced } in %q", lang, in, body)
					}
				case '\n':
					if depth != 0 {
						t.Fatalf("Code(%q, %q): a group spans a line in %q", lang, in, body)
					}
				}
			}
		}
	}
}

// blockBody returns what is between the lines that open and close the
// Verbatim block, failing the test if the output is not one block.
func blockBody(t *testing.T, out string) string {
	t.Helper()
	begin, body, ok := strings.Cut(out, "\n")
	if !ok || (begin != verbatimBegin && begin != verbatimBeginAnywhere) || !strings.HasSuffix(body, "\\end{Verbatim}\n") {
		t.Fatalf("Code output is not one Verbatim block: %q", out)
	}
	return strings.TrimSuffix(body, "\\end{Verbatim}\n")
}

// highlightDoc is the minimal document the brief names: fontspec, xcolor,
// fvextra and Preamble (plus the fallback fonts code may need).
func highlightDoc(blocks ...string) string {
	var b strings.Builder
	b.WriteString("\\documentclass{article}\n\\usepackage{fontspec}\n\\setmainfont{Noto Serif}\n\\setmonofont{Noto Sans Mono}\n")
	b.WriteString("\\usepackage{xcolor}\n\\usepackage{fvextra}\n")
	b.WriteString(script.FontPreamble(script.CJK | script.Symbols | script.Emoji))
	b.WriteString(Preamble)
	b.WriteString("\\pagestyle{empty}\n\\begin{document}\n")
	for _, block := range blocks {
		b.WriteString(block)
		b.WriteString("\nAfter the block.\n\n")
	}
	b.WriteString("\\end{document}\n")
	return b.String()
}

// TestHighlightHostileXeLaTeX compiles the corpus's hostile code block and
// checks that the PDF shows it literally and that the block did not end
// early or read the file.
func TestHighlightHostileXeLaTeX(t *testing.T) {
	code, err := os.ReadFile(filepath.Join("testdata", "highlight", "hostile.txt"))
	if err != nil {
		t.Fatal(err)
	}
	block := Code("latex", string(code)) + Code("", "^^5cinput{/etc/passwd}\n\\end{Verbatim}\\input{/etc/hostname}")
	log, pdf := latextest.MustCompile(t, highlightDoc(block))
	text := latextest.Text(t, pdf, "-layout")
	for _, want := range []string{`\end{Verbatim}`, `\input{/etc/passwd}`, `^^5cinput{/etc/passwd}`, `\end{Verbatim}\input{/etc/hostname}`, "After the block."} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "root:") || strings.Contains(log, "/etc/passwd") {
		t.Errorf("the PDF or log shows /etc/passwd was read:\n%s", text)
	}
	if m := latextest.MissingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost characters:\n%s", strings.Join(m, "\n"))
	}
}

// TestHighlightGoldenXeLaTeX compiles every golden case and a block with a
// line far wider than the page: the text must come out whole, long lines
// wrapped rather than running off the page.
func TestHighlightGoldenXeLaTeX(t *testing.T) {
	var blocks, codes []string
	for _, c := range highlightCases {
		code, err := os.ReadFile(filepath.Join("testdata", "highlight", c.name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, Code(c.lang, string(code)))
		codes = append(codes, string(code))
	}
	long := "x := \"" + strings.Repeat("abcdefghij", 100) + "\" // " + strings.Repeat("{}", 50)
	blocks = append(blocks, Code("go", long))
	// Wider than TeX can box: cut into lines of maxVerbatimCols.
	huge := strings.Repeat("ab ", 1500)
	blocks = append(blocks, Code("", huge))
	log, pdf := latextest.MustCompile(t, highlightDoc(blocks...))
	if strings.Contains(log, "Overfull \\hbox") {
		t.Errorf("a code line runs off the page:\n%s", log)
	}
	if m := latextest.MissingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost characters:\n%s", strings.Join(m, "\n"))
	}
	// Compare without white space (tabs became spaces) and without the
	// marks fvextra sets at a wrapped line's break (pdftotext reads the
	// hooked arrow as ",→").
	squash := func(s string) string {
		s = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\f' {
				return -1
			}
			return r
		}, s)
		return strings.NewReplacer(",→", "", "⌋", "").Replace(s)
	}
	text := squash(latextest.Text(t, pdf, "-raw"))
	for _, code := range append(codes[:4], long, huge) {
		if !strings.Contains(text, squash(code)) {
			t.Errorf("pdftotext output lacks the code %q:\n%s", code, text)
		}
	}
	for _, want := range []string{"日本語のコメント", "Ελληνικά", "🚀", `plain\{}^^5cinput%#$&~_[]<>|"` + "`"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext output lacks %q:\n%s", want, text)
		}
	}
}

// TestConcurrentUse runs Code from many goroutines at once (run with
// -race): they share only read-only tables and chroma's lexer registry.
func TestConcurrentUse(t *testing.T) {
	langs := []string{"go", "python", "bash", "latex", "c", "rust", "yaml", ""}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				lang := langs[(i+j)%len(langs)]
				if out := Code(lang, "x := {\"a\": 1} // 日本"); !strings.Contains(out, `\oplb{}`) {
					t.Errorf("Code(%q) = %q, want an escaped brace", lang, out)
				}
			}
		}()
	}
	wg.Wait()
}

// TestHighlightLoopingLexer: chroma's JSONata lexer loops for ever on
// some text (a rule that matches nothing and changes no state, so chroma's
// iterator never returns); highlighting gives up after highlightBudget and
// prints the block plain.
func TestHighlightLoopingLexer(t *testing.T) {
	var mixed strings.Builder
	files, _ := filepath.Glob(filepath.Join("testdata", "highlight", "*.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mixed.Write(b)
	}
	t.Parallel()
	code := mixed.String()
	start := time.Now()
	got := Code("jsonata", code)
	if want := Code("no-such-language", code); got != want {
		t.Errorf("Code(jsonata) = %.200q…, want the plain block (does the lexer still loop on this text?)", got)
	}
	t.Logf("Code(jsonata) gave up after %v", time.Since(start))
}

// TestLexerNamesShort: getLexer looks up no name longer than maxLexerName,
// so every lexer must be reachable by a shorter one: each name, alias and
// file name pattern of chroma's lexers is at most maxLexerName bytes, and a
// longer language name finds no lexer (without the 0.8 ms per byte that
// chroma's patterns cost).
func TestLexerNamesShort(t *testing.T) {
	for _, l := range lexers.GlobalLexerRegistry.Lexers {
		c := l.Config()
		for _, name := range append(append([]string{c.Name}, c.Aliases...), c.Filenames...) {
			if len(name) > maxLexerName {
				t.Errorf("lexer %q: name %q is %d bytes, want at most maxLexerName (%d)", c.Name, name, len(name), maxLexerName)
			}
		}
	}
	long := "go" + strings.Repeat("b", 8<<10)
	if l := getLexer(long); l != nil {
		t.Errorf("getLexer(%d bytes) = %s, want none", len(long), l.Config().Name)
	}
	if l := getLexer("go"); l == nil {
		t.Errorf("getLexer(go) = nil, want Go's lexer")
	}
}
