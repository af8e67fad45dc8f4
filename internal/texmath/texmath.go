// Package texmath checks formulas, the one place where user text reaches
// TeX as TeX. A formula is tokenized the way TeX reads it (control words, control
// symbols, characters) and parsed against an allowlist: the commands
// KaTeX supports that amsmath and amssymb provide in XeLaTeX, the
// environments of matrices, cases and alignments, and a grammar tight
// enough that an accepted formula also compiles (arguments present,
// braces, \left…\right and \begin…\end balanced, & and \\ only where an
// environment takes them, no double superscripts). Anything else is
// refused with the first offending token named, so the author can fix it.
// texmath_test.go compiles every allowlisted command with XeLaTeX.
package texmath

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/script"
)

// Bounds of one formula. Real formulas stay far below them; they keep a
// hostile one from costing TeX (or this parser) unbounded time or nesting.
const (
	maxMathTokens = 4000
	maxMathDepth  = 20
)

// Error is Check's answer for a formula outside the allowlist.
type Error struct {
	Token  string // the first offending token as written, such as `\input` or `%`
	Reason string // a sentence for the author, naming the token
}

func (e *Error) Error() string { return e.Reason }

// mathKind says how a command is used.
type mathKind uint8

const (
	mkSymbol       mathKind = iota + 1 // no argument: \alpha, \le
	mkMacro                            // no argument, but a macro that is no math field: \cdots, \quad
	mkOp                               // a large operator: may take \limits
	mkArg1                             // one math argument: \hat{x}, \mathbf{x}
	mkArg2                             // two math arguments: \frac{a}{b}
	mkOptArg1                          // optional [math] and one argument: \sqrt[3]{x}
	mkText                             // one text argument: \text{…}
	mkDelim                            // a delimiter follows: \big(, \left(
	mkLeft                             // \left
	mkMiddle                           // \middle
	mkRight                            // \right
	mkBegin                            // \begin{env}
	mkEnd                              // \end{env}
	mkLimits                           // \limits, \nolimits
	mkHline                            // \hline
	mkOperatorname                     // \operatorname{…} or \operatorname*{…}
	mkSubstack                         // \substack{a\\b}
	mkStyle                            // \displaystyle: a switch, no argument
)

