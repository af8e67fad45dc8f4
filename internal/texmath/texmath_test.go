package texmath

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/latextest"
	"github.com/outprint/outprint/internal/testenv"
)

func TestCheckMathAccepts(t *testing.T) {
	for _, f := range acceptedFormulas {
		if err := checkMath(f); err != nil {
			t.Errorf("checkMath(%q) = %v, want nil", f, err)
		}
	}
}

// acceptedFormulas are formulas as authors write them; math_test compiles
// them all with XeLaTeX.
var acceptedFormulas = []string{
	`x^2`, `x_1^2`, `x^{2n}_{i,j}`, `{x^a}^b`, `x'`, `x''`, `x'^2`, `x_1'`, `f'(x)`, `^2`, `{}_2F_1`,
	`\frac{a+b}{c}`, `\frac12`, `\frac\alpha\beta`, `\dfrac{1}{2} + \tfrac{1}{3}`, `\cfrac{1}{1+\cfrac{1}{x}}`,
	`\sqrt{2}`, `\sqrt[3]{x}`, `\sqrt[n]{\frac{a}{b}}`, `\sqrt x`,
	`\sum_{i=1}^{n} i = \frac{n(n+1)}{2}`, `\sum\limits_{k=0}^\infty a_k`, `\int_0^1 f(x)\,dx`, `\iint_D f\,dA`,
	`\oint_C \vec{F}\cdot d\vec{r}`, `\prod_{p} (1-p^{-s})^{-1}`, `\lim_{x \to 0} \frac{\sin x}{x} = 1`,
	`\limsup_{n\to\infty} a_n`, `\max_{x \in S} f(x)`, `\log_2 n`, `\ln x`, `e^{i\pi} + 1 = 0`,
	`\alpha + \beta = \gamma`, `\Gamma(z) = \int_0^\infty t^{z-1}e^{-t}\,dt`, `\varepsilon > 0`,
	`a \le b \ge c \neq d \approx e \equiv f \sim g \cong h \propto i`, `A \subseteq B \cup C \cap D`,
	`x \in \mathbb{R}`, `\mathbf{v} \times \mathbf{w}`, `\mathcal{O}(n \log n)`, `\mathrm{d}x`, `\mathit{diff}`,
	`\mathfrak{g}`, `\mathsf{T}`, `\mathtt{x}`, `\boldsymbol{\mu}`,
	`\left( \frac{a}{b} \right)`, `\left[ x \right]`, `\left\{ x \mid x > 0 \right\}`, `\left| x \right|`,
	`\left\| v \right\|`, `\left. \frac{df}{dx} \right|_{x=0}`, `\left\langle u, v \right\rangle`,
	`\left( a \middle| b \right)`, `\bigl( x \bigr)`, `\Big[ y \Big]`, `\biggl\{ z \biggr\}`,
	`\hat{x} \bar{y} \vec{z} \tilde{w} \dot{a} \ddot{b} \widehat{AB} \overline{z} \underline{x}`,
	`\overbrace{a+b}^{n} \underbrace{c+d}_{m}`, `\overset{!}{=}`, `\underset{x}{\arg\min}`, `\stackrel{def}{=}`,
	`\xrightarrow{f} \xleftarrow[g]{h}`, `\binom{n}{k}`, `\dbinom{n}{k}`, `\boxed{E=mc^2}`,
	`\operatorname{rank}(A)`, `\operatorname*{argmax}_{x} f(x)`, `a \bmod b`, `a \pmod{n}`, `a \mod{n}`,
	`\text{if } x > 0`, `x = 1 \quad \text{and} \qquad y = 2`, `\text{für alle } x`, `\textbf{bold} \textit{it}`,
	`\text{a \% b \& c \{d\} \_ \# \$ ~ x}`, `\text{Größe, Ωμέγα, Жизнь, naïve — ok}`, `\mbox{box}`,
	`a\,b\:c\;d\!e\ f`, `\{ x \}`, `\| x \|`, `100\%`, `\$5`, `a \& b`, `\#1`, `a\_b`,
	`\begin{matrix} a & b \\ c & d \end{matrix}`, `\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}`,
	`\begin{bmatrix} a \end{bmatrix}`, `\begin{Bmatrix} a \end{Bmatrix}`, `\det\begin{vmatrix} a & b \\ c & d \end{vmatrix}`,
	`\begin{Vmatrix} a \end{Vmatrix}`, `\left(\begin{smallmatrix} a & b \\ c & d \end{smallmatrix}\right)`,
	`f(x) = \begin{cases} 0 & \text{if } x < 0 \\ x & \text{otherwise} \end{cases}`,
	`\begin{aligned} a &= b + c \\ &= d \end{aligned}`, `\begin{gathered} a = b \\ c = d \end{gathered}`,
	`\begin{array}{c|cc} a & b & c \\ \hline d & e & f \end{array}`, `\begin{array}[t]{lr} \hline x & y \\ \hline \end{array}`,
	`\begin{aligned} x &= 1 \\[2pt] y &= 2 \end{aligned}`, `\begin{matrix} a \\* b \end{matrix}`,
	`\begin{pmatrix} \begin{matrix} a \end{matrix} & b \end{pmatrix}`,
	`\sum_{\substack{0 < i < m \\ 0 < j < n}} P(i, j)`, `\displaystyle \sum_i x_i`, `\scriptstyle x`,
	`x \to \infty`, `A \implies B \iff C`, `f: X \rightarrow Y`, `a \mapsto b`, `\nabla \cdot \mathbf{E} = \frac{\rho}{\varepsilon_0}`,
	`\partial_t u = \Delta u`, `\forall x \exists y`, `\neg p \land q \lor r`, `\emptyset \varnothing`,
	`\cdots \ldots \vdots \ddots \dots`, `1, 2, \dots, n`, `a \cdot b`, `\not= \not\in`, `x \notin A`,
	`B = (1 - A) \cdot T`, `B = 0.001 \times 40320 \approx 40`, `p < 0.05`, `[0, 1)`, `|x|`, `a ~ b`,
	"a\nb\n\\sum_i x_i", `\phantom{x} \vphantom{y} \hphantom{z}`, `\mathop{lim}\limits_{x}`, `\mathrel{R}`,
	`\left( \right.`, `x^{\prime\prime}`, `\langle x \rangle`, `\lfloor x \rfloor \lceil y \rceil`,
}

