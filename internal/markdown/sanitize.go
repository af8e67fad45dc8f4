package markdown

import (
	"strings"
	"unicode/utf8"
)

// dropRune reports whether r must never reach TeX: C0 controls other than
// tab and newline, DEL, C1 controls, the byte order mark and the Unicode
// noncharacters. A font has no glyph for any of them, and several are
// line or page ends to TeX.
func dropRune(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\t' && r != '\n'
	case r < 0x7f:
		return false
	case r <= 0x9f:
		return true
	case r == 0xFEFF:
		return true
	case r >= 0xFDD0 && r <= 0xFDEF:
		return true
	case r&0xFFFE == 0xFFFE:
		return true
	}
	return false
}

// ligatures are the Latin ligature characters U+FB00–U+FB06 spelled out:
// Noto Serif has no code point for them (it forms ligatures itself from
// the letters), and the fallback font that has them maps them to the
// wrong text when copied, so they are written as their letters.
var ligatures = [...]string{"ff", "fi", "fl", "ffi", "ffl", "st", "st"}

func isLigature(r rune) bool { return r >= 0xFB00 && r <= 0xFB06 }

// clean repairs src before anything parses it: invalid UTF-8 becomes
// U+FFFD, CR LF and lone CR become LF (so line numbers match what an
// editor shows), the characters of dropRune are removed and Latin
// ligature characters spelled out. Newlines are
// kept, so line numbers stay those of the original file. When nothing
// needs repair, src itself is returned.
func clean(src []byte) []byte {
	i := 0
	for i < len(src) {
		c := src[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			i++
			continue
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRune(src[i:])
			if r != utf8.RuneError && !dropRune(r) && !isLigature(r) {
				i += n
				continue
			}
		}
		break
	}
	if i == len(src) {
		return src
	}
	out := make([]byte, i, len(src)+16)
	copy(out, src[:i])
	for i < len(src) {
		c := src[i]
		if c < 0x80 {
			switch {
			case c == '\r':
				if i+1 >= len(src) || src[i+1] != '\n' {
					out = append(out, '\n')
				}
			case !dropRune(rune(c)):
				out = append(out, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(src[i:])
		i += n
		if r == utf8.RuneError {
			out = utf8.AppendRune(out, utf8.RuneError)
			continue
		}
		switch {
		case isLigature(r):
			out = append(out, ligatures[r-0xFB00]...)
		case !dropRune(r):
			out = append(out, src[i-n:i]...)
		}
	}
	return out
}

// cleanLine repairs a metadata string (title, author, ...) like clean and
// folds every run of white space, newlines included, into one space: such
// a string is typeset inside one argument, where a blank line is an error.
func cleanLine(s string) string {
	c := string(clean([]byte(s)))
	return strings.Join(strings.Fields(c), " ")
}