// mathCommands is the allowlist of control words.
var mathCommands = func() map[string]mathKind {
	m := map[string]mathKind{}
	add := func(k mathKind, names string) {
		for _, n := range strings.Fields(names) {
			m[n] = k
		}
	}
	// Greek and Hebrew letters.
	add(mkSymbol, `alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa varkappa
		lambda mu nu xi pi varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega
		Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega
		varGamma varDelta varTheta varLambda varXi varPi varSigma varUpsilon varPhi varPsi varOmega
		digamma aleph beth gimel daleth`)
	// Ordinary symbols.
	add(mkSymbol, `infty nabla partial forall exists nexists emptyset varnothing ell hbar hslash imath jmath
		Re Im wp prime backprime angle measuredangle sphericalangle triangle triangledown vartriangle
		square blacksquare lozenge blacklozenge bigstar clubsuit diamondsuit heartsuit spadesuit
		flat natural sharp top bot neg lnot surd mho eth complement Bbbk circledS checkmark maltese
		dagger ddagger ldots cdots vdots ddots dots dotsc dotsb dotsm dotsi dotso colon
		langle rangle lfloor rfloor lceil rceil vert Vert lvert rvert lVert rVert backslash
		lbrace rbrace lbrack rbrack ulcorner urcorner llcorner lrcorner bmod not`)
	// Binary operators.
	add(mkSymbol, `pm mp times div cdot ast star circ bullet oplus ominus otimes oslash odot bigcirc diamond
		setminus smallsetminus cap cup uplus sqcap sqcup wedge land vee lor triangleleft triangleright
		bigtriangleup bigtriangledown amalg wr dotplus ltimes rtimes leftthreetimes rightthreetimes
		curlywedge curlyvee barwedge doublebarwedge boxplus boxminus boxtimes boxdot circleddash
		circledast circledcirc centerdot intercal divideontimes Cap Cup`)
	// Relations.
	add(mkSymbol, `leq le geq ge neq ne equiv approx approxeq sim simeq cong propto prec succ preceq succeq
		ll gg lll ggg subset supset subseteq supseteq subsetneq supsetneq sqsubset sqsupset sqsubseteq
		sqsupseteq in ni notin owns mid nmid parallel nparallel perp models vdash dashv vDash Vdash
		bowtie smile frown asymp doteq doteqdot leqq geqq leqslant geqslant lesssim gtrsim lessapprox
		gtrapprox lessgtr gtrless nless ngtr nleq ngeq lneq gneq lneqq gneqq nsim ncong nsubseteq
		nsupseteq therefore because between pitchfork backsim backsimeq eqsim thicksim thickapprox
		triangleq circeq bumpeq Bumpeq risingdotseq fallingdotseq varpropto blacktriangleleft
		blacktriangleright vartriangleleft vartriangleright trianglelefteq trianglerighteq
		ntriangleleft ntriangleright Subset Supset shortmid shortparallel nshortmid precsim succsim
		precapprox succapprox eqcirc`)
	// Arrows.
	add(mkSymbol, `leftarrow gets rightarrow to Leftarrow Rightarrow leftrightarrow Leftrightarrow iff
		implies impliedby longleftarrow longrightarrow Longleftarrow Longrightarrow longleftrightarrow
		Longleftrightarrow mapsto longmapsto hookleftarrow hookrightarrow leftharpoonup leftharpoondown
		rightharpoonup rightharpoondown rightleftharpoons leftrightharpoons uparrow downarrow updownarrow
		Uparrow Downarrow Updownarrow nearrow searrow swarrow nwarrow leadsto nleftarrow nrightarrow
		nLeftarrow nRightarrow nleftrightarrow nLeftrightarrow twoheadrightarrow twoheadleftarrow
		rightarrowtail leftarrowtail looparrowleft looparrowright curvearrowleft curvearrowright
		circlearrowleft circlearrowright Lsh Rsh upuparrows downdownarrows leftleftarrows
		rightrightarrows leftrightarrows rightleftarrows multimap dashrightarrow dashleftarrow
		restriction upharpoonleft upharpoonright downharpoonleft downharpoonright Lleftarrow
		Rrightarrow rightsquigarrow leftrightsquigarrow`)
	// Spacing and styles.
	add(mkSymbol, `quad qquad enspace thinspace medspace thickspace negthinspace negmedspace negthickspace`)
	// Symbols that are macros rather than math characters: TeX takes them
	// as an argument of ^, _ or \sqrt only in braces (x^{\cdots}).
	add(mkMacro, `Longrightarrow bmod bowtie cdots colon cong dashleftarrow dashrightarrow ddots doteq dots dotsb dotsc dotsi dotsm dotso enspace iff impliedby implies ldots longrightarrow medspace models negmedspace negthickspace negthinspace notin qquad quad thickspace thinspace vdots`)
	add(mkStyle, `displaystyle textstyle scriptstyle scriptscriptstyle`)
	// Large operators and operator names.
	add(mkOp, `sum prod coprod int iint iiint iiiint idotsint oint bigcup bigcap bigoplus bigotimes bigodot
		biguplus bigsqcup bigvee bigwedge lim liminf limsup sup inf max min arg det dim exp gcd hom ker
		lg ln log Pr sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth deg injlim
		projlim varlimsup varliminf varinjlim varprojlim`)
	// One argument: accents, fonts, boxes, classes.
	add(mkArg1, `hat widehat check tilde widetilde acute grave dot ddot dddot ddddot breve bar vec mathring
		overline underline overleftarrow overrightarrow overleftrightarrow underleftarrow
		underrightarrow underleftrightarrow boxed phantom hphantom vphantom smash
		mathrm mathbf mathit mathsf mathtt mathcal mathbb mathfrak mathnormal boldsymbol pmb
		mathbin mathrel mathord mathopen mathclose mathpunct mathinner pmod pod mod`)
	// These take one argument and, like large operators, limits.
	m["overbrace"], m["underbrace"], m["mathop"] = mkOp, mkOp, mkOp
	add(mkArg2, `frac dfrac tfrac cfrac binom dbinom tbinom overset underset stackrel`)
	add(mkOptArg1, `sqrt xrightarrow xleftarrow`)
	add(mkText, `text textrm textit textbf textsf texttt textup textnormal mbox`)
	add(mkDelim, `big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl Biggr bigm Bigm biggm Biggm`)
	m["left"], m["middle"], m["right"] = mkLeft, mkMiddle, mkRight
	m["begin"], m["end"] = mkBegin, mkEnd
	m["limits"], m["nolimits"] = mkLimits, mkLimits
	m["hline"] = mkHline
	m["operatorname"] = mkOperatorname
	m["substack"] = mkSubstack
	return m
}()

// braceArgOps are the operators in mkOp that take an argument
// (\overbrace{…}^{…}, \mathop{…}\limits).
var braceArgOps = map[string]bool{"overbrace": true, "underbrace": true, "mathop": true}

// mathSymbols are the control symbols allowed in math: spacing and escaped
// specials.
const mathSymbols = `,:;! {}|%&#$_`

// textCommands are the control words allowed inside \text{…}.
var textCommands = map[string]mathKind{
	"textrm": mkText, "textit": mkText, "textbf": mkText, "textsf": mkText, "texttt": mkText,
	"textup": mkText, "textnormal": mkText, "text": mkText, "mbox": mkText, "emph": mkText,
	"quad": mkSymbol, "qquad": mkSymbol, "ldots": mkSymbol, "dots": mkSymbol,
	"enspace": mkSymbol, "thinspace": mkSymbol,
}

