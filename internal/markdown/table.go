package markdown

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// Tables are longtables with fixed p{} columns whose widths are computed
// here from the length of the cells' text: TeX then never has to guess
// widths (longtable would ask for reruns) and no column can run off the
// page. Cells wrap; long words in them get break opportunities sized to
// their column.

// cellSize is what the width computation knows of a cell: its length and
// its longest word, in characters.
type cellSize struct{ length, word float64 }

// lines estimates how many lines a cell takes in a column w characters
// wide: wrapping wastes some of each line, and a word longer than the
// column is broken, which counts extra (it reads badly). The estimate is
// smooth rather than whole lines, so that every character of width shows
// its worth to the search in columnWidths.
func (c cellSize) lines(w float64) float64 {
	n := 1.0
	if c.length > w {
		n = c.length / (w * 0.85)
	}
	if c.word > w {
		n += 2 * c.word / w
	}
	return n
}

// maxTableColumns bounds the columns set as a table. A page holds no more
// (each would be narrower than a word), and TeX runs out of memory
// building the column list of a few hundred; wider tables are set as one
// paragraph per row, cells separated by bars.
const maxTableColumns = 24

// wideTable sets a table too wide for the page as paragraphs, the header
// row bold.
func (r *writer) wideTable(rows []ast.Node) {
	for _, row := range rows {
		r.at(row)
		r.nl()
		_, header := row.(*extast.TableHeader)
		r.cell = true
		if header {
			r.raw(`\opthead{`)
		}
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			if c != row.FirstChild() {
				r.raw(` \textbar{} `)
			}
			r.bidiPara(c)
		}
		if header {
			r.raw(`}`)
		}
		r.cell = false
		r.raw(`\par` + "\n")
	}
}

// maxSampleRows bounds the rows the width computation looks at: a long
// table's first rows tell its columns well enough.
const maxSampleRows = 64

// columnWidths returns, for each column, its share of the usable width
// (summing to 1). capacity is about how many characters fit on the line.
// Widths grow one character at a time, each time for the column where a
// character saves the most lines over the table (cells[i][j] is row i,
// column j), so long notes get room while short columns keep their words
// whole; what no column needs any more is shared by length.
func columnWidths(cells [][]cellSize, ncol int, capacity float64) []float64 {
	if len(cells) > maxSampleRows {
		cells = cells[:maxSampleRows]
	}
	// Start from each column's longest word (up to 18 characters) when
	// the line has room for all of them, else from 3 characters each.
	w := make([]float64, ncol)
	total := 0.0
	for j := range w {
		w[j] = 3
		for _, row := range cells {
			if j < len(row) {
				w[j] = math.Max(w[j], math.Min(math.Ceil(row[j].word), 18)+1)
			}
		}
		total += w[j]
	}
	if total > capacity {
		// Not even the words fit: every column gives up the same part.
		for j := range w {
			w[j] *= capacity / total
		}
		total = capacity
	}
	// A row costs its height, plus a little for every line of each cell:
	// the second term lets one column's widening count even where
	// another column still sets the height. Each step finds, per row, the
	// cell lines, their sum and the two tallest cells, so that the gain of
	// widening any one column is found without recomputing the row.
	lines := make([]float64, ncol)
	gains := make([]float64, ncol)
	for total+1 <= capacity {
		clear(gains)
		for _, row := range cells {
			top1, top2, top1j, all := 1.0, 1.0, -1, 0.0
			for k, c := range row {
				lines[k] = c.lines(w[k])
				all += lines[k]
				switch {
				case lines[k] > top1:
					top2, top1, top1j = top1, lines[k], k
				case lines[k] > top2:
					top2 = lines[k]
				}
			}
			before := top1 + 0.25*all
			for j, c := range row {
				n := c.lines(w[j] + 1)
				h := top1
				if j == top1j {
					h = top2
				}
				gains[j] += before - (math.Max(h, n) + 0.25*(all-lines[j]+n))
			}
		}
		best, bestGain := -1, 0.0
		for j, g := range gains {
			if g > bestGain+1e-9 {
				best, bestGain = j, g
			}
		}
		if best < 0 {
			break
		}
		w[best]++
		total++
	}
	// Share what is left by each column's longest cell, so that a table
	// fills the line.
	if left := capacity - total; left > 0 {
		longest := make([]float64, ncol)
		sum := 0.0
		for j := range longest {
			for _, row := range cells {
				if j < len(row) {
					longest[j] = math.Max(longest[j], row[j].length)
				}
			}
			longest[j] = math.Max(longest[j], 1)
			sum += longest[j]
		}
		for j := range w {
			w[j] += left * longest[j] / sum
		}
	}
	sum := 0.0
	for _, v := range w {
		sum += v
	}
	for j := range w {
		w[j] /= sum
	}
	return w
}

