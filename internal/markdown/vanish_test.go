package markdown

import (
	"strings"
	"testing"
)

// TestNumericReferences: numeric character references resolve only in
// CommonMark's shape (&# and 1–7 digits, &#x and 1–6 hex digits); longer
// ones are text and print as typed, in text and in link targets.
func TestNumericReferences(t *testing.T) {
	tests := []struct{ in, want string }{
		{"&#x1100000;", `\&\#x1100000;`},
		{"&#12345678;", `\&\#12345678;`},
		{"&#x41; &#66; &#X43;", `A B C`},
		{"a &#x10FFFF; b", "a  b"}, // a noncharacter: dropped, as clean drops it
		{"[x](https://example.com/&#x1100000;)", `https://example.com/\&\#x1100000;`},
		{"&#;", `\&\#;`},
	}
	for _, tt := range tests {
		out := body(t, tt.in+"\n", Options{}, Meta{})
		if !strings.Contains(out.Body, tt.want) {
			t.Errorf("LaTeX(%q) = %q, want it to contain %q", tt.in, out.Body, tt.want)
		}
	}
}

func TestResolveNumericReferences(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"no refs", "no refs"},
		{"&#65;&#x42;", "AB"},
		{"&#x1100000;", "&#x1100000;"},
		{"&#1234567;", "\uFFFD"}, // seven digits are a reference, of no character
		{"&#x;&#", "&#x;&#"},
		{"&&#65;&", "&A&"},
	}
	for _, tt := range tests {
		if got := string(resolveNumericReferences([]byte(tt.in))); got != tt.want {
			t.Errorf("resolveNumericReferences(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
