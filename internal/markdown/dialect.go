package markdown

import (
	"bytes"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// This file holds the goldmark extensions for Outline's dialect: notices,
// toggles, math, underline, highlight and placeholders. They only build
// nodes; the LaTeX writer decides what the nodes look like.

// Node kinds of the dialect.
var (
	KindNotice      = ast.NewNodeKind("Notice")
	KindToggle      = ast.NewNodeKind("Toggle")
	KindToggleTitle = ast.NewNodeKind("ToggleTitle")
	KindMathBlock   = ast.NewNodeKind("MathBlock")
	KindMathInline  = ast.NewNodeKind("MathInline")
	KindUnderline   = ast.NewNodeKind("Underline")
	KindHighlight   = ast.NewNodeKind("Highlight")
	KindPlaceholder = ast.NewNodeKind("Placeholder")
)

// Notice is a `:::style` … `:::` block.
type Notice struct {
	ast.BaseBlock
	Style string // info, warning, tip or success
	fence int
}

// Kind implements ast.Node.
func (n *Notice) Kind() ast.NodeKind { return KindNotice }

// Dump implements ast.Node.
func (n *Notice) Dump(src []byte, level int) {
	ast.DumpHelper(n, src, level, map[string]string{"Style": n.Style}, nil)
}

// Toggle is Outline's toggle block, printed open: a `+++…` fence, its
// blocks, the closing fence. With a title on the fence line its first
// child is the ToggleTitle; on a bare fence the first block is the title.
type Toggle struct {
	ast.BaseBlock
	Title []byte // raw source of the title (backslash escapes unresolved)
	fence int
}

// ToggleTitle is a toggle's title line, parsed as inline Markdown (goldmark
// parses the inlines of every block that has lines).
type ToggleTitle struct{ ast.BaseBlock }

// Kind implements ast.Node.
func (n *ToggleTitle) Kind() ast.NodeKind { return KindToggleTitle }

// Dump implements ast.Node.
func (n *ToggleTitle) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// Kind implements ast.Node.
func (n *Toggle) Kind() ast.NodeKind { return KindToggle }

// Dump implements ast.Node.
func (n *Toggle) Dump(src []byte, level int) {
	ast.DumpHelper(n, src, level, map[string]string{"Title": string(n.Title)}, nil)
}

// MathBlock is a `$$` … `$$` block; its lines are the formula.
type MathBlock struct {
	ast.BaseBlock
	closed  bool // the closing $$ was seen
	oneLine bool // `$$ x $$` on a single line
}

// Kind implements ast.Node.
func (n *MathBlock) Kind() ast.NodeKind { return KindMathBlock }

// IsRaw implements ast.Node: the lines are a formula, not Markdown.
func (n *MathBlock) IsRaw() bool { return true }

// Dump implements ast.Node.
func (n *MathBlock) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// MathInline is `$x$` (or `$$x$$` inside a paragraph, Display set).
type MathInline struct {
	ast.BaseInline
	Formula string
	Display bool
	Offset  int // byte offset of the opening $ in the source
}

// Kind implements ast.Node.
func (n *MathInline) Kind() ast.NodeKind { return KindMathInline }

// Dump implements ast.Node.
func (n *MathInline) Dump(src []byte, level int) {
	ast.DumpHelper(n, src, level, map[string]string{"Formula": n.Formula}, nil)
}

// Underline is `__text__` (Outline's underline, not bold).
type Underline struct{ ast.BaseInline }

// Kind implements ast.Node.
func (n *Underline) Kind() ast.NodeKind { return KindUnderline }

// Dump implements ast.Node.
func (n *Underline) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// Highlight is `==text==`.
type Highlight struct{ ast.BaseInline }

// Kind implements ast.Node.
func (n *Highlight) Kind() ast.NodeKind { return KindHighlight }

// Dump implements ast.Node.
func (n *Highlight) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// Placeholder is `!!text!!`, printed as its text.
type Placeholder struct{ ast.BaseInline }

// Kind implements ast.Node.
func (n *Placeholder) Kind() ast.NodeKind { return KindPlaceholder }

// Dump implements ast.Node.
func (n *Placeholder) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

// fenceLine reports whether line (after up to three spaces of indentation)
// is a run of exactly n copies of c followed only by blanks.
func fenceLine(line []byte, c byte, n int) bool {
	i := 0
	for i < len(line) && i < 3 && line[i] == ' ' {
		i++
	}
	j := i
	for j < len(line) && line[j] == c {
		j++
	}
	return j-i == n && util.IsBlank(line[j:])
}

// insideRawChild reports whether a block opened after node is still
// collecting raw lines (fenced code, math): a fence line there belongs to
// it, not to the container around it.
func insideRawChild(node ast.Node, pc parser.Context) bool {
	// Raw blocks are leaves and the open blocks a chain from the
	// outermost in, so only the innermost can be one (checking just it
	// keeps a line's work linear in the nesting depth, not quadratic).
	blocks := pc.OpenedBlocks()
	if len(blocks) == 0 {
		return false
	}
	last := blocks[len(blocks)-1].Node
	if last == node {
		return false
	}
	switch last.(type) {
	case *ast.FencedCodeBlock, *MathBlock, *ast.HTMLBlock, *ast.CodeBlock:
		return true
	}
	return false
}

// insideNotice reports whether a notice with node's fence was opened
// inside node and is still open: a closing fence closes the innermost one,
// so that a notice can hold another one with the same fence.
func insideNotice(node ast.Node, pc parser.Context) bool {
	blocks := pc.OpenedBlocks()
	for i, b := range blocks {
		if b.Node != node {
			continue
		}
		for _, c := range blocks[i+1:] {
			if n, ok := c.Node.(*Notice); ok && n.fence == node.(*Notice).fence {
				return true
			}
		}
	}
	return false
}

// noticeParser parses `:::info` … `:::`. The closing line must repeat the
// opening's number of colons, so that a longer fence can hold a shorter one.
type noticeParser struct{}

func (noticeParser) Trigger() []byte { return []byte{':'} }

func (noticeParser) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	line, _ := reader.PeekLine()
	i := pc.BlockOffset()
	if i < 0 {
		return nil, parser.NoChildren
	}
	j := i
	for j < len(line) && line[j] == ':' {
		j++
	}
	if j-i < 3 {
		return nil, parser.NoChildren
	}
	fence := j - i
	for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
		j++
	}
	k := noticeWordEnd(line, j)
	if k == j || !util.IsBlank(line[k:]) {
		return nil, parser.NoChildren
	}
	style, ok := noticeStyles[string(bytes.ToLower(line[j:k]))]
	if !ok {
		return nil, parser.NoChildren
	}
	reader.AdvanceToEOL()
	return &Notice{Style: style, fence: fence}, parser.HasChildren
}

