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
	// The closing tag among the following siblings, at the same depth.
	depth := 0
	for s := n.NextSibling(); s != nil; s = s.NextSibling() {
		h, ok := s.(*ast.RawHTML)
		if !ok {
			continue
		}
		var b strings.Builder
		for i := 0; i < h.Segments.Len(); i++ {
			seg := h.Segments.At(i)
			b.Write(seg.Value(r.d.src))
		}
		t := htmlTagRE.FindStringSubmatch(strings.TrimSpace(b.String()))
		if t == nil || strings.ToLower(t[2]) != name {
			continue
		}
		if t[1] == "" {
			depth++
			continue
		}
		if depth > 0 {
			depth--
			continue
		}
		if r.htmlClose == nil {
			r.htmlClose = map[ast.Node]string{}
		}
		r.htmlClose[s] = `}`
		r.raw(open)
		return true
	}
	return false
}
