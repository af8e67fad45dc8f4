package markdown

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/outprint/outprint/internal/limits"
)

// This file bounds the work of a parse. goldmark calls every open block's
// Continue on every line, so a line costs as much as the nesting depth:
// 8,000 unclosed `:::info` lines were quadratic in time (and, before the
// patch described in third_party/goldmark/OUTPRINT.md, in memory: 2.3 GB).
// A document may nest containers (quotes, list items, notices, toggles)
// at most MaxBlockDepth levels deep; deeper is refused with a `document`
// error naming the line, and the parse stops there.

// MaxBlockDepth is how many containers (block quotes, list items, notices,
// toggles, footnote definitions) may nest inside each other. A list and
// its items count as one level. The writer prints at most 8 list levels
// as such and flattens the deeper ones, so no real document comes close;
// a megabyte of lines inside 32 levels parses in about a second and a
// half here.
const MaxBlockDepth = 32

// tooDeepKey holds the byte offset of the first container opened beyond
// MaxBlockDepth.
var tooDeepKey = parser.NewContextKey()

// depthGuard wraps a block parser: a container it opens deeper than
// MaxBlockDepth is replaced by a tooDeep leaf and the reader jumps to the
// end of the source, so the rest costs nothing; Parse then refuses the
// document.
type depthGuard struct{ parser.BlockParser }

// tooDeep stands for the container that was refused.
type tooDeep struct{ ast.BaseBlock }

var kindTooDeep = ast.NewNodeKind("TooDeep")

func (n *tooDeep) Kind() ast.NodeKind            { return kindTooDeep }
func (n *tooDeep) Dump(src []byte, level int)    { ast.DumpHelper(n, src, level, nil, nil) }
func (g depthGuard) Trigger() []byte             { return g.BlockParser.Trigger() }
func (g depthGuard) CanInterruptParagraph() bool { return g.BlockParser.CanInterruptParagraph() }
func (g depthGuard) CanAcceptIndentedLine() bool { return g.BlockParser.CanAcceptIndentedLine() }
func (g depthGuard) Close(n ast.Node, r text.Reader, pc parser.Context) {
	if _, ok := n.(*tooDeep); !ok {
		g.BlockParser.Close(n, r, pc)
	}
}

func (g depthGuard) Continue(n ast.Node, r text.Reader, pc parser.Context) parser.State {
	if _, ok := n.(*tooDeep); ok {
		return parser.Close
	}
	return g.BlockParser.Continue(n, r, pc)
}

func (g depthGuard) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	_, pos := reader.Position()
	node, state := g.BlockParser.Open(parent, reader, pc)
	if node == nil || state&parser.HasChildren == 0 || containerDepth(parent) < MaxBlockDepth {
		return node, state
	}
	if pc.Get(tooDeepKey) == nil {
		pc.Set(tooDeepKey, pos.Start+max(pc.BlockOffset(), 0))
	}
	src := reader.Source()
	line, _ := reader.Position()
	reader.SetPosition(line, text.NewSegment(len(src), len(src)))
	return &tooDeep{}, parser.NoChildren
}

// containerDepth counts the containers n is inside of, n included (a list
// counts through its items).
func containerDepth(n ast.Node) int {
	depth := 0
	for ; n != nil && n.Kind() != ast.KindDocument; n = n.Parent() {
		if n.Kind() != ast.KindList {
			depth++
		}
	}
	return depth
}

// guardDepth wraps every block parser of blocks in a depthGuard.
func guardDepth(blocks []util.PrioritizedValue) []util.PrioritizedValue {
	out := make([]util.PrioritizedValue, len(blocks))
	for i, v := range blocks {
		out[i] = util.Prioritized(depthGuard{v.Value.(parser.BlockParser)}, v.Priority)
	}
	return out
}

// tooDeepProblem reports the container at byte offset off of the source.
func (d *Document) tooDeepProblem(off int) limits.Problem {
	return limits.Problem{
		Source: limits.SourceDocument,
		Code:   limits.CodeInvalid,
		Line:   d.line(off),
		Message: fmt.Sprintf("blocks are nested too deeply: at most %d levels of lists, quotes, notices, toggles and footnotes inside each other",
			MaxBlockDepth),
	}
}

