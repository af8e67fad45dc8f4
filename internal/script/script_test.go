package script

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/outprint/outprint/internal/latextest"
	"github.com/outprint/outprint/internal/testenv"
)

func TestSplitRuns(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Run
	}{
		{"empty", "", nil},
		{"latin greek cyrillic stay in the main font", "Größe Καλώς Добро", []Run{{Text: "Größe Καλώς Добро"}}},
		{"decomposed accent stays with its base", "e\u0301t\u00e9", []Run{{Text: "e\u0301t\u00e9"}}},
		{"japanese with punctuation", "日本語: ようこそ。", []Run{{Text: "日本語", Font: "cjk"}, {Text: ": "}, {Text: "ようこそ。", Font: "cjk"}}},
		{"fullwidth punctuation is CJK", "欢迎！", []Run{{Text: "欢迎！", Font: "cjk"}}},
		{"arabic words and the space between are one RTL run", "x مرحبا بكم! y",
			[]Run{{Text: "x "}, {Text: "مرحبا بكم", Font: "arabic", RTL: true}, {Text: "! y"}}},
		{"digits between arabic words join the run", "عام 2024 جديد", []Run{{Text: "عام 2024 جديد", Font: "arabic", RTL: true}}},
		{"arabic comma follows its word", "نعم، لا", []Run{{Text: "نعم، لا", Font: "arabic", RTL: true}}},
		{"hebrew", "ברוכים הבאים.", []Run{{Text: "ברוכים הבאים", Font: "hebrew", RTL: true}, {Text: "."}}},
		{"punctuation the hebrew font lacks stays in the stretch", "הבאים! צוות",
			[]Run{{Text: "הבאים", Font: "hebrew", RTL: true}, {Text: "!", RTL: true}, {Text: " צוות", Font: "hebrew", RTL: true}}},
		{"neutral words in the stretch are reversed and mirrored, digits kept", "אחת (12), שתיים",
			[]Run{{Text: "אחת ", Font: "hebrew", RTL: true}, {Text: ",(12)", RTL: true}, {Text: " שתיים", Font: "hebrew", RTL: true}}},
		{"parentheses around an arabic word", "مرحبا (بكم) فريق",
			[]Run{{Text: "مرحبا ", Font: "arabic", RTL: true}, {Text: ")", RTL: true}, {Text: "بكم", Font: "arabic", RTL: true}, {Text: "(", RTL: true}, {Text: " فريق", Font: "arabic", RTL: true}}},
		{"emoji between hebrew words", "שלום 🚀 עולם",
			[]Run{{Text: "שלום ", Font: "hebrew", RTL: true}, {Text: "🚀", Font: "emoji", RTL: true}, {Text: " עולם", Font: "hebrew", RTL: true}}},
		{"latin word ends the stretch", "שלום Linux עולם",
			[]Run{{Text: "שלום", Font: "hebrew", RTL: true}, {Text: " Linux "}, {Text: "עולם", Font: "hebrew", RTL: true}}},
		{"arabic then hebrew are one stretch", "سلام שלום", []Run{{Text: "سلام ", Font: "arabic", RTL: true}, {Text: "שלום", Font: "hebrew", RTL: true}}},
		{"a number after an RTL word belongs to the stretch", "שלום 1.5% שלום 12:30, x",
			[]Run{{Text: "שלום ", Font: "hebrew", RTL: true}, {Text: "1.5%", RTL: true}, {Text: " שלום ", Font: "hebrew", RTL: true}, {Text: "12:30", RTL: true}, {Text: ", x"}}},
		{"a number before an RTL word does not", "2024 שלום", []Run{{Text: "2024 "}, {Text: "שלום", Font: "hebrew", RTL: true}}},
		{"devanagari with danda", "यहाँ है।", []Run{{Text: "यहाँ", Font: "devanagari"}, {Text: " "}, {Text: "है।", Font: "devanagari"}}},
		{"thai", "ไทย!", []Run{{Text: "ไทย", Font: "thai"}, {Text: "!"}}},
		{"emoji", "go 🚀 now", []Run{{Text: "go "}, {Text: "🚀", Font: "emoji"}, {Text: " now"}}},
		{"variation selector stays with its base in a font that has both", "⚠\uFE0F!", []Run{{Text: "⚠\uFE0F", Font: "emoji"}, {Text: "!"}}},
		{"ZWJ sequence is one cluster", "👩\u200D💻", []Run{{Text: "👩\u200D💻", Font: "emoji"}}},
		{"symbols", "☕ ∑ ≤", []Run{{Text: "☕", Font: "symbolstwo"}, {Text: " "}, {Text: "∑", Font: "math"}, {Text: " "}, {Text: "≤", Font: "math"}}},
		{"bidi controls are dropped", "a\u200Fb\u202Ec\u2066d", []Run{{Text: "abcd"}}},
		{"control characters are dropped, line space kept", "a\x00b\x07c\td\ne\u0085f", []Run{{Text: "abc\td\nef"}}},
		{"private use becomes U+FFFD", "a\uE000b", []Run{{Text: "a\uFFFDb"}}},
		{"invisible format character no font has is dropped", "a\U000E0001b", []Run{{Text: "ab"}}},
		{"variation selector the base font lacks is dropped", "x\uFE0Fy", []Run{{Text: "x\uFE0F", Font: "emoji"}, {Text: "y"}}},
		{"newline inside an RTL run", "مرحبا\nبكم", []Run{{Text: "مرحبا\nبكم", Font: "arabic", RTL: true}}},
		{"leading newline", "\nמים", []Run{{Text: "\n"}, {Text: "מים", Font: "hebrew", RTL: true}}},
		{"invalid UTF-8 is dropped", "a\xffb", []Run{{Text: "ab"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitRuns(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SplitRuns(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestScriptsOf(t *testing.T) {
	tests := []struct {
		in   string
		want Set
	}{
		{"plain English, Ελληνικά, Русский", 0},
		{"日本語 and 한국어", CJK},
		{"مرحبا and שלום", Arabic | Hebrew},
		{"हिन्दी ไทย", Devanagari | Thai},
		{"α ≤ ∞ → ☕", Symbols},
		{"🚀", Emoji},
		{"⚠️", Emoji | Symbols}, // ⚠ alone would be in Symbols2
		{"\u0301", 0},
	}
	for _, tt := range tests {
		if got := Of(tt.in); got != tt.want {
			t.Errorf("Of(%q) = %07b, want %07b", tt.in, got, tt.want)
		}
	}
}

// TestScriptsOfCoversPieces checks the promise of Of: the writer may
// split a text at markup anywhere, and every piece's runs must use fonts
// the whole text's Set load.
func TestScriptsOfCoversPieces(t *testing.T) {
	lines := latextest.CorpusLines(t, "../..")
	lines = append(lines, "x\u0951y", "⚠\uFE0F🇩🇪 👩\u200D💻", "ก\u0E34\u0E48 a\u0301\u0302", "نعم، لا ١٢٣")
	for _, line := range lines {
		whole := Of(line)
		rs := []rune(line)
		for i := 0; i < len(rs); i++ {
			for j := i + 1; j <= len(rs); j++ {
				for _, run := range SplitRuns(string(rs[i:j])) {
					if need := scriptsOfKey(run.Font); need&^whole != 0 {
						t.Fatalf("SplitRuns(%q) has a %q run, but Of(%q) = %07b lacks %07b", string(rs[i:j]), run.Font, line, whole, need)
					}
				}
			}
		}
	}
}

// TestSplitRunsKeepsText checks that runs only regroup the text: nothing
// but the characters SplitRuns documents as dropped goes missing. Neutrals
// inside a right-to-left stretch come in visual order, mirrored, so the
// comparison is of the sorted characters, brackets unmirrored.
func TestSplitRunsKeepsText(t *testing.T) {
	sorted := func(s string) string {
		rs := []rune(s)
		for i, r := range rs {
			if m := mirror(r); m < r {
				rs[i] = m
			}
		}
		slices.Sort(rs)
		return string(rs)
	}
	for _, line := range latextest.CorpusLines(t, "../..") {
		var got strings.Builder
		for _, r := range SplitRuns(line) {
			got.WriteString(r.Text)
		}
		if sorted(got.String()) != sorted(line) {
			t.Errorf("SplitRuns(%q) joined = %q, want the input's characters", line, got.String())
		}
	}
}

// TestEveryRunHasItsGlyphs checks each run against the coverage table, for
// the corpus and for a sweep over the whole Basic Multilingual Plane and
// the emoji planes.
func TestEveryRunHasItsGlyphs(t *testing.T) {
	var sweep strings.Builder
	for r := rune(0x20); r < 0x20000; r++ {
		sweep.WriteRune(r)
		if r%7 == 0 {
			sweep.WriteByte(' ')
		}
	}
	inputs := append(latextest.CorpusLines(t, "../.."), sweep.String())
	for _, in := range inputs {
		for _, run := range SplitRuns(in) {
			f := fontByKey(t, run.Font)
			for _, r := range run.Text {
				if !isLineSpace(r) && coverageOf(r)&fonts[f].set == 0 {
					t.Fatalf("SplitRuns: run %q in font %q has U+%04X, which the font lacks", run.Text, run.Font, r)
				}
			}
		}
	}
}

// TestMainFontHasASCII backs the fast paths that put printable ASCII in
// the main font without asking the table.
func TestMainFontHasASCII(t *testing.T) {
	for r := rune(0x20); r < 0x7F; r++ {
		if coverageOf(r)&covMain == 0 {
			t.Errorf("coverageOf(%q) lacks the main font", r)
		}
	}
}

func fontByKey(t *testing.T, key string) Font {
	t.Helper()
	for i, f := range fonts {
		if f.key == key {
			return Font(i)
		}
	}
	t.Fatalf("unknown font key %q", key)
	return 0
}

func TestFontPreambleDefinesOnlyWhatIsNeeded(t *testing.T) {
	tests := []struct {
		in      Set
		loads   []string
		noLoads []string
	}{
		{0, nil, []string{"\\newfontfamily", "TeXXeTstate"}},
		{CJK, []string{"{Noto Serif CJK JP}"}, []string{"Naskh", "TeXXeTstate"}},
		{Arabic, []string{"{OutprintNaskhArabic}[Extension=.ttf,UprightFont=*-Regular,BoldFont=*-Bold,Script=Arabic]", "\\TeXXeTstate=1"}, []string{"CJK"}},
		{Symbols, []string{"{Noto Sans Math}", "{Noto Sans Symbols}", "{Noto Sans Symbols2}"}, []string{"Symbola"}},
		{Emoji, []string{"{Symbola}"}, []string{"Noto Sans Math"}},
	}
	for _, tt := range tests {
		got := FontPreamble(tt.in)
		for _, m := range FontMacros()[4:] {
			if !strings.Contains(got, "\\newcommand"+m+"[1]") {
				t.Errorf("FontPreamble(%07b) does not define %s", tt.in, m)
			}
		}
		for _, s := range tt.loads {
			if !strings.Contains(got, s) {
				t.Errorf("FontPreamble(%07b) = %q, want it to contain %q", tt.in, got, s)
			}
		}
		for _, s := range tt.noLoads {
			if strings.Contains(got, s) {
				t.Errorf("FontPreamble(%07b) = %q, want no %q", tt.in, got, s)
			}
		}
	}
}

// escapeTestText escapes the few TeX specials of the corpus's plain text;
// the writer's real escaping is not this package's concern here.
func escapeTestText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '#', '$', '%', '&', '_', '{', '}':
			b.WriteString("\\" + string(r))
		case '~', '^', '\\':
			b.WriteString("?")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestWriteRuns(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"a_b", `a\_b`},
		{"x 日本 y", `x \opfontcjk{日本} y`},
		{"x הבאים! צוות y", `x \beginR \opfonthebrew{הבאים}!\opfonthebrew{ צוות}\endR{} y`},
		{"مرحبا بكم", `\beginR \opfontarabic{مرحبا بكم}\endR{}`},
		{"مرحبا, שלום", `\beginR \opfontarabic{مرحبا, }\opfonthebrew{שלום}\endR{}`},
	}
	for _, tt := range tests {
		var b strings.Builder
		WriteRuns(&b, SplitRuns(tt.in), escapeTestText)
		if b.String() != tt.want {
			t.Errorf("WriteRuns(SplitRuns(%q)) = %s, want %s", tt.in, b.String(), tt.want)
		}
	}
}

// TestMultilingualXeLaTeX typesets every line of the multilingual corpus,
// in serif, sans serif and monospace, regular, bold and italic, with the
// runs wrapped as the writer wraps them, and checks that XeTeX found every glyph and that the PDF's text has
// every script, right-to-left phrases in reading order.
func TestMultilingualXeLaTeX(t *testing.T) {
	lines := latextest.CorpusLines(t, "../..")
	whole := strings.Join(lines, "\n")
	var b strings.Builder
	b.WriteString("\\documentclass{article}\n\\usepackage[a4paper,landscape,margin=1cm]{geometry}\n\\usepackage{fontspec}\n")
	b.WriteString("\\setmainfont{Noto Serif}\n\\setsansfont{Noto Sans}\n\\setmonofont{Noto Sans Mono}\n")
	b.WriteString(FontPreamble(Of(whole)))
	b.WriteString("\\parindent=0pt\n\\begin{document}\n")
	// The main font's runs are also set in sans serif (headings) and
	// monospace (code), so all of them must have the glyphs.
	for _, style := range []string{
		"\\normalfont", "\\bfseries", "\\itshape", "\\bfseries\\itshape",
		"\\sffamily", "\\sffamily\\bfseries", "\\sffamily\\itshape", "\\sffamily\\bfseries\\itshape",
		"\\ttfamily", "\\ttfamily\\bfseries",
	} {
		b.WriteString(style + "\n")
		for _, line := range lines {
			if strings.TrimSpace(line) == "" {
				continue
			}
			WriteRuns(&b, SplitRuns(line), escapeTestText)
			b.WriteString("\\par\n")
		}
	}
	b.WriteString("\\end{document}\n")
	log, pdf := latextest.MustCompile(t, b.String())
	if m := latextest.MissingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost %d characters:\n%s", len(m), strings.Join(m, "\n"))
	}
	text := latextest.Text(t, pdf)
	flat := strings.ReplaceAll(text, " ", "")
	for _, want := range []string{
		"مرحبا بكم", "فريق الدعم هنا لمساعدتكم", "ברוכים הבאים", "צוות התמיכה כאן כדי לעזור",
		"Größere Änderungen", "« guillemets »", "Zażółć gęślą jaźń", "Καλώς ήρθατε", "Добро пожаловать", "Ґанок, їжак, єнот",
		"환영합니다! 지원팀이 한국어로 답변해 드립니다.",
		"🚀", "✅", "⚠", "☕", "€ £ ¥ ₹ ₽ ₿", "→ ⇒ ↔", "α + β = γ", "∑", "≤ ∞",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext output lacks %q:\n%s", want, text)
		}
	}
	// Set written without spaces may be broken across lines anywhere.
	for _, want := range []string{
		"ようこそ。サポートチームが日本語でお答えします。", "欢迎!我们的支持团队随时为您服务。", "歡迎!我們的支援團隊隨時為您服務。",
		"ยินดีต้อนรับ", "ทีมสนับสนุนของเรายินดีให้บริการ",
	} {
		if !strings.Contains(flat, norm.NFKC.String(want)) {
			t.Errorf("pdftotext output lacks %q:\n%s", want, text)
		}
	}
	// pdftotext gives Devanagari with vowel signs reordered: compare the
	// letters (consonants and independent vowels) in order.
	letters := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.Is(unicode.Devanagari, r) && unicode.IsLetter(r) {
				return r
			}
			return -1
		}, s)
	}
	for _, line := range lines {
		if l := letters(line); l != "" && !strings.Contains(letters(text), l) {
			t.Errorf("pdftotext output lacks the Devanagari letters %q (has %q)", l, letters(text))
		}
	}
}