// noticeWordEnd is the end of the style word that starts at j: letters,
// then lower-case parts joined by `_` (layout_section).
func noticeWordEnd(line []byte, j int) int {
	k := j
	for k < len(line) && (line[k] >= 'a' && line[k] <= 'z' || line[k] >= 'A' && line[k] <= 'Z') {
		k++
	}
	for k < len(line) && line[k] == '_' && k+1 < len(line) && line[k+1] >= 'a' && line[k+1] <= 'z' {
		k++ // layout_section
		for k < len(line) && line[k] >= 'a' && line[k] <= 'z' {
			k++
		}
	}
	return k
}

// noticeStyles maps the style words a notice fence may carry (lower-cased)
// to the Notice's Style: Outline's four kinds and their other names, and
// Outline's side-by-side columns (::::layout, :::layout_section), which
// are printed one after another, a page having no room for columns of
// arbitrary blocks.
var noticeStyles = map[string]string{
	"info": "info", "warning": "warning", "tip": "tip", "success": "success",
	"note": "info", "notice": "info",
	"danger": "warning", "caution": "warning",
	"layout": "layout", "layout_section": "layout_section",
}

func (noticeParser) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	line, _ := reader.PeekLine()
	if fenceLine(line, ':', node.(*Notice).fence) && !insideRawChild(node, pc) && !insideNotice(node, pc) {
		reader.AdvanceToEOL()
		return parser.Close
	}
	return parser.Continue | parser.HasChildren
}

func (noticeParser) Close(node ast.Node, reader text.Reader, pc parser.Context) {}
func (noticeParser) CanInterruptParagraph() bool                                { return true }
func (noticeParser) CanAcceptIndentedLine() bool                                { return false }

// toggleParser parses Outline's toggles: a fence of three or more `+`
// (Outline writes 3 + the toggle's nesting height, so that an inner toggle
// has fewer), the blocks of the toggle, and a closing line of at least as
// many `+` and nothing else, as markdown-it-container (Outline's parser)
// reads them. A bare fence's title is the first block inside (the writer
// makes it the title); `+++ Title` on the fence line is read as the title
// too.
type toggleParser struct{}

func (toggleParser) Trigger() []byte { return []byte{'+'} }

