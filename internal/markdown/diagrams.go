package markdown

// Diagrams: fenced blocks in a diagram language (```mermaid, ```dot) are
// drawn by the render before TeX runs and set here as figures. Which
// languages are diagrams is the caller's to say (Options.Diagram): this
// package only finds the blocks and places the drawings it is given, so it
// knows nothing of the programs that draw them.

import (
	"bytes"
	"strconv"

	"github.com/yuin/goldmark/ast"
)

// DiagramRef is a fenced block to draw as a diagram.
type DiagramRef struct {
	// Lang is the first word of the fence's info string ("mermaid").
	Lang string
	// Source is the text between the fences.
	Source string
	// Line is the line of the opening fence in the original file.
	Line int
}

// DiagramKey is the key of the i-th diagram's drawing (in Diagrams'
// order) in the images map LaTeX takes.
func DiagramKey(i int) string { return "diagram:" + strconv.Itoa(i) }

// Diagrams returns the document's diagrams in order: the fenced blocks
// whose language Options.Diagram accepts (none without it).
func (d *Document) Diagrams() []DiagramRef { return append([]DiagramRef(nil), d.diagrams...) }

// fenceLang returns the language of a fenced block: the first word of its
// info string.
func (d *Document) fenceLang(n *ast.FencedCodeBlock) string {
	if n.Info == nil {
		return ""
	}
	info := n.Info.Segment.Value(d.src)
	if i := bytes.IndexAny(info, " \t{"); i >= 0 {
		info = info[:i]
	}
	return resolveEscapes(info)
}

// noteDiagram records n as a diagram when its language is one.
func (d *Document) noteDiagram(n *ast.FencedCodeBlock) {
	if d.opts.Diagram == nil {
		return
	}
	lang := d.fenceLang(n)
	if lang == "" || !d.opts.Diagram(lang) {
		return
	}
	var src bytes.Buffer
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		s := l.At(i)
		src.Write(s.Value(d.src))
	}
	if d.diagramIndex == nil {
		d.diagramIndex = map[*ast.FencedCodeBlock]int{}
	}
	d.diagramIndex[n] = len(d.diagrams)
	d.diagrams = append(d.diagrams, DiagramRef{Lang: lang, Source: src.String(), Line: d.line(n.Info.Segment.Start)})
}

// diagram sets a fenced block's drawing, when it is a diagram and was
// drawn: centred, at its natural size or scaled down to the line (and to
// three quarters of the page's height), never split across pages. In a
// footnote or a cell, where a figure cannot go, it is an inline image. It
// reports false when the block is to be written as code. A paragraph just
// before it is kept on its page.
func (r *writer) diagram(n *ast.FencedCodeBlock) bool {
	i, ok := r.d.diagramIndex[n]
	if !ok {
		return false
	}
	img, ok := r.images[DiagramKey(i)]
	if !ok || !safeFile(img.File) {
		return false
	}
	call := `\opimg{\linewidth}{` + strconv.FormatFloat(img.Width, 'f', 2, 64) + `pt}{` +
		strconv.FormatFloat(img.Height, 'f', 2, 64) + `pt}{` + img.File + `}`
	if img.Page > 1 {
		// \opimgpage: the same, of the PDF's page Page.
		call = `\opimgpage{` + strconv.Itoa(img.Page) + `}` + call[len(`\opimg`):]
	}
	r.setDir(false)
	if r.footnote || r.cell {
		r.raw(call)
		return true
	}
	if p, ok := n.PreviousSibling().(*ast.Paragraph); ok && !r.onlyImages(p) {
		// A paragraph that ends right before a diagram introduces it
		// ("The flow:"): no page may end between them, so that it never
		// stays alone at a page's foot while its diagram goes to the
		// next page. TeX breaks before the paragraph instead (or, in a
		// long one, before its last lines).
		r.raw("\\nopagebreak\n")
	}
	r.raw("\\begin{opfigure}{c}\n" + call + "\n\\end{opfigure}\n")
	return true
}
