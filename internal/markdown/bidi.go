package markdown

import (
	"github.com/outprint/outprint/internal/script"
	emojiast "github.com/yuin/goldmark-emoji/ast"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// This file decides, for the writer, where right-to-left stretches begin
// and end when a paragraph's text comes in pieces: the bidi algorithm
// orders a paragraph as a whole, so "عنوان: **مرحبا** بكم" is one stretch
// across the bold text, and the neutrals at the end of one piece belong to
// the stretch only if the next letter is right to left. texWriter.text
// asks nextLetter when it needs to know.
//
// Bold, italics, links and code spans are transparent: TeX--XeT reverses
// the glyphs of a stretch whatever groups they are in. Formulas and images
// are neutral objects inside the stretch (TeX--XeT keeps a formula left to
// right). A line break ends the paragraph's stretches. Underline,
// strike-through and highlight are special: ulem boxes each word, and a
// stretch cannot begin in one box and end in another, so inside them the
// writer is frozen (see freeze).

// maxLookahead bounds the inline nodes nextLetter looks at, so that a
// paragraph of many pieces without letters costs linear time.
const maxLookahead = 64

// bidiState is what the writer saves around a bidirectional paragraph.
type bidiState struct {
	bidi, rtlPara, embOpen bool
	embPrev                script.Font
	laRoot                 ast.Node
	laNode                 ast.Node
	laStop                 bool
}

func (r *writer) saveBidi() bidiState {
	return bidiState{r.bidi, r.rtlPara, r.embOpen, r.embPrev, r.laRoot, r.laNode, r.laStop}
}

func (r *writer) restoreBidi(s bidiState) {
	r.bidi, r.rtlPara, r.embOpen, r.embPrev, r.laRoot, r.laNode, r.laStop = s.bidi, s.rtlPara, s.embOpen, s.embPrev, s.laRoot, s.laNode, s.laStop
}

// bidiPara writes the inline content of root (a paragraph, a heading, a
// table cell, a caption) as one bidirectional paragraph in the direction
// TeX sets it in (writer.dir, see direction.go).
func (r *writer) bidiPara(root ast.Node) {
	saved := r.saveBidi()
	r.bidi, r.rtlPara, r.embOpen, r.embPrev = true, r.dir, false, script.None
	r.laRoot, r.laNode, r.laStop = root, nil, false
	r.inlines(root)
	r.endEmb()
	r.restoreBidi(saved)
}

// freeze prepares the writer for ulem's decorations, whose text is plain
// (their source text, as far as letters go): the paragraph's stretch
// goes on across them if all of plain belongs to it, else it ends before.
// Inside, the stretch stays as it is (texWriter.frozen) and each embedded
// run is a stretch of its own inside its group, which ulem keeps in one
// box. The function freeze returns ends the frozen part, after the
// decoration.
func (r *writer) freeze(plain string) func() {
	prev := r.embPrev
	if !r.emb(prev) {
		prev = script.None
	}
	runs, last := r.split(plain, prev, script.None)
	next := script.None
	if r.emb(last) {
		// As in texWriter.text: a letter of the stretch's direction or a
		// number next keeps the stretch going.
		switch f, digit := r.nextLetter(); {
		case digit:
			next = last
		case r.emb(f):
			next = f
		}
		if next != script.None {
			runs, last = r.split(plain, prev, next)
		}
	}
	all := len(runs) > 0
	for _, run := range runs {
		all = all && run.RTL != r.rtlPara
	}
	if all && !r.embOpen {
		begin, _ := r.embMacros()
		r.raw(begin)
		r.embOpen = true
	} else if !all {
		r.endEmb()
	}
	r.frozen = true
	return func() {
		r.frozen = false
		r.embPrev = script.None
		if r.emb(last) {
			r.embPrev = last
		}
		if next == script.None {
			r.endEmb()
		}
	}
}

// imageShown reports whether an inline image prints as an image (a neutral
// object in the text) rather than its alternative text.
func (r *writer) imageShown(n *ast.Image) bool {
	_, ok := r.imageCall(n, `\linewidth`)
	return ok && !r.heading
}

// nextLetter returns the font of the first letter after the piece of text
// being written (the writer's laNode, or the end of its text when laStop
// is set) in the same bidirectional paragraph, or digit true when a digit
// comes first. It returns script.None when there is none or a line break
// comes first.
func (r *writer) nextLetter() (script.Font, bool) {
	n := r.laNode
	if r.laStop || n == nil {
		return script.None, false
	}
	if t, ok := n.(*ast.Text); ok && t.HardLineBreak() {
		return script.None, false
	}
	budget := maxLookahead
	for {
		for n.NextSibling() == nil {
			n = n.Parent()
			if n == nil || n == r.laRoot {
				return script.None, false
			}
		}
		n = n.NextSibling()
		if f, digit, done := r.firstLetter(n, &budget); done {
			return f, digit
		}
	}
}

// firstLetter looks for the first letter or digit in n's text. done is
// false when n has none and the search goes on after n.
func (r *writer) firstLetter(n ast.Node, budget *int) (f script.Font, digit, done bool) {
	*budget--
	if *budget < 0 {
		return script.None, false, true
	}
	switch n := n.(type) {
	case *ast.Text:
		pieces := textPieces(n.Segment.Value(r.d.src), r.d.opts.outline())
		if f, digit, ok := script.FirstLetter(pieces[0]); ok {
			return f, digit, true
		}
		// A literal \n or a hard line break ends the search.
		return script.None, false, len(pieces) > 1 || n.HardLineBreak()
	case *ast.String:
		f, digit, ok := script.FirstLetter(string(n.Value))
		return f, digit, ok
	case *ast.AutoLink:
		f, digit, ok := script.FirstLetter(string(n.Label(r.d.src)))
		return f, digit, ok
	case *ast.RawHTML:
		return script.Main, false, true // a tag: Latin letters, or a line break
	case *ast.Image:
		if r.imageShown(n) {
			return script.None, false, false
		}
	case *MathInline, *emojiast.Emoji, *extast.FootnoteLink, *extast.TaskCheckBox:
		return script.None, false, false
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if f, digit, done := r.firstLetter(c, budget); done {
			return f, digit, true
		}
	}
	return script.None, false, false
}