// textSymbols are the control symbols allowed inside \text{…}.
const textSymbols = `,; {}%&#$_`

// mathDelims are the delimiters \left, \right, \middle and \big take.
var mathDelims = map[string]bool{
	"(": true, ")": true, "[": true, "]": true, "<": true, ">": true, "/": true, "|": true, ".": true,
	`\{`: true, `\}`: true, `\|`: true,
	`\langle`: true, `\rangle`: true, `\lfloor`: true, `\rfloor`: true, `\lceil`: true, `\rceil`: true,
	`\vert`: true, `\Vert`: true, `\lvert`: true, `\rvert`: true, `\lVert`: true, `\rVert`: true,
	`\uparrow`: true, `\downarrow`: true, `\updownarrow`: true, `\Uparrow`: true, `\Downarrow`: true,
	`\Updownarrow`: true, `\backslash`: true, `\lbrace`: true, `\rbrace`: true, `\lbrack`: true, `\rbrack`: true,
}

// mathEnvs are the allowed environments and how many columns each takes
// (0: no limit; array takes as many as its column specification names).
var mathEnvs = map[string]int{
	"matrix": 10, "pmatrix": 10, "bmatrix": 10, "Bmatrix": 10, "vmatrix": 10, "Vmatrix": 10,
	"smallmatrix": 0, "cases": 2, "aligned": 0, "gathered": 1, "array": 0,
}

// mathChars are the characters allowed as they are in math besides
// letters and digits; ~ is a tie, ' a prime.
const mathChars = "+-*/=<>()[]|,.;:!?~ \t\r\n"

// Hints for characters that have a command: a reader who pastes "α" or
// "≤" learns what to write instead.
var mathCharHints = map[rune]string{
	'α': `\alpha`, 'β': `\beta`, 'γ': `\gamma`, 'δ': `\delta`, 'ε': `\varepsilon`, 'ζ': `\zeta`,
	'η': `\eta`, 'θ': `\theta`, 'ι': `\iota`, 'κ': `\kappa`, 'λ': `\lambda`, 'μ': `\mu`, 'ν': `\nu`,
	'ξ': `\xi`, 'π': `\pi`, 'ρ': `\rho`, 'σ': `\sigma`, 'τ': `\tau`, 'υ': `\upsilon`, 'φ': `\varphi`,
	'χ': `\chi`, 'ψ': `\psi`, 'ω': `\omega`, 'Γ': `\Gamma`, 'Δ': `\Delta`, 'Θ': `\Theta`,
	'Λ': `\Lambda`, 'Ξ': `\Xi`, 'Π': `\Pi`, 'Σ': `\Sigma`, 'Φ': `\Phi`, 'Ψ': `\Psi`, 'Ω': `\Omega`,
	'×': `\times`, '·': `\cdot`, '÷': `\div`, '±': `\pm`, '−': `-`, '≤': `\le`, '≥': `\ge`,
	'≠': `\neq`, '≈': `\approx`, '∞': `\infty`, '→': `\to`, '←': `\leftarrow`, '⇒': `\Rightarrow`,
	'∑': `\sum`, '∏': `\prod`, '∫': `\int`, '√': `\sqrt`, '∂': `\partial`, '∈': `\in`, '∀': `\forall`,
	'∃': `\exists`, '…': `\dots`, '°': `^\circ`,
}

// mtok is one TeX token of a formula.
type mtok struct {
	kind byte   // 'w' control word, 's' control symbol, 'c' character, ' ' space
	text string // as written: `\frac`, `\,`, `x`
	name string // control sequence name without the backslash
}

// tokenize splits a formula into TeX tokens, rejecting what must never
// reach TeX whatever the context.
func tokenize(f string) ([]mtok, error) {
	if strings.Contains(f, "^^") {
		return nil, mathErr("^^", "formula uses ^^, which is not allowed (TeX reads ^^ as a character code)")
	}
	if !utf8.ValidString(f) {
		return nil, mathErr("", "formula is not valid UTF-8")
	}
	var toks []mtok
	blank := 0 // newlines since the last non-space: two make a paragraph
	for i := 0; i < len(f); {
		if len(toks) > maxMathTokens {
			return nil, errTooManyTokens()
		}
		r, size := utf8.DecodeRuneInString(f[i:])
		switch {
		case r == '\n':
			blank++
			if blank >= 2 {
				return nil, mathErr("", "formula contains a blank line")
			}
		case r == ' ' || r == '\t' || r == '\r':
		default:
			blank = 0
		}
		var tok mtok
		var err error
		if r == '\\' {
			tok, size, err = controlSeq(f[i:])
		} else {
			tok, err = charToken(r)
		}
		if err != nil {
			return nil, err
		}
		toks = append(toks, tok)
		i += size
	}
	if len(toks) > maxMathTokens {
		return nil, errTooManyTokens()
	}
	return toks, nil
}

