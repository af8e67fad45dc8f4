package markdown

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// Tables are longtables with fixed p{} columns: TeX never has to guess
// widths (longtable would ask for reruns) and no column can run off the
// page. TeX measures, before the table, what each column must show
// unbroken (its numbers and short words: a number that wraps onto a line
// of its own looks like it belongs to the next row) and its widest cells;
// \opcolwidths then gives every column its unbroken width and shares the
// rest of the line among the columns that wrap, in proportion to how much
// wider they would be unwrapped. A table whose cells all fit unwrapped
// keeps its natural width. The writer picks the candidates to measure
// (the longest few per column, by characters), so that a long table costs
// a few measurements per column, not one per cell.

// shortWord is the longest word, in characters, that never breaks inside
// a table cell; longer words (URLs, identifiers) get break opportunities.
const shortWord = 16

// measuredPerColumn bounds the candidates measured per column and kind.
const measuredPerColumn = 4

// candidate is a piece of a column TeX measures: a whole cell (node) or a
// word of one (text), ranked by its estimated width.
type candidate struct {
	width  float64
	plain  string   // the text, to measure each only once
	node   ast.Node // the cell, written as it is typeset
	header bool
	text   string // a word of the cell, written in the cell's font
}

// keepWidest adds c to list, which keeps the measuredPerColumn widest
// different texts.
func keepWidest(list []candidate, c candidate) []candidate {
	narrowest := 0
	for i := range list {
		if list[i].plain == c.plain && list[i].header == c.header {
			return list
		}
		if list[i].width < list[narrowest].width {
			narrowest = i
		}
	}
	if len(list) < measuredPerColumn {
		return append(list, c)
	}
	if c.width > list[narrowest].width {
		list[narrowest] = c
	}
	return list
}

// estimateWidth is a rough width of s in ems, good enough to rank the
// cells of a column: which are worth measuring.
func estimateWidth(s string, bold bool) float64 {
	w := 0.0
	for _, c := range s {
		switch {
		case strings.ContainsRune("iljtfr.,:;'|!()[] ", c):
			w += 0.3
		case strings.ContainsRune("mwMW@%", c):
			w += 0.85
		case c >= 'A' && c <= 'Z':
			w += 0.68
		case c >= '0' && c <= '9':
			w += 0.56
		case c >= 0x1100 && unicode.In(c, unicode.Han, unicode.Hangul, unicode.Hiragana, unicode.Katakana):
			w += 1
		default:
			w += 0.52
		}
	}
	if bold {
		w *= 1.1
	}
	return w
}

// unbroken returns what of a cell's plain text must not wrap: the whole
// cell when it is one word or a number (digits with spaces, "1 234 567"),
// else its longest word of at most shortWord characters.
func unbroken(s string) (whole bool, word string) {
	s = strings.TrimSpace(s)
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return false, ""
	}
	if n <= shortWord && (!strings.ContainsAny(s, " \t\n") || isNumber(s)) {
		return true, s
	}
	for _, f := range strings.Fields(s) {
		if k := utf8.RuneCountInString(f); k <= shortWord && k > utf8.RuneCountInString(word) {
			word = f
		}
	}
	return false, word
}

// isNumber reports whether s is digits with the separators numbers are
// written with (spaces, points, commas, signs, currency, percent).
func isNumber(s string) bool {
	digits := 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case strings.ContainsRune(" .,'+-−–%$€£¥\u00a0\u202f", c):
		default:
			return false
		}
	}
	return digits > 0
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

