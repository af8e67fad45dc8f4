package markdown

import (
	"strconv"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// A heading must not end a page with its content on the next. LaTeX keeps
// a heading with the first two lines of a paragraph, but a table, a list,
// a code block or a notice may start a new page right after it. So before
// the first of a run of headings the writer asks (\opneed) for the room
// the run and the start of what follows take, in lines: where the page
// has less, the headings go to the next page.

// headingLines is the height of a heading of each sectioning level, with
// the space around it, in lines of text.
var headingLines = [...]float64{3.2, 2.6, 2.2, 2, 2}

// startLines is the room, in lines, the start of a block needs below its
// heading: two lines of a paragraph, a table's header and first three
// rows, the first lines of the rest.
func startLines(n ast.Node) float64 {
	switch n.(type) {
	case *extast.Table, *HTMLTable:
		return 6
	case *ast.List, *ast.FencedCodeBlock, *ast.CodeBlock, *Notice, *Toggle, *ast.Blockquote:
		return 4
	case *MathBlock:
		return 3.5
	case *ast.ThematicBreak:
		return 1
	}
	return 2.5
}

// keepWithNext writes \opneed before h when h is the first of a run of
// headings at the top level, with room for the whole run and the start
// of the block after it.
func (r *writer) keepWithNext(h *ast.Heading) {
	if _, ok := h.Parent().(*ast.Document); !ok {
		return
	}
	if prev, ok := h.PreviousSibling().(*ast.Heading); ok && ast.Node(prev) != r.skip {
		return
	}
	need := 0.0
	n := ast.Node(h)
	for ; n != nil; n = n.NextSibling() {
		hh, ok := n.(*ast.Heading)
		if !ok {
			break
		}
		i := max(0, hh.Level-r.sectionBase)
		need += headingLines[min(i, len(headingLines)-1)]
	}
	if n == nil {
		return // the document ends with the headings: nothing to keep
	}
	need += startLines(n)
	r.raw(`\opneed{` + strconv.FormatFloat(need, 'f', 1, 64) + "}\n")
}