// cellLongestWord returns the rune count of the longest space-separated word.
func cellLongestWord(s string) int {
	longest, n := 0, 0
	for _, c := range s {
		if c == ' ' || c == '\t' || c == '\n' {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}

func (r *writer) table(t *extast.Table) {
	// Collect rows and plain cell lengths.
	var rows []ast.Node
	ncol := len(t.Alignments)
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		rows = append(rows, row)
		ncol = max(ncol, row.ChildCount())
	}
	if ncol == 0 || len(rows) == 0 {
		return
	}
	if ncol > maxTableColumns {
		r.wideTable(rows)
		return
	}
	cells := make([][]cellSize, len(rows))
	for i, row := range rows {
		// Header cells are bold, about a quarter wider.
		factor := 1.0
		if _, ok := row.(*extast.TableHeader); ok {
			factor = 1.25
		}
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			text := r.d.plain(c)
			cells[i] = append(cells[i], cellSize{
				length: float64(utf8.RuneCountInString(text)) * factor,
				word:   float64(cellLongestWord(text)) * factor,
			})
		}
	}
	capacity := 80.0
	switch {
	case ncol >= 8:
		capacity = 100 // set in \footnotesize
	case ncol > 5:
		capacity = 88 // set in \small
	}
	capacity -= float64(ncol) * 1.2 // the column separation
	shares := columnWidths(cells, ncol, capacity)

	// The usable width: \linewidth less the separation between columns.
	boxed := r.boxed() || r.listDepth > 0
	env := "longtable"
	if boxed {
		// A longtable must sit on the main vertical list; inside a frame,
		// a list or a footnote the table is a tabular that does not break.
		env = "tabular"
	}
	r.raw(`\begin{optable}{` + strconv.Itoa(2*(ncol-1)) + `}` + "\n")
	switch {
	case ncol >= 8:
		r.raw(`\footnotesize` + "\n")
	case ncol > 5:
		r.raw(`\small` + "\n")
	}
	var spec strings.Builder
	spec.WriteString("@{}")
	for j := 0; j < ncol; j++ {
		align := extast.AlignNone
		if j < len(t.Alignments) {
			align = t.Alignments[j]
		}
		switch align {
		case extast.AlignRight:
			spec.WriteString(`>{\opcellr}`)
		case extast.AlignCenter:
			spec.WriteString(`>{\opcellc}`)
		default:
			spec.WriteString(`>{\opcelll}`)
		}
		// Rounded down, so that the columns never add up to more than the line.
		fmt.Fprintf(&spec, `p{%.4f\optw}`, math.Floor(shares[j]*10000)/10000)
		if j%16 == 15 {
			spec.WriteString("%\n") // a wide table's column list spans lines
		}
	}
	spec.WriteString("@{}")
	if env == "longtable" {
		r.raw(`\begin{longtable}[l]{` + spec.String() + "}\n")
	} else {
		r.raw(`\noindent\begin{tabular}{` + spec.String() + "}\n")
	}
	r.raw("\\toprule\n")

	savedFirst, savedEvery := r.firstBreak, r.everyBreak
	cellChars := func(j int) int {
		return max(4, int(shares[j]*capacity)-1)
	}
	writeRow := func(row ast.Node, header bool) {
		r.at(row)
		r.nl()
		j := 0
		r.cell, r.header = true, header
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			if j > 0 {
				r.raw("&\n")
			}
			r.firstBreak, r.everyBreak = cellChars(j), max(3, cellChars(j)/2)
			r.word = 0
			if header {
				r.raw(`\opthead{`)
				r.bidiPara(c)
				r.raw(`}`)
			} else {
				r.bidiPara(c)
			}
			j++
		}
		for ; j < ncol; j++ {
			r.raw("&\n")
		}
		r.cell, r.header = false, false
		r.raw(`\\` + "\n")
	}
	body := rows
	if _, ok := rows[0].(*extast.TableHeader); ok {
		writeRow(rows[0], true)
		r.raw("\\midrule\n")
		if env == "longtable" {
			r.raw("\\endfirsthead\n\\toprule\n")
			r.quiet = true
			writeRow(rows[0], true)
			r.quiet = false
			r.raw("\\midrule\n\\endhead\n")
		}
		body = rows[1:]
	} else if env == "longtable" {
		r.raw("\\endhead\n")
	}
	for _, row := range body {
		writeRow(row, false)
	}
	r.raw("\\bottomrule\n")
	r.firstBreak, r.everyBreak = savedFirst, savedEvery
	r.raw(`\end{` + env + "}\n")
	r.raw("\\end{optable}\n")
}
