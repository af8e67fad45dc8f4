package diagram

import "strings"

// dotLinkAttrs are the Graphviz attributes that make links: dot -Tpdf
// writes each as a link annotation (cairo 1.16 also writes such a PDF with
// a broken cross-reference table), and a printed diagram needs none, least
// of all a javascript: one.
var dotLinkAttrs = map[string]bool{
	"URL": true, "href": true,
	"edgeURL": true, "edgehref": true,
	"headURL": true, "headhref": true,
	"tailURL": true, "tailhref": true,
	"labelURL": true, "labelhref": true,
}

// dropDotLinks renames every link attribute of a DOT source ("URL=" becomes
// "_RL=", an attribute dot keeps but does nothing with), keeping every byte
// and line where it was, so dot's line numbers still name the user's lines.
// It reads the source as DOT's lexer does: names inside quoted strings,
// HTML strings and comments are text, not attributes.
func dropDotLinks(src string) string {
	b := []byte(src)
	n := len(b)
	// lastName is the start of the last ID or quoted string that may be
	// an attribute name, and its text; -1 when the last token was
	// something else.
	lastName, lastText := -1, ""
	for i := 0; i < n; {
		c := b[i]
		switch {
		case c == '/' && i+1 < n && b[i+1] == '/', c == '#' && atLineStart(b, i):
			for i < n && b[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && b[i+1] == '*':
			j := strings.Index(string(b[i+2:]), "*/")
			if j < 0 {
				return string(b)
			}
			i += j + 4
		case c == '"':
			j := i + 1
			for j < n && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			lastName, lastText = i+1, string(b[i+1:min(j, n)])
			i = j + 1
			continue
		case c == '<':
			depth := 0
			j := i
			for ; j < n; j++ {
				if b[j] == '<' {
					depth++
				} else if b[j] == '>' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			i = j + 1
			lastName = -1
			continue
		case isIDByte(c):
			j := i
			for j < n && isIDByte(b[j]) {
				j++
			}
			lastName, lastText = i, string(b[i:j])
			i = j
			continue
		case c == '=':
			if lastName >= 0 && dotLinkAttrs[lastText] {
				b[lastName] = '_'
			}
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		default:
			i++
		}
		lastName = -1
	}
	return string(b)
}

// isIDByte: a byte of an unquoted DOT ID (letters, digits, '_', '.', any
// byte of a multi-byte character).
func isIDByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// atLineStart: only blanks before i on its line (a '#' line is a C
// preprocessor line, which dot skips).
func atLineStart(b []byte, i int) bool {
	for j := i - 1; j >= 0 && b[j] != '\n'; j-- {
		if b[j] != ' ' && b[j] != '\t' {
			return false
		}
	}
	return true
}
