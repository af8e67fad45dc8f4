package markdown

// Code blocks: fenced code (the one place that reads a fence's info
// string), indented code, and code where Verbatim cannot go.

import (
	"strings"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/highlight"
	"github.com/yuin/goldmark/ast"
)

// fencedCode writes a fenced code block, highlighted as the language its
// info string names (its first word).
func (r *writer) fencedCode(n *ast.FencedCodeBlock) {
	if r.diagram(n) {
		return
	}
	r.code(r.d.fenceLang(n), r.rawLines(n))
}

// code writes a code block: highlighted Verbatim where a page may break,
// escaped monospace lines where Verbatim cannot go (footnotes, cells).
func (r *writer) code(lang, code string) {
	code = strings.TrimSuffix(code, "\n")
	r.setDir(false) // code reads left to right
	if r.footnote || r.cell {
		r.codeLines(code, true)
		return
	}
	r.raw(highlight.Code(r.bounds.codeLang(cleanLine(lang)), cutLongLines(code)))
	r.nl()
}

// cutLongLines cuts code lines longer than maxCodeLine runes: such a line
// wraps anyway, and once highlighted it would overflow TeX's line buffer.
func cutLongLines(code string) string {
	if len(code) <= maxCodeLine {
		return code
	}
	var b strings.Builder
	for line := range strings.SplitSeq(code, "\n") {
		for utf8.RuneCountInString(line) > maxCodeLine {
			i, n := 0, 0
			for n < maxCodeLine {
				_, size := utf8.DecodeRuneInString(line[i:])
				i += size
				n++
			}
			b.WriteString(line[:i])
			b.WriteByte('\n')
			line = line[i:]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// codeLines writes lines as escaped monospace text, one output paragraph
// line per input line (mono: code; else raw HTML in the text font).
func (r *writer) codeLines(s string, mono bool) {
	s = strings.TrimSuffix(s, "\n")
	r.raw(`\opcodelines{`)
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			r.raw(`\opnl` + "\n")
		}
		r.word = 0
		if mono {
			r.raw(`\optt{`)
		} else {
			r.raw(`{`)
		}
		r.text(strings.TrimRight(line, " \t"), modeCode)
		r.raw(`}`)
	}
	r.raw("}\n")
}

// rawLines returns the raw lines of a code-like block.
func (r *writer) rawLines(n ast.Node) string {
	var b strings.Builder
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		s := l.At(i)
		b.Write(s.Value(r.d.src))
	}
	return b.String()
}
