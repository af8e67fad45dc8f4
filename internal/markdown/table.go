package markdown

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/script"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// Tables are longtables with fixed p{} columns: TeX never has to guess
// widths (longtable would ask for reruns) and no column can run off the
// page. TeX measures, before the table, what each column must show
// unbroken (its numbers and short words: a number that wraps onto a line
// of its own looks like it belongs to the next row), what it would like
// to show unbroken (its short labels, "Net revenue", "Q3 2026 total") and
// its widest cells; \opcolwidths then gives every column its label width
// when all labels fit (else its unbroken width) and shares the rest of the
// line among the columns that wrap, in proportion to how much wider they
// would be unwrapped. In a table whose rows are mostly tall with prose
// anyway (columnPieces.tall), the labels must also leave the wrapping
// columns a third of the line (proseReserve): a label that wraps inside a
// row the prose makes three lines tall costs nothing, while a prose column
// squeezed by ten one-line labels makes every row a line taller. A table whose cells all fit unwrapped keeps its
// natural width. The writer picks the candidates to measure (the longest
// few per column, by characters), so that a long table costs a few
// measurements per column, not one per cell.
//
// Pipe tables and HTML tables (htmltable.go) are both a tableModel here:
// rows of cells that may span columns and rows. In a right-to-left
// document the writer sets the columns from right to left.

// shortWord is the longest word, in characters, that never breaks inside
// a table cell; longer words (URLs, identifiers) get break opportunities.
const shortWord = 16

// A label is a cell of at most maxLabelWords words and maxLabelRunes
// characters: it stays on one line when the labels of all columns fit.
const (
	maxLabelWords = 4
	maxLabelRunes = 40
)

// proseReserve is what of the line (\optw) the labels of a table of tall
// rows must leave to the columns that wrap for each to keep one line.
const proseReserve = `\optw/3`

// measuredPerColumn bounds the candidates measured per column and kind.
const measuredPerColumn = 4

// tableModel is a table to set: its columns and its rows of cells.
type tableModel struct {
	ncol   int
	align  []extast.Alignment // per column; shorter than ncol where none is given
	rows   []tableRow
	header int // the first header rows are the header, repeated on every page
}

// tableRow is a row: its node (for line numbers) and its cells.
type tableRow struct {
	node  ast.Node
	cells []*tableCell
}

// tableCell is a cell: its content node (a pipe table's cell, or an HTML
// table's, which holds blocks), the columns and rows it spans and its own
// alignment. head cells are bold.
type tableCell struct {
	node       ast.Node
	col        int // first column
	span, rows int // columns and rows it covers, at least 1
	head       bool
	// AlignNone: the column's. Not the zero value, which is no
	// alignment of goldmark's: a cell made without one would be set as
	// a \multicolumn aligned left, whatever its column's alignment.
	align extast.Alignment
}

// candidate is a piece of a column TeX measures: a whole cell (node) or a
// word of one (text), ranked by its estimated width.
type candidate struct {
	width  float64
	plain  string   // the text, to measure each only once
	node   ast.Node // the cell, written as it is typeset
	header bool
	text   string // a word or line of the cell, written in the cell's font
	mono   bool   // text is code, set in monospace
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

// isLabel reports whether a cell's plain text is a short label that should
// stay on one line where the table has room.
func isLabel(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && utf8.RuneCountInString(s) <= maxLabelRunes && len(strings.Fields(s)) <= maxLabelWords
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

// table sets a pipe table.
func (r *writer) table(t *extast.Table) {
	m := &tableModel{ncol: len(t.Alignments), align: t.Alignments}
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		tr := tableRow{node: row}
		_, header := row.(*extast.TableHeader)
		col := 0
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			tr.cells = append(tr.cells, &tableCell{node: c, col: col, span: 1, rows: 1, head: header, align: extast.AlignNone})
			col++
		}
		m.ncol = max(m.ncol, col)
		if header && len(m.rows) == 0 {
			m.header = 1
		}
		m.rows = append(m.rows, tr)
	}
	r.setTable(m)
}