// MaxCodeLanguages is how many distinct languages a document's code blocks
// are highlighted in; blocks in further languages print plain. Finding a
// lexer for a name chroma does not know costs some 15 ms (it tries the
// name against every lexer's file globs), so without a cap a document of
// many ```x1, ```x2, … blocks ran for minutes.
const MaxCodeLanguages = 16

// writerBounds keeps the writer's work linear in the document.
type writerBounds struct {
	slugNext map[string]int          // slug -> the next suffix to try
	plains   map[*ast.Heading]string // heading -> its plain text
	langs    map[string]struct{}     // code languages highlighted so far

	htmlPaired map[ast.Node]bool     // parents whose inline HTML tags are paired
	htmlPairs  map[ast.Node]ast.Node // opening tag -> its closing tag among its siblings
}

// htmlCloser returns the closing tag that matches the opening tag n among
// n's following siblings, at the same depth of tags of its name, or nil.
// The tags of a parent are paired once, with a stack per name, when the
// first of them is asked for (and remembered while other parents are
// written, a paragraph's and its emphasis' in turn): looking for each opener's closer among its
// siblings was quadratic (`[a](<b>` repeated, 4,000 unclosed <b>, took
// 12 s; issue 29).
func (b *writerBounds) htmlCloser(n ast.Node, src []byte) ast.Node {
	parent := n.Parent()
	if parent == nil {
		return nil
	}
	if !b.htmlPaired[parent] {
		if b.htmlPaired == nil {
			b.htmlPaired, b.htmlPairs = map[ast.Node]bool{}, map[ast.Node]ast.Node{}
		}
		b.htmlPaired[parent] = true
		open := map[string][]ast.Node{}
		for s := parent.FirstChild(); s != nil; s = s.NextSibling() {
			h, ok := s.(*ast.RawHTML)
			if !ok {
				continue
			}
			var raw strings.Builder
			for i := 0; i < h.Segments.Len(); i++ {
				seg := h.Segments.At(i)
				raw.Write(seg.Value(src))
			}
			t := htmlTagRE.FindStringSubmatch(strings.TrimSpace(raw.String()))
			if t == nil {
				continue
			}
			name := strings.ToLower(t[2])
			if t[1] == "" {
				// Every opening tag of the name counts for the depth,
				// a self-closing one too.
				open[name] = append(open[name], s)
				continue
			}
			if k := len(open[name]); k > 0 {
				b.htmlPairs[open[name][k-1]] = s
				open[name] = open[name][:k-1]
			}
		}
	}
	return b.htmlPairs[n]
}

// freeSlug returns base, or base-1, base-2, … (GitHub's rule) for the
// first one not in taken. It remembers where each base's search ended, so
// n headings with one text cost n steps, not n²/2.
func (b *writerBounds) freeSlug(base string, taken map[string]string) string {
	if b.slugNext == nil {
		b.slugNext = map[string]int{}
	}
	slug := base
	i, seen := b.slugNext[base]
	if seen {
		slug = base + "-" + strconv.Itoa(i)
	} else {
		i = 0
	}
	for {
		if _, ok := taken[slug]; !ok {
			break
		}
		i++
		slug = base + "-" + strconv.Itoa(i)
	}
	b.slugNext[base] = i + 1
	return slug
}

// headPlain maps every heading of d to its plain text (computed by Parse).
func (b *writerBounds) headPlain(d *Document) map[*ast.Heading]string {
	if b.plains == nil {
		b.plains = make(map[*ast.Heading]string, len(d.heads))
		for _, h := range d.heads {
			b.plains[h.node] = h.plain
		}
	}
	return b.plains
}

// codeLang returns lang, or "" (plain) once MaxCodeLanguages other
// languages were highlighted.
func (b *writerBounds) codeLang(lang string) string {
	key := strings.ToLower(strings.TrimSpace(lang))
	if key == "" {
		return lang
	}
	if b.langs == nil {
		b.langs = map[string]struct{}{}
	}
	if _, ok := b.langs[key]; ok {
		return lang
	}
	if len(b.langs) >= MaxCodeLanguages {
		return ""
	}
	b.langs[key] = struct{}{}
	return lang
}

