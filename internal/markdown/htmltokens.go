package markdown

import (
	"strings"

	"github.com/yuin/goldmark/util"
)

// htmlToken is a token of HTML: text, a start tag, an end tag or a
// comment, with its source text.
type htmlToken struct {
	kind  byte // 't' text, 's' start tag, 'e' end tag, 'c' comment
	name  string
	attrs []htmlAttr
	raw   string
	pos   int // offset of raw in the text read
}

type htmlAttr struct{ name, value string }

// attr returns the value of an attribute, its character references
// resolved, "" when the tag has none.
func (t htmlToken) attr(name string) string {
	for _, a := range t.attrs {
		if a.name == name {
			return string(clean(util.ResolveEntityNames(resolveNumericReferences([]byte(a.value)))))
		}
	}
	return ""
}

// htmlTokens splits HTML into tokens, in one pass: a '<' that starts no
// tag within maxTagBytes, or no well-formed one, is text.
func htmlTokens(s string) []htmlToken {
	var out []htmlToken
	text := 0 // start of the pending text
	flush := func(end int) {
		if end > text {
			out = append(out, htmlToken{kind: 't', raw: s[text:end], pos: text})
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '<' {
			i++
			continue
		}
		t, n := htmlTag(s[i:min(len(s), i+maxTagBytes)])
		if n == 0 {
			i++
			continue
		}
		flush(i)
		t.raw, t.pos = s[i:i+n], i
		out = append(out, t)
		i += n
		text = i
	}
	flush(len(s))
	return out
}

// htmlTag reads the tag or comment s starts with and returns it and its
// length, or 0 when s starts with none.
func htmlTag(s string) (htmlToken, int) {
	if strings.HasPrefix(s, "<!--") {
		end := strings.Index(s[4:], "-->")
		if end < 0 {
			return htmlToken{}, 0
		}
		return htmlToken{kind: 'c'}, 4 + end + 3
	}
	t := htmlToken{kind: 's'}
	i := 1
	if i < len(s) && s[i] == '/' {
		t.kind = 'e'
		i++
	}
	start := i
	i = tagNameEnd(s, i)
	if i == start {
		return htmlToken{}, 0
	}
	t.name = strings.ToLower(s[start:i])
	for {
		i = skipHTMLSpace(s, i)
		switch {
		case i >= len(s):
			return htmlToken{}, 0
		case s[i] == '>':
			return t, i + 1
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '>':
			return t, i + 2
		}
		var a htmlAttr
		var ok bool
		a, i, ok = htmlAttribute(s, i)
		if !ok {
			return htmlToken{}, 0
		}
		if t.kind == 's' {
			t.attrs = append(t.attrs, a)
		}
	}
}

// tagNameEnd is the end of the tag name at s[i:]: a letter, then letters,
// digits and hyphens.
func tagNameEnd(s string, i int) int {
	start := i
	for i < len(s) && (isLetter(s[i]) || i > start && (s[i] >= '0' && s[i] <= '9' || s[i] == '-')) {
		i++
	}
	return i
}

// skipHTMLSpace is the first offset at or after i that is no HTML space.
func skipHTMLSpace(s string, i int) int {
	for i < len(s) && isHTMLSpace(s[i]) {
		i++
	}
	return i
}

// htmlAttribute reads an attribute at s[i:]: a name, and a value after =
// (quoted or not).
func htmlAttribute(s string, i int) (htmlAttr, int, bool) {
	start := i
	for i < len(s) && !isHTMLSpace(s[i]) && !strings.ContainsRune("\"'>/=<", rune(s[i])) {
		i++
	}
	if i == start {
		return htmlAttr{}, i, false
	}
	a := htmlAttr{name: strings.ToLower(s[start:i])}
	j := skipHTMLSpace(s, i)
	if j >= len(s) || s[j] != '=' {
		return a, i, true
	}
	var ok bool
	a.value, j, ok = htmlAttrValue(s, skipHTMLSpace(s, j+1))
	return a, j, ok
}

// htmlAttrValue reads an attribute's value at s[j:], after the = and its
// spaces: quoted with " or ', or up to a space or >.
func htmlAttrValue(s string, j int) (string, int, bool) {
	if j >= len(s) {
		return "", j, false
	}
	if q := s[j]; q == '"' || q == '\'' {
		end := strings.IndexByte(s[j+1:], q)
		if end < 0 {
			return "", j, false
		}
		return s[j+1 : j+1+end], j + 1 + end + 1, true
	}
	vs := j
	for j < len(s) && !isHTMLSpace(s[j]) && s[j] != '>' {
		j++
	}
	return s[vs:j], j, true
}

func isHTMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