// setTable sets a table in the document's direction, which orders its
// columns.
func (r *writer) setTable(m *tableModel) {
	if m.ncol == 0 || len(m.rows) == 0 {
		return
	}
	r.keepDir(func() {
		r.setDir(r.docRTL)
		if m.ncol > maxTableColumns {
			r.wideTable(m)
			return
		}
		r.longTable(m)
	})
}

// wideTable sets a table too wide for the page as paragraphs, the header
// rows bold.
func (r *writer) wideTable(m *tableModel) {
	for i, row := range m.rows {
		r.at(row.node)
		r.nl()
		r.setDir(r.docRTL)
		r.cell = true
		if i < m.header {
			r.raw(`\opthead{`)
		}
		for j, c := range row.cells {
			if j > 0 {
				r.raw(` \textbar{} `)
			}
			r.bidiPara(c.node)
		}
		if i < m.header {
			r.raw(`}`)
		}
		r.cell = false
		r.raw(`\par` + "\n")
	}
}

// columnPieces are what TeX measures of each column, and whether some
// cells are long (rows get space between them) or huge (the table may
// break anywhere).
type columnPieces struct {
	mins, labels, naturals [][]candidate
	tall, huge             bool
}

// pieces picks the candidates to measure per column. Cells that span
// columns share their columns' widths and are not measured.
func (r *writer) pieces(m *tableModel) columnPieces {
	p := columnPieces{
		mins:     make([][]candidate, m.ncol),
		labels:   make([][]candidate, m.ncol),
		naturals: make([][]candidate, m.ncol),
	}
	long := 0
	for i, row := range m.rows {
		header := i < m.header
		rowLong := false
		for _, c := range row.cells {
			if c.span != 1 {
				continue
			}
			bold := header || c.head
			if _, ok := c.node.(*HTMLTableCell); ok && !inlineOnly(c.node) {
				// Blocks: each line of their text, as it is set.
				for _, l := range r.cellLines(c.node) {
					rowLong = p.add(c.col, candidate{plain: l.text, text: l.text, mono: l.mono, header: bold}) || rowLong
				}
				continue
			}
			rowLong = p.add(c.col, candidate{plain: r.d.plain(c.node), node: c.node, header: bold}) || rowLong
		}
		if header {
			rowLong = false
		}
		if rowLong {
			long++
		}
	}
	// Rows get space between them when long cells are common: a tall
	// row then reads as one. A few long cells among one-line rows do not
	// space the whole table.
	p.tall = long > 0 && long*5 >= len(m.rows)-m.header
	return p
}

// add adds a cell (or a line of one) of column j to the candidates and
// reports whether it is long enough to wrap.
func (p *columnPieces) add(j int, c candidate) bool {
	text := c.plain
	c.width = estimateWidth(text, c.header)
	p.naturals[j] = keepWidest(p.naturals[j], c)
	if whole, word := unbroken(text); whole {
		p.mins[j] = keepWidest(p.mins[j], c)
	} else if word != "" {
		p.mins[j] = keepWidest(p.mins[j], candidate{width: estimateWidth(word, c.header), plain: word, text: word, mono: c.mono, header: c.header})
	}
	if isLabel(text) {
		p.labels[j] = keepWidest(p.labels[j], c)
	}
	p.huge = p.huge || c.width > 200
	return c.width > 15 && strings.Contains(text, " ")
}

// cellLine is a line of a cell's text: a paragraph's, or a code line.
type cellLine struct {
	text string
	mono bool
}

// cellLines returns the lines of text of an HTML cell's blocks.
func (r *writer) cellLines(n ast.Node) []cellLine {
	var out []cellLine
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
			for line := range strings.SplitSeq(strings.TrimRight(r.rawLines(c), "\n"), "\n") {
				out = append(out, cellLine{cutLongLines(strings.TrimRight(line, " \t")), true})
			}
			return ast.WalkSkipChildren, nil
		case *ast.Paragraph, *ast.TextBlock, *ast.Heading:
			out = append(out, cellLine{cleanLine(r.d.plain(c)), false})
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return out
}

