package markdown

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// HTML tables. GitHub shows a <table> in Markdown as a table, and READMEs
// use it where a pipe table cannot do (cells spanning columns or rows,
// line breaks, lists or code in a cell). An HTML block that opens with
// <table> is read here, after parsing, into an HTMLTable node: rows,
// cells with colspan and rowspan, and the inline HTML GitHub keeps (<b>,
// <i>, <code>, <br>, <a>, <img>, …) as the Markdown nodes that print the
// same; Markdown blocks set between the tags on lines of their own (after
// a blank line) go into the cell they stand in. The writer sets it like a
// pipe table (table.go). A tag it does not know prints as typed, never as
// a command; a table whose </table> is missing stays text as a whole.

// The nodes of an HTML table.
var (
	KindHTMLTable     = ast.NewNodeKind("HTMLTable")
	KindHTMLTableRow  = ast.NewNodeKind("HTMLTableRow")
	KindHTMLTableCell = ast.NewNodeKind("HTMLTableCell")
	kindHTMLCode      = ast.NewNodeKind("HTMLCode")
	kindHTMLGroup     = ast.NewNodeKind("HTMLGroup")
)

// HTMLTable is a <table>: its children are HTMLTableRow nodes, the first
// Header of them the header (<thead>, or a first row of <th> cells).
type HTMLTable struct {
	ast.BaseBlock
	Header int
}

// Kind implements ast.Node.
func (n *HTMLTable) Kind() ast.NodeKind { return KindHTMLTable }

// Dump implements ast.Node.
func (n *HTMLTable) Dump(src []byte, level int) {
	ast.DumpHelper(n, src, level, map[string]string{"Header": strconv.Itoa(n.Header)}, nil)
}

// HTMLTableRow is a <tr>; its children are HTMLTableCell nodes.
type HTMLTableRow struct{ ast.BaseBlock }

// Kind implements ast.Node.
func (n *HTMLTableRow) Kind() ast.NodeKind { return KindHTMLTableRow }

// Dump implements ast.Node.
func (n *HTMLTableRow) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// HTMLTableCell is a <td> or <th> (Head): its children are blocks, a
// paragraph for the inline content.
type HTMLTableCell struct {
	ast.BaseBlock
	Head             bool
	ColSpan, RowSpan int // at least 1; RowSpan 0 spans the rest of the table
	Align            extast.Alignment
}

// Kind implements ast.Node.
func (n *HTMLTableCell) Kind() ast.NodeKind { return KindHTMLTableCell }

// Dump implements ast.Node.
func (n *HTMLTableCell) Dump(src []byte, level int) {
	ast.DumpHelper(n, src, level, map[string]string{
		"Head": strconv.FormatBool(n.Head), "ColSpan": strconv.Itoa(n.ColSpan), "RowSpan": strconv.Itoa(n.RowSpan),
	}, nil)
}

// htmlCode is <code>, <kbd>, <samp> or <tt>: its children are text, set
// in monospace as a code span.
type htmlCode struct{ ast.BaseInline }

func (n *htmlCode) Kind() ast.NodeKind         { return kindHTMLCode }
func (n *htmlCode) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// htmlGroup is <sup>, <sub>, <mark> or <small>: its children in a group
// opened by open (one of htmlGroupMacros).
type htmlGroup struct {
	ast.BaseInline
	open string
}

func (n *htmlGroup) Kind() ast.NodeKind         { return kindHTMLGroup }
func (n *htmlGroup) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// htmlGroupMacros are the groups of the formatting tags htmlGroup
// stands for.
var htmlGroupMacros = map[string]string{
	"sup":   `\textsuperscript{`,
	"sub":   `\textsubscript{`,
	"mark":  `\ophlbox{`,
	"small": `{\small `,
}

// htmlTableTransformer turns HTML blocks that hold a table into
// HTMLTable nodes.
type htmlTableTransformer struct{}

// Transform implements parser.ASTTransformer.
func (htmlTableTransformer) Transform(doc *ast.Document, reader text.Reader, pc parser.Context) {
	src := reader.Source()
	var found []*ast.HTMLBlock
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if hb, ok := n.(*ast.HTMLBlock); ok && entering && opensTable(htmlText(hb, src)) {
			found = append(found, hb)
		}
		return ast.WalkContinue, nil
	})
	for _, hb := range found {
		if hb.Parent() != nil { // not consumed by a table before it
			convertTable(hb, src)
		}
	}
}

