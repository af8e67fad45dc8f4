package markdown

// Footnotes: numbered at their first reference, typeset there or, where
// \footnote cannot go, after the block.

import (
	"strconv"

	extast "github.com/yuin/goldmark/extension/ast"

	"github.com/outprint/outprint/internal/script"
)

// footnoteRef typesets a footnote at its first reference. Numbers are
// given here, in reference order, and written out (\footnote[3]{…}), so
// that a note can also be typeset later: where \footnote cannot go (a
// heading, a table cell, underlined text, a frame, a caption, a link or
// another footnote) the reference prints its mark and the text follows as
// \footnotetext once the block is done. A second reference prints the
// mark only.
func (r *writer) footnoteRef(n *extast.FootnoteLink) {
	fn := r.d.footnotes[n.Index]
	if fn == nil || r.quiet {
		// The bookmark and contents copy of a heading, the repeated
		// table header: no marks.
		return
	}
	if num, ok := r.fnNumber[n.Index]; ok {
		r.raw(`\opfnmark{` + strconv.Itoa(num) + `}`)
		return
	}
	r.fnCount++
	num := r.fnCount
	r.fnNumber[n.Index] = num
	if r.heading || r.cell || r.ulem > 0 || r.footnote || r.frameDepth > 0 || r.caption || r.link || r.args > 0 {
		r.raw(`\opfnmark{` + strconv.Itoa(num) + `}`)
		r.pending = append(r.pending, pendingNote{num, fn})
		return
	}
	r.raw(`\footnote[` + strconv.Itoa(num) + `]{`)
	r.noteBody(fn)
	r.raw(`}`)
}

type pendingNote struct {
	num int
	fn  *extast.Footnote
}

func (r *writer) noteBody(fn *extast.Footnote) {
	saved := r.cur
	// The note is text of its own, even when its mark stands inside a
	// right-to-left stretch (which goes on after it).
	savedBidi := r.saveBidi()
	r.bidi, r.rtlPara, r.embOpen, r.embPrev = false, r.dir, false, script.None
	defer r.restoreBidi(savedBidi)
	r.footnote = true
	for c := fn.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c)
	}
	r.footnote = false
	r.cur = saved
}

// flushNotes typesets the footnotes whose references could not hold them,
// once the writer is back where \footnotetext may go.
func (r *writer) flushNotes() {
	if r.heading || r.cell || r.ulem > 0 || r.footnote || r.frameDepth > 0 || r.caption || r.link || r.args > 0 {
		return
	}
	for len(r.pending) > 0 {
		p := r.pending[0]
		r.pending = r.pending[1:]
		r.nl()
		r.raw(`\footnotetext[` + strconv.Itoa(p.num) + `]{`)
		r.noteBody(p.fn)
		r.raw("}\n")
	}
}