// longTable sets a table as a longtable (or, where a page cannot break, a
// tabular) with measured column widths.
func (r *writer) longTable(m *tableModel) {
	p := r.pieces(m)
	env := "longtable"
	if r.boxed() || r.listDepth > 0 {
		// A longtable must sit on the main vertical list; inside a frame,
		// a list or a footnote the table is a tabular that does not break.
		env = "tabular"
	}
	size := 0
	switch {
	case m.ncol >= 8:
		size = 2 // footnotesize
	case m.ncol > 5:
		size = 1 // small
	}
	r.raw(`\begin{optable}{` + strconv.Itoa(2*(m.ncol-1)) + `}{` + strconv.Itoa(size) + `}` + "\n")
	savedFirst, savedEvery := r.firstBreak, r.everyBreak
	r.firstBreak, r.everyBreak = shortWord, 4
	r.measureColumns(m, p)
	r.raw(r.tableBegin(m, env))
	r.raw("\\toprule\n")
	r.tableRows(m, env, p)
	r.raw("\\bottomrule\n")
	r.firstBreak, r.everyBreak = savedFirst, savedEvery
	r.raw(`\end{` + env + "}\n")
	r.raw("\\end{optable}\n")
}

// measureColumns writes the measurements of every column and
// \opcolwidths with the room the labels must leave to the wrapping
// columns.
func (r *writer) measureColumns(m *tableModel, p columnPieces) {
	r.raw(`\opcolinit{` + strconv.Itoa(m.ncol) + "}\n")
	for j := 0; j < m.ncol; j++ {
		for _, c := range p.mins[j] {
			r.measure("m", j, c)
		}
		for _, c := range p.labels[j] {
			r.measure("p", j, c)
		}
		for _, c := range p.naturals[j] {
			r.measure("n", j, c)
		}
	}
	reserve := "0pt"
	if p.tall {
		reserve = proseReserve
	}
	r.raw(`\opcolwidths{` + strconv.Itoa(m.ncol) + `}{` + reserve + "}\n")
}

// measure writes \opcol<kind>{j}{…}: the candidate as it is typeset.
func (r *writer) measure(kind string, j int, c candidate) {
	r.raw(`\opcol` + kind + `{` + strconv.Itoa(j+1) + `}{`)
	saved := r.saveBidi()
	r.word = 0
	r.cell, r.header, r.quiet = true, c.header, true
	if c.header {
		r.raw(`\opthead{`)
	}
	if c.node != nil {
		r.dir = r.dirOf(c.node)
		r.bidiPara(c.node)
	} else {
		r.bidi, r.rtlPara, r.embOpen, r.embPrev = false, r.dir, false, script.None
		if c.mono {
			r.raw(`\optt{`)
			r.text(c.text, modeCode)
			r.raw(`}`)
		} else {
			r.text(c.text, modeText)
		}
		r.endEmb()
	}
	if c.header {
		r.raw(`}`)
	}
	r.cell, r.header, r.quiet = false, false, false
	r.restoreBidi(saved)
	r.dir = r.docRTL
	r.raw("}\n")
}

// physical returns the column that is the j-th from the left: the
// columns run from right to left in a right-to-left document.
func (r *writer) physical(m *tableModel, j int) int {
	if r.docRTL {
		return m.ncol - 1 - j
	}
	return j
}

// cellSpec returns a column's spec: its alignment and width. first and
// last add no space at the table's outer edges.
func cellSpec(a extast.Alignment, width string, first, last bool) string {
	var b strings.Builder
	if first {
		b.WriteString("@{}")
	}
	switch a {
	case extast.AlignRight:
		b.WriteString(`>{\opcellr}`)
	case extast.AlignCenter:
		b.WriteString(`>{\opcellc}`)
	default:
		b.WriteString(`>{\opcelll}`)
	}
	b.WriteString(`p{` + width + `}`)
	if last {
		b.WriteString("@{}")
	}
	return b.String()
}