// goldmark's ProcessDelimiters looks for a closer's opener by walking back
// over every delimiter of the block, of any character, so a paragraph of
// delimiters that never pair (`*a_ ` repeated, `a**b` followed by `c* `
// repeated: the rule of three forbids every pair) costs n². The delimiter
// parsers therefore look at the whole block first (once) and push only the
// runs that could pair with some run of the same character: an opener
// needs a compatible closer after it, a closer a compatible opener before
// it; the others are text, as they would end up anyway. And a block keeps
// at most maxBlockDelimiters runs as delimiters, the rest are text, which
// bounds the walk for inputs that defeat the check.
const maxBlockDelimiters = 500

var delimPlanKey = parser.NewContextKey()

// delimPlan says, for the block being parsed, which runs (by source offset)
// may be pushed as delimiters.
type delimPlan struct {
	block  ast.Node
	keep   map[int]bool
	pushed int
}

// mayPush reports whether the delimiter run d at source offset pos of
// parent's lines should be pushed.
func mayPush(parent ast.Node, block text.Reader, pc parser.Context, pos int) bool {
	plan, _ := pc.Get(delimPlanKey).(*delimPlan)
	if plan == nil || plan.block != parent {
		plan = planDelimiters(parent, block.Source())
		pc.Set(delimPlanKey, plan)
	}
	if !plan.keep[pos] || plan.pushed >= maxBlockDelimiters {
		return false
	}
	plan.pushed++
	return true
}

// delimRun is a run of one delimiter character in a block.
type delimRun struct {
	pos               int
	char              byte
	len               int
	canOpen, canClose bool
}

// planDelimiters scans the lines of block for runs of the dialect's
// delimiter characters, with the flanking rules of parser.ScanDelimiter,
// and marks those that could pair.
func planDelimiters(block ast.Node, src []byte) *delimPlan {
	plan := &delimPlan{block: block, keep: map[int]bool{}}
	markPairable(delimRuns(block, src), plan.keep)
	return plan
}

// delimParsers are the dialect's delimiter processors by character.
var delimParsers = map[byte]*delimParser{'*': starParser, '_': underParser, '=': highlightParser, '!': placeholderParser}

// delimRuns are the runs of delimiter characters in block's lines that
// parser.ScanDelimiter takes for delimiters, in source order.
func delimRuns(block ast.Node, src []byte) []delimRun {
	var runs []delimRun
	lines := block.Lines()
	for li := 0; li < lines.Len(); li++ {
		seg := lines.At(li)
		line := seg.Value(src)
		for i := 0; i < len(line); {
			c := line[i]
			if c == '\\' {
				i += 2 // an escaped character is no delimiter
				continue
			}
			p, ok := delimParsers[c]
			if !ok {
				i++
				continue
			}
			j := i
			for j < len(line) && line[j] == c {
				j++
			}
			if d := parser.ScanDelimiter(line[i:], charBefore(src, seg, li, i), 1, p.proc); d != nil {
				runs = append(runs, delimRun{pos: seg.Start + i, char: c, len: d.OriginalLength, canOpen: d.CanOpen, canClose: d.CanClose})
			}
			i = j
		}
	}
	return runs
}

// charBefore is the character before offset i of the li-th line seg, as
// goldmark's reader tells it (text.Reader.PrecendingCharacter): a line
// start after padding is a space, the block's start a newline, any other
// position the source's character (a `>` quote marker, say).
func charBefore(src []byte, seg text.Segment, li, i int) rune {
	switch {
	case i == 0 && seg.Padding > 0:
		return ' '
	case li == 0 && i == 0:
	case seg.Start+i > 0:
		r, _ := utf8.DecodeLastRune(src[:seg.Start+i])
		return r
	}
	return '\n'
}

// delimClass is a class of runs by character, length mod 3 and the other
// flank (whether an opener can also close, or a closer also open).
type delimClass struct {
	char  byte
	mod   int
	other bool
}

