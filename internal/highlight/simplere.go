package highlight

import (
	"github.com/dlclark/regexp2/v2/syntax"
)

// simpleRE matches the common, simple rules of chroma's lexers without
// starting regexp2's engine, whose fixed cost per call (a runner from a
// pool, match bookkeeping, a timeout clock) is most of the time a short
// match takes. It walks the expression tree regexp2 parsed, depth first,
// trying alternatives in order, greedy loops longest first and lazy loops
// shortest first: the first path that matches is the backtracking
// engine's match. It knows only what the rules of plain token rules
// mostly use: characters, sets, strings, loops of one character, groups,
// alternation, lookahead, anchors and word boundaries. Any other rule is
// left to regexp2 (newSimpleRE returns nil), and so is a match that takes
// more than maxSimpleSteps steps (regexp2 then applies its timeout).
// TestSimpleREMatchesRegexp2 compares it with regexp2 on every rule of
// every lexer at every position of sample texts.
type simpleRE struct {
	// seqs are the node sequences of the expression: seqs[0] is the
	// root alone, then the children of each group or concatenation, and
	// each alternative alone. A frame names a sequence by its index, so
	// that frames hold no pointers.
	seqs [][]snode
}

// snode is a node of the expression with the index of the sequence of
// its children (of its first alternative, for an alternation; the others
// follow).
type snode struct {
	*syntax.RegexNode
	kids int32
}

// maxSimpleSteps bounds the work of one match before simpleRE gives up.
const maxSimpleSteps = 5000

// newSimpleRE returns a matcher for the parsed expression, or nil when it
// uses something simpleRE does not know.
func newSimpleRE(tree *syntax.RegexTree) *simpleRE {
	if tree == nil || tree.Root == nil || tree.Options&(syntax.RightToLeft|syntax.ECMAScript) != 0 || !simpleNode(tree.Root) {
		return nil
	}
	re := &simpleRE{seqs: [][]snode{nil}}
	re.seqs[0] = []snode{re.node(tree.Root)}
	return re
}

// node returns n with its children's sequences added to re.
func (re *simpleRE) node(n *syntax.RegexNode) snode {
	sn := snode{RegexNode: n, kids: -1}
	switch n.T {
	case syntax.NtConcatenate, syntax.NtGroup, syntax.NtCapture, syntax.NtAtomic, syntax.NtPosLook, syntax.NtNegLook:
		sn.kids = int32(len(re.seqs))
		re.seqs = append(re.seqs, nil)
		seq := make([]snode, len(n.Children))
		for k, c := range n.Children {
			seq[k] = re.node(c)
		}
		re.seqs[sn.kids] = seq
	case syntax.NtAlternate:
		sn.kids = int32(len(re.seqs))
		for range n.Children {
			re.seqs = append(re.seqs, nil)
		}
		for k, c := range n.Children {
			re.seqs[int(sn.kids)+k] = []snode{re.node(c)}
		}
	}
	return sn
}

func simpleNode(n *syntax.RegexNode) bool {
	if n.Options&(syntax.RightToLeft|syntax.ECMAScript) != 0 {
		return false
	}
	switch n.T {
	case syntax.NtOne, syntax.NtNotone, syntax.NtMulti,
		syntax.NtOneloop, syntax.NtNotoneloop, syntax.NtOnelazy, syntax.NtNotonelazy,
		syntax.NtOneloopatomic, syntax.NtNotoneloopatomic,
		syntax.NtBol, syntax.NtEol, syntax.NtBoundary, syntax.NtNonboundary,
		syntax.NtBeginning, syntax.NtStart, syntax.NtEndZ, syntax.NtEnd,
		syntax.NtEmpty, syntax.NtNothing, syntax.NtUpdateBumpalong:
		return len(n.Children) == 0
	case syntax.NtSet, syntax.NtSetloop, syntax.NtSetlazy, syntax.NtSetloopatomic:
		return n.Set != nil && len(n.Children) == 0
	case syntax.NtGroup, syntax.NtCapture, syntax.NtAtomic, syntax.NtPosLook, syntax.NtNegLook:
		return len(n.Children) == 1 && simpleNode(n.Children[0])
	case syntax.NtConcatenate, syntax.NtAlternate:
		for _, c := range n.Children {
			if !simpleNode(c) {
				return false
			}
		}
		return len(n.Children) > 0
	}
	return false
}

