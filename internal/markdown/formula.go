package markdown

import (
	"errors"
	"strings"
)

// checkFormula decides whether a formula may reach TeX: CheckMath's
// allowlist of commands, and the writer's own guards for what would break
// out of the math the writer puts around it (it sets formulas between
// \( \) or \[ \]): unbalanced braces, the math delimiters themselves, a
// dollar, a comment sign or a parameter sign, and `^^` notation.
func checkFormula(f string) error {
	if strings.TrimSpace(f) == "" {
		return nil
	}
	if err := CheckMath(f); err != nil {
		return err
	}
	if strings.Contains(f, "^^") {
		return errors.New("^^ notation is not allowed")
	}
	depth := 0
	for i := 0; i < len(f); i++ {
		switch c := f[i]; c {
		case '\\':
			if i+1 < len(f) {
				switch f[i+1] {
				case '(', ')', '[', ']':
					return errors.New(`\( \) \[ \] are not allowed inside a formula`)
				}
			}
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth < 0 {
				return errors.New("unbalanced braces")
			}
		case '$', '%', '#':
			return errors.New("the character " + string(c) + " must be escaped")
		}
	}
	if depth != 0 {
		return errors.New("unbalanced braces")
	}
	return nil
}
