package render

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestShortLabels renders 200 rows of three columns of short labels, a
// few of the last column's cells a long comment: each label stays on one
// line (the long comments wrap in their own column), so the table takes
// at most 5 A4 pages; with the width a column must show unbroken alone
// (its longest word), every label wrapped a word a line, 13 pages.
func TestShortLabels(t *testing.T) {
	labels := []string{"Net revenue", "Q3 2026 total", "Operating costs", "Gross margin", "Cost of goods sold",
		"Deferred tax assets", "Other income", "Employee benefits", "Cash and equivalents", "Accounts receivable net"}
	periods := []string{"Q1 2026 total", "Q2 2026", "Full year 2025", "H1 2026 actual"}
	comments := []string{"Reported figure", "Adjusted", "Restated prior year", "Budget", "Audited", "Estimate"}
	var b strings.Builder
	b.WriteString("| Line item | Period | Comment |\n|---|---|---|\n")
	for i := range 200 {
		c := comments[i%len(comments)]
		if i%40 == 7 {
			c = "Restated after the auditors asked for the deferred items to be split across both quarters of the year"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", labels[(i*7)%len(labels)], periods[(i*3)%len(periods)], c)
	}
	p := newPipeline(t)
	res, err := p.Do(context.Background(), Request{Name: "labels.md", Markdown: []byte(b.String())}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if res.Pages > 5 {
		t.Errorf("200 rows of short labels take %d pages, want at most 5", res.Pages)
	}
	pages := bboxPages(t, writePDF(t, res.PDF, "labels.pdf"))
	for _, label := range append(append(labels, periods...), comments[:5]...) {
		words := strings.Fields(label)
		first := findWords(pages, words[0])
		if len(first) == 0 {
			t.Fatalf("no word %q on the pages", words[0])
		}
		w := first[len(first)-1] // in the table, after the header
		line := lineOf(pages, w)
		for _, word := range words[1:] {
			found := false
			for _, x := range line {
				found = found || letters(x.text) == letters(word)
			}
			if !found {
				t.Errorf("label %q wraps: %q is not on the line of %q", label, word, words[0])
			}
		}
	}
}

// TestTableAlignment renders a pipe table whose columns are aligned left,
// right and centred: in every row the figure of the right-aligned column
// ends where the others end, the code of the centred column has its
// middle where the others have theirs, and the words of the left-aligned
// column start together (every body cell was once set left, whatever its
// column's alignment).
func TestTableAlignment(t *testing.T) {
	src := "| Item | Amount | Code |\n|:--|--:|:-:|\n" +
		"| alpha | 7 | x |\n| beta | 88888 | yyyyyyy |\n| gamma | 333 | zzz |\n"
	p := newPipeline(t)
	res, err := p.Do(context.Background(), Request{Name: "align.md", Markdown: []byte(src)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	pages := bboxPages(t, writePDF(t, res.PDF, "align.pdf"))
	cell := func(item, text string) bboxWord {
		t.Helper()
		first := findWords(pages, item)
		if len(first) == 0 {
			t.Fatalf("no word %q on the pages", item)
		}
		for _, w := range lineOf(pages, first[0]) {
			if w.text == text {
				return w
			}
		}
		t.Fatalf("no %q on the line of %q", text, item)
		return bboxWord{}
	}
	rows := []struct{ item, amount, code string }{{"alpha", "7", "x"}, {"beta", "88888", "yyyyyyy"}, {"gamma", "333", "zzz"}}
	first := rows[0]
	a0, c0, i0 := cell(first.item, first.amount), cell(first.item, first.code), cell(first.item, first.item)
	for _, r := range rows[1:] {
		if a := cell(r.item, r.amount); math.Abs(a.xMax-a0.xMax) > 1 {
			t.Errorf("right-aligned %q ends at x = %.1f, %q at %.1f, want the same", r.amount, a.xMax, first.amount, a0.xMax)
		}
		c := cell(r.item, r.code)
		if mid, mid0 := (c.xMin+c.xMax)/2, (c0.xMin+c0.xMax)/2; math.Abs(mid-mid0) > 1 {
			t.Errorf("centred %q has its middle at x = %.1f, %q at %.1f, want the same", r.code, mid, first.code, mid0)
		}
		if i := cell(r.item, r.item); math.Abs(i.xMin-i0.xMin) > 1 {
			t.Errorf("left-aligned %q starts at x = %.1f, %q at %.1f, want the same", r.item, i.xMin, first.item, i0.xMin)
		}
	}
}
