package markdown

import (
	"regexp"
	"strings"

	"github.com/yuin/goldmark/ast"
)

// Inline HTML is printed as text, as typed, except what every Markdown
// renderer of GitHub's kind understands: comments print nowhere, and a
// small allowlist of formatting tags becomes the matching formatting,
// written by the writer (the tag itself never reaches TeX). An opening tag
// counts only when its closing tag follows among its siblings; otherwise
// both print as text.

// htmlFormat maps an allowed tag to the macro that opens its group.
var htmlFormat = map[string]string{
	"code":   `\optt{`,
	"kbd":    `\opkbd{`,
	"sup":    `\textsuperscript{`,
	"sub":    `\textsubscript{`,
	"em":     `\emph{`,
	"dfn":    `\emph{`,
	"strong": `\textbf{`,
	"b":      `\textbf{`,
	"i":      `\emph{`,
	"mark":   `\ophlbox{`,
}

var htmlTagRE = regexp.MustCompile(`^<(/?)([a-zA-Z]+)\s*(/?)>$`)

// isFormattingHTML reports whether a piece of inline HTML is a comment or
// an allowed tag: it has no text of its own (bookmarks, table widths).
func isFormattingHTML(raw string) bool {
	if isComment(raw) {
		return true
	}
	m := htmlTagRE.FindStringSubmatch(strings.TrimSpace(raw))
	if m == nil {
		return false
	}
	name := strings.ToLower(m[2])
	_, ok := htmlFormat[name]
	return ok || name == "br"
}

// rawHTML writes a piece of inline HTML: what it means if it is a comment
// or an allowed tag, else the tag as typed.
func (r *writer) rawHTML(n *ast.RawHTML) {
	var b strings.Builder
	for i := 0; i < n.Segments.Len(); i++ {
		s := n.Segments.At(i)
		b.Write(s.Value(r.d.src))
	}
	if r.inlineHTML(n, b.String()) {
		return
	}
	r.text(string(clean([]byte(b.String()))), modeCode)
}

// htmlBlock writes a block of raw HTML as typed (in the text font), or
// nothing when it is only comments.
func (r *writer) htmlBlock(n *ast.HTMLBlock) {
	s := r.rawLines(n)
	if n.HasClosure() {
		s += string(n.ClosureLine.Value(r.d.src))
	}
	if isComment(s) {
		return
	}
	r.setDir(false) // markup reads left to right
	r.codeLines(s, false)
}

// isComment reports whether raw HTML is comments and white space only.
func isComment(s string) bool {
	s = strings.TrimSpace(s)
	for s != "" {
		if !strings.HasPrefix(s, "<!--") {
			return false
		}
		end := strings.Index(s[4:], "-->")
		if end < 0 {
			return false
		}
		s = strings.TrimSpace(s[4+end+3:])
	}
	return true
}

// inlineHTML writes what a piece of inline HTML means, if it is a comment
// or an allowed tag, and reports whether it did.
func (r *writer) inlineHTML(n ast.Node, raw string) bool {
	if isComment(raw) {
		return true
	}
	if closing, ok := r.htmlClose[n]; ok {
		r.raw(closing)
		return true
	}
	m := htmlTagRE.FindStringSubmatch(strings.TrimSpace(raw))
	if m == nil {
		return false
	}
	name := strings.ToLower(m[2])
	if name == "br" && m[1] == "" {
		if r.heading || r.ulem > 0 {
			r.space()
			return true
		}
		r.bidiBreak()
		r.raw(`\opnl{}`)
		return true
	}
	open, ok := htmlFormat[name]
	if !ok || m[1] != "" || m[3] != "" {
		return false
	}
	// The closing tag among the following siblings, at the same depth
	// (paired once per parent: bounds.go).
	s := r.bounds.htmlCloser(n, r.d.src)
	if s == nil {
		return false
	}
	if r.htmlClose == nil {
		r.htmlClose = map[ast.Node]string{}
	}
	r.htmlClose[s] = `}`
	r.raw(open)
	return true
}