// htmlPiece is a run of an HTML block's text: its lines joined, and the
// source offset of each byte's line start (to report lines).
type htmlPiece struct {
	text  string
	start []int // start[i]: source offset of text's i-th line
	lines []int // offsets in text where each line starts
}

func (p htmlPiece) srcPos(off int) int {
	i := 0
	for i+1 < len(p.lines) && p.lines[i+1] <= off {
		i++
	}
	if len(p.start) == 0 {
		return -1
	}
	return p.start[i] + off - p.lines[i]
}

// htmlText returns the text of an HTML block.
func htmlText(hb *ast.HTMLBlock, src []byte) htmlPiece {
	var p htmlPiece
	var b strings.Builder
	l := hb.Lines()
	for i := 0; i < l.Len(); i++ {
		s := l.At(i)
		p.lines = append(p.lines, b.Len())
		p.start = append(p.start, s.Start)
		b.Write(s.Value(src))
	}
	if hb.HasClosure() {
		p.lines = append(p.lines, b.Len())
		p.start = append(p.start, hb.ClosureLine.Start)
		b.Write(hb.ClosureLine.Value(src))
	}
	p.text = b.String()
	return p
}

// opensTable reports whether an HTML block starts with a <table> tag.
func opensTable(p htmlPiece) bool {
	s := strings.TrimLeft(p.text, " \t\r\n")
	if len(s) < 6 || !strings.EqualFold(s[:6], "<table") {
		return false
	}
	return len(s) == 6 || strings.ContainsRune(" \t\r\n>/", rune(s[6]))
}

// closesTable reports whether s has a </table> end tag.
func closesTable(s string) bool {
	return bytes.Contains(bytes.ToLower([]byte(s)), []byte("</table"))
}

// convertTable reads the table that HTML block hb opens, with the blocks
// after it up to the one that closes it, and puts it in their place.
// Without a closing tag nothing changes.
func convertTable(hb *ast.HTMLBlock, src []byte) {
	parts := []ast.Node{hb}
	first := htmlText(hb, src)
	if !closesTable(first.text) {
		closed := false
		for n := hb.NextSibling(); n != nil && !closed; n = n.NextSibling() {
			parts = append(parts, n)
			if h, ok := n.(*ast.HTMLBlock); ok {
				closed = closesTable(htmlText(h, src).text)
			}
		}
		if !closed {
			return
		}
	}
	parent := hb.Parent()
	b := &tableBuilder{src: src}
	for _, part := range parts {
		if h, ok := part.(*ast.HTMLBlock); ok {
			b.html(htmlText(h, src))
			continue
		}
		b.block(part)
	}
	b.endTable()
	for _, n := range b.out {
		parent.InsertBefore(parent, hb, n)
	}
	for _, part := range parts {
		if part.Parent() == parent {
			parent.RemoveChild(parent, part)
		}
	}
}

// maxFormatDepth bounds the formatting tags open at once in a cell;
// deeper ones are transparent.
const maxFormatDepth = 16

// maxTagBytes bounds a tag: a '<' without its '>' within as many bytes is
// text (so that a text of many '<' costs linear time).
const maxTagBytes = 2048

// tableBuilder builds the nodes of HTML tables from tags and blocks.
type tableBuilder struct {
	src   []byte
	out   []ast.Node // what takes the blocks' place: tables, text around them
	table *HTMLTable
	head  bool // inside <thead>
	row   *HTMLTableRow
	cell  *HTMLTableCell
	para  *ast.Paragraph // the paragraph text goes into (a cell's, or one outside the table)
	stack []formatName   // open formatting nodes in para
	space bool           // white space is pending before the next text
	pos   int            // source offset of the token being read
	// rest holds the HTML after the last table that is not a table: it
	// prints as typed (flushRest), as HTML blocks do.
	rest []string
}