// pairs reports whether an opener of class opener may pair with a closer
// of class closer: a pair is possible unless the rule of three forbids it
// (parser.Delimiter.CalcComsumption).
func (opener delimClass) pairs(closer delimClass) bool {
	return !((opener.other || closer.other) && (opener.mod+closer.mod)%3 == 0 && closer.mod != 0)
}

// asOpener and asCloser are the classes of a run in either role.
func (r delimRun) asOpener() delimClass { return delimClass{r.char, r.len % 3, r.canClose} }
func (r delimRun) asCloser() delimClass { return delimClass{r.char, r.len % 3, r.canOpen} }

// markPairable marks in keep (by offset) the runs that could pair: an
// opener with a compatible closer after it, a closer with a compatible
// opener before it. It counts the classes instead of looking at every
// other run, so it is linear in the runs.
func markPairable(runs []delimRun, keep map[int]bool) {
	closersAfter := map[delimClass]int{}
	for _, r := range runs {
		if r.canClose {
			closersAfter[r.asCloser()]++
		}
	}
	openersBefore := map[delimClass]int{}
	for _, r := range runs {
		if r.canClose {
			closersAfter[r.asCloser()]--
		}
		if r.canOpen && anyCloser(closersAfter, r.asOpener()) || r.canClose && anyOpener(openersBefore, r.asCloser()) {
			keep[r.pos] = true
		}
		if r.canOpen {
			openersBefore[r.asOpener()]++
		}
	}
}

// anyCloser reports whether closers (counts by class) holds a closer the
// opener op may pair with.
func anyCloser(closers map[delimClass]int, op delimClass) bool {
	for cl, n := range closers {
		if n > 0 && cl.char == op.char && op.pairs(cl) {
			return true
		}
	}
	return false
}

// anyOpener reports whether openers (counts by class) holds an opener that
// may pair with the closer cl.
func anyOpener(openers map[delimClass]int, cl delimClass) bool {
	for op, n := range openers {
		if n > 0 && op.char == cl.char && op.pairs(cl) {
			return true
		}
	}
	return false
}

// maxLinkScan bounds how far goldmark's link parser looks for the end of
// an inline link's destination or title: it scans to the end of the line
// (destination) or block (title) from every `](`, so `[a](` repeated was
// quadratic (a megabyte ran for minutes). A destination or title longer
// than this is not a link; the writer would not print a URL of that
// length anyway (maxURLBytes).
const maxLinkScan = 8 << 10

// linkGuard wraps goldmark's link parser: it parses with a reader that
// shows it at most maxLinkScan bytes ahead.
type linkGuard struct{ parser.InlineParser }

func (g linkGuard) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, seg := block.PeekLine()
	if len(line) > 0 && line[0] != ']' {
		at := seg.Start
		if line[0] == '!' {
			at++
		}
		if !labelAllowed(parent, block, pc, at) {
			if line[0] == '!' {
				return nil
			}
			block.Advance(1)
			return ast.NewTextSegment(seg.WithStop(seg.Start + 1))
		}
	}
	var r text.Reader = block
	if len(line) > 1 && line[0] == ']' && line[1] == '(' && !linkMayClose(parent, block, pc, seg.Start+2) {
		// The inline link cannot close: goldmark goes on as if no `(`
		// followed (a reference or plain text) without scanning for it.
		r = hidePeek{Reader: block, at: seg.Start + 1}
	}
	return g.InlineParser.Parse(parent, windowReader{r}, pc)
}

// hidePeek is a text.Reader whose Peek shows no character at offset at.
type hidePeek struct {
	text.Reader
	at int
}

func (r hidePeek) Peek() byte {
	if _, pos := r.Reader.Position(); pos.Start == r.at {
		return 0
	}
	return r.Reader.Peek()
}

var linkScanKey = parser.NewContextKey()

// linkScan holds, for the block being parsed, per-line tables that answer
// in constant time where goldmark's scan of an inline link destination
// from an offset would end (parser.parseLinkDestination).
type linkScan struct {
	block ast.Node
	lines map[int]*lineScan // by index in block.Lines()
}