// TestRightToLeftOrderXeLaTeX checks on the page, with pdftotext's word
// boxes, that the words of a right-to-left stretch run from right to left
// in reading order, numbers stay left to right, and brackets face the right
// way.
func TestRightToLeftOrderXeLaTeX(t *testing.T) {
	paragraphs := []string{
		"ברוכים הבאים! צוות התמיכה כאן כדי לעזור.",
		"مرحبا بكم! فريق الدعم هنا لمساعدتكم.",
		"אחת (שתיים) 123, שלוש",
		"مرحبا (بكم) «فريق» الدعم 2024",
		"שלום 1.5% (שלום) 12:30, עולם",
	}
	var b strings.Builder
	b.WriteString("\\documentclass{article}\n\\usepackage{fontspec}\n\\setmainfont{Noto Serif}\n")
	b.WriteString(FontPreamble(Of(strings.Join(paragraphs, " "))))
	b.WriteString("\\pagestyle{empty}\\parindent=0pt\n\\begin{document}\n")
	for _, p := range paragraphs {
		WriteRuns(&b, SplitRuns(p), escapeTestText)
		b.WriteString("\\newpage\n")
	}
	b.WriteString("\\end{document}\n")
	log, pdf := latextest.MustCompile(t, b.String())
	if m := latextest.MissingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost %d characters:\n%s", len(m), strings.Join(m, "\n"))
	}
	latextest.CheckRTLOrder(t, pdf, paragraphs)
}

