package markdown

// Temporary stand-ins for the functions another engineer writes in math.go,
// highlight.go and script.go. This file is deleted as soon as those land.

import "strings"

// HighlightPreamble is a stand-in.
const HighlightPreamble = ""

// HighlightCode is a stand-in: plain Verbatim with command characters so
// that every backslash and brace is escaped.
func HighlightCode(lang, code string) string {
	var b strings.Builder
	b.WriteString("\\begin{Verbatim}[breaklines,commandchars=\\\\\\{\\}]\n")
	for _, r := range strings.TrimRight(code, "\n") {
		switch r {
		case '\\':
			b.WriteString("\\textbackslash{}")
		case '{':
			b.WriteString("\\{")
		case '}':
			b.WriteString("\\}")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("\n\\end{Verbatim}\n")
	return b.String()
}