func (r *writer) table(t *extast.Table) {
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
	// Per column, the longest cells and unbroken pieces to measure; and
	// whether some cell is long enough to wrap (then rows get space
	// between them, so that a tall row reads as one).
	mins := make([][]candidate, ncol)
	naturals := make([][]candidate, ncol)
	tall := false
	huge := false // a cell of many lines: the table may need to break anywhere
	for _, row := range rows {
		_, header := row.(*extast.TableHeader)
		j := 0
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			text := r.d.plain(c)
			w := estimateWidth(text, header)
			naturals[j] = keepWidest(naturals[j], candidate{width: w, plain: text, node: c, header: header})
			if whole, word := unbroken(text); whole {
				mins[j] = keepWidest(mins[j], candidate{width: w, plain: text, node: c, header: header})
			} else if word != "" {
				mins[j] = keepWidest(mins[j], candidate{width: estimateWidth(word, header), plain: word, text: word, header: header})
			}
			if !header && w > 15 && strings.Contains(text, " ") {
				tall = true
			}
			if w > 200 {
				huge = true
			}
			j++
		}
	}

	boxed := r.boxed() || r.listDepth > 0
	env := "longtable"
	if boxed {
		// A longtable must sit on the main vertical list; inside a frame,
		// a list or a footnote the table is a tabular that does not break.
		env = "tabular"
	}
	size := 0
	switch {
	case ncol >= 8:
		size = 2 // footnotesize
	case ncol > 5:
		size = 1 // small
	}
	r.raw(`\begin{optable}{` + strconv.Itoa(2*(ncol-1)) + `}{` + strconv.Itoa(size) + `}` + "\n")
	savedFirst, savedEvery := r.firstBreak, r.everyBreak
	r.firstBreak, r.everyBreak = shortWord, 4
	r.raw(`\opcolinit{` + strconv.Itoa(ncol) + "}\n")
	measure := func(kind string, j int, c candidate) {
		r.raw(`\opcol` + kind + `{` + strconv.Itoa(j+1) + `}{`)
		saved := r.saveBidi()
		r.word = 0
		r.cell, r.header, r.quiet = true, c.header, true
		if c.header {
			r.raw(`\opthead{`)
		}
		if c.node != nil {
			r.bidiPara(c.node)
		} else {
			r.bidi, r.rtlOpen, r.rtlPrev = false, false, fontNone
			r.text(c.text, modeText)
			r.endRTL()
		}
		if c.header {
			r.raw(`}`)
		}
		r.cell, r.header, r.quiet = false, false, false
		r.restoreBidi(saved)
		r.raw("}\n")
	}
	for j := 0; j < ncol; j++ {
		for _, c := range mins[j] {
			measure("m", j, c)
		}
		for _, c := range naturals[j] {
			measure("n", j, c)
		}
	}
	r.raw(`\opcolwidths{` + strconv.Itoa(ncol) + "}\n")

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
		fmt.Fprintf(&spec, `p{\opcw{%d}}`, j+1)
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

	// end is how a row ends: in a long table the first two and last two
	// body rows keep their neighbour on the same page, so that a page
	// break leaves at least three rows on either side, and a table of
	// fewer than six rows is not broken (unless a cell is huge); tall
	// rows get space between them.
	end := func(i, n int) string {
		s := `\\`
		switch {
		case env != "longtable":
		case n >= 6 && (i < 2 || i >= n-3):
			s = `\\*`
		case n < 6 && !huge:
			// A short table is not split at all.
			s = `\\*`
		}
		if tall && i < n-1 {
			s += `\opcolgap`
		}
		return s + "\n"
	}
	writeRow := func(row ast.Node, header bool, ending string) {
		r.at(row)
		r.nl()
		j := 0
		r.cell, r.header = true, header
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			if j > 0 {
				r.raw("&\n")
			}
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
		r.raw(ending)
	}
	body := rows
	if _, ok := rows[0].(*extast.TableHeader); ok {
		writeRow(rows[0], true, "\\\\\n")
		r.raw("\\midrule\n")
		if env == "longtable" {
			r.raw("\\endfirsthead\n\\toprule\n")
			r.quiet = true
			writeRow(rows[0], true, "\\\\\n")
			r.quiet = false
			r.raw("\\midrule\n\\endhead\n")
		}
		body = rows[1:]
	} else if env == "longtable" {
		r.raw("\\endhead\n")
	}
	for i, row := range body {
		writeRow(row, false, end(i, len(body)))
	}
	r.raw("\\bottomrule\n")
	r.firstBreak, r.everyBreak = savedFirst, savedEvery
	r.raw(`\end{` + env + "}\n")
	r.raw("\\end{optable}\n")
}