// BenchmarkFontGroupXeLaTeX measures what each font group costs a
// XeLaTeX run: a one-line document with the group's fonts defined but
// unused ("defined"), and with a few characters of each of its fonts set
// ("used"), against the same document without fallback fonts ("none").
// Besides wall time it reports the CPU time of the XeLaTeX process, which
// other work on the machine disturbs less.
//
//	go test -run XXX -bench FontGroup -benchtime 5x ./internal/script
func BenchmarkFontGroupXeLaTeX(b *testing.B) {
	type benchCase struct {
		name    string
		scripts Set
		text    string
	}
	groups := []struct {
		name    string
		scripts Set
		text    string
	}{
		{"cjk", CJK, "日本語"}, {"arabic", Arabic, "مرحبا"}, {"hebrew", Hebrew, "שלום"},
		{"devanagari", Devanagari, "नमस्ते"}, {"thai", Thai, "ไทย"},
		{"symbols", Symbols, "∑ ★ ☕"}, {"emoji", Emoji, "🚀"},
	}
	cases := []benchCase{{"none", 0, ""}}
	var all Set
	var allText strings.Builder
	for _, g := range groups {
		cases = append(cases, benchCase{g.name + "/defined", g.scripts, ""}, benchCase{g.name + "/used", g.scripts, g.text})
		all |= g.scripts
		allText.WriteString(g.text + " ")
	}
	cases = append(cases, benchCase{"all/defined", all, ""}, benchCase{"all/used", all, allText.String()})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var doc strings.Builder
			doc.WriteString("\\documentclass{article}\n\\usepackage{fontspec}\n\\setmainfont{Noto Serif}\n")
			doc.WriteString(FontPreamble(c.scripts))
			doc.WriteString("\\begin{document}\nHello. ")
			WriteRuns(&doc, SplitRuns(c.text), escapeTestText)
			doc.WriteString("\n\\end{document}\n")
			var cpu time.Duration
			for b.Loop() {
				cpu += benchXeLaTeX(b, doc.String())
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// benchXeLaTeX runs XeLaTeX on doc once, failing the benchmark on an
// error, and returns the CPU time the process used.
func benchXeLaTeX(b *testing.B, doc string) time.Duration {
	b.Helper()
	testenv.Require(b, "xelatex")
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "doc.tex"), []byte(doc), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("xelatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "doc.tex")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), latextest.FontEnv(b))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("xelatex: %v\n%s", err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// multilingualMiB is about one MiB (the Markdown size limit) of the
// multilingual corpus, repeated.
func multilingualMiB(b *testing.B) string {
	shared := testenv.SharedDir(b, "../..")
	if shared == "" {
		testenv.Missing(b, "../shared (the test corpus) is not there")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "multilingual.md"))
	if err != nil {
		b.Fatal(err)
	}
	return strings.Repeat(string(src), (1<<20)/len(src))
}

func BenchmarkScriptsOf(b *testing.B) {
	s := multilingualMiB(b)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		Of(s)
	}
}

func BenchmarkSplitRuns(b *testing.B) {
	s := multilingualMiB(b)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		SplitRuns(s)
	}
}

