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

// columnWidths returns, for each column, its share of the usable width
// (summing to 1). Every column first gets room for its longest word (up to
// 18 characters; longer words get break points), then the rest of the
// line is shared by what the columns still want: their cells' length,
// damped so that one long cell does not starve the others. capacity is
// about how many characters fit on the line.
func columnWidths(lengths [][]int, words []int, ncol int, capacity float64) []float64 {
	minC := make([]float64, ncol)
	natural := make([]float64, ncol)
	for j := 0; j < ncol; j++ {
		longest, total, count := 0, 0, 0
		for _, row := range lengths {
			if j < len(row) {
				longest = max(longest, row[j])
				total += row[j]
				count++
			}
		}
		avg := 0.0
		if count > 0 {
			avg = float64(total) / float64(count)
		}
		d := math.Max(avg, math.Min(float64(longest), 2*avg+8))
		w := 2.0
		if j < len(words) {
			w = float64(min(words[j], 18))
		}
		minC[j] = w*1.25 + 1 // bold headers are wider
		natural[j] = math.Max(minC[j], d+1)
	}
	sumMin, sumNat := 0.0, 0.0
	for j := range minC {
		sumMin += minC[j]
		sumNat += natural[j]
	}
	want := make([]float64, ncol)
	switch {
	case sumNat <= capacity || sumNat == sumMin:
		copy(want, natural)
	case sumMin <= capacity:
		f := (capacity - sumMin) / (sumNat - sumMin)
		for j := range want {
			want[j] = minC[j] + (natural[j]-minC[j])*f
		}
	default:
		copy(want, minC)
	}
	sum := 0.0
	for _, v := range want {
		sum += v
	}
	for j := range want {
		want[j] /= sum
	}
	return want
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
	lengths := make([][]int, len(rows))
	words := make([]int, ncol)
	for i, row := range rows {
		j := 0
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			text := r.d.plain(c)
			lengths[i] = append(lengths[i], utf8.RuneCountInString(text))
			words[j] = max(words[j], cellLongestWord(text))
			j++
		}
	}
	capacity := 80.0
	if ncol > 5 {
		capacity = 88 // set in \small
	}
	capacity -= float64(ncol) * 1.2 // the column separation
	shares := columnWidths(lengths, words, ncol, capacity)

	// The usable width: \linewidth less the separation between columns.
	boxed := r.boxed() || r.listDepth > 0
	env := "longtable"
	if boxed {
		// A longtable must sit on the main vertical list; inside a frame,
		// a list or a footnote the table is a tabular that does not break.
		env = "tabular"
	}
	r.raw(`\begin{optable}{` + strconv.Itoa(2*(ncol-1)) + `}` + "\n")
	if ncol > 5 {
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
		fmt.Fprintf(&spec, `p{%.4f\optw}`, shares[j])
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
				r.inlines(c)
				r.raw(`}`)
			} else {
				r.inlines(c)
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
