package texmath

import (
	"errors"
	"strings"
)

// Check decides whether a formula may reach TeX: checkMath's
// allowlist of commands, and the guards for what would break out of the
// math a writer puts around it (formulas are set between \( \) or
// \[ \]): unbalanced braces, the math delimiters themselves, a dollar, a
// comment sign or a parameter sign, and `^^` notation.
func Check(f string) error {
	if strings.TrimSpace(f) == "" {
		return nil
	}
	if err := checkMath(f); err != nil {
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