// TestMainFontOnly checks the fast path's promise: where MainOnly(s)
// holds, SplitRuns(s) is s as one left-to-right run in the main font. It
// tries every character up to the emoji planes between Latin letters, and
// the corpus lines; and it checks that the fast path is taken for Latin,
// Greek and Cyrillic text with typographic punctuation.
func TestMainFontOnly(t *testing.T) {
	var inputs []string
	for r := rune(0); r < 0x20000; r++ {
		inputs = append(inputs, "a"+string(r)+"b", string(r)+" ")
	}
	inputs = append(inputs, latextest.CorpusLines(t, "../..")...)
	for _, in := range inputs {
		if in == "" || !MainOnly(in) {
			continue
		}
		if got := SplitRuns(in); len(got) != 1 || got[0] != (Run{Text: in}) {
			t.Errorf("MainOnly(%q) = true, but SplitRuns = %+v", in, got)
		}
	}
	for _, in := range []string{"Größe — “quoted” … Καλώς Добро € £ ©", "naïve café"} {
		if !MainOnly(in) {
			t.Errorf("MainOnly(%q) = false, want true", in)
		}
	}
}

// TestConcurrentUse runs SplitRuns from many goroutines at once (run with
// -race): they share only read-only tables.
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if runs := SplitRuns("مرحبا بكم 日本 🚀"); len(runs) != 5 {
					t.Errorf("SplitRuns = %+v, want 5 runs", runs)
				}
			}
		})
	}
	wg.Wait()
}