// columnAlign returns the alignment of column j.
func (m *tableModel) columnAlign(j int) extast.Alignment {
	if j < len(m.align) {
		return m.align[j]
	}
	return extast.AlignNone
}

// tableBegin returns the line that opens the table, its columns from left
// to right.
func (r *writer) tableBegin(m *tableModel, env string) string {
	var spec strings.Builder
	for p := 0; p < m.ncol; p++ {
		j := r.physical(m, p)
		spec.WriteString(cellSpec(m.columnAlign(j), `\opcw{`+strconv.Itoa(j+1)+`}`, p == 0, p == m.ncol-1))
		if p%16 == 15 {
			spec.WriteString("%\n") // a wide table's column list spans lines
		}
	}
	if env != "longtable" {
		return `\noindent\begin{tabular}{` + spec.String() + "}\n"
	}
	pos := "l"
	if r.docRTL {
		pos = "r"
	}
	return `\begin{longtable}[` + pos + `]{` + spec.String() + "}\n"
}

// tableRows writes the header rows (twice in a longtable: for the first
// page and the following ones) and the body rows.
func (r *writer) tableRows(m *tableModel, env string, p columnPieces) {
	grid := m.grid()
	for i := 0; i < m.header; i++ {
		r.tableRow(m, grid, i, "\\\\\n")
	}
	if m.header > 0 {
		r.raw("\\midrule\n")
	}
	if env == "longtable" {
		if m.header > 0 {
			r.raw("\\endfirsthead\n\\toprule\n")
			r.quiet = true
			for i := 0; i < m.header; i++ {
				r.tableRow(m, grid, i, "\\\\\n")
			}
			r.quiet = false
			r.raw("\\midrule\n")
		} else {
			// A row that sets the columns' widths and prints nothing:
			// without it longtable finds the widths of the first chunk
			// (the head, without a row) changed and asks for a rerun.
			r.raw(strings.Repeat("&", m.ncol-1) + "\\kill\n")
		}
		r.raw("\\endhead\n")
	}
	n := len(m.rows) - m.header
	for i := m.header; i < len(m.rows); i++ {
		r.tableRow(m, grid, i, r.rowEnd(env, p, i-m.header, n, grid.spans(i)))
	}
}

// rowEnd is how body row i of n ends: in a long table the first two and
// last two body rows keep their neighbour on the same page, so that a
// page break leaves at least three rows on either side, a table of fewer
// than six rows is not broken (unless a cell is huge), and rows that a
// cell spans stay together; tall rows get space between them.
func (r *writer) rowEnd(env string, p columnPieces, i, n int, spanned bool) string {
	s := `\\`
	switch {
	case env != "longtable":
	case spanned, n >= 6 && (i < 2 || i >= n-3):
		s = `\\*`
	case n < 6 && !p.huge:
		s = `\\*`
	}
	if p.tall && i < n-1 {
		s += `\opcolgap`
	}
	return s + "\n"
}

// tableGrid says, for each row and column, which cell covers it: the
// cell that starts there, one that spans into it from the left or from a
// row above, or none.
type tableGrid [][]*tableCell

// grid places the cells: a cell spanning rows covers its columns in the
// rows below.
func (m *tableModel) grid() tableGrid {
	g := make(tableGrid, len(m.rows))
	for i := range g {
		g[i] = make([]*tableCell, m.ncol)
	}
	for i, row := range m.rows {
		for _, c := range row.cells {
			for di := 0; di < c.rows && i+di < len(g); di++ {
				for dj := 0; dj < c.span && c.col+dj < m.ncol; dj++ {
					g[i+di][c.col+dj] = c
				}
			}
		}
	}
	return g
}