// lineScan are the tables of one line: for each offset i of the line, the
// offsets where goldmark's scans from i stop.
type lineScan struct {
	seg       text.Segment
	nextSpace []int32 // first white space (util.IsSpace) at or after i
	nextDrop  []int32 // first unescaped `)` closing more than opens after i
	nextGT    []int32 // first unescaped `>` at or after i
	nextSolid []int32 // first character at or after i that is no blank (the newline is not blank)
}

func scanLine(src []byte, seg text.Segment) *lineScan {
	line := src[seg.Start:seg.Stop]
	n := len(line)
	ls := &lineScan{seg: seg, nextSpace: make([]int32, n+1), nextDrop: make([]int32, n+1),
		nextGT: make([]int32, n+1), nextSolid: make([]int32, n+1)}
	depth, escaped := parenDepths(line)
	// From the right: the nearest `)` that brings each depth one lower.
	drop := make([]int32, 2*n+3)
	for i := range drop {
		drop[i] = int32(n)
	}
	ls.nextSpace[n], ls.nextDrop[n], ls.nextGT[n], ls.nextSolid[n] = int32(n), int32(n), int32(n), int32(n)
	for i := n - 1; i >= 0; i-- {
		c := line[i]
		ls.nextSpace[i], ls.nextGT[i], ls.nextSolid[i] = ls.nextSpace[i+1], ls.nextGT[i+1], ls.nextSolid[i+1]
		if util.IsSpace(c) {
			ls.nextSpace[i] = int32(i)
		}
		if c == '>' && !escaped[i] {
			ls.nextGT[i] = int32(i)
		}
		if !util.IsSpace(c) || c == '\n' {
			ls.nextSolid[i] = int32(i)
		}
		if c == ')' && !escaped[i] {
			drop[depth[i]+int32(n)+1] = int32(i)
		}
		ls.nextDrop[i] = drop[depth[i]+int32(n)+1]
	}
	return ls
}

// parenDepths is the depth before each offset of line (and at its end),
// counting unescaped parentheses, and which characters are escaped (a
// backslash before punctuation).
func parenDepths(line []byte) (depth []int32, escaped []bool) {
	n := len(line)
	depth = make([]int32, n+1)
	escaped = make([]bool, n)
	d := int32(0)
	for i := 0; i < n; i++ {
		depth[i] = d
		c := line[i]
		if c == '\\' && i+1 < n && util.IsPunct(line[i+1]) {
			escaped[i+1] = true
			depth[i+1] = d
			i++
			continue
		}
		switch c {
		case '(':
			d++
		case ')':
			d--
		}
	}
	depth[n] = d
	return depth, escaped
}

// linkMayClose reports whether goldmark's inline link after `](` (p is
// the offset after the parenthesis) could succeed; false only when it
// surely fails: the destination is followed, after white space, by
// something other than `)` or a title. Without this, every `](` of
// `[a](` repeated scanned to the end of the line.
func linkMayClose(parent ast.Node, block text.Reader, pc parser.Context, p int) bool {
	ls, next := lineAt(parent, block, pc, p)
	if ls == nil {
		return true
	}
	src := block.Source()
	n := len(ls.nextSpace) - 1
	q := int(ls.nextSolid[p-ls.seg.Start])
	if q >= n || src[ls.seg.Start+q] == '\n' {
		return true // the destination is on the next line: one scan per line
	}
	after, may, decided := ls.destinationEnd(src, q)
	if decided {
		return may
	}
	c, found := ls.charAfter(src, next, after)
	if !found {
		// The block ends (nothing can close the link), or the next line is
		// blank to its end.
		return next != nil
	}
	return c == ')' || c == '"' || c == '\'' || c == '('
}

// destinationEnd is the offset after the link destination that starts at
// offset q of the line. decided is set when the destination alone settles
// the link: may then says whether it could close (a `)` right after it)
// or surely fails (no `>` closes a destination in <…>, or it is longer
// than maxLinkScan).
func (ls *lineScan) destinationEnd(src []byte, q int) (after int, may, decided bool) {
	n := len(ls.nextSpace) - 1
	switch src[ls.seg.Start+q] {
	case ')':
		return 0, true, true
	case '<':
		g := int(ls.nextGT[q+1])
		if g >= n || g-q > maxLinkScan {
			return 0, false, true
		}
		return g + 1, false, false
	}
	e := int(min(ls.nextSpace[q], ls.nextDrop[q]))
	if e-q > maxLinkScan {
		return 0, false, true
	}
	if e < n && src[ls.seg.Start+e] == ')' {
		return 0, true, true
	}
	return e, false, false
}

