package render

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// corpusDir returns ../shared/corpus; it is required under CI=true.
func corpusDir(t *testing.T) string {
	t.Helper()
	shared := testenv.SharedDir(t, moduleRoot())
	if shared == "" {
		testenv.Missing(t, "../shared/corpus is not present")
	}
	return filepath.Join(shared, "corpus")
}

// TestCorpusDocuments gives every normal corpus document the outcome the
// corpus README lists, judged by pdfinfo, pdftotext and pdffonts.
func TestCorpusDocuments(t *testing.T) {
	dir := corpusDir(t)
	p := newPipeline(t)
	tests := []struct {
		file  string
		check func(t *testing.T, f pdfFacts, res *Result)
	}{
		{"memo.md", func(t *testing.T, f pdfFacts, res *Result) {
			if f.Pages != 1 {
				t.Errorf("memo pages = %d, want 1", f.Pages)
			}
			if res.Runs != 1 {
				t.Errorf("memo TeX runs = %d, want 1 (no TOC, page N of M in one run)", res.Runs)
			}
			for _, s := range []string{"Office move on 14 March", "Facilities team", "fourth floor", "Personal items, plants and mugs", "facilities@example.com"} {
				if !strings.Contains(f.Text, s) {
					t.Errorf("memo text lacks %q", s)
				}
			}
			if !strings.Contains(strings.ToLower(f.Text), "page 1 of 1") {
				t.Errorf("memo footer lacks \"page 1 of 1\"")
			}
			if !regexp.MustCompile(`(?m)^Title:\s+Office move on 14 March$`).MatchString(f.Info) ||
				!regexp.MustCompile(`(?m)^Author:\s+Facilities team$`).MatchString(f.Info) {
				t.Errorf("memo pdfinfo lacks title or author:\n%s", f.Info)
			}
		}},
		{"handbook.md", func(t *testing.T, f pdfFacts, res *Result) {
			for _, s := range []string{
				"Platform Engineering Handbook", "How we build, ship and run services", "Contents",
				"Getting started", "Onboarding checklist", "Service levels", "Dana Kowalski",
				"99.99 %", "platform doctor --verbose", "func Backoff(n int, base, max time.Duration)",
				"def backoff(n: int", "Never deploy on Friday after 15:00", "Retrying is not free",
				"Handover notes go into the on-call log", "Terms used in this handbook",
				"service level objective", "Utilisation is measured as the 95th percentile",
				"living document", "a runbook", "🎉", "Request path through the platform", "Weekly request volume",
			} {
				if s == "🎉" {
					continue // the :tada: shortcode is checked below by its character
				}
				if !strings.Contains(squash(f.Text), squash(s)) {
					t.Errorf("handbook text lacks %q", s)
				}
			}
			if strings.Contains(f.Text, ":tada:") || !strings.Contains(f.Text, "🎉") {
				t.Errorf("handbook :tada: shortcode did not become 🎉")
			}
			if strings.Contains(f.Text, `\n`) {
				t.Errorf("handbook shows a literal \\n; want a line break")
			}
			if res.Runs != 1 {
				t.Errorf("handbook TeX runs = %d, want 1 (the TOC is typeset in the same run)", res.Runs)
			}
			// numberSections: the first section is numbered.
			if !regexp.MustCompile(`1\s+Getting started`).MatchString(f.Text) {
				t.Errorf("handbook sections are not numbered")
			}
		}},
		{"multilingual.md", func(t *testing.T, f pdfFacts, res *Result) {
			for _, s := range []string{
				"Größere Änderungen", "« guillemets »", "Zażółć gęślą jaźń", "Καλώς ήρθατε", "Добро пожаловать",
				"Ґанок, їжак, єнот", "ようこそ", "欢迎", "歡迎", "환영합니다", "ยินดีต้อนรับ",
				"مرحبا بكم", "ברוכים הבאים", "€ £ ¥ ₹ ₽ ₿", "→ ⇒ ↔", "🚀", "✅", "☕",
			} {
				if !strings.Contains(squash(f.Text), squash(s)) {
					t.Errorf("multilingual text lacks %q", s)
				}
			}
			// Devanagari comes out with vowel signs reordered: compare letters.
			for _, r := range "सवगतहमरसहयत" {
				if !strings.ContainsRune(f.Text, r) {
					t.Errorf("multilingual text lacks Devanagari letter %q", r)
				}
			}
			for _, w := range res.Warnings {
				if strings.Contains(w.Message, "Missing character") {
					t.Errorf("missing glyph: %s", w.Message)
				}
			}
		}},
		{"tables.md", func(t *testing.T, f pdfFacts, res *Result) {
			if f.Pages < 3 {
				t.Errorf("tables pages = %d, want the long table to break across pages", f.Pages)
			}
			// The header row repeats on every page of the long table (its
			// "Revenue (EUR)" may wrap in its column).
			if n := strings.Count(squash(f.Text), "Revenue"); n < 3 {
				t.Errorf("long table header appears %d times, want it repeated on each page", n)
			}
			for _, s := range []string{"144", "Kraków"} {
				if !strings.Contains(f.Text, s) {
					t.Errorf("tables text lacks %q", s)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := renderFile(t, p, filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatalf("render %s: %v", tt.file, err)
			}
			f := inspectPDF(t, res.PDF)
			assertFontsEmbedded(t, f.Fonts)
			for _, w := range res.Warnings {
				if strings.Contains(w.Message, "Missing character") {
					t.Errorf("%s: missing glyph: %s", tt.file, w.Message)
				}
			}
			tt.check(t, f, res)
		})
	}
}

// TestCorpusHostile gives every hostile document its listed outcome.
func TestCorpusHostile(t *testing.T) {
	dir := filepath.Join(corpusDir(t), "hostile")
	p := newPipeline(t)
	pwned := "/tmp/outprint-pwned"
	_ = os.Remove(pwned)

	t.Run("tex-injection.md", func(t *testing.T) {
		res, err := renderFile(t, p, filepath.Join(dir, "tex-injection.md"))
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		f := inspectPDF(t, res.PDF)
		text := squash(f.Text)
		for _, s := range []string{
			`\input{/etc/passwd}`, `^^5cinput{/etc/passwd}`, `\immediate\write18{touch /tmp/outprint-pwned}`,
			`\directlua{os.execute("touch /tmp/outprint-pwned")}`, `\catcode`, `100% of # and & and ~ and _ and ^ and { } and $`,
			`\end{document}`, `\section{Heading with commands}`, `\textbf{bold}`, `\item fake item`,
			`link with a run action`, `a & b`, `c \ d`, `\hline`, `\end{Verbatim}`, `\def\evil{1}`, "Footnote use.",
		} {
			if !strings.Contains(text, squash(s)) {
				t.Errorf("text lacks %q literally", s)
			}
		}
		if strings.Contains(f.Text, "root:x:0:0") {
			t.Errorf("the PDF contains /etc/passwd")
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("%s exists: a command ran", pwned)
		}
		for _, w := range res.Warnings {
			if w.Line == 0 {
				t.Errorf("warning without a line: %+v", w)
			}
		}
	})

	t.Run("math-injection.md", func(t *testing.T) {
		_, err := renderFile(t, p, filepath.Join(dir, "math-injection.md"))
		le := limitsError(t, err)
		if le.Kind != limits.KindDocument {
			t.Errorf("kind = %q, want %q", le.Kind, limits.KindDocument)
		}
		if len(le.Problems) != 6 {
			t.Errorf("problems = %d, want 6 (one per formula): %+v", len(le.Problems), le.Problems)
		}
		for _, pr := range le.Problems {
			if pr.Source != limits.SourceDocument || pr.Line < 5 || pr.Line > 10 {
				t.Errorf("problem %+v: want source document and a line of a formula (5-10)", pr)
			}
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("%s exists: a command ran", pwned)
		}
	})

	t.Run("control-chars.md", func(t *testing.T) {
		res, err := renderFile(t, p, filepath.Join(dir, "control-chars.md"))
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		f := inspectPDF(t, res.PDF)
		for _, s := range []string{"NUL:", "BEL:", "ESC:", "DEL:", "BOM:", "invalid UTF-8:", "nonchar:", "end."} {
			if !strings.Contains(f.Text, s) {
				t.Errorf("text lacks %q", s)
			}
		}
	})

	for _, name := range []string{"deep-nesting.md", "huge-line.md"} {
		t.Run(name, func(t *testing.T) {
			res, err := renderFile(t, p, filepath.Join(dir, name))
			if err != nil {
				le := limitsError(t, err)
				if le.Kind != limits.KindDocument || le.Problems[0].Line == 0 {
					t.Fatalf("error %v: want a PDF or a 422 with a line", err)
				}
				return
			}
			f := inspectPDF(t, res.PDF)
			if f.Pages < 1 {
				t.Errorf("pages = %d", f.Pages)
			}
		})
	}

	t.Run("too-large.md", func(t *testing.T) {
		_, err := renderFile(t, p, filepath.Join(dir, "too-large.md"))
		le := limitsError(t, err)
		if le.Kind != limits.KindTooLarge || le.Code() != limits.CodeTooLarge {
			t.Errorf("error = %v, want 413 too_large", err)
		}
	})

	t.Run("many-pages.md", func(t *testing.T) {
		_, err := renderFile(t, p, filepath.Join(dir, "many-pages.md"))
		le := limitsError(t, err)
		if le.Kind != limits.KindTooLarge || le.Code() != limits.CodeTooManyPages {
			t.Errorf("error = %v, want 413 too_many_pages", err)
		}
	})

	t.Run("images.md", func(t *testing.T) {
		_, err := renderFile(t, p, filepath.Join(dir, "images.md"))
		le := limitsError(t, err)
		if le.Kind != limits.KindDocument {
			t.Errorf("kind = %q, want %q", le.Kind, limits.KindDocument)
		}
		lines := map[int]bool{}
		for _, pr := range le.Problems {
			if pr.Source != limits.SourceImage {
				t.Errorf("problem %+v: want source image", pr)
			}
			lines[pr.Line] = true
		}
		for _, l := range []int{3, 5, 7, 9, 11, 13, 15, 17, 19} {
			if !lines[l] {
				t.Errorf("no image problem for line %d: %+v", l, le.Problems)
			}
		}
	})
}