func errTooManyTokens() *Error {
	return mathErr("", fmt.Sprintf("formula is too long (more than %d tokens)", maxMathTokens))
}

// controlSeq reads the control sequence at the start of f (which starts
// with a backslash) and returns it with the bytes it takes: a control
// word takes the spaces after it, as TeX skips them.
func controlSeq(f string) (mtok, int, error) {
	if len(f) < 2 {
		return mtok{}, 0, mathErr(`\`, `formula ends with a lone \`)
	}
	j := 1
	for j < len(f) && isASCIILetter(f[j]) {
		j++
	}
	if j > 1 {
		tok := mtok{kind: 'w', text: f[:j], name: f[1:j]}
		for j < len(f) && (f[j] == ' ' || f[j] == '\t') {
			j++
		}
		return tok, j, nil
	}
	r2, size2 := utf8.DecodeRuneInString(f[1:])
	if r2 == '\n' || r2 == '\r' || r2 == '\t' {
		r2 = ' ' // TeX reads the end of a line as a space
	}
	return mtok{kind: 's', text: `\` + string(r2), name: string(r2)}, 1 + size2, nil
}

// charToken returns the token of character r outside a control
// sequence: a space, or the character, which must be visible.
func charToken(r rune) (mtok, error) {
	switch {
	case r == ' ' || r == '\t' || r == '\r' || r == '\n':
		return mtok{kind: ' ', text: " "}, nil
	case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || isNonchar(r):
		return mtok{}, mathErr(fmt.Sprintf("U+%04X", r), fmt.Sprintf("formula contains the invisible or control character U+%04X", r))
	}
	return mtok{kind: 'c', text: string(r)}, nil
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isNonchar reports whether r is a Unicode noncharacter.
func isNonchar(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}

func mathErr(tok, reason string) *Error { return &Error{Token: tok, Reason: reason} }

// checkMath reports whether formula, the text between $…$ or $$…$$, may
// be set by TeX: nil, or a *Error naming the first offending token
// ("formula uses \input, which is not allowed").
func checkMath(formula string) error {
	toks, err := tokenize(formula)
	if err != nil {
		return err
	}
	p := &mathParser{toks: toks}
	if err := p.mathList(ctxTop); err != nil {
		return err
	}
	if p.i < len(p.toks) {
		// mathList stops only at a token that closes something.
		return p.unexpected(p.toks[p.i])
	}
	return nil
}

// mathParser walks the tokens of one formula.
type mathParser struct {
	toks  []mtok
	i     int
	depth int
}

// listCtx says what may end a math list, and what it may contain.
type listCtx uint8

const (
	ctxTop      listCtx = iota // the whole formula: ends at the end
	ctxGroup                   // {…}: ends at }
	ctxLeft                    // \left…\right: ends at \right, may hold \middle
	ctxCell                    // a cell of an environment: ends at &, \\ or \end
	ctxOpt                     // […] optional argument: ends at ]
	ctxSubstack                // \substack{…}: ends at }, may hold \\
)

// peek returns the next token that is not a space, and its index.
func (p *mathParser) peek() (mtok, int, bool) {
	j := p.i
	for j < len(p.toks) && p.toks[j].kind == ' ' {
		j++
	}
	if j >= len(p.toks) {
		return mtok{}, j, false
	}
	return p.toks[j], j, true
}

func (p *mathParser) enter(tok mtok) error {
	p.depth++
	if p.depth > maxMathDepth {
		return mathErr(tok.text, fmt.Sprintf("formula nests deeper than %d levels", maxMathDepth))
	}
	return nil
}

func (p *mathParser) unexpected(t mtok) error {
	switch {
	case t.text == "}":
		return mathErr("}", "formula has a } without a matching {")
	case t.text == "&":
		return mathErr("&", "formula uses & outside an environment such as aligned or matrix")
	case t.text == `\\`:
		return mathErr(`\\`, `formula uses \\ outside an environment such as aligned or matrix`)
	case t.name == "right":
		return mathErr(`\right`, `formula has a \right without a matching \left`)
	case t.name == "middle":
		return mathErr(`\middle`, `formula uses \middle outside \left…\right`)
	case t.name == "end":
		return mathErr(`\end`, `formula has an \end without a matching \begin`)
	case t.text == "]":
		return mathErr("]", "formula has an unexpected ]")
	}
	return mathErr(t.text, fmt.Sprintf("formula uses %s, which is not allowed here", t.text))
}

// scriptState tracks the superscript and subscript of the current nucleus:
// TeX refuses a second one ("Double superscript").
type scriptState struct {
	sup, sub bool
	prime    bool // the superscript so far is primes, which one ^ may join
	op       bool // the nucleus is a large operator: \limits may follow
}

// mathList parses items until the token that ends a list of kind ctx,
// which it leaves unread.
func (p *mathParser) mathList(ctx listCtx) error {
	var st scriptState
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		if t.kind == ' ' {
			p.i++
			continue
		}
		if end, err := p.listEnd(t, ctx); end || err != nil {
			return err
		}
		if scripted, err := p.scripts(t, &st); scripted || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		// Anything else is a new nucleus (or a switch or space that ends
		// the current one).
		st = scriptState{}
		op, err := p.atom(ctx)
		if err != nil {
			return err
		}
		st.op = op
	}
	return unclosed(ctx)
}

// listEnd reports whether t ends a list of kind ctx, or the error when t
// ends a list of another kind.
func (p *mathParser) listEnd(t mtok, ctx listCtx) (bool, error) {
	var ends bool
	switch {
	case t.text == "}":
		ends = ctx == ctxGroup || ctx == ctxSubstack
	case t.text == "]":
		return ctx == ctxOpt, nil // else an ordinary character
	case t.text == "&" || t.text == `\\`:
		ends = ctx == ctxCell || (ctx == ctxSubstack && t.text == `\\`)
	case t.kind == 'w' && (t.name == "right" || t.name == "middle"):
		ends = ctx == ctxLeft
	case t.kind == 'w' && t.name == "end":
		ends = ctx == ctxCell
	default:
		return false, nil
	}
	if !ends {
		return false, p.unexpected(t)
	}
	return true, nil
}

// scripts parses t if it is a superscript, a subscript, a prime or
// \limits, keeping the nucleus's state in st, and reports whether it was.
func (p *mathParser) scripts(t mtok, st *scriptState) (bool, error) {
	switch {
	case t.text == "^" || t.text == "_":
		return true, p.script(t, st)
	case t.text == "'":
		if st.sup && !st.prime {
			return true, mathErr("'", "formula has a prime after a superscript (write x'^{2}, or x^{2\\prime})")
		}
		st.sup, st.prime = true, true
		p.i++
	case t.kind == 'w' && mathCommands[t.name] == mkLimits:
		if !st.op || st.sup || st.sub {
			return true, mathErr(t.text, fmt.Sprintf(`formula uses %s where no operator such as \sum precedes it`, t.text))
		}
		p.i++
	default:
		return false, nil
	}
	return true, nil
}

// script parses the superscript or subscript that t (^ or _) starts.
// A nucleus takes one of each, but primes and one ^ join.
func (p *mathParser) script(t mtok, st *scriptState) error {
	sup := t.text == "^"
	if (sup && st.sup && !st.prime) || (!sup && st.sub) {
		what := map[bool]string{true: "superscript", false: "subscript"}[sup]
		return mathErr(t.text, fmt.Sprintf("formula has a double %s (write x^{ab} or {x^a}^b)", what))
	}
	p.i++
	if err := p.mathArg(t.text); err != nil {
		return err
	}
	if sup {
		st.sup, st.prime = true, false
	} else {
		st.sub = true
	}
	return nil
}

// unclosed is the error of a list of kind ctx that the formula ends.
func unclosed(ctx listCtx) error {
	switch ctx {
	case ctxTop:
		return nil
	case ctxGroup, ctxSubstack:
		return mathErr("{", "formula has a { without a matching }")
	case ctxLeft:
		return mathErr(`\left`, `formula has a \left without a matching \right`)
	case ctxCell:
		return mathErr(`\begin`, `formula has a \begin without a matching \end`)
	default:
		return mathErr("[", "formula has a [ without a matching ]")
	}
}

// atom parses one item that is not a script, and reports whether it is a
// large operator.
func (p *mathParser) atom(ctx listCtx) (op bool, err error) {
	t := p.toks[p.i]
	p.i++
	switch t.kind {
	case 'c':
		return false, p.mathChar(t)
	case 's':
		if t.name == `\` {
			return false, p.unexpected(t)
		}
		if !strings.Contains(mathSymbols, t.name) {
			return false, notAllowed(t)
		}
		return false, nil
	}
	kind, ok := mathCommands[t.name]
	if !ok {
		return false, notAllowed(t)
	}
	switch kind {
	case mkSymbol, mkMacro, mkStyle:
		return false, nil
	case mkOp:
		if braceArgOps[t.name] {
			return true, p.mathArg(t.text)
		}
		return true, nil
	case mkOperatorname:
		if next, j, ok := p.peek(); ok && next.text == "*" {
			p.i = j + 1
		}
		return true, p.mathArg(t.text)
	case mkHline:
		return false, mathErr(t.text, `formula uses \hline outside the start of an array row`)
	}
	return false, p.command(t, kind)
}

// command parses the arguments or body of control word t, of a kind
// that is not a large operator and takes something after it.
func (p *mathParser) command(t mtok, kind mathKind) error {
	switch kind {
	case mkArg1:
		return p.mathArg(t.text)
	case mkArg2:
		if err := p.mathArg(t.text); err != nil {
			return err
		}
		return p.mathArg(t.text)
	case mkOptArg1:
		return p.optArg1(t)
	case mkText:
		return p.textArg(t.text)
	case mkDelim:
		return p.delim(t.text)
	case mkLeft:
		return p.leftRight(t)
	case mkBegin:
		return p.environment(t)
	case mkSubstack:
		return p.substack(t)
	}
	return p.unexpected(t)
}

// optArg1 parses the optional argument in brackets and the argument of
// t (\sqrt[3]{x}).
func (p *mathParser) optArg1(t mtok) error {
	if next, j, ok := p.peek(); ok && next.text == "[" {
		p.i = j + 1
		if err := p.enter(next); err != nil {
			return err
		}
		if err := p.mathList(ctxOpt); err != nil {
			return err
		}
		p.i++ // the ]
		p.depth--
	}
	return p.mathArg(t.text)
}

// substack parses the rows of \substack{a\\b}.
func (p *mathParser) substack(t mtok) error {
	next, j, ok := p.peek()
	if !ok || next.text != "{" {
		return mathErr(t.text, fmt.Sprintf("formula uses %s without its argument in braces", t.text))
	}
	p.i = j + 1
	if err := p.enter(next); err != nil {
		return err
	}
	if err := p.rows(ctxSubstack, 1, t.text); err != nil {
		return err
	}
	p.i++ // the }
	p.depth--
	return nil
}

func notAllowed(t mtok) error {
	return mathErr(t.text, fmt.Sprintf("formula uses %s, which is not allowed", t.text))
}

// mathChar checks a character token in math.
func (p *mathParser) mathChar(t mtok) error {
	r, _ := utf8.DecodeRuneInString(t.text)
	switch {
	case r < 0x80 && (isASCIILetter(byte(r)) || r >= '0' && r <= '9'):
		return nil
	case strings.ContainsRune(mathChars, r):
		return nil
	case t.text == "{":
		if err := p.enter(t); err != nil {
			return err
		}
		if err := p.mathList(ctxGroup); err != nil {
			return err
		}
		p.i++ // the }
		p.depth--
		return nil
	case r == '%':
		return mathErr("%", `formula uses %, which is not allowed (write \% for a percent sign)`)
	case r == '#' || r == '$' || r == '&':
		return mathErr(t.text, fmt.Sprintf(`formula uses %s, which is not allowed here (write \%s)`, t.text, t.text))
	}
	if hint, ok := mathCharHints[r]; ok {
		return mathErr(t.text, fmt.Sprintf("formula uses %q, which is not allowed in math (write %s)", t.text, hint))
	}
	if r >= 0x80 {
		return mathErr(t.text, fmt.Sprintf(`formula uses %q, which is not allowed in math (only \text{…} may hold such characters)`, t.text))
	}
	return mathErr(t.text, fmt.Sprintf("formula uses %q, which is not allowed in math", t.text))
}

// mathArg parses the argument of a command or script: a group, a single
// character, or a command that is a math character (x^\alpha). Anything
// else must be braced: TeX reads the argument of ^, _ and primitives such
// as \sqrt as a math field, which a macro like \cdots or \sum is not.
func (p *mathParser) mathArg(of string) error {
	next, j, ok := p.peek()
	if !ok || next.text == "}" || next.text == "&" || next.text == `\\` || next.kind == 'w' && (next.name == "end" || next.name == "right") {
		return mathErr(of, fmt.Sprintf("formula uses %s where it needs an argument", of))
	}
	p.i = j
	switch {
	case next.text == "{":
	case next.kind == 'c' && strings.ContainsRune("^_'~", rune(next.text[0])),
		next.kind == 's',
		next.kind == 'w' && mathCommands[next.name] != mkSymbol && mathCommands[next.name] != 0:
		return mathErr(of, fmt.Sprintf("formula uses %s %s: put the argument in braces, as %s{%s}", of, next.text, of, next.text))
	}
	_, err := p.atom(ctxGroup)
	return err
}

// delim parses the delimiter after \left, \right, \middle or \big.
func (p *mathParser) delim(of string) error {
	next, j, ok := p.peek()
	if !ok {
		return mathErr(of, fmt.Sprintf("formula ends where %s needs a delimiter", of))
	}
	if !mathDelims[next.text] {
		return mathErr(next.text, fmt.Sprintf("formula uses %s %s, which is not a delimiter", of, next.text))
	}
	p.i = j + 1
	return nil
}

// leftRight parses \left<delim> … [\middle<delim> …] \right<delim>.
func (p *mathParser) leftRight(left mtok) error {
	if err := p.enter(left); err != nil {
		return err
	}
	if err := p.delim(left.text); err != nil {
		return err
	}
	for {
		if err := p.mathList(ctxLeft); err != nil {
			return err
		}
		t := p.toks[p.i] // \middle or \right
		p.i++
		if err := p.delim(t.text); err != nil {
			return err
		}
		if t.name == "right" {
			p.depth--
			return nil
		}
	}
}

// envName reads the {name} after \begin or \end.
func (p *mathParser) envName(of mtok) (string, error) {
	next, j, ok := p.peek()
	if !ok || next.text != "{" {
		return "", mathErr(of.text, fmt.Sprintf("formula uses %s without {name}", of.text))
	}
	var name strings.Builder
	for k := j + 1; k < len(p.toks); k++ {
		t := p.toks[k]
		if t.text == "}" {
			p.i = k + 1
			return name.String(), nil
		}
		if t.kind != 'c' || !(len(t.text) == 1 && isASCIILetter(t.text[0]) || t.text == "*") {
			break
		}
		name.WriteString(t.text)
	}
	return "", mathErr(of.text, fmt.Sprintf("formula uses %s with a malformed environment name", of.text))
}

// environment parses \begin{env} … \end{env}.
func (p *mathParser) environment(begin mtok) error {
	name, err := p.envName(begin)
	if err != nil {
		return err
	}
	cols, ok := mathEnvs[name]
	if !ok {
		return mathErr(`\begin{`+name+`}`, fmt.Sprintf(`formula uses \begin{%s}, which is not allowed`, name))
	}
	if err := p.enter(begin); err != nil {
		return err
	}
	if name == "array" {
		if cols, err = p.arraySpec(); err != nil {
			return err
		}
	}
	if err := p.rows(ctxCell, cols, `\begin{`+name+`}`); err != nil {
		return err
	}
	end := p.toks[p.i] // \end, as rows guarantees
	p.i++
	endName, err := p.envName(end)
	if err != nil {
		return err
	}
	if endName != name {
		return mathErr(`\end{`+endName+`}`, fmt.Sprintf(`formula has \end{%s} where \end{%s} belongs`, endName, name))
	}
	p.depth--
	return nil
}

// arraySpec reads the optional [t|c|b] and the column specification of
// an array, and returns the number of columns.
func (p *mathParser) arraySpec() (int, error) {
	next, j, ok := p.peek()
	if ok && next.text == "[" {
		if j+2 < len(p.toks) && strings.Contains("tcb", p.toks[j+1].text) && len(p.toks[j+1].text) == 1 && p.toks[j+2].text == "]" {
			p.i = j + 3
			next, j, ok = p.peek()
		} else {
			return 0, mathErr("[", `formula uses \begin{array}[…] with a position other than t, c or b`)
		}
	}
	if !ok || next.text != "{" {
		return 0, mathErr(`\begin{array}`, `formula uses \begin{array} without its column specification, such as {lcr}`)
	}
	cols := 0
	for k := j + 1; k < len(p.toks); k++ {
		switch t := p.toks[k]; t.text {
		case "}":
			if cols == 0 {
				return 0, mathErr(`\begin{array}`, `formula uses \begin{array} with no columns`)
			}
			p.i = k + 1
			return cols, nil
		case "l", "c", "r":
			cols++
		case "|", " ":
		default:
			return 0, mathErr(t.text, fmt.Sprintf(`formula uses %q in an array's column specification (only l, c, r and | are allowed)`, t.text))
		}
	}
	return 0, mathErr(`\begin{array}`, `formula has an array column specification without its }`)
}