func TestCheckMathRefuses(t *testing.T) {
	tests := []struct {
		in    string
		token string // Error.Token
		msg   string // part of the message
	}{
		{`\input{/etc/passwd}`, `\input`, `formula uses \input, which is not allowed`},
		{`^^5cinput{/etc/passwd}`, "^^", "^^"},
		{`x^^41`, "^^", "^^"},
		{`\def\x{1}\x`, `\def`, `\def`},
		{`x % comment`, "%", "%"},
		{`\write18{ls}`, `\write`, `\write`},
		{`\immediate\write18{touch /tmp/outprint-pwned}`, `\immediate`, `\immediate`},
		{`\catcode`, `\catcode`, `\catcode`},
		{`\directlua{os.exit()}`, `\directlua`, `\directlua`},
		{`\csname input\endcsname`, `\csname`, `\csname`},
		{`\openin1=/etc/passwd`, `\openin`, `\openin`},
		{`\read1 to\x`, `\read`, `\read`},
		{`\special{pdf:}`, `\special`, `\special`},
		{`\href{run:/bin/sh}{x}`, `\href`, `\href`},
		{`\url{x}`, `\url`, `\url`},
		{`\includegraphics{/etc/passwd}`, `\includegraphics`, `\includegraphics`},
		{`\begin{align} a \end{align}`, `\begin{align}`, `\begin{align}`},
		{`\begin{verbatim}`, `\begin{verbatim}`, "not allowed"},
		{`\begin{matrix} a \end{pmatrix}`, `\end{pmatrix}`, "belongs"},
		{`\begin{matrix} a`, `\begin`, "without a matching"},
		{`\end{matrix}`, `\end`, "without a matching"},
		{`#1`, "#", "#"},
		{`$x$`, "$", "$"},
		{`a & b`, "&", "outside an environment"},
		{`a \\ b`, `\\`, "outside an environment"},
		{`{x`, "{", "without a matching }"},
		{`x}`, "}", "without a matching {"},
		{`\left( x`, `\left`, `without a matching \right`},
		{`x \right)`, `\right`, `without a matching \left`},
		{`a \middle| b`, `\middle`, `\middle`},
		{`\left x \right)`, "x", "not a delimiter"},
		{`\big x`, "x", "not a delimiter"},
		{`x^2^3`, "^", "double superscript"},
		{`x_1_2`, "_", "double subscript"},
		{`x^2'`, "'", "prime after a superscript"},
		{`x^`, "^", "needs an argument"},
		{`\frac{a}`, `\frac`, "needs an argument"},
		{`x^\frac12`, "^", "braces"},
		{`x^\cdots`, "^", "braces"},
		{`x_\sum`, "_", "braces"},
		{`x^\,`, "^", "braces"},
		{`x^~`, "^", "braces"},
		{`\sqrt\cdots`, `\sqrt`, "braces"},
		{`\sqrt`, `\sqrt`, "needs an argument"},
		{`a \limits`, `\limits`, "no operator"},
		{`\text{a^b}`, "^", `inside \text`},
		{`\text{\input x}`, `\input`, `inside \text`},
		{`\text{日本}`, "日", "main font"},
		{`\text x`, `\text`, "braces"},
		{`α + β`, "α", `\alpha`},
		{`x ≤ y`, "≤", `\le`},
		{`x @ y`, "@", "not allowed"},
		{`x " y`, `"`, "not allowed"},
		{"a\x07b", "U+0007", "control character"},
		{"a\u202eb", "U+202E", "invisible"},
		{"a\n\nb", "", "blank line"},
		{"a\xffb", "", "UTF-8"},
		{`\`, `\`, `lone \`},
		{`\é`, `\é`, "not allowed"},
		{`\(x\)`, `\(`, "not allowed"},
		{`\[x\]`, `\[`, "not allowed"},
		{`\begin{matrix} a \\ [b] \end{matrix}`, `\\[`, "length"},
		{`\begin{cases} a & b & c \end{cases}`, "&", "more than 2 columns"},
		{`\begin{gathered} a & b \end{gathered}`, "&", "more than 1 columns"},
		{`\begin{array}{cc} a & b & c \end{array}`, "&", "more than 2 columns"},
		{`\begin{array}{p{2cm}} a \end{array}`, "p", "column specification"},
		{`\begin{array} a \end{array}`, `\begin{array}`, "column specification"},
		{`\begin{matrix} a \hline b \end{matrix}`, `\hline`, `\hline`},
		{`\begin{array}{c} a \hline b \end{array}`, `\hline`, `\hline`},
		{`\hline`, `\hline`, `\hline`},
		{`{a & b}`, "&", "outside"},
		{`\tag{1}`, `\tag`, "not allowed"},
		{`\color{red} x`, `\color`, "not allowed"},
		{`\hspace{1cm}`, `\hspace`, "not allowed"},
		{`\operatorname`, `\operatorname`, "needs an argument"},
		{`\frac{a}}`, `\frac`, "needs an argument"},
		{`\substack{a & b}`, "&", ""},
		{strings.Repeat("{", maxMathDepth+1) + strings.Repeat("}", maxMathDepth+1), "{", "deeper"},
		{strings.Repeat("x+", maxMathTokens), "", "too long"},
	}
	for _, tt := range tests {
		err := checkMath(tt.in)
		var me *Error
		if !errors.As(err, &me) {
			t.Errorf("checkMath(%.60q) = %v, want a *Error", tt.in, err)
			continue
		}
		if me.Token != tt.token || !strings.Contains(me.Error(), tt.msg) {
			t.Errorf("checkMath(%.60q) = %q (token %q), want token %q and a message with %q", tt.in, me.Error(), me.Token, tt.token, tt.msg)
		}
	}
}

// corpusFormulas returns the formulas of a corpus document: $$ blocks and
// inline $…$ spans.
func corpusFormulas(t *testing.T, name string) []string {
	t.Helper()
	shared := testenv.SharedDir(t, "../..")
	if shared == "" {
		testenv.Missing(t, "../shared (the test corpus) is not there")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	text := string(src)
	for _, m := range regexp.MustCompile(`(?s)\n\$\$\n(.*?)\n\$\$\n`).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	text = regexp.MustCompile(`(?s)\n\$\$\n.*?\n\$\$\n`).ReplaceAllString(text, "\n")
	for _, m := range regexp.MustCompile(`\$([^$\n]+)\$`).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestCheckMathCorpus(t *testing.T) {
	hostile := corpusFormulas(t, "hostile/math-injection.md")
	if len(hostile) != 6 {
		t.Fatalf("found %d formulas in math-injection.md, want 6: %q", len(hostile), hostile)
	}
	for _, f := range hostile {
		if err := checkMath(f); err == nil {
			t.Errorf("checkMath(%q) = nil, want an error", f)
		}
	}
	handbook := corpusFormulas(t, "handbook.md")
	if len(handbook) != 5 {
		t.Fatalf("found %d formulas in handbook.md, want 5: %q", len(handbook), handbook)
	}
	for _, f := range handbook {
		if err := checkMath(f); err != nil {
			t.Errorf("checkMath(%q) = %v, want nil", f, err)
		}
	}
}

// commandSamples returns formulas that use every allowlisted command,
// delimiter, environment and control symbol in the ways checkMath accepts.
func commandSamples() []string {
	var out []string
	names := make([]string, 0, len(mathCommands))
	for n := range mathCommands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c := `\` + n
		switch mathCommands[n] {
		case mkSymbol:
			out = append(out, `a `+c+` b`, `x^`+c, `x_`+c, `\hat`+c, `\frac`+c+c, `\sqrt`+c, `\overline`+c)
		case mkMacro:
			out = append(out, `a `+c+` b`, `x^{`+c+`}`, `\sqrt{`+c+`}`)
		case mkStyle:
			out = append(out, c+` x`, `{`+c+` x}^2`)
		case mkOp:
			if braceArgOps[n] {
				out = append(out, c+`{x}^{n}`, c+`{x}_{n}`, c+`{x}\limits^{n}`)
			} else {
				out = append(out, c+`_{i=1}^{n} x`, c+`\limits_0^1 x`, c+`\nolimits_0 x`, c+` x`, `x^{`+c+`}`)
			}
		case mkArg1:
			out = append(out, c+`{x+y}`, c+` x`, c+`\alpha`, `x^{`+c+`{y}}`)
		case mkArg2:
			out = append(out, c+`{a}{b}`, c+` ab`, c+`\alpha\beta`)
		case mkOptArg1:
			out = append(out, c+`{x}`, c+`[n]{x}`, c+` x`)
		case mkText:
			out = append(out, c+`{a b}`, `x_{`+c+`{max}}`)
		case mkDelim:
			for d := range mathDelims {
				out = append(out, c+` `+d+` x`)
			}
		}
	}
	delims := make([]string, 0, len(mathDelims))
	for d := range mathDelims {
		delims = append(delims, d)
	}
	slices.Sort(delims)
	for _, d := range delims {
		out = append(out, `\left`+d+` x \middle`+d+` y \right`+d)
	}
	for _, r := range mathSymbols {
		out = append(out, `a \`+string(r)+` b`)
	}
	for n, k := range textCommands {
		if k == mkText {
			out = append(out, `\text{a \`+n+`{b} c}`)
		} else {
			out = append(out, `\text{a \`+n+` b}`)
		}
	}
	for _, r := range textSymbols {
		out = append(out, `\text{a \`+string(r)+` b}`)
	}
	envs := make([]string, 0, len(mathEnvs))
	for e := range mathEnvs {
		envs = append(envs, e)
	}
	slices.Sort(envs)
	for _, e := range envs {
		spec := ""
		if e == "array" {
			spec = "{cc}"
		}
		switch mathEnvs[e] {
		case 1:
			out = append(out, `\begin{`+e+`} a \\ b \\[1.5em] c \\ \end{`+e+`}`)
		default:
			out = append(out, `\begin{`+e+`}`+spec+` a & b \\ c & d \\[2pt] & \end{`+e+`}^T`)
		}
	}
	return out
}

// randomFormulas returns formulas made of random allowlisted pieces that
// checkMath accepts: they probe the grammar, not just the vocabulary.
func randomFormulas(n int) []string {
	pieces := []string{
		"x", "2", "+", "=", "(", ")", "[", "]", "|", ",", "'", "^", "_", "{", "}", "{", "}", " ", "&", `\\`, "~",
		`\alpha`, `\le`, `\neq`, `\cdots`, `\infty`, `\sum`, `\int`, `\lim`, `\limits`, `\frac`, `\sqrt`,
		`\sqrt[3]`, `\hat`, `\mathbf`, `\left(`, `\right)`, `\left.`, `\right|`, `\middle|`, `\big(`,
		`\begin{matrix}`, `\end{matrix}`, `\begin{cases}`, `\end{cases}`, `\begin{aligned}`, `\end{aligned}`,
		`\begin{array}{cc}`, `\end{array}`, `\hline`, `\text{a}`, `\operatorname{f}`, `\substack{a\\b}`,
		`\overbrace{x}`, `\,`, `\quad`, `\displaystyle`, `\{`, `\}`, `\not`, `\mod`, `\pmod`, `\colon`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var out []string
	for tries := 0; len(out) < n && tries < 400*n; tries++ {
		var b strings.Builder
		for k := 2 + rng.IntN(14); k > 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if f := b.String(); checkMath(f) == nil && strings.ContainsAny(f, `\^_'{&`) {
			out = append(out, f)
		}
	}
	return out
}

// TestAcceptedMathCompiles is the allowlist's proof: every command it
// allows, every curated formula and a few hundred random formulas it
// accepts compile with XeLaTeX in the preamble the writer uses (fontspec,
// amsmath, amssymb, hyperref), inline, displayed and in a heading.
func TestAcceptedMathCompiles(t *testing.T) {
	random := randomFormulas(300)
	formulas := append(append(commandSamples(), random...), acceptedFormulas...)
	for _, f := range formulas {
		if err := checkMath(f); err != nil {
			t.Fatalf("checkMath(%q) = %v, want nil (the sample must be accepted)", f, err)
		}
	}
	inHeading := func(i int) bool { return i%7 == 0 || i >= len(formulas)-len(acceptedFormulas) }
	failed, log := compileFormulas(t, formulas, inHeading)
	for _, f := range formulas {
		if msg, ok := failed[f]; ok {
			t.Errorf("checkMath accepts %q, but XeLaTeX says %s", f, msg)
		}
	}
	if m := latextest.MissingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost characters:\n%s", strings.Join(m, "\n"))
	}
	t.Logf("compiled %d formulas (%d random)", len(formulas), len(random))
}

// TestCompileFormulasFindsErrors checks the harness of
// TestAcceptedMathCompiles: formulas TeX refuses are reported, each on
// its own, and good ones around them are not.
func TestCompileFormulasFindsErrors(t *testing.T) {
	formulas := []string{`x^2`, `x^2^3`, `\frac{a}{b}`, `\undefinedcommand`, `a & b`, `\sqrt{x}`}
	failed, _ := compileFormulas(t, formulas, func(int) bool { return false })
	for _, f := range formulas {
		_, got := failed[f]
		want := checkMath(f) != nil
		if got != want {
			t.Errorf("compileFormulas: %q failed = %v, want %v (all: %q)", f, got, want, failed)
		}
	}
}

// compileFormulas sets every formula inline and displayed (and, where
// inHeading says so, in a heading as the writer makes it) in one XeLaTeX
// run that goes on after errors, and returns the first error message of
// each formula that failed, with the log.
func compileFormulas(t *testing.T, formulas []string, inHeading func(int) bool) (map[string]string, string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`\documentclass{article}
\usepackage{fontspec}
\setmainfont{Noto Serif}
\setsansfont{Noto Sans}
\setmonofont{Noto Sans Mono}
\usepackage{amsmath,amssymb}
\usepackage[unicode]{hyperref}
\begin{document}
\tableofcontents
`)
	// Each formula sits on its own lines, so the line number of a TeX
	// error names it.
	lineOf := map[int]string{}
	line := strings.Count(b.String(), "\n") + 1
	emit := func(f, before, after string) {
		b.WriteString(before + strings.ReplaceAll(f, "\n", " ") + after + "\n")
		lineOf[line] = f
		line++
	}
	// In a heading, the formula is typeset, but it must not be in the
	// optional argument: that one is written to the .toc and .aux files,
	// and many of the commands (\checkmark, \sum\limits, \hline, \text)
	// do not survive the writing.
	for i, f := range formulas {
		emit(f, `\(`, `\)\par`)
		emit(f, `\[`, `\]`)
		if inHeading(i) {
			emit(f, `\section[\texorpdfstring{H}{H}]{H \(`, `\)}`)
		}
	}
	b.WriteString("\\end{document}\n")

	log, _, err := latextest.Compile(t, b.String(), false)
	failed := map[string]string{}
	lines := strings.Split(log, "\n")
	lre := regexp.MustCompile(`^l\.(\d+) `)
	for i, l := range lines {
		if !strings.HasPrefix(l, "! ") {
			continue
		}
		found := false
		for _, next := range lines[i+1 : min(i+12, len(lines))] {
			if m := lre.FindStringSubmatch(next); m != nil {
				n, _ := strconv.Atoi(m[1])
				f, ok := lineOf[n]
				if !ok {
					t.Fatalf("XeLaTeX error outside the formulas: %s (%s)", l, next)
				}
				if _, seen := failed[f]; !seen {
					failed[f] = l
				}
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("XeLaTeX error without a line: %s", l)
		}
	}
	if err != nil && len(failed) == 0 {
		t.Fatalf("xelatex failed without an error line: %v", err)
	}
	return failed, log
}

// FuzzCheckMath checks that checkMath never panics and that what it
// accepts keeps the promises the writer relies on: no ^^, no comment or
// parameter character, no math shift, balanced braces, and only
// allowlisted control words.
func FuzzCheckMath(f *testing.F) {
	for _, s := range acceptedFormulas {
		f.Add(s)
	}
	for _, s := range []string{`\input{x}`, `^^5c`, `x%`, `\begin{matrix}a&b\\c\end{matrix}`, `\left(\right)`, `\text{é}`} {
		f.Add(s)
	}
	vocab := map[string]bool{}
	for _, v := range Vocabulary() {
		vocab[v] = true
	}
	f.Fuzz(func(t *testing.T, s string) {
		done := make(chan error, 1)
		go func() { done <- checkMath(s) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			panic(fmt.Sprintf("checkMath(%q) runs for more than 10 s", s))
		}
		if err != nil {
			return
		}
		if strings.Contains(s, "^^") {
			t.Fatalf("checkMath(%q) = nil, but it has ^^", s)
		}
		toks, err := tokenize(s)
		if err != nil {
			t.Fatalf("checkMath(%q) = nil, but tokenize fails: %v", s, err)
		}
		depth := 0
		for _, tok := range toks {
			switch {
			case tok.kind == 'w' || tok.kind == 's':
				if !vocab[tok.text] {
					t.Fatalf("checkMath(%q) = nil, but it uses %s", s, tok.text)
				}
			case tok.text == "{":
				depth++
			case tok.text == "}":
				depth--
				if depth < 0 {
					t.Fatalf("checkMath(%q) = nil with an unbalanced }", s)
				}
			case tok.text == "%" || tok.text == "#" || tok.text == "$":
				t.Fatalf("checkMath(%q) = nil, but it has %s", s, tok.text)
			}
		}
		if depth != 0 {
			t.Fatalf("checkMath(%q) = nil with an unbalanced {", s)
		}
	})
}

func BenchmarkCheckMath(b *testing.B) {
	f := `\sum_{i=1}^{n} \frac{\alpha_i}{\sqrt{1+x_i^2}} + \begin{pmatrix} a & b \\ c & d \end{pmatrix} \text{ for all } x \in \mathbb{R}`
	for b.Loop() {
		if err := checkMath(f); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrentUse runs Check from many goroutines at once (run with
// -race): they share only read-only tables.
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if err := Check(`\frac{a}{b}`); err != nil {
					t.Errorf("Check(\\frac{a}{b}) = %v, want nil", err)
				}
				if err := Check(`\input{x}`); err == nil {
					t.Errorf("Check(\\input{x}) = nil, want an error")
				}
			}
		})
	}
	wg.Wait()
}

func TestProtect(t *testing.T) {
	tests := []struct{ in, want string }{
		{`x^2`, `x^2`},
		{`\frac{a}{b}`, `\protect\frac{a}{b}`},
		{`\sum\limits_{i}\,x`, `\protect\sum\protect\limits_{i}\protect\,x`},
		{`a\\b`, `a\protect\\b`},
	}
	for _, tt := range tests {
		if got := Protect(tt.in); got != tt.want {
			t.Errorf("Protect(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSafeCut(t *testing.T) {
	tests := []struct {
		in   string
		want int
		then string // what the line goes on with after the cut
	}{
		{`abcdef`, 3, `def`},
		{`ab\alpha x`, 9, `x`}, // not inside \alpha, not before the space
		{`ab\\cd`, 5, `d`},     // never right after a backslash
		{`abc日本`, 3, `日本`},
	}
	for _, tt := range tests {
		got := SafeCut(tt.in, 3)
		if got != tt.want || tt.in[got:] != tt.then {
			t.Errorf("SafeCut(%q, 3) = %d (%q after it), want %d (%q)", tt.in, got, tt.in[got:], tt.want, tt.then)
		}
	}
}
