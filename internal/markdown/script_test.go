package markdown

import (
	"bufio"
	"cmp"
	"context"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"

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
		want Scripts
	}{
		{"plain English, Ελληνικά, Русский", 0},
		{"日本語 and 한국어", ScriptCJK},
		{"مرحبا and שלום", ScriptArabic | ScriptHebrew},
		{"हिन्दी ไทย", ScriptDevanagari | ScriptThai},
		{"α ≤ ∞ → ☕", ScriptSymbols},
		{"🚀", ScriptEmoji},
		{"⚠️", ScriptEmoji | ScriptSymbols}, // ⚠ alone would be in Symbols2
		{"\u0301", 0},
	}
	for _, tt := range tests {
		if got := ScriptsOf(tt.in); got != tt.want {
			t.Errorf("ScriptsOf(%q) = %07b, want %07b", tt.in, got, tt.want)
		}
	}
}

// TestScriptsOfCoversPieces checks the promise of ScriptsOf: the writer may
// split a text at markup anywhere, and every piece's runs must use fonts
// the whole text's Scripts load.
func TestScriptsOfCoversPieces(t *testing.T) {
	lines := corpusLines(t)
	lines = append(lines, "x\u0951y", "⚠\uFE0F🇩🇪 👩\u200D💻", "ก\u0E34\u0E48 a\u0301\u0302", "نعم، لا ١٢٣")
	for _, line := range lines {
		whole := ScriptsOf(line)
		rs := []rune(line)
		for i := 0; i < len(rs); i++ {
			for j := i + 1; j <= len(rs); j++ {
				for _, run := range SplitRuns(string(rs[i:j])) {
					if need := scriptsOfKey(run.Font); need&^whole != 0 {
						t.Fatalf("SplitRuns(%q) has a %q run, but ScriptsOf(%q) = %07b lacks %07b", string(rs[i:j]), run.Font, line, whole, need)
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
	for _, line := range corpusLines(t) {
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
	inputs := append(corpusLines(t), sweep.String())
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

func fontByKey(t *testing.T, key string) fontID {
	t.Helper()
	for i, f := range fonts {
		if f.key == key {
			return fontID(i)
		}
	}
	t.Fatalf("unknown font key %q", key)
	return 0
}

func TestFontPreambleDefinesOnlyWhatIsNeeded(t *testing.T) {
	tests := []struct {
		in      Scripts
		loads   []string
		noLoads []string
	}{
		{0, nil, []string{"\\newfontfamily", "TeXXeTstate"}},
		{ScriptCJK, []string{"{Noto Serif CJK JP}"}, []string{"Naskh", "TeXXeTstate"}},
		{ScriptArabic, []string{"{OutprintNaskhArabic}[Extension=.ttf,UprightFont=*-Regular,BoldFont=*-Bold,Script=Arabic]", "\\TeXXeTstate=1"}, []string{"CJK"}},
		{ScriptSymbols, []string{"{Noto Sans Math}", "{Noto Sans Symbols}", "{Noto Sans Symbols2}"}, []string{"Symbola"}},
		{ScriptEmoji, []string{"{Symbola}"}, []string{"Noto Sans Math"}},
	}
	for _, tt := range tests {
		got := FontPreamble(tt.in)
		for _, m := range FontMacros()[2:] {
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

// corpusLines returns the lines of the shared multilingual document.
func corpusLines(t *testing.T) []string {
	t.Helper()
	shared := testenv.SharedDir(t, "../..")
	if shared == "" {
		testenv.Missing(t, "../shared (the test corpus) is not there")
	}
	f, err := os.Open(filepath.Join(shared, "corpus", "multilingual.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
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

// runXeLaTeX compiles doc in a fresh folder, the way outprint does
// (no shell escape, no reading outside the folder), and returns the log and
// the PDF's path. A TeX error fails the test with the log's error lines.
func runXeLaTeX(t *testing.T, doc string) (log, pdf string) {
	t.Helper()
	log, pdf, err := xelatex(t, doc, true)
	if err != nil {
		var errs []string
		for _, l := range strings.Split(log, "\n") {
			if strings.HasPrefix(l, "!") || strings.HasPrefix(l, "l.") {
				errs = append(errs, l)
			}
		}
		t.Fatalf("xelatex failed: %v\n%s", err, strings.Join(errs, "\n"))
	}
	return log, pdf
}

// xelatex runs XeLaTeX once on doc in a fresh folder and returns its log,
// the PDF's path and the run's error. With haltOnError false, TeX goes on
// after errors, so that the log lists all of them.
func xelatex(t *testing.T, doc string, haltOnError bool) (log, pdf string, err error) {
	t.Helper()
	testenv.Require(t, "xelatex", "pdftotext")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "doc.tex"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-no-shell-escape", "-interaction=nonstopmode", "doc.tex"}
	if haltOnError {
		args = append([]string{"-halt-on-error"}, args...)
	}
	cmd := exec.CommandContext(ctx, "xelatex", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "openin_any=p", "openout_any=p", "MKTEXPK=0", "MKTEXTFM=0", "MKTEXMF=0", fontEnv(t))
	out, runErr := cmd.CombinedOutput()
	logBytes, err := os.ReadFile(filepath.Join(dir, "doc.log"))
	if err != nil {
		t.Fatalf("xelatex wrote no log (%v): %s", runErr, out)
	}
	return string(logBytes), filepath.Join(dir, "doc.pdf"), runErr
}

// pdfText returns pdftotext's text of pdf, NFKC-normalized (Arabic comes
// out as presentation forms) and without the bidi marks pdftotext puts
// around right-to-left runs, with white space collapsed.
func pdfText(t *testing.T, pdf string, args ...string) string {
	t.Helper()
	out, err := exec.Command("pdftotext", append(append([]string{"-enc", "UTF-8"}, args...), pdf, "-")...).Output()
	if err != nil {
		t.Fatalf("pdftotext %s: %v", pdf, err)
	}
	text := norm.NFKC.String(string(out))
	text = strings.Map(func(r rune) rune {
		if r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) {
			return -1
		}
		return r
	}, text)
	return strings.Join(strings.Fields(text), " ")
}

func missingCharacters(log string) []string {
	var missing []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "Missing character") {
			missing = append(missing, l)
		}
	}
	return missing
}

// TestMultilingualXeLaTeX typesets every line of the multilingual corpus,
// in serif, sans serif and monospace, regular, bold and italic, with the
// runs wrapped as the writer wraps them, and checks that XeTeX found every glyph and that the PDF's text has
// every script, right-to-left phrases in reading order.
func TestMultilingualXeLaTeX(t *testing.T) {
	lines := corpusLines(t)
	whole := strings.Join(lines, "\n")
	var b strings.Builder
	b.WriteString("\\documentclass{article}\n\\usepackage[a4paper,landscape,margin=1cm]{geometry}\n\\usepackage{fontspec}\n")
	b.WriteString("\\setmainfont{Noto Serif}\n\\setsansfont{Noto Sans}\n\\setmonofont{Noto Sans Mono}\n")
	b.WriteString(FontPreamble(ScriptsOf(whole)))
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
	log, pdf := runXeLaTeX(t, b.String())
	if m := missingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost %d characters:\n%s", len(m), strings.Join(m, "\n"))
	}
	text := pdfText(t, pdf)
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
	// Scripts written without spaces may be broken across lines anywhere.
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
	b.WriteString(FontPreamble(ScriptsOf(strings.Join(paragraphs, " "))))
	b.WriteString("\\pagestyle{empty}\\parindent=0pt\n\\begin{document}\n")
	for _, p := range paragraphs {
		WriteRuns(&b, SplitRuns(p), escapeTestText)
		b.WriteString("\\newpage\n")
	}
	b.WriteString("\\end{document}\n")
	log, pdf := runXeLaTeX(t, b.String())
	if m := missingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost %d characters:\n%s", len(m), strings.Join(m, "\n"))
	}
	checkRTLOrder(t, pdf, paragraphs)
}

// TestRightToLeftWriterXeLaTeX is TestRightToLeftOrderXeLaTeX for the
// writer: the Arabic and Hebrew lines of the multilingual corpus, and
// right-to-left sentences across Markdown markup and line ends, go through
// Parse, LaTeX and XeLaTeX with the writer's preamble, one paragraph a
// page, and must read from right to left in order.
func TestRightToLeftWriterXeLaTeX(t *testing.T) {
	var paragraphs []string
	for _, line := range corpusLines(t) {
		if strings.ContainsFunc(line, func(r rune) bool { return unicode.In(r, unicode.Arabic, unicode.Hebrew) }) && strings.HasPrefix(line, "- ") {
			paragraphs = append(paragraphs, line)
		}
	}
	if len(paragraphs) != 2 {
		t.Fatalf("multilingual.md has %d Arabic or Hebrew list items, want 2: %q", len(paragraphs), paragraphs)
	}
	paragraphs = append(paragraphs,
		"ברוכים הבאים!\nצוות התמיכה כאן", // a soft line end inside the stretch
		"مرحبا **بكم** في _فريق_ [الدعم](https://example.com) `هنا` اليوم",
		"שלום, **עולם**: אחת (*שתיים*) 12:30, שלוש.",
		"عنوان: **2024** ثم ~~شطب~~ نهاية",
		"Latin first, then **עברית: שלום עולם** and Latin again.",
		"אחת $x^2$ שתיים ![תמונה](missing.png) שלוש",
	)
	src := strings.Join(paragraphs, "\n\n***\n\n")
	d, err := Parse([]byte(src), Options{Dialect: DialectOutline}) // *** is a page break
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := Preamble(Profile{Scripts: d.Scripts()}) + "\\begin{document}\n\\pagestyle{empty}\n" + out.Body + "\\end{document}\n"
	log, pdf := runXeLaTeX(t, doc)
	if m := missingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost %d characters:\n%s", len(m), strings.Join(m, "\n"))
	}
	if strings.Contains(log, `\endL or \endR problem`) {
		t.Errorf("XeTeX found unbalanced \\beginR and \\endR:\n%s", out.Body)
	}
	checkRTLOrder(t, pdf, paragraphs)
}

// checkRTLOrder checks that page i+1 of pdf shows paragraphs[i] on one
// line with its right-to-left words (and numbers) from right to left in
// reading order: pdftotext's word boxes, sorted from right to left, must
// give the words of the paragraph in order. Words without right-to-left
// letters or digits are not compared. Brackets must face inwards.
func checkRTLOrder(t *testing.T, pdf string, paragraphs []string) {
	t.Helper()
	isRTL := func(r rune) bool { return unicode.In(r, unicode.Hebrew, unicode.Arabic) && unicode.IsLetter(r) }
	// token reduces a word to its right-to-left letters (in logical order)
	// or its digits.
	token := func(word string, visual bool) string {
		var letters, digits []rune
		for _, r := range norm.NFKC.String(word) {
			switch {
			case isRTL(r):
				letters = append(letters, r)
			case unicode.IsDigit(r):
				digits = append(digits, r)
			}
		}
		if len(letters) > 0 {
			if visual {
				slices.Reverse(letters)
			}
			return string(letters)
		}
		return string(digits)
	}
	wordRE := regexp.MustCompile(`<word xMin="([0-9.]+)"[^>]*>([^<]*)</word>`)
	for i, p := range paragraphs {
		var want []string
		for _, w := range strings.Fields(p) {
			if tok := token(w, false); tok != "" {
				want = append(want, tok)
			}
		}
		out, err := exec.Command("pdftotext", "-bbox", "-f", strconv.Itoa(i+1), "-l", strconv.Itoa(i+1), pdf, "-").Output()
		if err != nil {
			t.Fatalf("pdftotext -bbox: %v", err)
		}
		type box struct {
			x    float64
			text string
		}
		var boxes []box
		for _, m := range wordRE.FindAllStringSubmatch(string(out), -1) {
			x, _ := strconv.ParseFloat(m[1], 64)
			if text := html.UnescapeString(m[2]); token(text, true) != "" {
				boxes = append(boxes, box{x, text})
			}
		}
		slices.SortFunc(boxes, func(a, b box) int { return cmp.Compare(b.x, a.x) })
		var got []string
		for _, bx := range boxes {
			got = append(got, token(bx.text, true))
			// Seen from the left, an opening bracket of the page is the
			// closing one of the text: either way it must open to the right.
			for _, pair := range []string{"()", "«»"} {
				open, close := strings.IndexRune(bx.text, rune(pair[0])), strings.IndexRune(bx.text, []rune(pair)[1])
				if open >= 0 && close >= 0 && open > close {
					t.Errorf("paragraph %q: the page shows %q, brackets facing outwards", p, bx.text)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("paragraph %q: words from right to left on the page = %q, want %q", p, got, want)
		}
	}
}

// BenchmarkFontGroupXeLaTeX measures what each font group costs a
// XeLaTeX run: a one-line document with the group's fonts defined but
// unused ("defined"), and with a few characters of each of its fonts set
// ("used"), against the same document without fallback fonts ("none").
// Besides wall time it reports the CPU time of the XeLaTeX process, which
// other work on the machine disturbs less.
//
//	go test -run XXX -bench FontGroup -benchtime 5x ./internal/markdown
func BenchmarkFontGroupXeLaTeX(b *testing.B) {
	type benchCase struct {
		name    string
		scripts Scripts
		text    string
	}
	groups := []struct {
		name    string
		scripts Scripts
		text    string
	}{
		{"cjk", ScriptCJK, "日本語"}, {"arabic", ScriptArabic, "مرحبا"}, {"hebrew", ScriptHebrew, "שלום"},
		{"devanagari", ScriptDevanagari, "नमस्ते"}, {"thai", ScriptThai, "ไทย"},
		{"symbols", ScriptSymbols, "∑ ★ ☕"}, {"emoji", ScriptEmoji, "🚀"},
	}
	cases := []benchCase{{"none", 0, ""}}
	var all Scripts
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
	cmd.Env = append(os.Environ(), fontEnv(b))
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
		ScriptsOf(s)
	}
}

func BenchmarkSplitRuns(b *testing.B) {
	s := multilingualMiB(b)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		SplitRuns(s)
	}
}

// TestMainFontOnly checks the fast path's promise: where mainFontOnly(s)
// holds, SplitRuns(s) is s as one left-to-right run in the main font. It
// tries every character up to the emoji planes between Latin letters, and
// the corpus lines; and it checks that the fast path is taken for Latin,
// Greek and Cyrillic text with typographic punctuation.
func TestMainFontOnly(t *testing.T) {
	var inputs []string
	for r := rune(0); r < 0x20000; r++ {
		inputs = append(inputs, "a"+string(r)+"b", string(r)+" ")
	}
	inputs = append(inputs, corpusLines(t)...)
	for _, in := range inputs {
		if in == "" || !mainFontOnly(in) {
			continue
		}
		if got := SplitRuns(in); len(got) != 1 || got[0] != (Run{Text: in}) {
			t.Errorf("mainFontOnly(%q) = true, but SplitRuns = %+v", in, got)
		}
	}
	for _, in := range []string{"Größe — “quoted” … Καλώς Добро € £ ©", "naïve café"} {
		if !mainFontOnly(in) {
			t.Errorf("mainFontOnly(%q) = false, want true", in)
		}
	}
}