// rows parses the body of an environment (or \substack): cells separated
// by & and rows by \\, at most cols cells a row when cols > 0. It stops at
// the \end (or the } of \substack), which it leaves unread.
func (p *mathParser) rows(ctx listCtx, cols int, env string) error {
	for {
		if err := p.hlines(env); err != nil {
			return err
		}
		more, err := p.row(ctx, cols, env)
		if !more || err != nil {
			return err
		}
	}
}

// hlines skips the \hline commands that may start a row, which only an
// array takes.
func (p *mathParser) hlines(env string) error {
	for {
		next, j, ok := p.peek()
		if !ok || next.kind != 'w' || next.name != "hline" {
			return nil
		}
		if env != `\begin{array}` {
			return mathErr(`\hline`, fmt.Sprintf(`formula uses \hline in %s (only array takes it)`, env))
		}
		p.i = j + 1
	}
}

// row parses the cells of one row and reports whether another row
// follows (the row ended with \\) or the body ended.
func (p *mathParser) row(ctx listCtx, cols int, env string) (bool, error) {
	for cell := 1; ; cell++ {
		if cols > 0 && cell > cols {
			return false, mathErr("&", fmt.Sprintf("formula has more than %d columns in %s", cols, env))
		}
		if err := p.mathList(ctx); err != nil {
			return false, err
		}
		if p.i >= len(p.toks) {
			return false, p.mathList(ctx) // reports the missing end
		}
		switch t := p.toks[p.i]; t.text {
		case "&":
			if ctx == ctxSubstack {
				return false, mathErr("&", `formula uses & inside \substack`)
			}
			p.i++
		case `\\`:
			p.i++
			return true, p.rowEnd()
		default:
			return false, nil // \end or }
		}
	}
}