// charAfter is the first character after white space from offset after
// of the line, or else the first of the next line; found is false when
// there is none: the block ends, or the next line is blank.
func (ls *lineScan) charAfter(src []byte, next *lineScan, after int) (c byte, found bool) {
	n := len(ls.nextSpace) - 1
	if r := int(ls.nextSolid[min(after, n)]); r < n && src[ls.seg.Start+r] != '\n' {
		return src[ls.seg.Start+r], true
	}
	if next == nil {
		return 0, false
	}
	if r := int(next.nextSolid[0]); r < len(next.nextSpace)-1 {
		return src[next.seg.Start+r], true
	}
	return 0, false
}

// lineAt returns the tables of the line of parent holding offset p-1 and
// of the line after it (nil when there is none).
func lineAt(parent ast.Node, block text.Reader, pc parser.Context, p int) (*lineScan, *lineScan) {
	plan, _ := pc.Get(linkScanKey).(*linkScan)
	if plan == nil || plan.block != parent {
		plan = &linkScan{block: parent, lines: map[int]*lineScan{}}
		pc.Set(linkScanKey, plan)
	}
	lines := parent.Lines()
	li := sort.Search(lines.Len(), func(i int) bool { return lines.At(i).Stop >= p }) // the line holding p-1
	if li >= lines.Len() || lines.At(li).Start > p-1 || p > lines.At(li).Stop {
		return nil, nil
	}
	get := func(i int) *lineScan {
		if ls, ok := plan.lines[i]; ok {
			return ls
		}
		ls := scanLine(block.Source(), lines.At(i))
		plan.lines[i] = ls
		return ls
	}
	var next *lineScan
	if li+1 < lines.Len() {
		next = get(li + 1)
	}
	return get(li), next
}

// maxLabelDepth bounds how many `[` may be open around a link label: for
// every `]`, goldmark walks everything after the label's `[` looking for
// a link inside, so 50,000 nested brackets cost n². A `[` inside more than
// maxLabelDepth open ones is text.
const maxLabelDepth = 32

var labelPlanKey = parser.NewContextKey()

// labelPlan lists, for the block being parsed, the offsets of the `[` that
// are nested too deeply to open a label.
type labelPlan struct {
	block   ast.Node
	tooDeep map[int]bool
}

func labelAllowed(parent ast.Node, block text.Reader, pc parser.Context, at int) bool {
	plan, _ := pc.Get(labelPlanKey).(*labelPlan)
	if plan == nil || plan.block != parent {
		plan = &labelPlan{block: parent, tooDeep: map[int]bool{}}
		src := block.Source()
		depth := 0
		lines := parent.Lines()
		for li := 0; li < lines.Len(); li++ {
			seg := lines.At(li)
			for i := seg.Start; i < seg.Stop; i++ {
				switch src[i] {
				case '\\':
					i++
				case '[':
					if depth >= maxLabelDepth {
						plan.tooDeep[i] = true
					}
					depth++
				case ']':
					depth = max(0, depth-1)
				}
			}
		}
		pc.Set(labelPlanKey, plan)
	}
	return !plan.tooDeep[at]
}

// CloseBlock forwards to goldmark's link parser, which cleans up its
// unclosed labels there.
func (g linkGuard) CloseBlock(parent ast.Node, block text.Reader, pc parser.Context) {
	if cb, ok := g.InlineParser.(parser.CloseBlocker); ok {
		cb.CloseBlock(parent, block, pc)
	}
}

// guardInline wraps goldmark's link parser (the one triggered by `]`) in a
// linkGuard and returns any other parser as it is.
func guardInline(v util.PrioritizedValue) util.PrioritizedValue {
	ip := v.Value.(parser.InlineParser)
	for _, c := range ip.Trigger() {
		if c == ']' {
			return util.Prioritized(linkGuard{ip}, v.Priority)
		}
	}
	return v
}

