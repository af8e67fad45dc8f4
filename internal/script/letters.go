package script

import (
	"unicode"

	"golang.org/x/text/unicode/bidi"
)

// CodeRuns splits a piece of code into runs by font, like SplitRuns but
// without the right-to-left ordering: code reads left to right.
func CodeRuns(s string) []Run {
	if isASCII(s) || MainOnly(s) {
		return []Run{{Text: s}}
	}
	cs := clusters(s)
	var buf [numFonts + 1]Font
	var runs []Run
	for i := range cs {
		c := &cs[i]
		if isLineSpace(c.runes[0]) {
			c.font = Main
		} else {
			place(c, chainFor(c.runes[0], buf[:]))
		}
		if len(c.runes) == 0 {
			continue
		}
		key := fonts[c.font].key
		if n := len(runs); n > 0 && runs[n-1].Font == key {
			runs[n-1].Text += string(c.runes)
		} else {
			runs = append(runs, Run{Text: string(c.runes), Font: key})
		}
	}
	return runs
}

// FirstLetter returns the font of the first letter of s, or digit true
// when a digit comes first; ok is false when s has neither.
func FirstLetter(s string) (f Font, digit, ok bool) {
	var buf [numFonts + 1]Font
	for _, c := range s {
		switch {
		case c < 0x80:
			if c >= '0' && c <= '9' {
				return None, true, true
			}
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				return Main, false, true
			}
		case unicode.IsDigit(c):
			return None, true, true
		case unicode.IsLetter(c) || scriptFont(c) != Main:
			cl := cluster{runes: []rune{c}}
			place(&cl, chainFor(c, buf[:]))
			return cl.font, false, true
		}
	}
	return None, false, false
}

// Drawable reports whether some font of the chain has a glyph for r.
func Drawable(r rune) bool { return coverageOf(r) != 0 }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// InMainFont reports whether the main font has a glyph for r.
func InMainFont(r rune) bool { return coverageOf(r)&covMain != 0 }

// FirstStrong returns the direction of the first strong character of s
// (rules P2 and P3 of the Unicode bidi algorithm: a letter of class L, R
// or AL): rtl is true for R and AL, found false when s has none.
func FirstStrong(s string) (rtl, found bool) {
	for _, r := range s {
		if r < 0x80 {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return false, true
			}
			continue
		}
		p, _ := bidi.LookupRune(r)
		switch p.Class() {
		case bidi.L:
			return false, true
		case bidi.R, bidi.AL:
			return true, true
		}
	}
	return false, false
}