func (toggleParser) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	line, seg := reader.PeekLine()
	i := pc.BlockOffset()
	if i < 0 {
		return nil, parser.NoChildren
	}
	j := i
	for j < len(line) && line[j] == '+' {
		j++
	}
	if j-i < 3 || (j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\n' && line[j] != '\r') {
		return nil, parser.NoChildren
	}
	k := j
	for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
		k++
	}
	title := bytes.TrimRight(line[k:], " \t\r\n")
	reader.AdvanceToEOL()
	t := &Toggle{Title: append([]byte(nil), title...), fence: j - i}
	if len(title) > 0 {
		// The title is a child block of its own, added here rather than
		// opened by the parser: no later line continues it, and the
		// body's blocks follow it.
		tt := &ToggleTitle{}
		start := seg.Start + k - seg.Padding // Padding: spaces of a tab that are not in the source
		tt.Lines().Append(text.NewSegment(start, start+len(title)))
		t.AppendChild(t, tt)
	}
	return t, parser.HasChildren
}

func (toggleParser) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	line, _ := reader.PeekLine()
	if closingFence(line, '+', node.(*Toggle).fence) && !insideRawChild(node, pc) {
		reader.AdvanceToEOL()
		return parser.Close
	}
	return parser.Continue | parser.HasChildren
}

// closingFence reports whether line (after up to three spaces) is a run of
// at least n copies of c followed only by blanks.
func closingFence(line []byte, c byte, n int) bool {
	i := 0
	for i < len(line) && i < 3 && line[i] == ' ' {
		i++
	}
	j := i
	for j < len(line) && line[j] == c {
		j++
	}
	return j-i >= n && util.IsBlank(line[j:])
}

func (toggleParser) Close(node ast.Node, reader text.Reader, pc parser.Context) {}
func (toggleParser) CanInterruptParagraph() bool                                { return true }
func (toggleParser) CanAcceptIndentedLine() bool                                { return false }

// mathBlockParser parses `$$` lines around a formula, or `$$ x $$` alone
// on a line. A block whose closing `$$` never comes is turned back into a
// paragraph, so that a stray `$$` is ordinary text, as in pandoc.
type mathBlockParser struct{}

func (mathBlockParser) Trigger() []byte { return []byte{'$'} }

func (mathBlockParser) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	line, seg := reader.PeekLine()
	i := pc.BlockOffset()
	if i < 0 || i+2 > len(line) || line[i] != '$' || line[i+1] != '$' {
		return nil, parser.NoChildren
	}
	rest := bytes.TrimSpace(line[i+2:])
	node := &MathBlock{}
	node.Lines().Append(text.NewSegment(seg.Start, seg.Stop)) // the opening line, kept for the fallback
	if len(rest) == 0 {
		reader.AdvanceToEOL()
		return node, parser.NoChildren
	}
	if len(rest) > 2 && bytes.HasSuffix(rest, []byte("$$")) && !bytes.Contains(rest[:len(rest)-2], []byte("$$")) {
		node.closed, node.oneLine = true, true
		reader.AdvanceToEOL()
		return node, parser.NoChildren
	}
	return nil, parser.NoChildren
}

func (mathBlockParser) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	n := node.(*MathBlock)
	if n.closed {
		return parser.Close
	}
	line, seg := reader.PeekLine()
	if line == nil {
		return parser.Close
	}
	t := bytes.TrimSpace(line)
	n.Lines().Append(text.NewSegment(seg.Start, seg.Stop))
	reader.AdvanceToEOL()
	if bytes.HasSuffix(t, []byte("$$")) {
		n.closed = true
		return parser.Close
	}
	return parser.Continue | parser.NoChildren
}

func (mathBlockParser) Close(node ast.Node, reader text.Reader, pc parser.Context) {
	n := node.(*MathBlock)
	if n.closed || node.Parent() == nil {
		return
	}
	// No closing $$: the lines are an ordinary paragraph.
	p := ast.NewParagraph()
	p.SetLines(n.Lines())
	p.SetPos(n.Pos())
	node.Parent().ReplaceChild(node.Parent(), node, p)
}

func (mathBlockParser) CanInterruptParagraph() bool { return true }
func (mathBlockParser) CanAcceptIndentedLine() bool { return false }

// Formula returns the formula of a closed math block: its lines without
// the `$$` fences.
func (n *MathBlock) Formula(src []byte) string {
	var b bytes.Buffer
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	s := bytes.TrimSpace(b.Bytes())
	s = bytes.TrimPrefix(s, []byte("$$"))
	s = bytes.TrimSuffix(s, []byte("$$"))
	return string(bytes.TrimSpace(s))
}

var mathMissKey = parser.NewContextKey()

