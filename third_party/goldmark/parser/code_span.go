package parser

import (
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

type codeSpanParser struct {
}

var defaultCodeSpanParser = &codeSpanParser{}

// NewCodeSpanParser return a new InlineParser that parses inline codes
// surrounded by '`' .
func NewCodeSpanParser() InlineParser {
	return defaultCodeSpanParser
}

func (s *codeSpanParser) Trigger() []byte {
	return []byte{'`'}
}

// codeSpanMissesKey holds the codeSpanMisses of the block being parsed.
var codeSpanMissesKey = NewContextKey()

// codeSpanMisses remembers, for the block whose inlines are being parsed,
// the backtick string lengths that have no closing string after a
// position: at[n] is the position of an opening string of n backticks
// whose scan reached the end of the block. A closing string is a whole
// run of backticks, so no later opening string of n backticks can find
// one either, and it need not scan again. Without this, every unmatched
// opening string scans to the end of the block, and a block of n of them
// (two backticks and a backslash, repeated) takes time quadratic in n.
type codeSpanMisses struct {
	parent ast.Node
	at     map[int]int
}

// misses returns the codeSpanMisses of parent, starting afresh when the
// context holds another block's.
func misses(parent ast.Node, pc Context) *codeSpanMisses {
	if m, ok := pc.Get(codeSpanMissesKey).(*codeSpanMisses); ok && m.parent == parent {
		return m
	}
	m := &codeSpanMisses{parent: parent, at: map[int]int{}}
	pc.Set(codeSpanMissesKey, m)
	return m
}

func (s *codeSpanParser) Parse(parent ast.Node, block text.Reader, pc Context) ast.Node {
	line, startSegment := block.PeekLine()
	opener := 0
	for ; opener < len(line) && line[opener] == '`'; opener++ {
	}
	m := misses(parent, pc)
	if at, ok := m.at[opener]; ok && at <= startSegment.Start {
		block.Advance(opener)
		return ast.NewTextSegment(startSegment.WithStop(startSegment.Start + opener))
	}
	block.Advance(opener)
	l, pos := block.Position()
	node := ast.NewCodeSpan()
	for {
		line, segment := block.PeekLine()
		if line == nil {
			block.SetPosition(l, pos)
			m.at[opener] = startSegment.Start
			return ast.NewTextSegment(startSegment.WithStop(startSegment.Start + opener))
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c == '`' {
				oldi := i
				for ; i < len(line) && line[i] == '`'; i++ {
				}
				closure := i - oldi
				if closure == opener && (i >= len(line) || line[i] != '`') {
					segment = segment.WithStop(segment.Start + i - closure)
					if !segment.IsEmpty() {
						node.AppendChild(node, ast.NewRawTextSegment(segment))
					}
					block.Advance(i)
					goto end
				}
			}
		}
		node.AppendChild(node, ast.NewRawTextSegment(segment))
		block.AdvanceLine()
	}
end:
	if !node.IsBlank(block.Source()) {
		// trim first halfspace and last halfspace
		segment := node.FirstChild().(*ast.Text).Segment
		shouldTrimmed := true
		if !(!segment.IsEmpty() && isSpaceOrNewline(block.Source()[segment.Start])) {
			shouldTrimmed = false
		}
		segment = node.LastChild().(*ast.Text).Segment
		if !(!segment.IsEmpty() && isSpaceOrNewline(block.Source()[segment.Stop-1])) {
			shouldTrimmed = false
		}
		if shouldTrimmed {
			t := node.FirstChild().(*ast.Text)
			segment := t.Segment
			t.Segment = segment.WithStart(segment.Start + 1)
			t = node.LastChild().(*ast.Text)
			segment = node.LastChild().(*ast.Text).Segment
			t.Segment = segment.WithStop(segment.Stop - 1)
		}

	}
	return node
}

func isSpaceOrNewline(c byte) bool {
	return c == ' ' || c == '\n'
}
