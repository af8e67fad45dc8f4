package render

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// The checks of this file judge how a PDF reads, with pdftotext -bbox:
// table data on the row it belongs to, no line past the text area, no
// heading left alone at the foot of a page.

// bboxWord is one word of pdftotext -bbox, in points from the page's
// top left corner.
type bboxWord struct {
	page                   int
	xMin, yMin, xMax, yMax float64
	text                   string
}

// pageBox is one page of pdftotext -bbox: its size and words.
type pageBox struct {
	width, height float64
	words         []bboxWord
}

var (
	bboxPageRE = regexp.MustCompile(`<page width="([\d.]+)" height="([\d.]+)">`)
	bboxWordRE = regexp.MustCompile(`<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*)</word>`)
)

// bboxPages runs pdftotext -bbox on a PDF file.
func bboxPages(t *testing.T, path string) []pageBox {
	t.Helper()
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", "-bbox", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext -bbox %s: %v", path, err)
	}
	var pages []pageBox
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := bboxPageRE.FindStringSubmatch(line); m != nil {
			w, _ := strconv.ParseFloat(m[1], 64)
			h, _ := strconv.ParseFloat(m[2], 64)
			pages = append(pages, pageBox{width: w, height: h})
			continue
		}
		if m := bboxWordRE.FindStringSubmatch(line); m != nil && len(pages) > 0 {
			var f [4]float64
			for i := range f {
				f[i], _ = strconv.ParseFloat(m[i+1], 64)
			}
			p := &pages[len(pages)-1]
			p.words = append(p.words, bboxWord{len(pages), f[0], f[1], f[2], f[3], html.UnescapeString(m[5])})
		}
	}
	return pages
}

