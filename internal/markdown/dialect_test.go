package markdown

import (
	"strings"
	"testing"

	"github.com/yuin/goldmark/ast"
)

// TestDialects: the rules that change CommonMark's meaning apply in
// Outline's dialect only; a CommonMark document keeps CommonMark's.
func TestDialects(t *testing.T) {
	tests := []struct {
		src       string
		dialect   Dialect
		want, not string
	}{
		{"__x__", DialectCommonMark, `\textbf{x}`, `\opul`},
		{"__x__", DialectOutline, `\opul{x}`, `\textbf`},
		{`### A heading with \newline`, DialectCommonMark, `A heading with \textbackslash{}newline`, `\opnl`},
		{`a\nb`, DialectOutline, `a\opnl`, `textbackslash`},
		{"a\n\n***\n\nb", DialectCommonMark, `\oprule`, `\opnewpage`},
		{"a\n\n***\n\nb", DialectOutline, `\opnewpage`, `\oprule`},
		{"+++++\nTitle\n\nBody\n\n+++++", DialectCommonMark, `+++++`, `optoggle`},
		{"+++++\nTitle\n\nBody\n\n+++++", DialectOutline, `\begin{optoggle}{Title}`, `+++`},
		{"a. one\nb. two", DialectCommonMark, `a. one`, `enumerate`},
		{"a. one\nb. two", DialectOutline, `\item[{b.}]`, `a. one`},
		{":thumbs_up:", DialectOutline, "👍", ":thumbs_up:"},
		{":+1:", DialectCommonMark, "👍", ":+1:"},
	}
	for _, tt := range tests {
		d, err := Parse([]byte(tt.src), Options{Dialect: tt.dialect})
		if err != nil {
			t.Errorf("Parse(%q, %s) = %v", tt.src, tt.dialect, err)
			continue
		}
		out, err := d.LaTeX(Meta{Title: "T"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.Body, tt.want) || strings.Contains(out.Body, tt.not) {
			t.Errorf("LaTeX(%q, %s) = %q, want %q and not %q", tt.src, tt.dialect, out.Body, tt.want, tt.not)
		}
	}
}

// TestOutlineMath: Outline's rule tries only the next `$` as the closer,
// so text with dollars prints as text and never fails as a formula.
func TestOutlineMath(t *testing.T) {
	tests := []struct {
		src      string
		formulas []string
	}{
		{"$E = mc^2$", []string{"E = mc^2"}},
		{"Price $5, env $HOME/$PATH here.", nil},
		{"price $5 and $10, env $HOME/$PATH.", nil},
		{"$$\\frac{a}{b}$$ inline", nil},
		{"a $x$ and $y$.", []string{"x", "y"}},
		{"costs $ 5 $", nil},
		{"escaped \\$x$ and $y$", []string{"y"}},
		{"over $a\nb$ lines", []string{"a\nb"}},
		{"$x$5 is not closed, $y$.", []string{"y"}},
		{strings.Repeat("$a ", 2000), nil},
	}
	for _, tt := range tests {
		d, err := Parse([]byte(tt.src), Options{Dialect: DialectOutline})
		if err != nil {
			t.Errorf("Parse(%.40q) = %v, want no error", tt.src, err)
			continue
		}
		got := walkMath(d)
		if strings.Join(got, "|") != strings.Join(tt.formulas, "|") {
			t.Errorf("formulas of %.40q = %q, want %q", tt.src, got, tt.formulas)
		}
	}
	// CommonMark documents keep pandoc's rule: the formula runs on to the
	// next closer, and a formula outside the allowlist is an error.
	if _, err := Parse([]byte(`$\input{x}$`), Options{}); err == nil {
		t.Errorf("Parse($\\input{x}$) = nil, want a math error")
	}
}

func walkMath(d *Document) []string {
	var out []string
	// The walker returns no error, so Walk has none to return.
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if m, ok := n.(*MathInline); ok && entering {
			out = append(out, m.Formula)
		}
		return ast.WalkContinue, nil
	})
	return out
}
