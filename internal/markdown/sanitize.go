package markdown

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/util"
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
	i := cleanPrefix(src)
	if i == len(src) {
		return src
	}
	out := make([]byte, i, len(src)+16)
	copy(out, src[:i])
	for i < len(src) {
		c := src[i]
		if c < 0x80 {
			out = appendCleanByte(out, src, i)
			i++
			continue
		}
		r, n := utf8.DecodeRune(src[i:])
		out = appendCleanRune(out, r, src[i:i+n])
		i += n
	}
	return out
}

// cleanPrefix is the length of the start of src that needs no repair, the
// fast path of clean: most documents need none at all.
func cleanPrefix(src []byte) int {
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
	return i
}

// appendCleanByte appends the repaired ASCII byte src[i]: CR LF and a lone
// CR become LF, the characters of dropRune go.
func appendCleanByte(out, src []byte, i int) []byte {
	switch c := src[i]; {
	case c == '\r':
		if i+1 >= len(src) || src[i+1] != '\n' {
			out = append(out, '\n')
		}
	case !dropRune(rune(c)):
		out = append(out, c)
	}
	return out
}

// appendCleanRune appends the repaired rune r, whose bytes in src are
// raw: invalid UTF-8 becomes U+FFFD, a ligature its letters, the
// characters of dropRune go.
func appendCleanRune(out []byte, r rune, raw []byte) []byte {
	switch {
	case r == utf8.RuneError:
		return utf8.AppendRune(out, utf8.RuneError)
	case isLigature(r):
		return append(out, ligatures[r-0xFB00]...)
	case !dropRune(r):
		return append(out, raw...)
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

// resolveNumericReferences resolves the numeric character references of
// v that CommonMark counts as such: &# and 1–7 decimal digits, or &#x and
// 1–6 hex digits, then ;. goldmark's util.ResolveNumericReferences also
// takes longer hex numbers and makes them U+FFFD, which then vanishes;
// CommonMark keeps them as typed (&#x1100000; is text).
func resolveNumericReferences(v []byte) []byte {
	i := bytes.Index(v, []byte("&#"))
	if i < 0 {
		return v
	}
	var out []byte
	for i >= 0 {
		n := numericRefLen(v[i:])
		if n == 0 {
			out = append(out, v[:i+2]...)
			v = v[i+2:]
		} else {
			out = append(out, v[:i]...)
			out = append(out, util.ResolveNumericReferences(v[i:i+n])...)
			v = v[i+n:]
		}
		i = bytes.Index(v, []byte("&#"))
	}
	return append(out, v...)
}

// numericRefLen returns the length of the numeric character reference s
// starts with, 0 when it starts with none.
func numericRefLen(s []byte) int {
	i, maxDigits, isDigit := 2, 7, func(c byte) bool { return c >= '0' && c <= '9' }
	if len(s) > 2 && (s[2] == 'x' || s[2] == 'X') {
		i, maxDigits = 3, 6
		isDigit = func(c byte) bool { return isHex(c) }
	}
	start := i
	for i < len(s) && i-start < maxDigits && isDigit(s[i]) {
		i++
	}
	if i == start || i >= len(s) || s[i] != ';' {
		return 0
	}
	return i + 1
}
