// Package latextest runs XeLaTeX on a test's document the way outprint
// does (no shell escape, no reading or writing outside the folder, tex's
// font copies on OSFONTDIR) and reads the PDF back with poppler's tools,
// never with our own code. The packages that write LaTeX (markdown,
// script, highlight, texmath) share it; only tests import it.
package latextest

import (
	"bufio"
	"cmp"
	"context"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// Compile runs XeLaTeX once on doc in a fresh folder and returns its log,
// the PDF's path and the run's error. With haltOnError false, TeX goes on
// after errors, so that the log lists all of them.
func Compile(t testing.TB, doc string, haltOnError bool) (log, pdf string, err error) {
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
	cmd.Env = append(os.Environ(), "openin_any=p", "openout_any=p", "MKTEXPK=0", "MKTEXTFM=0", "MKTEXMF=0", FontEnv(t))
	out, runErr := cmd.CombinedOutput()
	logBytes, err := os.ReadFile(filepath.Join(dir, "doc.log"))
	if err != nil {
		t.Fatalf("xelatex wrote no log (%v): %s", runErr, out)
	}
	return string(logBytes), filepath.Join(dir, "doc.pdf"), runErr
}

// MustCompile is Compile that halts on the first error and fails the test
// with the log's error lines.
func MustCompile(t testing.TB, doc string) (log, pdf string) {
	t.Helper()
	log, pdf, err := Compile(t, doc, true)
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

// FontEnv is the environment entry that lets XeLaTeX find tex's font
// copies (the Arabic font the preamble loads by file name).
func FontEnv(t testing.TB) string {
	t.Helper()
	env, err := tex.FontEnv()
	if err != nil {
		t.Fatalf("tex.FontEnv: %v", err)
	}
	return env
}

// Text returns pdftotext's text of pdf, NFKC-normalized (Arabic comes out
// as presentation forms) and without the bidi marks pdftotext puts around
// right-to-left runs, with white space collapsed.
func Text(t testing.TB, pdf string, args ...string) string {
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

// MissingCharacters returns the log's lines that say a font lacked a
// character (XeTeX drops such a character and only logs it).
func MissingCharacters(log string) []string {
	var missing []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "Missing character") {
			missing = append(missing, l)
		}
	}
	return missing
}

// CorpusLines returns the lines of the shared multilingual document,
// moduleRoot being the path from the test's folder to the repository.
func CorpusLines(t testing.TB, moduleRoot string) []string {
	t.Helper()
	shared := testenv.SharedDir(t, moduleRoot)
	if shared == "" {
		testenv.Missing(t, "../shared (the test corpus) is not there")
	}
	f, err := os.Open(filepath.Join(shared, "corpus", "multilingual.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
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

// CheckRTLOrder checks that page i+1 of pdf shows paragraphs[i] with its
// right-to-left words (and numbers) from right to left in reading order:
// pdftotext's word boxes, sorted from right to left, must give the words
// of the paragraph in order. Words without right-to-left letters or
// digits are not compared. Brackets must face inwards.
func CheckRTLOrder(t testing.TB, pdf string, paragraphs []string) {
	t.Helper()
	for i, p := range paragraphs {
		var want []string
		for _, w := range strings.Fields(p) {
			if tok := rtlToken(w, false); tok != "" {
				want = append(want, tok)
			}
		}
		var got []string
		words := Words(t, pdf, i+1)
		slices.SortStableFunc(words, func(a, b Word) int { return cmp.Compare(b.XMin, a.XMin) })
		for _, w := range words {
			tok := rtlToken(w.Text, true)
			if tok == "" {
				continue
			}
			got = append(got, tok)
			if bracketsOutward(w.Text) {
				t.Errorf("paragraph %q: the page shows %q, brackets facing outwards", p, w.Text)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("paragraph %q: words from right to left on the page = %q, want %q", p, got, want)
		}
	}
}

// rtlToken reduces a word to its right-to-left letters (in logical
// order; a word of the page, visual, has them in visual order) or, when
// it has none, its digits.
func rtlToken(word string, visual bool) string {
	var letters, digits []rune
	for _, r := range norm.NFKC.String(word) {
		switch {
		case unicode.In(r, unicode.Hebrew, unicode.Arabic) && unicode.IsLetter(r):
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

// bracketsOutward reports whether a word of a right-to-left page has a
// pair of brackets facing outwards. Seen from the left, an opening
// bracket of the page is the closing one of the text: either way it must
// open to the right.
func bracketsOutward(text string) bool {
	for _, pair := range [][2]rune{{'(', ')'}, {'«', '»'}} {
		open, close := strings.IndexRune(text, pair[0]), strings.IndexRune(text, pair[1])
		if open >= 0 && close >= 0 && open > close {
			return true
		}
	}
	return false
}

// Word is one word of pdftotext -bbox: its box in points from the page's
// top left corner, and its text.
type Word struct {
	XMin, YMin, XMax, YMax float64
	Text                   string
}

var wordRE = regexp.MustCompile(`<word xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">([^<]*)</word>`)

// Words returns the words pdftotext -bbox finds on page (1-based) of pdf,
// in pdftotext's order.
func Words(t testing.TB, pdf string, page int) []Word {
	t.Helper()
	out, err := exec.Command("pdftotext", "-bbox", "-f", strconv.Itoa(page), "-l", strconv.Itoa(page), pdf, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext -bbox: %v", err)
	}
	var words []Word
	for _, m := range wordRE.FindAllStringSubmatch(string(out), -1) {
		var w Word
		for i, p := range []*float64{&w.XMin, &w.YMin, &w.XMax, &w.YMax} {
			*p, _ = strconv.ParseFloat(m[i+1], 64)
		}
		w.Text = html.UnescapeString(m[5])
		words = append(words, w)
	}
	return words
}