// windowReader is a text.Reader whose current line ends at most
// maxLinkScan bytes ahead and whose FindClosure gives up when the closer
// is not within maxLinkScan bytes, or when an unescaped opener comes
// first and the options allow no nesting, as goldmark's own FindClosure
// does: a title in parentheses ends at a '(' (cmark's "[ (](" repeated
// scanned the whole window from every "](" for a ')').
type windowReader struct{ text.Reader }

func (r windowReader) PeekLine() ([]byte, text.Segment) {
	line, seg := r.Reader.PeekLine()
	if len(line) > maxLinkScan {
		line = line[:maxLinkScan]
		seg.Stop = seg.Start + maxLinkScan
	}
	return line, seg
}

func (r windowReader) FindClosure(opener, closer byte, opts text.FindClosureOptions) (*text.Segments, bool) {
	_, pos := r.Reader.Position()
	src := r.Reader.Source()
	if pos.Start < 0 || pos.Start >= len(src) {
		return nil, false
	}
	window := src[pos.Start:min(len(src), pos.Start+maxLinkScan)]
	found := false
	for i := 0; i < len(window); i++ {
		if window[i] == '\\' {
			i++
			continue
		}
		if window[i] == closer {
			found = true
			break
		}
		if window[i] == opener && !opts.Nesting {
			return nil, false
		}
	}
	if !found {
		return nil, false
	}
	return r.Reader.FindClosure(opener, closer, opts)
}

// containerStart is written right after the \item of a list item, quote
// or toggle whose first block is first: a heading or a notice frame there
// needs help to keep the item's label (\opitemhead, \opframefirst in the
// preamble); `1. :::info` and `## A` followed by `> ## B` failed with
// "missing \item".
func (r *writer) containerStart(first ast.Node) {
	if r.footnote || r.cell {
		return
	}
	switch first.(type) {
	case *ast.Heading:
		r.raw(`\opitemhead` + "\n")
	case *Notice:
		if r.frameDepth < maxFrameDepth {
			r.raw(`\opframefirst` + "\n")
		}
	}
}

// MaxInlineDepth is how many inline constructs (emphasis, strong, links,
// underline, …) may nest inside each other. TeX allows 255 open groups and
// the writer opens one or two per level, so a document nested deeper
// failed in TeX, reported as a lack of memory; it is refused here, naming
// the real cause. No written text nests more than a few levels.
const MaxInlineDepth = 50

// inlineTooDeep returns the first inline node nested deeper than
// MaxInlineDepth, or nil.
func inlineTooDeep(root ast.Node) ast.Node {
	var found ast.Node
	depth := 0
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if n.Type() != ast.TypeInline || !n.HasChildren() {
			return ast.WalkContinue, nil
		}
		if !entering {
			depth--
			return ast.WalkContinue, nil
		}
		depth++
		if depth > MaxInlineDepth {
			found = n
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return found
}

// inlineTooDeepProblem reports n, found by inlineTooDeep.
func (d *Document) inlineTooDeepProblem(n ast.Node) limits.Problem {
	line := 0
	for p := ast.Node(n); p != nil && line == 0; p = p.Parent() {
		if p.Type() == ast.TypeBlock {
			line = d.line(d.blockPos(p))
		}
	}
	return limits.Problem{
		Source: limits.SourceDocument,
		Code:   limits.CodeInvalid,
		Line:   line,
		Message: fmt.Sprintf("formatting is nested too deeply: at most %d levels of emphasis, links and other inline markup inside each other",
			MaxInlineDepth),
	}
}

// headingAfterHeading writes \opheadbreak before a heading whose block
// follows another heading: LaTeX keeps a heading with what follows it, so
// a run of headings was one unbreakable block, and a run taller than a
// page overflowed it (40 empty `##` lost everything after the 26th). The
// break it allows is a discouraged one: short runs stay together.
func (r *writer) headingAfterHeading(h *ast.Heading) {
	if prev, ok := h.PreviousSibling().(*ast.Heading); ok && ast.Node(prev) != r.skip {
		r.raw(`\opheadbreak` + "\n")
	}
}
