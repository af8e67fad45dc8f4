package markdown

import (
	"fmt"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/outprint/outprint/internal/limits"
)

// This file bounds the work of a parse. goldmark calls every open block's
// Continue on every line and keeps a record per open block and line until
// all blocks close, so time and memory grow with the product of nesting
// depth and length: 8,000 unclosed `:::info` lines took gigabytes. A
// document may nest containers (quotes, list items, notices, toggles) at
// most MaxBlockDepth levels deep; deeper is refused with a `document`
// error naming the line, and the parse stops there.

// MaxBlockDepth is how many containers (block quotes, list items, notices,
// toggles) may nest inside each other. A list and its items count as one
// level. The writer prints at most 8 list levels as such and flattens the
// rest, so no real document comes close.
const MaxBlockDepth = 12

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
		Message: fmt.Sprintf("blocks are nested too deeply: at most %d levels of lists, quotes, notices and toggles inside each other",
			MaxBlockDepth),
	}
}
