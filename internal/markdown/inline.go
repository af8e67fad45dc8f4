package markdown

// Inline content: text, code spans, emphasis, decorations, formulas and
// the dispatch to links, images, raw HTML and footnote references.

import (
	"strings"

	emojiast "github.com/yuin/goldmark-emoji/ast"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"

	"github.com/outprint/outprint/internal/texmath"
)

func (r *writer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
		r.soft()
	}
}

// hardBreak ends a line inside a paragraph; where a line cannot end
// (headings, underlined text) it is a space.
func (r *writer) hardBreak() {
	r.bidiBreak()
	if r.heading || r.ulem > 0 {
		r.space()
		return
	}
	r.raw(`\opnl` + "\n")
	r.word = 0
}

func (r *writer) inline(n ast.Node) {
	r.laNode = n
	switch n := n.(type) {
	case *ast.Text:
		v := n.Segment.Value(r.d.src)
		if plainASCII(v) && !r.rtlPara && !r.inEmb() {
			r.escBytes(v)
		} else {
			pieces := textPieces(v, r.d.opts.outline())
			for i, piece := range pieces {
				if i > 0 {
					r.hardBreak()
				}
				r.laStop = i < len(pieces)-1
				r.text(piece, modeText)
			}
			r.laStop = false
		}
		switch {
		case n.HardLineBreak():
			r.hardBreak()
		case n.SoftLineBreak():
			r.space()
		}
	case *ast.String:
		r.text(string(clean(n.Value)), modeText)
	case *extast.TaskCheckBox:
		// Shown as the item's label.
	default:
		r.inlineOther(n)
	}
}

// inlineOther writes every inline node but text.
func (r *writer) inlineOther(n ast.Node) {
	switch n := n.(type) {
	case *ast.CodeSpan, *htmlCode:
		r.codeSpan(n)
	case *htmlGroup:
		r.group(n.open, n)
	case *ast.Emphasis:
		if n.Level >= 2 {
			r.group(`\textbf{`, n)
		} else {
			r.group(`\emph{`, n)
		}
	case *Underline, *extast.Strikethrough, *Highlight, *Placeholder:
		r.decorated(decorations[n.Kind()], n)
	case *MathInline:
		r.inlineMath(n)
	case *emojiast.Emoji:
		r.text(string(n.Value.Unicode), modeText)
	case *ast.Link:
		r.linkNode(n)
	case *ast.AutoLink:
		r.autoLink(n)
	case *ast.Image:
		r.inlineImage(n)
	case *ast.RawHTML:
		r.rawHTML(n)
	case *extast.FootnoteLink:
		r.footnoteRef(n)
	default:
		r.inlines(n)
	}
}

// decorations are the ulem macros of the decorated kinds.
var decorations = map[ast.NodeKind]string{
	KindUnderline:            `\opul`,
	extast.KindStrikethrough: `\opst`,
	KindHighlight:            `\ophl`,
	KindPlaceholder:          `\opph`,
}

// codeSpan writes inline code (a code span, or HTML's <code>) in
// monospace, every space kept.
func (r *writer) codeSpan(n ast.Node) {
	r.raw(`\optt{`)
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(r.d.src))
		case *ast.String:
			b.Write(c.Value)
		}
	}
	r.text(strings.ReplaceAll(b.String(), "\n", " "), modeCode)
	r.raw(`}`)
}

// inlineMath writes a checked formula in text, or displayed where a
// display may go.
func (r *writer) inlineMath(n *MathInline) {
	f := strings.TrimSpace(n.Formula)
	if f == "" {
		return
	}
	if r.tocCopy {
		f = texmath.Protect(f)
	}
	if n.Display && !r.heading && r.ulem == 0 && !r.cell && r.args == 0 {
		r.raw(`\[`)
		r.formula(f)
		r.raw(`\]`)
	} else {
		r.raw(`\(`)
		r.formula(f)
		r.raw(`\)`)
	}
}

// group writes open, the children and a closing brace.
func (r *writer) group(open string, n ast.Node) {
	r.raw(open)
	r.args++
	r.inlines(n)
	r.args--
	r.raw(`}`)
}

// decorated writes underline, strike-through or highlight. These ulem
// commands set their argument word by word; anything but text inside them
// is put in braces, which ulem sets as one unbreakable box.
func (r *writer) decorated(cmd string, n ast.Node) {
	if r.heading {
		// ulem does not survive a moving argument; headings keep the text.
		r.inlines(n)
		return
	}
	if !r.frozen {
		r.laNode, r.laStop = n, false
		end := r.freeze(r.d.plain(n))
		defer end()
	}
	r.raw(cmd + `{`)
	r.ulem++
	r.args++
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c.(type) {
		case *ast.Text:
			r.inline(c)
		case *ast.Link, *ast.AutoLink, *ast.CodeSpan:
			if r.ulem > 1 {
				r.raw(`{`)
				r.inline(c)
				r.raw(`}`)
				break
			}
			// A link or code span would be one unbreakable box in ulem,
			// possibly wider than the line: it is set between two
			// decorated runs instead, not decorated itself.
			r.raw(`}`)
			r.ulem--
			r.inline(c)
			r.ulem++
			r.raw(cmd + `{`)
		default:
			// A box cannot break anyway, and ulem's \penalty inside a
			// group of the box unbalances its groups: no \opbr in it.
			saved := r.firstBreak
			r.firstBreak = 0
			r.raw(`{`)
			r.inline(c)
			r.raw(`}`)
			r.firstBreak = saved
		}
		r.soft()
	}
	r.args--
	r.ulem--
	r.raw(`}`)
}