// html reads a piece of HTML.
func (b *tableBuilder) html(p htmlPiece) {
	for _, t := range htmlTokens(p.text) {
		b.pos = p.srcPos(t.pos)
		if b.table == nil {
			if t.kind == 's' && t.name == "table" {
				b.flushRest()
				b.table = &HTMLTable{}
				b.table.SetPos(b.pos)
				continue
			}
			if t.kind != 'c' {
				b.rest = append(b.rest, t.raw)
			}
			continue
		}
		b.token(t)
	}
}

// block puts a Markdown block that stands between the tags into the
// cell it is in; outside a cell it comes before the table, where a browser
// shows it.
func (b *tableBuilder) block(n ast.Node) {
	if b.table == nil {
		b.flushRest()
		b.out = append(b.out, n)
		return
	}
	if b.cell == nil {
		b.out = append(b.out, n)
		return
	}
	b.para, b.stack, b.space = nil, nil, false
	b.cell.AppendChild(b.cell, n)
}

// token reads a token inside a table.
func (b *tableBuilder) token(t htmlToken) {
	switch t.kind {
	case 'c':
		return
	case 't':
		b.text(t.raw)
		return
	case 'e':
		b.endTag(t)
		return
	}
	switch t.name {
	case "table":
		// A table in a cell is not set as one: its tags print as text.
		b.literal(t.raw)
	case "thead":
		b.endCell()
		b.head = true
	case "tbody", "tfoot":
		b.endCell()
		b.head = false
	case "tr":
		b.newRow()
	case "td", "th":
		b.newCell(t)
	case "caption", "colgroup", "col":
		// Understood, and without a place in print.
	default:
		b.inlineTag(t)
	}
}

func (b *tableBuilder) endTag(t htmlToken) {
	switch t.name {
	case "table":
		b.endTable()
	case "thead", "tbody", "tfoot":
		b.endCell()
		b.row = nil
		b.head = false
	case "tr":
		b.endCell()
		b.row = nil
	case "td", "th":
		b.endCell()
	case "caption", "colgroup", "col", "span", "font", "abbr", "big", "nobr", "center", "label", "time", "ul", "ol", "li":
	case "p", "div":
		b.lineBreak()
	default:
		if !b.closeFormat(t.name) {
			b.literal(t.raw)
		}
	}
}

// inlineTag reads a start tag inside a cell.
func (b *tableBuilder) inlineTag(t htmlToken) {
	switch t.name {
	case "br", "hr":
		b.lineBreak()
	case "p", "div":
		b.lineBreak()
	case "li":
		b.lineBreak()
		b.inline(ast.NewString([]byte("• ")))
	case "span", "font", "abbr", "big", "nobr", "center", "label", "time", "ul", "ol":
	case "a":
		l := ast.NewLink()
		l.Destination = []byte(t.attr("href"))
		l.Title = []byte(t.attr("title"))
		b.open(t.name, l)
	case "img":
		b.image(t)
	default:
		if n := formatNode(t.name); n != nil {
			b.open(t.name, n)
			return
		}
		b.literal(t.raw)
	}
}

// formatNode returns the node a formatting tag stands for, nil for none.
func formatNode(name string) ast.Node {
	switch name {
	case "b", "strong":
		return ast.NewEmphasis(2)
	case "i", "em", "cite", "var", "dfn":
		return ast.NewEmphasis(1)
	case "u", "ins":
		return &Underline{}
	case "s", "del", "strike":
		return extast.NewStrikethrough()
	case "code", "kbd", "samp", "tt":
		return &htmlCode{}
	}
	if open, ok := htmlGroupMacros[name]; ok {
		return &htmlGroup{open: open}
	}
	return nil
}

// formatName gives each node the tag that closes it.
type formatName struct {
	ast.Node
	name string
}

// open opens a formatting node in the cell's paragraph; deeper than
// maxFormatDepth a tag is transparent.
func (b *tableBuilder) open(name string, n ast.Node) {
	if len(b.stack) >= maxFormatDepth {
		return
	}
	if b.space && b.para != nil && b.para.HasChildren() {
		// The space before the tag is outside what it formats.
		b.space = false
		b.inline(ast.NewString([]byte(" ")))
	}
	n.SetPos(b.pos)
	b.inline(n)
	b.stack = append(b.stack, formatName{n, name})
}