func TestSplitPieceRTL(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Run
	}{
		{"arabic alone", "مرحبا بكم", []Run{{Text: "مرحبا بكم", Font: "arabic", RTL: true}}},
		{"one english word", "مرحبا English بكم",
			[]Run{{Text: "مرحبا ", Font: "arabic", RTL: true}, {Text: "English"}, {Text: " بكم", Font: "arabic", RTL: true}}},
		{"english words with the space between", "مرحبا two words بكم",
			[]Run{{Text: "مرحبا ", Font: "arabic", RTL: true}, {Text: "two words"}, {Text: " بكم", Font: "arabic", RTL: true}}},
		{"a number after an english word joins it", "مرحبا version 2 بكم",
			[]Run{{Text: "مرحبا ", Font: "arabic", RTL: true}, {Text: "version 2"}, {Text: " بكم", Font: "arabic", RTL: true}}},
		{"a number after an arabic word stays in the flow", "عام 2024 جديد", []Run{{Text: "عام 2024 جديد", Font: "arabic", RTL: true}}},
		{"brackets around english are mirrored", "مرحبا (English) بكم",
			[]Run{{Text: "مرحبا ", Font: "arabic", RTL: true}, {Text: ")", RTL: true}, {Text: "English"}, {Text: "(", RTL: true}, {Text: " بكم", Font: "arabic", RTL: true}}},
		{"hebrew with a full stop", "שלום עולם.", []Run{{Text: "שלום עולם", Font: "hebrew", RTL: true}, {Text: ".", RTL: true}}},
		{"english at the start", "Linux שלום", []Run{{Text: "Linux"}, {Text: " שלום", Font: "hebrew", RTL: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := SplitPieceRTL(tt.in, None, None)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SplitPieceRTL(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFirstStrong(t *testing.T) {
	tests := []struct {
		in         string
		rtl, found bool
	}{
		{"", false, false},
		{"123 ... !", false, false},
		{"Hello مرحبا", false, true},
		{"مرحبا Hello", true, true},
		{"  (2024) שלום", true, true},
		{"«ادب»", true, true},
		{"日本 مرحبا", false, true},
		{"ދިވެހި", true, true}, // Thaana
	}
	for _, tt := range tests {
		if rtl, found := FirstStrong(tt.in); rtl != tt.rtl || found != tt.found {
			t.Errorf("FirstStrong(%q) = %v, %v, want %v, %v", tt.in, rtl, found, tt.rtl, tt.found)
		}
	}
}