// rowEnd checks what follows \\: TeX takes a [ right after it (even after
// spaces, in arrays) as a length, so [ must start one.
func (p *mathParser) rowEnd() error {
	next, j, ok := p.peek()
	if ok && next.text == "*" {
		p.i = j + 1
		next, j, ok = p.peek()
	}
	if !ok || next.text != "[" {
		return nil
	}
	var b strings.Builder
	k := j + 1
	for ; k < len(p.toks) && p.toks[k].text != "]" && k-j < 12; k++ {
		b.WriteString(p.toks[k].text)
	}
	if k >= len(p.toks) || p.toks[k].text != "]" || !isLength(b.String()) {
		return mathErr(`\\[`, `formula has [ after \\, which TeX reads as a length: write \\[2pt] for extra space, or {[} for a bracket`)
	}
	p.i = k + 1
	return nil
}

// isLength reports whether s is a small TeX length such as 2pt, -1.5em.
func isLength(s string) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "-")
	var unit string
	for _, u := range []string{"pt", "mm", "cm", "em", "ex"} {
		if strings.HasSuffix(s, u) {
			unit = u
		}
	}
	if unit == "" {
		return false
	}
	num := strings.TrimSpace(strings.TrimSuffix(s, unit))
	intPart, frac, _ := strings.Cut(num, ".")
	if len(intPart) == 0 || len(intPart) > 2 || len(frac) > 2 {
		return false
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// textArg parses the {…} argument of \text and its kin, in text mode.
func (p *mathParser) textArg(of string) error {
	next, j, ok := p.peek()
	if !ok || next.text != "{" {
		return mathErr(of, fmt.Sprintf("formula uses %s without its argument in braces", of))
	}
	p.i = j + 1
	if err := p.enter(next); err != nil {
		return err
	}
	if err := p.textList(); err != nil {
		return err
	}
	p.i++ // the }
	p.depth--
	return nil
}

// textList parses text up to the } that closes it, which it leaves unread.
func (p *mathParser) textList() error {
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		switch {
		case t.kind == ' ':
			p.i++
		case t.kind == 's' || t.kind == 'w':
			p.i++
			if err := p.textCommand(t); err != nil {
				return err
			}
		case t.text == "}":
			return nil
		case t.text == "{":
			p.i++
			if err := p.enter(t); err != nil {
				return err
			}
			if err := p.textList(); err != nil {
				return err
			}
			p.i++
			p.depth--
		default:
			if err := textChar(t); err != nil {
				return err
			}
			p.i++
		}
	}
	return mathErr("{", `formula has a \text{ without its }`)
}