// closeFormat closes the innermost open node of a tag name and the ones
// inside it; it reports false when none is open.
func (b *tableBuilder) closeFormat(name string) bool {
	if name == "a" || formatNode(name) != nil {
		for i := len(b.stack) - 1; i >= 0; i-- {
			if b.stack[i].name == name {
				b.stack = b.stack[:i]
				return true
			}
		}
		return len(b.stack) >= maxFormatDepth // a transparent one
	}
	return false
}

// image reads <img>: an image of the document (fetched like Markdown's),
// its alt text the description, its width and height Outline's size hint.
func (b *tableBuilder) image(t htmlToken) {
	img := ast.NewImage(ast.NewLink())
	img.Destination = []byte(t.attr("src"))
	title := t.attr("title")
	w, h := t.attr("width"), t.attr("height")
	if digits(w) || digits(h) {
		title = strings.TrimSpace(title + " =" + w + "x" + h)
	}
	img.Title = []byte(title)
	img.SetPos(b.pos)
	if alt := t.attr("alt"); alt != "" {
		img.AppendChild(img, ast.NewString([]byte(alt)))
	}
	b.inline(img)
}

func digits(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// text adds text: entities resolved, white space collapsed as a browser
// does.
func (b *tableBuilder) text(raw string) {
	v := util.ResolveEntityNames(resolveNumericReferences([]byte(raw)))
	for len(v) > 0 {
		i := bytes.IndexAny(v, " \t\r\n\f")
		if i == 0 {
			b.space = true
			v = v[1:]
			continue
		}
		word := v
		if i > 0 {
			word = v[:i]
		}
		v = v[len(word):]
		b.word(string(clean(word)))
	}
}

// literal adds text as it stands: a tag that is not understood.
func (b *tableBuilder) literal(raw string) {
	b.word(string(clean([]byte(strings.Join(strings.Fields(raw), " ")))))
}

// word adds a piece of text without white space, after the pending space
// if the paragraph has text before it.
func (b *tableBuilder) word(s string) {
	if s == "" {
		return
	}
	if b.space && b.para != nil && b.para.HasChildren() {
		s = " " + s
	}
	b.space = false
	b.inline(ast.NewString([]byte(s)))
}

// lineBreak ends a line in the cell (<br>, and between <p> or <div>
// blocks), unless it has no text yet.
func (b *tableBuilder) lineBreak() {
	b.space = false
	if b.para == nil || !b.para.HasChildren() {
		return
	}
	if last, ok := b.para.LastChild().(*ast.Text); ok && last.HardLineBreak() {
		return
	}
	br := ast.NewTextSegment(text.NewSegment(0, 0))
	br.SetHardLineBreak(true)
	b.para.AppendChild(b.para, br)
}

// inline appends n to the innermost open node, starting the cell's
// paragraph (or, outside a cell, the table's text) if need be.
func (b *tableBuilder) inline(n ast.Node) {
	if b.cell == nil && b.table != nil && b.row == nil && b.para == nil {
		// Text in <table> or <tr> outside a cell: a browser shows it
		// before the table.
		b.para = ast.NewParagraph()
		b.out = append(b.out, b.para)
	}
	if b.cell == nil && b.para == nil {
		b.newCell(htmlToken{name: "td"})
	}
	if b.para == nil {
		b.para = ast.NewParagraph()
		b.cell.AppendChild(b.cell, b.para)
	}
	parent := ast.Node(b.para)
	if len(b.stack) > 0 {
		parent = b.stack[len(b.stack)-1].Node
	}
	parent.AppendChild(parent, n)
}

func (b *tableBuilder) newRow() {
	b.endCell()
	b.row = &HTMLTableRow{}
	b.row.SetPos(b.pos)
	b.table.AppendChild(b.table, b.row)
	if b.head {
		b.table.Header++
	}
}

func (b *tableBuilder) newCell(t htmlToken) {
	b.endCell()
	if b.row == nil {
		b.newRow()
	}
	c := &HTMLTableCell{Head: t.name == "th", ColSpan: spanAttr(t.attr("colspan"), 1, maxTableColumns+1), RowSpan: spanAttr(t.attr("rowspan"), 0, 1<<16)}
	if t.attr("rowspan") == "" {
		c.RowSpan = 1
	}
	c.Align = alignAttr(t)
	c.SetPos(b.pos)
	b.row.AppendChild(b.row, c)
	b.cell = c
}

// spanAttr reads colspan or rowspan: a number from lo to hi, 1 when it is
// not one.
func spanAttr(s string, lo, hi int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < lo {
		return 1
	}
	return min(n, hi)
}

// alignAttr reads a cell's align attribute or its style's text-align.
func alignAttr(t htmlToken) extast.Alignment {
	a := strings.ToLower(t.attr("align"))
	if style := strings.ToLower(t.attr("style")); a == "" && strings.Contains(style, "text-align") {
		_, v, _ := strings.Cut(style, "text-align")
		v = strings.TrimLeft(v, " :")
		a = strings.TrimRight(strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ' ' })[0], " ")
	}
	switch a {
	case "left":
		return extast.AlignLeft
	case "right":
		return extast.AlignRight
	case "center":
		return extast.AlignCenter
	}
	return extast.AlignNone
}