// writePDF writes a rendered PDF into a temporary file.
func writePDF(t *testing.T, pdf []byte, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The text area of the A4 page (geometry in markdown.Preamble: 2.4 cm
// left and right), with half a point for rounding.
const (
	textLeft  = 2.4/2.54*72 - 0.5
	textRight = 595.28 - 2.4/2.54*72 + 0.5
)

// checkInsideText fails for every word that reaches past the text area's
// left or right edge: an overfull line or a table wider than the page.
func checkInsideText(t *testing.T, name string, pages []pageBox) {
	t.Helper()
	bad := 0
	for _, p := range pages {
		for _, w := range p.words {
			if w.xMin < textLeft || w.xMax > textRight {
				if bad++; bad <= 5 {
					t.Errorf("%s page %d: %q spans x %.1f–%.1f, outside the text area %.1f–%.1f", name, w.page, w.text, w.xMin, w.xMax, textLeft, textRight)
				}
			}
		}
	}
}

// sameLine reports whether two words sit on one line.
func sameLine(a, b bboxWord) bool {
	return a.page == b.page && a.yMin-b.yMin < 2 && b.yMin-a.yMin < 2
}

// TestTableRows renders the corpus's sales ledger and checks what a reader
// relies on: every row's number is one word on the line of its city and
// month (it never wraps below its row), no city breaks, the product
// matrix's descriptions get a prose column's share of the width, and no
// table leaves one or two rows alone on a page.
func TestTableRows(t *testing.T) {
	dir := corpusDir(t)
	p := newPipeline(t)
	src, err := os.ReadFile(filepath.Join(dir, "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := renderFile(t, p, filepath.Join(dir, "tables.md"))
	if err != nil {
		t.Fatalf("render tables.md: %v", err)
	}
	path := writePDF(t, res.PDF, "tables.pdf")
	pages := bboxPages(t, path)
	checkInsideText(t, "tables.md", pages)
	var words []bboxWord
	for _, p := range pages {
		words = append(words, p.words...)
	}

	// The ledger: "| 100 | Vilnius | May | 900 | 43,200 | |".
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (\S+) \| (\w+) \| (\d+) \| ([\d,]+) \|`)
	rows := row.FindAllStringSubmatch(string(src), -1)
	if len(rows) < 100 {
		t.Fatalf("tables.md has %d ledger rows, want over 100", len(rows))
	}
	for _, r := range rows {
		var found bool
		for i, w := range words {
			if w.text != r[1] || w.xMin > textLeft+20 {
				continue
			}
			line := map[string]bool{}
			for _, v := range words[max(0, i-10):min(len(words), i+40)] {
				if sameLine(v, w) {
					line[v.text] = true
				}
			}
			if line[r[2]] && line[r[3]] && line[r[4]] && line[r[5]] {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("row %s: no line holds %q, %q, %q, %q and %q as whole words", r[1], r[1], r[2], r[3], r[4], r[5])
		}
	}

	// The product matrix: the Description column's share of the line,
	// from the left edge of "A" (its first word) to the left edge of the
	// Q1 figure on the same line.
	q1 := regexp.MustCompile(`(?m)^\| P-1000 \| [^|]+ \| (\d+) \|`).FindStringSubmatch(string(src))
	if q1 == nil {
		t.Fatal("tables.md has no row P-1000")
	}
	for i, w := range words {
		if w.text != "P-1000" {
			continue
		}
		desc, next := words[i+1], 0.0
		for _, v := range words[i+2:] {
			if sameLine(v, w) && v.text == q1[1] {
				next = v.xMin
				break
			}
		}
		share := (next - desc.xMin) / (textRight - textLeft)
		if share < 0.33 {
			t.Errorf("product matrix: Description column is %.0f %% of the line, want at least 33 %%", share*100)
		}
		t.Logf("product matrix: Description column is %.0f %% of the line", share*100)
		break
	}

	// No page holds fewer than three rows of a table that continues on it
	// or from it: count, per page, the ledger numbers and product codes.
	code := regexp.MustCompile(`^(\d+|P-1\d\d\d)$`)
	for _, pg := range pages {
		n := 0
		for _, w := range pg.words {
			if code.MatchString(w.text) && w.xMin < textLeft+20 {
				n++
			}
		}
		if n > 0 && n < 3 {
			t.Errorf("page %d holds %d table rows, want none or at least 3", pg.words[0].page, n)
		}
	}
}

// TestTableWidths: a small table keeps its natural width instead of
// stretching over the line, and a long URL in a cell breaks inside its
// column instead of running past the text area.
func TestTableWidths(t *testing.T) {
	p := newPipeline(t)
	md := "# Widths\n\n| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n| 10 | 20 | 30 |\n\n" +
		"| Site | Address | Status |\n|---|---|---|\n" +
		"| Docs | https://docs.example.com/reference/configuration/advanced/networking/proxies/index.html?lang=en#timeouts | up |\n" +
		"| Shop | <https://shop.example.com/catalogue/categories/hardware/storage/solid-state-drives/enterprise/nvme> | down |\n"
	res, err := p.Do(t.Context(), Request{Name: "widths.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	pages := bboxPages(t, writePDF(t, res.PDF, "widths.pdf"))
	checkInsideText(t, "widths.md", pages)
	for _, w := range pages[0].words {
		if w.text == "30" && w.xMax > textLeft+0.4*(textRight-textLeft) {
			t.Errorf("small table: its last column ends at x %.1f, want it at its natural width (under %.1f)", w.xMax, textLeft+0.4*(textRight-textLeft))
		}
	}
}

// headingKeep is a heading of a Markdown source, by its first words, and
// the first words of what follows it.
type headingKeep struct{ head, next []string }

var wordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

// headingsAndNext returns the ATX headings outside fenced code with the
// first two words of the line of text after each: a paragraph's, a
// table's header, a list item's. A heading followed by an image or a
// formula is left out: an image is one box the heading's \nobreak keeps,
// and a formula's words do not come back as typed.
func headingsAndNext(src string) []headingKeep {
	lines := strings.Split(src, "\n")
	fenced := make([]bool, len(lines))
	fence := ""
	for i, line := range lines {
		trim := strings.TrimSpace(line)
		switch {
		case fence != "":
			fenced[i] = true
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
		case strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~"):
			fence = trim[:3]
		}
	}
	isHeading := func(line string) bool {
		text := strings.TrimLeft(line, "#")
		n := len(line) - len(text)
		return n >= 1 && n <= 6 && strings.HasPrefix(text, " ")
	}
	var out []headingKeep
	for i, line := range lines {
		if fenced[i] || !isHeading(line) {
			continue
		}
		head := wordRE.FindAllString(line, 3)
		var next []string
		for _, l := range lines[i+1:] {
			trim := strings.TrimSpace(l)
			if trim == "" || strings.HasPrefix(trim, ":::") || strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "|--") || strings.HasPrefix(trim, "|:-") {
				continue
			}
			if isHeading(l) || strings.HasPrefix(trim, "![") || strings.HasPrefix(trim, "$$") {
				break
			}
			next = wordRE.FindAllString(l, 2)
			break
		}
		if len(head) > 0 && len(next) == 2 {
			out = append(out, headingKeep{head, next})
		}
	}
	return out
}

// strandedHeadings returns the headings whose following text starts on a
// later page than the heading.
func strandedHeadings(t *testing.T, pages []pageBox, keeps []headingKeep) []string {
	var words []bboxWord
	for _, p := range pages {
		for _, w := range p.words {
			for _, f := range wordRE.FindAllString(w.text, -1) {
				words = append(words, bboxWord{w.page, w.xMin, w.yMin, w.xMax, w.yMax, f})
			}
		}
	}
	seq := func(at int, want []string) bool {
		if at+len(want) > len(words) {
			return false
		}
		for k := range want {
			if words[at+k].text != want[k] {
				return false
			}
		}
		return true
	}
	var stranded []string
	from := 0
	for _, k := range keeps {
		found := false
		for i := from; i < len(words) && !found; i++ {
			if !seq(i, k.head) {
				continue
			}
			// A contents entry ends in a page number at the right margin.
			toc := false
			for _, v := range words[i:min(len(words), i+20)] {
				if sameLine(v, words[i]) && v.xMax > textRight-20 {
					if _, err := strconv.Atoi(v.text); err == nil {
						toc = true
					}
				}
			}
			if toc {
				continue
			}
			for j := i + len(k.head); j < min(len(words), i+400); j++ {
				if seq(j, k.next) {
					found = true
					from = i + 1
					if words[j].page != words[i].page {
						stranded = append(stranded, fmt.Sprintf("page %d: %q (its text %q starts on page %d)",
							words[i].page, strings.Join(k.head, " "), strings.Join(k.next, " "), words[j].page))
					}
					break
				}
			}
		}
		if !found {
			t.Logf("heading %q with text %q not found in the PDF", strings.Join(k.head, " "), strings.Join(k.next, " "))
		}
	}
	return stranded
}

// TestHeadingsKeepTheirText: no heading of the corpus documents or the
// showcase is the last line of a page.
func TestHeadingsKeepTheirText(t *testing.T) {
	dir := corpusDir(t)
	p := newPipeline(t)
	files := []string{filepath.Join(moduleRoot(), "examples", "showcase.md")}
	for _, name := range []string{"README.md", "handbook.md", "memo.md", "multilingual.md", "tables.md"} {
		files = append(files, filepath.Join(dir, name))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := renderFile(t, p, path)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			pages := bboxPages(t, writePDF(t, res.PDF, "doc.pdf"))
			for _, s := range strandedHeadings(t, pages, headingsAndNext(string(src))) {
				t.Errorf("heading stranded at the foot of %s", s)
			}
		})
	}
}

// TestFooterOneFont: the footer's total ("Page 1 of 2") is set in the
// footer's font and size, not the body's: pdftotext gives its words one
// height, and pdffonts no body font for it.
func TestFooterOneFont(t *testing.T) {
	p := newPipeline(t)
	md := "# Footer\n\n" + strings.Repeat("A paragraph of text that fills pages. ", 150)
	res, err := p.Do(t.Context(), Request{Name: "footer.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	pages := bboxPages(t, writePDF(t, res.PDF, "footer.pdf"))
	for _, pg := range pages {
		n := len(pg.words)
		if n < 4 || pg.words[n-4].text != "Page" || pg.words[n-2].text != "of" {
			t.Fatalf("page %d does not end in the footer: %v", len(pages), pg.words[max(0, n-4):])
		}
		page, total := pg.words[n-4], pg.words[n-1]
		if h1, h2 := page.yMax-page.yMin, total.yMax-total.yMin; h1-h2 > 0.05 || h2-h1 > 0.05 {
			t.Errorf("page %d footer: %q is %.2f pt high, its total %q %.2f pt: want one font", page.page, page.text, h1, total.text, h2)
		}
	}
}

// TestTextLayer: pdftotext gives back the source text of every script of
// the multilingual corpus document, letter for letter (NFC, spaces
// aside): Devanagari words whole, with their vowel signs in order, Arabic,
// Persian and Urdu as their letters (never presentation forms), and the
// Latin ligature characters as their letters.
func TestTextLayer(t *testing.T) {
	dir := corpusDir(t)
	p := newPipeline(t)
	src, err := os.ReadFile(filepath.Join(dir, "multilingual.md"))
	if err != nil {
		t.Fatal(err)
	}
	// More right-to-left text than the corpus has: lam-alef in all its
	// joinings, ه in every position, and the letters Persian and Urdu add
	// (some of which share glyphs with Arabic ones in the font).
	extra := []string{
		"لا سلام إلا الحق، والعلم له. كتابه وبها ومنه.",
		"سلام دنیا! این یک آزمایش است. گچ ژاله پژوهش کوچک.",
		"خوش آمدید، ہماری ٹیم آپ کی مدد کے لیے یہاں ہے۔ ڈاک بڑا.",
	}
	md := string(src) + "\nLigatures: \ufb00 \ufb01 \ufb02 \ufb03 \ufb04 in office.\n"
	for _, e := range extra {
		md += "\n" + e + "\n"
	}
	res, err := p.Do(t.Context(), Request{Name: "multilingual.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", writePDF(t, res.PDF, "ml.pdf"), "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	text := squash(bidiMarks.Replace(norm.NFC.String(string(out))))
	item := regexp.MustCompile(`(?m)^- \*\*(.+?):?\s*:?\*\* (.+)$`)
	rtl := regexp.MustCompile(`[\p{Arabic}\p{Hebrew}]`)
	letterRE := regexp.MustCompile(`[\p{L}\p{M}]+`)
	letters := func(s string) string {
		return strings.Join(letterRE.FindAllString(s, -1), "")
	}
	if pf := regexp.MustCompile(`[\x{FB50}-\x{FDFF}\x{FE70}-\x{FEFF}]`).FindAllString(text, 5); len(pf) > 0 {
		t.Errorf("pdftotext gives Arabic presentation forms %q, want letters", pf)
	}
	items := item.FindAllStringSubmatch(string(src), -1)
	if len(items) < 10 {
		t.Fatalf("multilingual.md has %d language items, want at least 10", len(items))
	}
	var want []string
	for _, m := range items {
		want = append(want, m[1], m[2])
	}
	// Not tested: "الله", whose last three letters are one ligature
	// glyph, which poppler writes in reverse in right-to-left text (هلل).
	want = append(want, extra...)
	gotLetters := letters(text)
	for _, s := range want {
		w := squash(norm.NFC.String(strings.TrimRight(s, ":")))
		got := text
		if rtl.MatchString(s) {
			// Right to left: poppler places the neutrals at the
			// stretch's ends by its own rules; compare the letters.
			if lw := letters(w); !strings.Contains(gotLetters, lw) {
				t.Errorf("pdftotext lacks the letters of %q", s)
			}
			continue
		}
		if !strings.Contains(got, w) {
			t.Errorf("pdftotext lacks %q", s)
		}
	}
	if !strings.Contains(text, "Ligatures:fffiflffifflinoffice.") {
		t.Errorf("ligature characters do not extract as their letters: %q", text[strings.LastIndex(text, "Ligatures"):])
	}
}

// TestTypefaces: one typeface system, by pdffonts: formulas in TeX Gyre
// Schola Math (no Computer Modern or Latin Modern beside Noto Serif), and
// Devanagari, Thai and Hebrew inside serif text in the Noto Serif faces.
func TestTypefaces(t *testing.T) {
	p := newPipeline(t)
	md := "# Faces\n\nInline $E = mc^2$ and a sum $\\sum_{i=1}^n i$.\n\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n" +
		"Hindi दुनिया, Thai ภาษาไทย, Hebrew שלום in serif text.\n"
	res, err := p.Do(t.Context(), Request{Name: "faces.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	f := inspectPDF(t, res.PDF)
	for _, want := range []string{"TeXGyreScholaMath", "NotoSerifDevanagari", "NotoSerifThai", "NotoSerifHebrew"} {
		if !strings.Contains(f.Fonts, want) {
			t.Errorf("pdffonts lacks %s:\n%s", want, f.Fonts)
		}
	}
	for _, unwanted := range []string{"CMR", "CMMI", "CMSY", "CMEX", "LMRoman", "LMMath", "NotoSansDevanagari", "NotoSansThai", "NotoSansHebrew"} {
		if strings.Contains(f.Fonts, unwanted) {
			t.Errorf("pdffonts lists %s:\n%s", unwanted, f.Fonts)
		}
	}
}

// TestEveryScript: each script Debian's Noto fonts cover prints in its
// Noto font and comes back from pdftotext as typed; a script no installed
// font has fails the render with an error that names it.
func TestEveryScript(t *testing.T) {
	p := newPipeline(t)
	samples := []struct{ script, text, font string }{
		{"Bengali", "বাংলা ভাষা", "NotoSerifBengali"},
		{"Tamil", "தமிழ் மொழி", "NotoSerifTamil"},
		{"Malayalam", "മലയാളം ഭാഷ", "NotoSerifMalayalam"},
		{"Kannada", "ಕನ್ನಡ ಭಾಷೆ", "NotoSerifKannada"},
		{"Telugu", "తెలుగు భాష", "NotoSerifTelugu"},
		{"Gujarati", "ગુજરાતી ભાષા", "NotoSerifGujarati"},
		{"Gurmukhi", "ਪੰਜਾਬੀ ਭਾਸ਼ਾ", "NotoSerifGurmukhi"},
		{"Oriya", "ଓଡ଼ିଆ ଭାଷା", "NotoSansOriya"},
		{"Sinhala", "සිංහල භාෂාව", "NotoSerifSinhala"},
		{"Khmer", "ភាសាខ្មែរ", "NotoSerifKhmer"},
		{"Lao", "ພາສາລາວ", "NotoSerifLao"},
		{"Myanmar", "မြန်မာဘာသာ", "NotoSerifMyanmar"},
		{"Georgian", "ქართული ენა", "NotoSerifGeorgian"},
		{"Armenian", "Հայերեն լեզու", "NotoSerifArmenian"},
		{"Ethiopic", "አማርኛ ቋንቋ", "NotoSerifEthiopic"},
	}
	var md strings.Builder
	md.WriteString("# Scripts\n\n")
	for _, s := range samples {
		fmt.Fprintf(&md, "- %s: %s\n", s.script, s.text)
	}
	res, err := p.Do(t.Context(), Request{Name: "scripts.md", Markdown: []byte(md.String())}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	f := inspectPDF(t, res.PDF)
	text := squash(norm.NFC.String(inspectPDFPath(t, writePDF(t, res.PDF, "scripts.pdf"))))
	for _, s := range samples {
		if !strings.Contains(text, squash(s.script+": "+s.text)) {
			t.Errorf("pdftotext lacks %s %q", s.script, s.text)
		}
		if !strings.Contains(f.Fonts, s.font) {
			t.Errorf("pdffonts lacks %s for %s", s.font, s.script)
		}
	}
	if strings.Contains(text, "\ufffd") {
		t.Errorf("pdftotext has a replacement character")
	}

	_, err = p.Do(t.Context(), Request{Name: "cuneiform.md", Markdown: []byte("# Old\n\nCuneiform: \U00012000\U00012001.\n")}, nil)
	if err == nil {
		t.Fatal("render of Cuneiform text succeeded, want an error naming the script")
	}
	le := limitsError(t, err)
	if len(le.Problems) != 1 || !strings.Contains(le.Problems[0].Message, "Cuneiform") || le.Problems[0].Line != 3 {
		t.Errorf("problems = %+v, want one at line 3 naming Cuneiform", le.Problems)
	}
}

// TestRhythm: a highlighted line keeps the paragraph's line spacing, and
// two display formulas in a row do not touch.
func TestRhythm(t *testing.T) {
	p := newPipeline(t)
	words := strings.Repeat("plain words that fill the line ", 6)
	md := "# Rhythm\n\n" + words + "then ==a highlighted phrase== and " + words + "\n\n$$a = b$$\n\n$$c = d$$\n"
	res, err := p.Do(t.Context(), Request{Name: "rhythm.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	pages := bboxPages(t, writePDF(t, res.PDF, "rhythm.pdf"))
	var lines []float64
	var a, c bboxWord
	for _, w := range pages[0].words {
		switch norm.NFKC.String(w.text) {
		case "a=b":
			a = w
		case "c=d":
			c = w
		}
		if w.text != "plain" && w.text != "highlighted" {
			continue
		}
		if len(lines) == 0 || w.yMin-lines[len(lines)-1] > 2 {
			lines = append(lines, w.yMin)
		}
	}
	if len(lines) < 4 {
		t.Fatalf("paragraph has %d lines, want at least 4", len(lines))
	}
	for i := 2; i < len(lines); i++ {
		if d0, d := lines[1]-lines[0], lines[i]-lines[i-1]; d-d0 > 0.1 || d0-d > 0.1 {
			t.Errorf("line %d is %.2f pt below the one before, line 1 %.2f pt: want even spacing", i+1, d, d0)
		}
	}
	if a.text == "" || c.text == "" {
		t.Fatalf("formulas not found in the text layer")
	}
	if gap := c.yMin - a.yMax; gap < 4 {
		t.Errorf("display formulas %.1f pt apart, want a gap", gap)
	}
}

// TestWarmPoolTypefaces: the preamble, unicode-math and the script fonts
// included, dumps into a warm process's format and typesets there as it
// does cold.
func TestWarmPoolTypefaces(t *testing.T) {
	testenv.Require(t, "xelatex", "pdffonts")
	pool, err := tex.NewPool(tex.PoolConfig{Runner: tex.RunnerConfig{TempDir: t.TempDir()}, Max: 1, Formats: testFormats(t)})
	if err != nil {
		t.Fatalf("tex.NewPool: %v", err)
	}
	defer func() { _ = pool.Close(context.Background()) }()
	p := New(Config{Engine: pool, TempDir: t.TempDir()})
	md := "# Warm\n\nInline $x^2$ and हिन्दी and தமிழ்.\n"
	for i := 0; i < 2; i++ { // the second render finds the process warm
		res, err := p.Do(t.Context(), Request{Name: "warm.md", Markdown: []byte(md)}, nil)
		if err != nil {
			t.Fatalf("render %d: %v", i, err)
		}
		f := inspectPDF(t, res.PDF)
		for _, want := range []string{"TeXGyreScholaMath", "NotoSerifDevanagari", "NotoSerifTamil"} {
			if !strings.Contains(f.Fonts, want) {
				t.Errorf("render %d: pdffonts lacks %s", i, want)
			}
		}
	}
}

// TestSmallThings: inline code keeps its monospace spaces, a URL breaks
// after a slash, point or hyphen and never gets a hyphen of its own,
// Korean breaks between words, and a document of three headings gets no
// table of contents.
func TestSmallThings(t *testing.T) {
	p := newPipeline(t)
	korean := strings.Repeat("환영합니다! 지원팀이 한국어로 답변해 드립니다. ", 6)
	words := map[string]bool{}
	for _, w := range strings.Fields(korean) {
		words[w] = true
	}
	md := "# Zero\n\n# One\n\n## Two\n\n## Three\n\nRun `sync  --dry-run` and `ab` now. See https://docs.example.com/reference/configuration/advanced/networking/proxies/index.html?lang=en#timeouts and more words after it, " +
		"https://docs.example.com/reference/configuration/advanced/networking/proxies/index.html?lang=en#timeouts again.\n\n" + korean + "\n"
	res, err := p.Do(t.Context(), Request{Name: "small.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	path := writePDF(t, res.PDF, "small.pdf")
	text := inspectPDFPath(t, path)
	if strings.Contains(text, "Contents") {
		t.Errorf("a document of three headings has a table of contents")
	}
	pages := bboxPages(t, path)
	var sync, dry, ab bboxWord
	for _, w := range pages[0].words {
		switch w.text {
		case "sync":
			sync = w
		case "--dry-run":
			dry = w
		case "ab":
			ab = w
		}
	}
	char := (ab.xMax - ab.xMin) / 2
	if gap := dry.xMin - sync.xMax; char == 0 || gap < 1.8*char || gap > 2.2*char {
		t.Errorf("two spaces of inline code are %.1f pt wide, want two characters (%.1f pt)", gap, 2*char)
	}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.LastIndex(line, "https://"); i >= 0 && !strings.HasSuffix(line, "#timeouts") && !strings.Contains(line[i:], " ") {
			if end := line[len(line)-1]; end != '/' && end != '.' && end != '-' {
				t.Errorf("URL broken after %q, want a break after / . or -", line[i:])
			}
		}
		if f := strings.Fields(line); len(f) > 0 && strings.ContainsRune(line, '니') {
			// Every line of the Korean paragraph starts and ends with
			// whole words.
			if !words[f[0]] || !words[f[len(f)-1]] {
				t.Errorf("Korean line breaks inside a word: %q", line)
			}
		}
	}
}

// TestGitHubMarkdown: HTML comments print nowhere, the allowed inline tags
// become formatting and other HTML prints as typed, GitHub's heading
// anchors (underscores, non-ASCII letters, -1 for a repeat) are link
// targets, and literal HTML keeps its straight apostrophes.
func TestGitHubMarkdown(t *testing.T) {
	p := newPipeline(t)
	md := "# GitHub\n\n<!-- block comment -->\n\nText <!-- inline comment --> H<sub>2</sub>O, <kbd>Ctrl</kbd>, <mark>marked</mark>, <span>span stays</span>.\n\n" +
		"<div>echo '>'</div>\n\n## extension tex_math_dollars\n\n## Café crème\n\n## Café crème\n\n" +
		"See [ext](#extension-tex_math_dollars), [café](#café-crème), [second](#café-crème-1).\n"
	res, err := p.Do(t.Context(), Request{Name: "gh.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("warning: %s", w.Message)
	}
	f := inspectPDF(t, res.PDF)
	text := strings.Join(strings.Fields(f.Text), " ")
	for _, bad := range []string{"comment", "<sub>", "<kbd>", "<mark>", "’>’"} {
		if strings.Contains(text, bad) {
			t.Errorf("pdftotext has %q: %s", bad, text)
		}
	}
	for _, want := range []string{"H2", "Ctrl", "marked", "<span>span stays</span>", "echo '>'"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext lacks %q: %s", want, text)
		}
	}
	// Three internal links: the PDF's link annotations with a destination.
	out, err := exec.Command("qpdf", "--qdf", "--object-streams=disable", writePDF(t, res.PDF, "gh.pdf"), "-").Output()
	if err != nil {
		t.Fatalf("qpdf: %v", err)
	}
	if n := strings.Count(string(out), "/Subtype /Link"); n != 3 {
		t.Errorf("PDF has %d link annotations, want 3", n)
	}
}

// TestFootnotes: no blank line between two notes, and a note's second
// paragraph starts where its first does.
func TestFootnotes(t *testing.T) {
	p := newPipeline(t)
	md := "# Notes\n\nText with a note[^a] and another[^b].\n\n[^a]: Alpha note.\n[^b]: Bravo note.\n\n    Charlie paragraph.\n"
	res, err := p.Do(t.Context(), Request{Name: "notes.md", Markdown: []byte(md)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	at := map[string]bboxWord{}
	for _, w := range bboxPages(t, writePDF(t, res.PDF, "notes.pdf"))[0].words {
		at[w.text] = w
	}
	a, b, c := at["Alpha"], at["Bravo"], at["Charlie"]
	if a.text == "" || b.text == "" || c.text == "" {
		t.Fatalf("notes not found: %v", at)
	}
	if gap, line := b.yMin-a.yMin, c.yMin-b.yMin; gap > line*1.05 {
		t.Errorf("notes %.1f pt apart, lines of one note %.1f pt: want no blank line between notes", gap, line)
	}
	if d := c.xMin - b.xMin; d > 0.5 || d < -0.5 {
		t.Errorf("second paragraph starts at x %.1f, first at %.1f: want them aligned", c.xMin, b.xMin)
	}
}

// TestNoBookmarksPanel: a PDF without headings has no bookmarks, so it
// does not ask the viewer to open the bookmarks panel; one with headings
// does.
func TestNoBookmarksPanel(t *testing.T) {
	p := newPipeline(t)
	for _, c := range []struct{ md, want string }{
		{"Just a paragraph.\n", "/PageMode /UseNone"},
		{"# Title\n\n## A heading\n\nA paragraph.\n", "/PageMode /UseOutlines"},
	} {
		res, err := p.Do(t.Context(), Request{Name: "panel.md", Markdown: []byte(c.md)}, nil)
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		out, err := exec.Command("qpdf", "--qdf", "--object-streams=disable", writePDF(t, res.PDF, "panel.pdf"), "-").Output()
		if err != nil {
			t.Fatalf("qpdf: %v", err)
		}
		if !strings.Contains(string(out), c.want) || strings.Count(string(out), "/PageMode") != 1 {
			t.Errorf("%q: the catalog lacks %s (or has two page modes)", c.md, c.want)
		}
	}
}