// textCommand checks the control sequence t inside \text, and parses the
// argument of one that takes text (\textbf{…}).
func (p *mathParser) textCommand(t mtok) error {
	if t.kind == 's' {
		if !strings.Contains(textSymbols, t.name) {
			return mathErr(t.text, fmt.Sprintf(`formula uses %s inside \text, which is not allowed`, t.text))
		}
		return nil
	}
	k, ok := textCommands[t.name]
	if !ok {
		return mathErr(t.text, fmt.Sprintf(`formula uses %s inside \text, which is not allowed`, t.text))
	}
	if k == mkText {
		return p.textArg(t.text)
	}
	return nil
}

// textChar checks a character inside \text: TeX's special characters
// must be escaped, and the main font must have the character.
func textChar(t mtok) error {
	r, _ := utf8.DecodeRuneInString(t.text)
	switch {
	case strings.ContainsRune(`^_&#$%`, r):
		return mathErr(t.text, fmt.Sprintf(`formula uses %s inside \text, which is not allowed (write \%s)`, t.text, t.text))
	case r < 0x80:
		// Printable ASCII: letters, digits, punctuation, ~ (a tie).
	case !script.InMainFont(r) || unicode.Is(unicode.Co, r):
		return mathErr(t.text, fmt.Sprintf(`formula uses %q inside \text, which the main font cannot print`, t.text))
	}
	return nil
}

// Vocabulary returns the control sequences checkMath lets through, for
// tests that check the body for unknown commands.
func Vocabulary() []string {
	var out []string
	for name := range mathCommands {
		out = append(out, `\`+name)
	}
	for name := range textCommands {
		out = append(out, `\`+name)
	}
	for _, r := range mathSymbols + textSymbols {
		out = append(out, `\`+string(r))
	}
	out = append(out, `\\`)
	return out
}