// mathMiss records, per block, the offset from which no closing `$`
// (from[0]) or `$$` (from[1]) exists.
type mathMiss struct {
	block ast.Node
	from  [2]int
}

// mathInlineParser parses `$x$` with pandoc's tex_math_dollars rules: the
// opening `$` is not followed by a blank, the closing one is not preceded
// by a blank nor followed by a digit. `$$x$$` inside a paragraph is display
// math. A formula may continue over the lines of its paragraph.
//
// With outline set it follows Outline's rule instead (outlineMath).
type mathInlineParser struct{ outline bool }

func (mathInlineParser) Trigger() []byte { return []byte{'$'} }

// outlineMath is Outline's inline math rule (shared/editor/rules/math.ts):
// only the next unescaped `$` is tried as the closer. The opener must not
// be followed by a blank; the closer must not be preceded by a blank nor
// followed by a digit, and — beyond Outline, which would take `$HOME/$` in
// `$HOME/$PATH` as a formula — not by a letter either: Outline never
// escapes `$` in text, so a closer glued to a word is taken as text. When
// the next `$` cannot close, the opener is text and the scan moves on.
// `$$` inside a paragraph is text, as in Outline (display math is the
// `$$` block).
func outlineMath(block text.Reader) ast.Node {
	line, seg := block.PeekLine()
	if len(line) >= 2 && line[1] == '$' {
		// `$$` with nothing between is text, both dollars.
		block.Advance(2)
		return ast.NewTextSegment(text.NewSegment(seg.Start, seg.Start+2))
	}
	if len(line) < 2 || line[1] == ' ' || line[1] == '\t' || line[1] == '\n' {
		return nil
	}
	start := seg.Start
	l, pos := block.Position()
	block.Advance(1)
	var formula []byte
	for {
		line, _ := block.PeekLine()
		if line == nil {
			block.SetPosition(l, pos)
			return nil
		}
		if i := unescapedDollar(line); i >= 0 {
			if !outlineCloses(line, i) {
				block.SetPosition(l, pos)
				return nil
			}
			formula = append(formula, line[:i]...)
			block.Advance(i + 1)
			return &MathInline{Formula: string(formula), Offset: start}
		}
		formula = append(formula, line...)
		block.AdvanceLine()
	}
}

// unescapedDollar is the offset of the first `$` in line that an odd run
// of backslashes does not escape, -1 if none.
func unescapedDollar(line []byte) int {
	for i := 0; i < len(line); i++ {
		if line[i] != '$' {
			continue
		}
		esc := 0
		for j := i - 1; j >= 0 && line[j] == '\\'; j-- {
			esc++
		}
		if esc%2 == 0 {
			return i
		}
	}
	return -1
}

// outlineCloses reports whether the `$` at line[i] may close a formula
// under outlineMath's rule: no blank before it, no digit or letter after.
func outlineCloses(line []byte, i int) bool {
	prev := byte('\n')
	if i > 0 {
		prev = line[i-1]
	}
	var next byte
	if i+1 < len(line) {
		next = line[i+1]
	}
	return !(prev == ' ' || prev == '\t' || next >= '0' && next <= '9' ||
		next >= 'a' && next <= 'z' || next >= 'A' && next <= 'Z')
}

func (p mathInlineParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	if p.outline {
		return outlineMath(block)
	}
	return dollarMath(parent, block, pc)
}

// dollarMath is pandoc's rule (see mathInlineParser): `$x$`, or `$$x$$`
// displayed.
func dollarMath(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, seg := block.PeekLine()
	open := mathOpener(line)
	if open == 0 {
		return nil
	}
	start := seg.Start
	// A closer's validity does not depend on its opener, so once a scan
	// found no closer up to the end of this block, no later opener in the
	// block can find one either: remember that, or a paragraph of many
	// lone dollars would be scanned quadratically.
	miss, _ := pc.Get(mathMissKey).(*mathMiss)
	if miss != nil && miss.block == parent && start >= miss.from[open-1] {
		return nil
	}
	l, pos := block.Position()
	block.Advance(open)
	var formula []byte
	for {
		line, _ := block.PeekLine()
		if line == nil {
			block.SetPosition(l, pos)
			noteMathMiss(pc, miss, parent, open, start)
			return nil
		}
		if i := mathCloser(line, open, formula); i >= 0 {
			formula = append(formula, line[:i]...)
			block.Advance(i + open)
			return &MathInline{Formula: string(formula), Display: open == 2, Offset: start}
		}
		formula = append(formula, line...)
		block.AdvanceLine()
	}
}