// simpleRun is the state of matches: the expression and text, where the
// current match starts, its steps so far, and the frames its recursion
// uses. A frame is what remains to match after a node: the rest of a
// sequence (seq from i), then frame next (-1: nothing). Frames are taken
// from and given back to frames in the order of the recursion, so that a
// match allocates nothing. One simpleRun serves the matches of one
// tokenisation.
type simpleRun struct {
	re     *simpleRE
	text   []rune
	start  int
	steps  int
	frames []frame
}

type frame struct {
	seq, i, next int32
}

// maxSimpleDepth bounds the frames of one match (and so its nesting).
const maxSimpleDepth = 256

func newSimpleRun(text []rune) *simpleRun {
	return &simpleRun{text: text, frames: make([]frame, 0, maxSimpleDepth)}
}

// push takes a frame and returns its index, or -1 when none are left.
func (r *simpleRun) push(seq, i, next int32) int32 {
	n := len(r.frames)
	if n == cap(r.frames) {
		return -1
	}
	r.frames = append(r.frames, frame{seq, i, next})
	return int32(n)
}

// gaveUp marks a match that took too many steps or frames.
const gaveUp = -2

// match returns the end of the match of the expression at pos in r's
// text, -1 when it does not match there, or gaveUp.
func (re *simpleRE) match(r *simpleRun, pos int) int {
	r.re, r.start, r.steps, r.frames = re, pos, 0, r.frames[:0]
	return r.run(r.push(0, 0, -1), pos)
}

// run matches frame f and what follows it at pos. Frames it takes are
// given back before it returns.
func (r *simpleRun) run(f int32, pos int) int {
	if f < 0 {
		return gaveUp
	}
	mark := len(r.frames)
	end := r.step(f, pos)
	r.frames = r.frames[:mark]
	return end
}

// step matches the node frame fi stands at, then what follows it. It
// climbs out of finished sequences first, then hands the node to the
// helper for its kind: characters, loops, anchors, or groups.
func (r *simpleRun) step(fi int32, pos int) int {
	f := r.frames[fi]
	for int(f.i) == len(r.re.seqs[f.seq]) {
		if f.next < 0 {
			return pos
		}
		f = r.frames[f.next]
	}
	r.steps++
	if r.steps > maxSimpleSteps {
		return gaveUp
	}
	n := r.re.seqs[f.seq][f.i]
	rest := r.push(f.seq, f.i+1, f.next)
	if rest < 0 {
		return gaveUp
	}
	switch n.T {
	case syntax.NtOne, syntax.NtNotone, syntax.NtSet, syntax.NtMulti:
		w := r.chars(n.RegexNode, pos)
		if w < 0 {
			return -1
		}
		return r.run(rest, pos+w)
	case syntax.NtOneloop, syntax.NtNotoneloop, syntax.NtSetloop,
		syntax.NtOneloopatomic, syntax.NtNotoneloopatomic, syntax.NtSetloopatomic,
		syntax.NtOnelazy, syntax.NtNotonelazy, syntax.NtSetlazy:
		return r.loop(n.RegexNode, rest, pos)
	case syntax.NtBol, syntax.NtEol, syntax.NtBeginning, syntax.NtStart,
		syntax.NtEndZ, syntax.NtEnd, syntax.NtBoundary, syntax.NtNonboundary,
		syntax.NtNothing, syntax.NtEmpty, syntax.NtUpdateBumpalong:
		if !r.holds(n.RegexNode, pos) {
			return -1
		}
		return r.run(rest, pos)
	case syntax.NtConcatenate, syntax.NtGroup, syntax.NtCapture:
		return r.run(r.push(n.kids, 0, rest), pos)
	case syntax.NtAlternate:
		for k := range n.Children {
			if end := r.run(r.push(n.kids+int32(k), 0, rest), pos); end != -1 {
				return end
			}
		}
		return -1
	case syntax.NtAtomic, syntax.NtPosLook, syntax.NtNegLook:
		return r.alone(n, rest, pos)
	}
	return gaveUp // not a simple node: newSimpleRE refused it
}