func (b *tableBuilder) endCell() {
	b.cell, b.para, b.stack, b.space = nil, nil, nil, false
}

// endTable ends the table being read: a table with rows takes its place,
// the first row its header if all its cells are <th>.
func (b *tableBuilder) endTable() {
	b.endCell()
	t := b.table
	b.table, b.row, b.head = nil, nil, false
	if t == nil {
		return
	}
	if t.Header == 0 {
		if first, ok := t.FirstChild().(*HTMLTableRow); ok && first.HasChildren() {
			all := true
			for c := first.FirstChild(); c != nil; c = c.NextSibling() {
				all = all && c.(*HTMLTableCell).Head
			}
			if all {
				t.Header = 1
			}
		}
	}
	if t.HasChildren() {
		b.out = append(b.out, t)
	}
}

// flushRest puts the HTML beside a table that is not a table where it
// stands: as typed, each line a line.
func (b *tableBuilder) flushRest() {
	s := strings.Join(b.rest, "")
	b.rest = nil
	if strings.TrimSpace(s) == "" {
		return
	}
	p := ast.NewParagraph()
	p.SetPos(b.pos)
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		t := ast.NewString([]byte(strings.TrimRight(l, " \t\r")))
		p.AppendChild(p, t)
		if i < len(lines)-1 {
			br := ast.NewTextSegment(text.NewSegment(0, 0))
			br.SetHardLineBreak(true)
			p.AppendChild(p, br)
		}
	}
	b.out = append(b.out, p)
}

// inlineOnly reports whether a cell holds at most one paragraph and
// nothing else: it is set as one paragraph, like a pipe table's cell.
func inlineOnly(n ast.Node) bool {
	c := n.FirstChild()
	if c == nil {
		return true
	}
	_, ok := c.(*ast.Paragraph)
	return ok && c.NextSibling() == nil
}

// htmlTable sets an HTML table: the cells placed in columns as a browser
// places them (a cell that spans rows takes its columns in the rows below).
func (r *writer) htmlTable(t *HTMLTable) {
	m := &tableModel{header: t.Header}
	var taken [][]bool // taken[i][j]: row i's column j is covered from above
	nrows := t.ChildCount()
	i := 0
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		tr := tableRow{node: row}
		col := 0
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			hc := c.(*HTMLTableCell)
			for col < len(takenRow(taken, i)) && taken[i][col] {
				col++
			}
			rows := hc.RowSpan
			if rows == 0 || i+rows > nrows {
				rows = nrows - i
			}
			cell := &tableCell{node: hc, col: col, span: hc.ColSpan, rows: rows, head: hc.Head, align: hc.Align}
			tr.cells = append(tr.cells, cell)
			for di := 1; di < rows && col <= maxTableColumns; di++ {
				for len(taken) <= i+di {
					taken = append(taken, nil)
				}
				for len(taken[i+di]) < col+cell.span {
					taken[i+di] = append(taken[i+di], false)
				}
				for dj := 0; dj < cell.span; dj++ {
					taken[i+di][col+dj] = true
				}
			}
			col += cell.span
		}
		m.ncol = max(m.ncol, col, len(takenRow(taken, i)))
		m.rows = append(m.rows, tr)
		i++
	}
	m.header = min(m.header, len(m.rows))
	r.setTable(m)
}

func takenRow(taken [][]bool, i int) []bool {
	if i < len(taken) {
		return taken[i]
	}
	return nil
}