// spans reports whether a cell of row i spans into the row after it.
func (g tableGrid) spans(i int) bool {
	if i+1 >= len(g) {
		return false
	}
	for j, c := range g[i] {
		if c != nil && g[i+1][j] == c {
			return true
		}
	}
	return false
}

// tableRow writes row i, its cells from left to right.
func (r *writer) tableRow(m *tableModel, g tableGrid, i int, ending string) {
	row := m.rows[i]
	r.at(row.node)
	r.nl()
	r.cell, r.header = true, i < m.header
	for p := 0; p < m.ncol; {
		if p > 0 {
			r.raw("&\n")
		}
		j := r.physical(m, p)
		c := g[i][j]
		if c == nil {
			r.raw(r.cellStart())
			p++
			continue
		}
		// The cell's columns, from left to right: p to p+k-1.
		k := min(c.span, m.ncol-c.col)
		lo := c.col
		if r.docRTL {
			lo = c.col + k - 1
		}
		if lo != j {
			// A cell spanning into this column from one already written
			// (never happens when columns are in reading order).
			k = 1
		}
		owner := m.startsAt(i, c)
		r.tableCell(m, c, owner, p, k)
		p += k
	}
	r.cell, r.header = false, false
	r.raw(ending)
}

// startsAt reports whether cell c begins in row i (else a row above spans
// into it).
func (m *tableModel) startsAt(i int, c *tableCell) bool {
	for _, own := range m.rows[i].cells {
		if own == c {
			return true
		}
	}
	return false
}

// tableCell writes cell c at columns p to p+k-1 from the left; a cell a
// row above spans into (!owner) is empty here.
func (r *writer) tableCell(m *tableModel, c *tableCell, owner bool, p, k int) {
	multi := k > 1 || owner && c.align != extast.AlignNone
	if multi {
		widths := make([]string, 0, k)
		for q := p; q < p+k; q++ {
			widths = append(widths, `\opcw{`+strconv.Itoa(r.physical(m, q)+1)+`}`)
		}
		width := strings.Join(widths, "+")
		if k > 1 {
			width = `\dimexpr` + width + fmt.Sprintf(`+%d\tabcolsep\relax`, 2*(k-1))
		}
		a := c.align
		if a == extast.AlignNone {
			a = m.columnAlign(c.col)
		}
		r.raw(`\multicolumn{` + strconv.Itoa(k) + `}{` + cellSpec(a, width, p == 0, p+k == m.ncol) + `}{`)
	}
	r.word = 0
	if owner {
		r.dir = r.dirOf(c.node)
		r.raw(r.cellStart())
		if r.header || c.head {
			r.raw(`\opthead{`)
			r.cellBody(c.node)
			r.raw(`}`)
		} else {
			r.cellBody(c.node)
		}
		r.dir = r.docRTL
	} else {
		r.raw(r.cellStart())
	}
	if multi {
		r.raw(`}`)
	}
}

// cellStart begins a cell's paragraph (the column's \raggedright and such
// come before) in the cell's direction, writer.dir, where it is not the
// table's (the document's).
func (r *writer) cellStart() string {
	switch {
	case !r.dirs || r.dir == r.docRTL:
		return `\opcs{}`
	case r.dir:
		return `\opcsr{}`
	}
	return `\opcsl{}`
}

// cellBody writes a cell's content: a pipe table's cell or an HTML
// table's paragraph as one paragraph, the blocks of an HTML cell as
// blocks.
func (r *writer) cellBody(n ast.Node) {
	if _, ok := n.(*HTMLTableCell); !ok || inlineOnly(n) {
		r.bidiPara(n)
		return
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			r.raw(`\par` + "\n")
			r.setDir(r.dirOf(c))
		}
		if _, ok := c.(*ast.Paragraph); ok {
			r.bidiPara(c)
			continue
		}
		r.block(c)
	}
}