// chars returns how many characters of the text at pos the character,
// set or string node n matches, or -1 when it does not match there.
func (r *simpleRun) chars(n *syntax.RegexNode, pos int) int {
	text := r.text
	switch n.T {
	case syntax.NtOne:
		if pos < len(text) && text[pos] == n.Ch {
			return 1
		}
	case syntax.NtNotone:
		if pos < len(text) && text[pos] != n.Ch {
			return 1
		}
	case syntax.NtSet:
		if pos < len(text) && n.Set.CharIn(text[pos]) {
			return 1
		}
	case syntax.NtMulti:
		if len(text)-pos < len(n.Str) {
			return -1
		}
		for k, c := range n.Str {
			if text[pos+k] != c {
				return -1
			}
		}
		return len(n.Str)
	}
	return -1
}

// loop matches the one-character loop n at pos and then rest: an atomic
// loop takes all it can and never gives back, a greedy one tries its
// longest run first, a lazy one its shortest, as regexp2 backtracks.
func (r *simpleRun) loop(n *syntax.RegexNode, rest int32, pos int) int {
	c := r.count(n, pos) // the most the loop can take
	switch n.T {
	case syntax.NtOnelazy, syntax.NtNotonelazy, syntax.NtSetlazy:
		for k := n.M; k <= c; k++ {
			if end := r.run(rest, pos+k); end != -1 {
				return end
			}
		}
		return -1
	}
	if c < n.M {
		return -1
	}
	if n.T == syntax.NtOneloopatomic || n.T == syntax.NtNotoneloopatomic || n.T == syntax.NtSetloopatomic {
		return r.run(rest, pos+c)
	}
	for ; c >= n.M; c-- {
		if end := r.run(rest, pos+c); end != -1 {
			return end
		}
	}
	return -1
}

// holds reports whether the zero-width node n (an anchor, a word
// boundary, empty or nothing) matches at pos.
func (r *simpleRun) holds(n *syntax.RegexNode, pos int) bool {
	text := r.text
	switch n.T {
	case syntax.NtBol:
		return pos == 0 || text[pos-1] == '\n'
	case syntax.NtEol:
		return pos >= len(text) || text[pos] == '\n'
	case syntax.NtBeginning:
		return pos == 0
	case syntax.NtStart:
		return pos == r.start
	case syntax.NtEndZ:
		return len(text)-pos == 0 || len(text)-pos == 1 && text[pos] == '\n'
	case syntax.NtEnd:
		return pos >= len(text)
	case syntax.NtBoundary, syntax.NtNonboundary:
		b := (pos > 0 && isWordChar(text[pos-1])) != (pos < len(text) && isWordChar(text[pos]))
		return b == (n.T == syntax.NtBoundary)
	case syntax.NtNothing:
		return false
	}
	return true // NtEmpty, NtUpdateBumpalong
}

// alone matches an atomic group or a lookaround n at pos on its own,
// first way only, so that what follows cannot make it backtrack; then
// rest, after the group or (lookarounds take nothing) at pos.
func (r *simpleRun) alone(n snode, rest int32, pos int) int {
	end := r.run(r.push(n.kids, 0, -1), pos)
	switch {
	case end == gaveUp:
		return gaveUp
	case n.T == syntax.NtAtomic && end >= 0:
		return r.run(rest, end)
	case n.T == syntax.NtPosLook && end >= 0, n.T == syntax.NtNegLook && end < 0:
		return r.run(rest, pos)
	}
	return -1
}

// count returns how many characters from pos the one-character loop n
// can take, at most its maximum.
func (r *simpleRun) count(n *syntax.RegexNode, pos int) int {
	text := r.text
	limit := len(text) - pos
	if n.N >= 0 && n.N < limit {
		limit = n.N
	}
	c := 0
	switch n.T {
	case syntax.NtOneloop, syntax.NtOnelazy, syntax.NtOneloopatomic:
		for c < limit && text[pos+c] == n.Ch {
			c++
		}
	case syntax.NtNotoneloop, syntax.NtNotonelazy, syntax.NtNotoneloopatomic:
		for c < limit && text[pos+c] != n.Ch {
			c++
		}
	default:
		for c < limit && n.Set.CharIn(text[pos+c]) {
			c++
		}
	}
	return c
}

// isWordChar is regexp2's syntax.IsWordChar with a fast path for ASCII.
func isWordChar(c rune) bool {
	if c < 0x80 {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
	}
	return syntax.IsWordChar(c)
}
