package texmath

import (
	"strings"
	"unicode/utf8"
)

// Protect puts \protect before every control sequence of a checked
// formula, so that the formula survives being written to a file: LaTeX's
// protected writes then keep each command as it is instead of expanding
// it.
func Protect(f string) string {
	if strings.IndexByte(f, '\\') < 0 {
		return f
	}
	var b strings.Builder
	b.Grow(len(f) + 32)
	for i := 0; i < len(f); i++ {
		if f[i] != '\\' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && isASCIILetter(f[j]) {
			j++
		}
		if j == i+1 {
			_, n := utf8.DecodeRuneInString(f[j:])
			j += n // a control symbol
		}
		b.WriteString(`\protect`)
		b.WriteString(f[i:j])
		i = j - 1
	}
	return b.String()
}

// SafeCut returns a byte index near want at which a formula line can
// be split by `%` and a newline without changing its tokens: not after a
// backslash, not inside a control word, not inside a UTF-8 sequence.
func SafeCut(s string, want int) int {
	for i := want; i < len(s); i++ {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		prev := s[i-1]
		if prev == '\\' || isASCIILetter(s[i]) && inControlWord(s, i) {
			continue
		}
		if s[i] == ' ' {
			continue // a space after the cut would be skipped; keep it before
		}
		return i
	}
	return len(s)
}

// inControlWord reports whether position i continues a control word.
func inControlWord(s string, i int) bool {
	j := i - 1
	for j >= 0 && isASCIILetter(s[j]) {
		j--
	}
	if j < 0 || s[j] != '\\' {
		return false
	}
	// s[j] is a backslash that starts a control word unless it is itself
	// escaped (an even run of backslashes before it).
	k := j - 1
	for k >= 0 && s[k] == '\\' {
		k--
	}
	return (j-k)%2 == 1
}
