package markdown

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// typeset writes src with the default profile, compiles it with XeLaTeX
// and returns the PDF's path.
func typeset(t *testing.T, name, src string) string {
	t.Helper()
	d, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatalf("Parse(%s) = %v", name, err)
	}
	out, err := d.LaTeX(Meta{}, nil)
	if err != nil {
		t.Fatalf("LaTeX(%s) = %v", name, err)
	}
	pdf, _ := compileTeX(t, t.TempDir(), name, Preamble(Profile{})+"\\begin{document}\n"+out.Body+"\\end{document}\n")
	return pdf
}

var bboxWord = regexp.MustCompile(`<word xMin="([0-9.]+)" yMin="[0-9.]+" xMax="([0-9.]+)"`)

// TestXeLaTeXBreakPoints: runs without a space, made of many pieces of
// text (`[a` repeated: every bracket is a node of its own) or of
// punctuation alone, break at the right margin. A 600-byte run of `[a`
// ran off the page, 1 KB crashed XeTeX, 2 KB stopped it with "Missing
// number".
func TestXeLaTeXBreakPoints(t *testing.T) {
	testenv.Require(t, "xelatex", "pdftotext")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	src := strings.Repeat("[a", 300) + "\n\n" + strings.Repeat("[a", 500) + "\n\n" + strings.Repeat("[a", 1000) + "\n\n" +
		strings.Repeat("!", 2000) + "\n\n" + strings.Repeat("-.", 1000) + "\n\n" + strings.Repeat("*[", 1000) + "\n"
	pdf := typeset(t, "breaks", src)
	out, err := exec.Command("pdftotext", "-bbox", pdf, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext -bbox: %v", err)
	}
	words := bboxWord.FindAllStringSubmatch(string(out), -1)
	if len(words) < 20 {
		t.Fatalf("pdftotext -bbox found %d words, want the runs broken into many lines", len(words))
	}
	for _, w := range words {
		xMax, _ := strconv.ParseFloat(w[2], 64)
		if xMax > 595.28-50 { // A4, inside the right margin
			t.Errorf("a line ends at x=%.0f pt, past the right margin (page width 595 pt)", xMax)
			break
		}
	}
	text := pdftotext(t, pdf)
	if n := strings.Count(text, "["); n != 300+500+1000+1000 {
		t.Errorf("pdftotext shows %d brackets, want %d", n, 2800)
	}
}

// TestXeLaTeXItemStarts: a list item, quote or toggle that starts with a
// notice, or with a heading right after another heading, typesets (both
// stopped XeLaTeX with "missing \item") and shows its text.
func TestXeLaTeXItemStarts(t *testing.T) {
	testenv.Require(t, "xelatex", "pdftotext")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	src := "1. :::info\n   noticeone\n   :::\n2. itemtwo\n\n" +
		"## Alpha\n\n> ## Bravo\n>\n> quoted\n\n" +
		"## Charlie\n\n- ## Delta\n\n  itemtext\n\n" +
		"## Echo\n\n+++ Toggle\n## Foxtrot\n+++\n\n" +
		"- :::warning\n  noticetwo\n  :::\n"
	text := pdftotext(t, typeset(t, "itemstarts", src))
	for _, w := range []string{"noticeone", "itemtwo", "Alpha", "Bravo", "quoted", "Charlie", "Delta", "itemtext", "Echo", "Toggle", "Foxtrot", "noticetwo"} {
		if !strings.Contains(text, w) {
			t.Errorf("pdftotext lacks %q:\n%s", w, text)
		}
	}
}

// TestXeLaTeXHeadingRuns: a run of headings taller than a page breaks
// across pages: 40 empty `##` headings lost everything after about the
// 26th below the first page's bottom edge (footers said "Page 2 of 1").
// Every word reaches the PDF and every footer's total is the page count.
func TestXeLaTeXHeadingRuns(t *testing.T) {
	testenv.Require(t, "xelatex", "pdftotext", "pdfinfo")
	if testing.Short() {
		t.Skip("compiles TeX: not under testing.Short")
	}
	src := "intro\n\n" + strings.Repeat("##\n\n", 40) + "middleword\n\n" + strings.Repeat("### h\n", 150) + "lastword\n"
	pdf := typeset(t, "headingruns", src)
	info, err := exec.Command("pdfinfo", pdf).Output()
	if err != nil {
		t.Fatal(err)
	}
	pages := regexp.MustCompile(`Pages:\s+(\d+)`).FindStringSubmatch(string(info))
	if pages == nil {
		t.Fatalf("pdfinfo: no page count:\n%s", info)
	}
	text := pdftotext(t, pdf)
	for _, w := range []string{"intro", "middleword", "lastword"} {
		if !strings.Contains(text, w) {
			t.Errorf("pdftotext lacks %q", w)
		}
	}
	n := 0
	for _, w := range strings.Fields(text) {
		if w == "h" {
			n++
		}
	}
	if n != 150 {
		t.Errorf("pdftotext shows %d headings h, want 150", n)
	}
	for _, m := range regexp.MustCompile(`Page (\d+) of (\d+)`).FindAllStringSubmatch(text, -1) {
		if m[2] != pages[1] {
			t.Errorf("footer %q, want the total %s (pdfinfo)", m[0], pages[1])
			break
		}
	}
}
