package markdown

// Temporary stand-ins for the functions another engineer writes in math.go,
// highlight.go and script.go. This file is deleted as soon as those land.

import (
	"errors"
	"regexp"
	"strings"
)

var stubMathCmd = regexp.MustCompile(`\\([A-Za-z]+|.)`)

var stubMathAllowed = map[string]bool{
	"frac": true, "cdot": true, "times": true, "approx": true, "sum": true, "alpha": true,
	"beta": true, "gamma": true, "sqrt": true, "int": true, "infty": true, "le": true,
	"ge": true, "pi": true, "left": true, "right": true, ",": true, "{": true, "}": true,
	"text": true, "mathrm": true, "quad": true, "\\": true, "begin": true, "end": true,
}

// CheckMath is a stand-in for A2's allowlist.
func CheckMath(formula string) error {
	if strings.Contains(formula, "^^") || strings.ContainsAny(formula, "%$#") {
		return errors.New("forbidden character in formula")
	}
	for _, m := range stubMathCmd.FindAllStringSubmatch(formula, -1) {
		if !stubMathAllowed[m[1]] {
			return errors.New("command \\" + m[1] + " is not allowed")
		}
	}
	return nil
}

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

