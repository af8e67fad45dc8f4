package markdown

// The blocks that are not code, lists, tables or headings: paragraphs,
// rules, display math, quotes, notices and toggles.

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark/ast"

	"github.com/outprint/outprint/internal/texmath"
)

func (r *writer) paragraph(n ast.Node) {
	if r.onlyImages(n) {
		if img := r.wrapImage(n); img != nil {
			r.wrapFigure(img)
			return
		}
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if img, ok := c.(*ast.Image); ok {
				r.figure(img)
			}
		}
		return
	}
	r.setDir(r.dirOf(n))
	wrap := r.wrapNext
	r.wrapNext = false
	if wrap {
		r.raw(`\opwrapstart `)
	}
	r.bidiPara(n)
	r.raw(`\par`)
	if wrap {
		r.raw(`\opwrapend`)
	}
	r.nl()
}

func (r *writer) thematicBreak(n ast.Node) {
	// In Outline's dialect `***` is a page break, `---` and `___` stay a
	// rule: the node does not say which, the source does.
	star := false
	if p := n.Pos(); p >= 0 && p < len(r.d.src) {
		line := r.d.src[p:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		star = bytes.IndexByte(line, '*') >= 0
	}
	if star && r.d.opts.outline() && r.listDepth == 0 && !r.boxed() {
		r.raw("\\opnewpage\n")
		return
	}
	r.raw("\\oprule\n")
}

func (r *writer) mathBlock(n *MathBlock) {
	f := n.Formula(r.d.src)
	if f == "" {
		return
	}
	if _, ok := n.PreviousSibling().(*MathBlock); ok {
		// Two displays in a row would touch: the second one's skip
		// above is the short one, after a paragraph of no text.
		r.raw(`\opmathgap` + "\n")
	}
	r.raw(`\[` + "\n")
	r.formula(f)
	r.raw("\n" + `\]` + "\n")
}

// formula writes a checked formula, without blank lines (an error in
// math) and with long lines broken between tokens.
func (r *writer) formula(f string) {
	first := true
	for line := range strings.SplitSeq(f, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !first {
			r.raw("\n")
		}
		first = false
		for len(line) > softLine {
			cut := texmath.SafeCut(line, softLine)
			r.raw(line[:cut] + "%\n")
			line = line[cut:]
		}
		r.raw(line)
	}
}

// nested writes an environment that counts as a list level (quote,
// toggle); beyond maxListDepth the content joins its parent's level.
func (r *writer) nested(env, arg string, n ast.Node) {
	if r.listDepth >= maxListDepth {
		r.blocks(n)
		return
	}
	r.listDepth++
	r.keepDir(func() {
		r.setDir(r.dirOf(n))
		r.raw(`\begin{op` + env + `}` + arg + "\n")
		r.containerStart(n.FirstChild())
		r.blocks(n)
		r.nl()
		r.raw(`\end{op` + env + "}\n")
	})
	r.listDepth--
}

var noticeLabels = map[string]string{"info": "Info", "warning": "Warning", "tip": "Tip", "success": "Success"}

func (r *writer) notice(n *Notice) {
	if n.Style == "layout" || n.Style == "layout_section" {
		// Outline's columns print one after another.
		r.blocks(n)
		return
	}
	label, ok := noticeLabels[n.Style]
	if !ok {
		n.Style, label = "info", "Info"
	}
	r.setDir(r.dirOf(n))
	if r.frameDepth >= maxFrameDepth || r.footnote || r.cell {
		r.raw(`\opnoticelabel{` + n.Style + `}{` + label + "}\\par\n")
		r.blocks(n)
		return
	}
	r.frameDepth++
	r.keepDir(func() {
		r.raw(`\begin{opnotice}{` + n.Style + `}{` + label + "}\n")
		r.blocks(n)
		r.nl()
		r.raw("\\end{opnotice}\n")
	})
	r.frameDepth--
}

func (r *writer) toggle(n *Toggle) {
	r.keepDir(func() { r.toggleIn(n) })
}

// toggleIn is toggle, the direction switch ending with it.
func (r *writer) toggleIn(n *Toggle) {
	r.setDir(r.dirOf(n))
	flat := r.listDepth >= maxListDepth || r.footnote || r.cell
	if flat {
		r.raw(`\optoggletitle{`)
	} else {
		r.listDepth++
		r.raw(`\begin{optoggle}{`)
	}
	body := ast.Node(n.FirstChild())
	switch title := body.(type) {
	case *ToggleTitle, *ast.Paragraph:
		// The title (on the fence line, or the first block inside a bare
		// fence, as Outline writes it) is an argument: footnotes in it
		// are set after the block, display math inline.
		r.args++
		r.bidiPara(title)
		r.args--
		body = title.NextSibling()
	}
	r.raw("}\n")
	if !flat {
		r.containerStart(body)
	}
	for c := body; c != nil; c = c.NextSibling() {
		r.block(c)
	}
	if flat {
		return
	}
	r.nl()
	r.raw("\\end{optoggle}\n")
	r.listDepth--
}
