package render

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTMLTables renders GitHub-style HTML tables (testdata/visual/docs/
// html-tables.md): no tag reaches the page, every cell's words sit inside
// its cell's box (its columns, from the left edge of its first column's
// header to the left edge of the next one), a cell spanning two rows
// starts on its first row and one spanning two columns stays within them,
// and a <br> breaks its cell's line.
func TestHTMLTables(t *testing.T) {
	p := newPipeline(t)
	res, err := renderFile(t, p, filepath.Join(moduleRoot(), "testdata", "visual", "docs", "html-tables.md"))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	path := writePDF(t, res.PDF, "tables.pdf")
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", path, "-").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"<t", "</", "<b>", "<br", "<code", "<a ", "&amp;", "&lt;", "colspan", "rowspan"} {
		if strings.Contains(string(out), tag) {
			t.Errorf("the page shows %q:\n%s", tag, out)
		}
	}
	pages := bboxPages(t, path)
	type cell struct {
		words      []string
		first, end string // header words of the cell's first column and of the column after its last ("" for the text area's right edge)
	}
	tables := []struct {
		headers []string
		cells   []cell
	}{
		{[]string{"Feature", "Status", "Notes"}, []cell{
			{[]string{"Markdown", "Forms"}, "Feature", "Status"},
			{[]string{"stable", "beta"}, "Status", "Notes"},
			{[]string{"CommonMark", "tables", "plus", "dialect", "guide", "examples."}, "Notes", ""},
		}},
		{[]string{"Region", "Quarter", "Sales"}, []cell{
			{[]string{"North"}, "Region", "Quarter"},
			{[]string{"Spring", "Summer"}, "Quarter", "Sales"},
			{[]string{"120", "135", "255"}, "Sales", ""},
			{[]string{"Total", "north"}, "Region", "Sales"},
		}},
		{[]string{"Steps", "Command"}, []cell{
			{[]string{"Install", "xelatex", "poppler"}, "Steps", "Command"},
			{[]string{"make", "run"}, "Command", ""},
		}},
	}
	for _, tb := range tables {
		left := map[string]float64{}
		for _, h := range tb.headers {
			left[h] = oneWord(t, pages, h).xMin
		}
		for _, c := range tb.cells {
			hi := textRightEdge + 1
			if c.end != "" {
				hi = left[c.end] - 1
			}
			for _, word := range c.words {
				w := oneWord(t, pages, word)
				if w.xMin < left[c.first]-1 || w.xMax > hi {
					t.Errorf("%q at x %.1f–%.1f, outside its cell (x %.1f–%.1f, under %q)", word, w.xMin, w.xMax, left[c.first], hi, c.first)
				}
			}
		}
	}
	// The row-spanning cell starts on its first row, the column-spanning
	// one shares its row with that row's last cell, and <br> breaks a
	// cell's line.
	if n, s := oneWord(t, pages, "North"), oneWord(t, pages, "Spring"); !sameLine(n, s) {
		t.Errorf("North (y %.1f) is not on the row of Spring (y %.1f)", n.yMin, s.yMin)
	}
	if tot, sum := oneWord(t, pages, "Total"), oneWord(t, pages, "255"); !sameLine(tot, sum) {
		t.Errorf("Total (y %.1f) is not on the row of 255 (y %.1f)", tot.yMin, sum.yMin)
	}
	if a, b := oneWord(t, pages, "CommonMark"), oneWord(t, pages, "plus"); b.yMin < a.yMin+5 || b.xMin > a.xMin+1 {
		t.Errorf("plus (x %.1f, y %.1f) does not start the line after CommonMark (x %.1f, y %.1f)", b.xMin, b.yMin, a.xMin, a.yMin)
	}
}
