package render

import (
	"cmp"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// The checks of this file read right-to-left pages as a reader does, with
// pdftotext: where each word sits (-bbox) and what copying a line gives.

// textRightEdge is the right margin of the A4 page (markdown.Preamble's
// geometry: 2.4 cm), textLeftEdge the left one.
const (
	textRightEdge = 595.28 - 2.4/2.54*72
	textLeftEdge  = 2.4 / 2.54 * 72
)

// letters reduces a word to its letters and digits, NFKC-normalized
// (Arabic comes out of pdftotext as presentation forms).
func letters(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, norm.NFKC.String(s))
}

func reversed(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// findWords returns the words of the pages that are word (as typed),
// pdftotext giving right-to-left words in the order of their glyphs.
func findWords(pages []pageBox, word string) []bboxWord {
	want := letters(word)
	var out []bboxWord
	for _, p := range pages {
		for _, w := range p.words {
			if got := letters(w.text); got != "" && (got == want || reversed(got) == want) {
				out = append(out, w)
			}
		}
	}
	return out
}

// oneWord returns the first word of the pages that is word, failing the
// test when there is none.
func oneWord(t *testing.T, pages []pageBox, word string) bboxWord {
	t.Helper()
	ws := findWords(pages, word)
	if len(ws) == 0 {
		t.Fatalf("pdftotext -bbox finds no word %q", word)
	}
	return ws[0]
}

// lineOf returns the words on w's line, from left to right.
func lineOf(pages []pageBox, w bboxWord) []bboxWord {
	var line []bboxWord
	for _, x := range pages[w.page-1].words {
		if sameLine(x, w) {
			line = append(line, x)
		}
	}
	slices.SortFunc(line, func(a, b bboxWord) int { return cmp.Compare(a.xMin, b.xMin) })
	return line
}

// rtlCase is what a reader of one right-to-left document checks.
type rtlCase struct {
	doc string
	// atRight are first words of right-to-left lines: each ends at the
	// right margin (within 3 pt).
	atRight []string
	// atLeft are first words of left-to-right lines: each starts at the
	// left margin.
	atLeft []string
	// between are {right, middle, left} words of one line: the middle
	// one (an embedded left-to-right word) sits between the other two,
	// as the bidi algorithm orders them.
	between [][3]string
	// lines are whole lines (list items, short paragraphs): their words
	// from right to left are the line's words in reading order, its last
	// word at its left.
	lines []string
	// bullets are first words of list items whose marker is right of the
	// item (bulletsLeft: left of it).
	bullets, bulletsLeft []string
	// order are words of one line that must run from right to left in
	// this order (a table's columns in a right-to-left document).
	order [][]string
	// copied is text that copying from the PDF gives in reading order.
	copied []string
}

var rtlCases = []rtlCase{
	{
		doc:     "rtl-arabic.md",
		atRight: []string{"مرحبا", "يعمل", "المقدمة"},
		between: [][3]string{{"كلمة", "English", "واحدة"}, {"نظام", "outprint", "الجديد"}},
		lines:   []string{"تحديث الموقع قبل نهاية الشهر", "جمع البيانات", "تحليل النتائج", "إرسال التقرير إلى فريق الدعم"},
		bullets: []string{"مراجعة", "تحديث", "إرسال", "جمع", "تحليل", "كتابة"},
		order:   [][]string{{"المرحلة", "الموعد", "المسؤول"}, {"التنفيذ", "فبراير", "أحمد"}},
		copied: []string{
			"مرحبا بالعالم، هذه فقرة عربية فيها كلمة English واحدة في الوسط.",
			"يعمل الفريق منذ عام 2024 على نظام outprint الجديد",
			"Page 1 of 2",
		},
	},
	{
		doc:     "rtl-hebrew.md",
		atRight: []string{"ברוכים", "דרישות"},
		atLeft:  []string{"make"},
		between: [][3]string{{"שרת", "Linux", "בכמה"}, {"את", "outprint", "על"}, {"עם", "12", "Debian"}},
		lines:   []string{"חיבור לאינטרנט", "הרשאות מנהל", "מורידים את הקוד"},
		bullets: []string{"חיבור", "הרשאות", "מורידים", "מריצים"},
		order:   [][]string{{"רכיב", "גרסה"}, {"Live", "TeX"}},
		copied:  []string{"המסמך הזה מסביר איך להתקין את outprint על שרת Linux", "make run"},
	},
	{
		doc:     "rtl-persian.md",
		atRight: []string{"این", "خلاصه"},
		between: [][3]string{{"واژه", "PDF", "دارد"}},
		lines:   []string{"بهبود سرعت چاپ"},
		bullets: []string{"بهبود", "نوشتن"},
		copied:  []string{"این گزارش پیشرفت پروژه را در ماه گذشته نشان می\u200cدهد.", "یک جمله کوتاه با واژه PDF دارد."},
	},
	{
		doc:     "rtl-urdu.md",
		atRight: []string{"تعارف"},
		between: [][3]string{{"لفظ", "Server", "موجود"}},
		bullets: []string{"تیاری", "درستی", "منصوبہ"},
	},
	{
		doc:         "rtl-mixed.md",
		atRight:     []string{"مرحبا", "ברוכים"},
		atLeft:      []string{"This", "Back"},
		lines:       []string{"بند عربي أول"},
		bullets:     []string{"بند"},
		bulletsLeft: []string{"An", "Another"},
		order:       [][]string{{"Greeting", "Time"}, {"صباح", "الخير", "Morning"}, {"ערב", "טוב", "Evening"}},
		// On a page of left-to-right text pdftotext splits a
		// right-to-left line at its punctuation; each clause reads in
		// order.
		copied: []string{
			"مرحبا بكم في الإصدار الجديد",
			"الذي يطبع النصوص العربية من اليمين إلى اليسار بشكل صحيح",
			"ברוכים הבאים לגרסה החדשה",
			"שמדפיסה טקסט בעברית מימין לשמאל",
		},
	},
}

// TestRightToLeft renders Arabic, Hebrew, Persian and Urdu documents and
// an English one with Arabic and Hebrew paragraphs (testdata/visual/docs)
// and checks each page as its reader would: right-to-left lines start at
// the right margin, embedded English words sit where the bidi algorithm
// puts them, list markers are right of their items, a right-to-left
// document's table runs from right to left, and copied text is in reading
// order.
func TestRightToLeft(t *testing.T) {
	p := newPipeline(t)
	for _, tc := range rtlCases {
		t.Run(strings.TrimSuffix(tc.doc, ".md"), func(t *testing.T) {
			res, err := renderFile(t, p, filepath.Join(moduleRoot(), "testdata", "visual", "docs", tc.doc))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			path := writePDF(t, res.PDF, "doc.pdf")
			pages := bboxPages(t, path)
			checkRTL(t, pages, tc)
			checkCopied(t, path, tc.copied)
		})
	}
}

func checkRTL(t *testing.T, pages []pageBox, tc rtlCase) {
	t.Helper()
	for _, w := range tc.atRight {
		if x := oneWord(t, pages, w); x.xMax < textRightEdge-3 || x.xMax > textRightEdge+3 {
			t.Errorf("%q ends at x = %.1f, want the right margin %.1f", w, x.xMax, textRightEdge)
		}
	}
	for _, w := range tc.atLeft {
		if x := oneWord(t, pages, w); x.xMin < textLeftEdge-3 || x.xMin > textLeftEdge+12 {
			t.Errorf("%q starts at x = %.1f, want the left margin %.1f", w, x.xMin, textLeftEdge)
		}
	}
	for _, b := range tc.between {
		r, m, l := oneWord(t, pages, b[0]), oneWord(t, pages, b[1]), oneWord(t, pages, b[2])
		if !sameLine(r, m) || !sameLine(m, l) || !(l.xMax < m.xMin && m.xMax < r.xMin) {
			t.Errorf("%q at x %.1f–%.1f, want it between %q (x %.1f–%.1f) on its right and %q (x %.1f–%.1f) on its left, on one line",
				b[1], m.xMin, m.xMax, b[0], r.xMin, r.xMax, b[2], l.xMin, l.xMax)
		}
	}
	for _, line := range tc.lines {
		words := strings.Fields(line)
		first := oneWord(t, pages, words[0])
		var got []string
		on := lineOf(pages, first)
		slices.Reverse(on) // right to left
		for _, w := range on {
			if l := letters(w.text); l != "" && !isNumberMarker(w.text) {
				got = append(got, reversed(l))
			}
		}
		var want []string
		for _, w := range words {
			want = append(want, letters(w))
		}
		if !slices.Equal(got, want) {
			t.Errorf("line %q: words from right to left = %q, want %q", line, got, want)
		}
	}
	checkBullets(t, pages, tc.bullets, true)
	checkBullets(t, pages, tc.bulletsLeft, false)
	for _, o := range tc.order {
		prev := oneWord(t, pages, o[0])
		for _, w := range o[1:] {
			x := oneWord(t, pages, w)
			if !sameLine(prev, x) || x.xMax >= prev.xMin {
				t.Errorf("%q (x %.1f–%.1f) is not left of %q (x %.1f–%.1f) on its line", w, x.xMin, x.xMax, prev.text, prev.xMin, prev.xMax)
			}
			prev = x
		}
	}
}

// checkBullets checks that the marker of each list item (given by its
// first word) is right of the item's words (or left of them).
func checkBullets(t *testing.T, pages []pageBox, items []string, right bool) {
	t.Helper()
	for _, item := range items {
		first := oneWord(t, pages, item)
		line := lineOf(pages, first)
		var marker *bboxWord
		lo, hi := 1e9, -1e9
		for i, w := range line {
			if w.text == "•" || isNumberMarker(w.text) {
				marker = &line[i]
				continue
			}
			lo, hi = min(lo, w.xMin), max(hi, w.xMax)
		}
		switch {
		case marker == nil:
			t.Errorf("item %q: no list marker on its line", item)
		case right && marker.xMin <= hi:
			t.Errorf("item %q: marker %q at x %.1f, want it right of the item (which ends at %.1f)", item, marker.text, marker.xMin, hi)
		case !right && marker.xMax >= lo:
			t.Errorf("item %q: marker %q at x %.1f–%.1f, want it left of the item (which starts at %.1f)", item, marker.text, marker.xMin, marker.xMax, lo)
		}
	}
}

// isNumberMarker reports whether s is an ordered list's marker: "1." (or
// ".1" as pdftotext reads it in right-to-left text).
func isNumberMarker(s string) bool {
	s = strings.Trim(s, ".)")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkCopied checks that pdftotext's text (what copying gives) holds each
// phrase in reading order: its letters and digits in the phrase's order
// (poppler moves the spaces and punctuation where a right-to-left run
// meets a left-to-right one).
func checkCopied(t *testing.T, path string, phrases []string) {
	t.Helper()
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	text := letters(norm.NFC.String(string(out)))
	for _, p := range phrases {
		if !strings.Contains(text, letters(norm.NFC.String(p))) {
			t.Errorf("copied text lacks %q in reading order:\n%s", p, out)
		}
	}
}