// mathOpener is the length of the opener (`$` 1, `$$` 2) line starts
// with, 0 when it opens no formula: the opener must be followed by
// something that is neither a blank nor another `$`.
func mathOpener(line []byte) int {
	open := 1
	if len(line) > 1 && line[1] == '$' {
		open = 2
	}
	if open >= len(line) || line[open] == ' ' || line[open] == '\t' || line[open] == '\n' || line[open] == '$' {
		return 0
	}
	return open
}

// noteMathMiss records that no closer for an opener of length open exists
// after start in the block parent (see dollarMath); miss is the record so
// far, nil or of another block when there is none for this one.
func noteMathMiss(pc parser.Context, miss *mathMiss, parent ast.Node, open, start int) {
	if miss == nil || miss.block != parent {
		miss = &mathMiss{block: parent, from: [2]int{1 << 62, 1 << 62}}
		pc.Set(mathMissKey, miss)
	}
	miss.from[open-1] = min(miss.from[open-1], start)
}

// mathCloser is the offset in line of the closer of an opener of length
// open, -1 if the line has none; formula is what the formula holds from
// the lines before. Backslashes escape the character after them.
func mathCloser(line []byte, open int, formula []byte) int {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' && i+1 < len(line) {
			i++
			continue
		}
		if c != '$' {
			continue
		}
		if open == 2 {
			// `$$`, not at the start of a line.
			if i+1 < len(line) && line[i+1] == '$' && i > 0 {
				return i
			}
			continue
		}
		if dollarCloses(line, i, formula) {
			return i
		}
	}
	return -1
}

// dollarCloses reports whether the `$` at line[i] closes a formula opened
// by one `$`: it is not preceded by a blank (at the line's start, the
// formula's last character is before it) nor followed by a digit.
func dollarCloses(line []byte, i int, formula []byte) bool {
	prev := byte(' ')
	if i > 0 {
		prev = line[i-1]
	} else if len(formula) > 0 {
		prev = formula[len(formula)-1]
	}
	if prev == ' ' || prev == '\t' || prev == '\n' {
		return false
	}
	return !(i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '9')
}

// delimProc is a delimiter processor for one character whose matches
// become nodes made by match (consumes is 1 or 2).
type delimProc struct {
	char  byte
	match func(consumes int) ast.Node
}

func (p *delimProc) IsDelimiter(b byte) bool { return b == p.char }
func (p *delimProc) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char
}
func (p *delimProc) OnMatch(consumes int) ast.Node { return p.match(consumes) }

// delimParser pushes delimiter runs of its processor's character. exact,
// when set, accepts only runs of exactly that length (`==`, `!!`).
type delimParser struct {
	proc  *delimProc
	exact int
}

func (p *delimParser) Trigger() []byte { return []byte{p.proc.char} }

func (p *delimParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	before := block.PrecendingCharacter()
	line, segment := block.PeekLine()
	min := 1
	if p.exact > 0 {
		min = p.exact
		if before == rune(p.proc.char) {
			return nil
		}
	}
	node := parser.ScanDelimiter(line, before, min, p.proc)
	if node == nil || (p.exact > 0 && node.OriginalLength != p.exact) {
		return nil
	}
	node.Segment = segment.WithStop(segment.Start + node.OriginalLength)
	block.Advance(node.OriginalLength)
	if !mayPush(parent, block, pc, segment.Start) {
		return ast.NewTextSegment(node.Segment) // cannot pair (bounds.go)
	}
	pc.PushDelimiter(node)
	return node
}

// The delimiter parsers: `*` keeps CommonMark's emphasis and strong,
// `_` gives emphasis for one and Outline's underline for two, `==`
// highlights and `!!` marks a placeholder.
var (
	starParser  = &delimParser{proc: &delimProc{char: '*', match: func(c int) ast.Node { return ast.NewEmphasis(c) }}}
	underParser = &delimParser{proc: &delimProc{char: '_', match: func(c int) ast.Node {
		if c == 2 {
			return &Underline{}
		}
		return ast.NewEmphasis(1)
	}}}
	// strongUnderParser is `_` in CommonMark: emphasis for one, strong for
	// two. It replaces goldmark's own emphasis parser in that dialect too,
	// for the bound on delimiter runs (bounds.go's planDelimiters).
	strongUnderParser = &delimParser{proc: &delimProc{char: '_', match: func(c int) ast.Node { return ast.NewEmphasis(c) }}}
	highlightParser   = &delimParser{proc: &delimProc{char: '=', match: func(int) ast.Node { return &Highlight{} }}, exact: 2}
	placeholderParser = &delimParser{proc: &delimProc{char: '!', match: func(int) ast.Node { return &Placeholder{} }}, exact: 2}
)
