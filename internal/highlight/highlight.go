// Package highlight turns a fenced code block into an fvextra Verbatim
// block with syntax highlighting: chroma splits the code into tokens, and
// our own formatter writes each token in a style macro of Preamble.
//
// The Verbatim runs in commandchars mode (\, { and } are TeX's), so every
// backslash and brace of the code is written as a macro (\opvb{}, \oplb{},
// \oprb{}); no other character of the code is special inside Verbatim. A
// line "\end{Verbatim}" in the code therefore stays text, and ^ is written
// as \opcaret{} so that no ^^ sequence reaches TeX even if a line were ever
// read again with other category codes. fvextra breaks long lines
// anywhere, also inside the style macros (breaknonspaceingroup).
package highlight

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"

	"github.com/outprint/outprint/internal/script"
)

// Preamble defines the macros Code's output uses. It
// needs the packages xcolor and fvextra, which it does not load itself so
// that the preamble can choose their options.
const Preamble = `% Code blocks (highlight.Code): escaped characters and token styles.
\newcommand\opvb{\char"5C\relax}
\newcommand\oplb{\char"7B\relax}
\newcommand\oprb{\char"7D\relax}
\newcommand\opcaret{\char"5E\relax}
\definecolor{opkw}{HTML}{1A4D8F}
\definecolor{opty}{HTML}{6F2DA8}
\definecolor{opfn}{HTML}{005F73}
\definecolor{opst}{HTML}{2E6B1F}
\definecolor{opnu}{HTML}{A3410A}
\definecolor{opco}{HTML}{6A6F73}
\definecolor{oppp}{HTML}{8A4B08}
\definecolor{opta}{HTML}{9B1C31}
\definecolor{opva}{HTML}{8B2F6E}
\definecolor{opgd}{HTML}{B3261E}
\newcommand\optkkw[1]{\textcolor{opkw}{\textbf{#1}}}
\newcommand\optkty[1]{\textcolor{opty}{#1}}
\newcommand\optkfn[1]{\textcolor{opfn}{#1}}
\newcommand\optkbi[1]{\textcolor{opfn}{\textbf{#1}}}
\newcommand\optkst[1]{\textcolor{opst}{#1}}
\newcommand\optknu[1]{\textcolor{opnu}{#1}}
\newcommand\optkco[1]{\textcolor{opco}{#1}}
\newcommand\optkpp[1]{\textcolor{oppp}{#1}}
\newcommand\optkta[1]{\textcolor{opta}{#1}}
\newcommand\optkva[1]{\textcolor{opva}{#1}}
\newcommand\optkgd[1]{\textcolor{opgd}{#1}}
\newcommand\optkgi[1]{\textcolor{opst}{#1}}
\newcommand\optkgh[1]{\textbf{#1}}
`

// The lines that open the block. commandchars makes our macros work;
// breaklines breaks long lines at spaces, also inside the style macros.
// A block with a long word (a URL, a long string) also needs breaks
// anywhere, inside the macros too; that costs XeLaTeX about 35 µs per
// character of the block (a 1,000-line block of 1,000 characters: 35 s),
// so it is only asked for when needed.
const (
	verbatimBegin         = `\begin{Verbatim}[commandchars=\\\{\},breaklines]`
	verbatimBeginAnywhere = `\begin{Verbatim}[commandchars=\\\{\},breaklines,breakanywhere,breaknonspaceingroup]`
)

// maxWordCols is the longest run of non-space columns that breaks at
// spaces alone are trusted to fit: about a third of a page's width.
const maxWordCols = 40

// tabWidth is the number of columns a tab advances to: code is printed,
// and four columns keep nested code on the page.
const tabWidth = 4

// maxVerbatimCols bounds a line of the block: fvextra sets each line in a
// box before it breaks it, and a box wider than TeX's largest dimension
// (about 5.7 m, some 2,700 characters) is an error. A longer line is cut
// into lines of this many columns.
const maxVerbatimCols = 800

// Bounds for highlighting: beyond them a block is printed plain (still
// escaped). chroma's lexers are regular expressions with backtracking;
// the size bound keeps the output the same for the same input, the time
// bound is the safety net for a pathological block.
const (
	maxHighlightBytes = 256 << 10
	highlightBudget   = 2 * time.Second
)

// tokenStyle returns the style macro of a chroma token type, or "" for
// text printed plain. Chroma numbers its types by category (thousands)
// and subcategory (hundreds), so the type's category picks the branch.
func tokenStyle(t chroma.TokenType) string {
	switch t.Category() {
	case chroma.Keyword:
		if t == chroma.KeywordType {
			return `\optkty`
		}
		return `\optkkw`
	case chroma.Name:
		return nameStyle(t)
	case chroma.Operator:
		if t == chroma.OperatorWord {
			return `\optkkw`
		}
	case chroma.Comment:
		if t.InSubCategory(chroma.CommentPreproc) {
			return `\optkpp`
		}
		return `\optkco`
	case chroma.Literal:
		switch t.SubCategory() {
		case chroma.LiteralString:
			return `\optkst`
		case chroma.LiteralNumber:
			return `\optknu`
		}
	case chroma.Generic:
		return genericStyle(t)
	}
	return ""
}

// nameStyle is tokenStyle for the Name category, whose types borrow the
// styles of keywords, types, numbers and preprocessor lines.
func nameStyle(t chroma.TokenType) string {
	switch t {
	case chroma.NameClass, chroma.NameException, chroma.NameNamespace:
		return `\optkty`
	case chroma.NameKeyword:
		return `\optkkw`
	case chroma.NameFunction, chroma.NameFunctionMagic, chroma.NameAttribute:
		return `\optkfn`
	case chroma.NameTag:
		return `\optkta`
	case chroma.NameDecorator:
		return `\optkpp`
	case chroma.NameConstant:
		return `\optknu`
	}
	switch t.SubCategory() {
	case chroma.NameBuiltin:
		return `\optkbi`
	case chroma.NameVariable:
		return `\optkva`
	}
	return ""
}

// genericStyle is tokenStyle for the Generic category (diffs, consoles).
func genericStyle(t chroma.TokenType) string {
	switch t {
	case chroma.GenericDeleted, chroma.GenericError:
		return `\optkgd`
	case chroma.GenericInserted:
		return `\optkgi`
	case chroma.GenericHeading, chroma.GenericSubheading, chroma.GenericStrong, chroma.GenericPrompt:
		return `\optkgh`
	}
	return ""
}

// Code returns code as a Verbatim block for fvextra, highlighted
// as lang when chroma knows it (go, python, bash, …) and plain otherwise.
// Control characters are dropped, tabs expanded; characters the monospace
// font lacks are set in a fallback font (\opfont<key>{…}, see
// script.FontPreamble).
func Code(lang, code string) string {
	code = cleanCode(code)
	var b strings.Builder
	b.Grow(len(code) * 2)
	if longestWord(code) > maxWordCols {
		b.WriteString(verbatimBeginAnywhere + "\n")
	} else {
		b.WriteString(verbatimBegin + "\n")
	}
	f := codeFormatter{b: &b}
	tokens, ok := highlightTokens(lang, code)
	if !ok {
		tokens = []chroma.Token{{Type: chroma.Text, Value: code}}
	}
	for _, tok := range tokens {
		f.token(tokenStyle(tok.Type), tok.Value)
	}
	f.endLine()
	b.WriteString(`\end{Verbatim}` + "\n")
	return b.String()
}

// highlightTokens lexes code as lang, or reports false when lang is
// unknown or the block is too large or too slow to lex.
func highlightTokens(lang, code string) ([]chroma.Token, bool) {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if lang == "" || len(code) > maxHighlightBytes {
		return nil, false
	}
	lexer := getLexer(lang)
	if lexer == nil {
		return nil, false
	}
	if f := getFastLexer(lexer); f != nil {
		tokens, err := f.tokens(code, time.Now().Add(highlightBudget))
		return tokens, err == nil
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, code)
	if err != nil {
		return nil, false
	}
	deadline := time.Now().Add(highlightBudget)
	var tokens []chroma.Token
	for tok := it(); tok != chroma.EOF; tok = it() {
		if time.Now().After(deadline) {
			return nil, false
		}
		tokens = append(tokens, tok)
	}
	return tokens, true
}

// lexerCache remembers chroma's lexer for a language name. For a name
// that is not a lexer's name or alias, lexers.Get tries it as a file name
// against every glob of every lexer, some 12 ms; documents repeat their
// languages (```console, ```text), so the answer is kept, for at most
// maxCachedLexers short names (they come from users).
var (
	lexerCache      sync.Map // string -> chroma.Lexer (nil for none)
	lexerCacheCount atomic.Int64
)

const maxCachedLexers = 1024

// maxLexerName is the longest language name getLexer looks up. Every name,
// alias and file name pattern of chroma's lexers is shorter
// (TestLexerNamesShort), and chroma matches a name against each pattern
// with filepath.Match, which took 0.8 ms per byte of a long name: an 8 KB
// "language" cost 6.7 s (issue 29's fuzzing).
const maxLexerName = 64

func getLexer(lang string) chroma.Lexer {
	if len(lang) > maxLexerName {
		return nil
	}
	if v, ok := lexerCache.Load(lang); ok {
		l, _ := v.(chroma.Lexer)
		return l
	}
	l := lexers.Get(lang)
	if lexerCacheCount.Load() < maxCachedLexers {
		if _, loaded := lexerCache.LoadOrStore(lang, l); !loaded {
			lexerCacheCount.Add(1)
		}
	}
	return l
}

// longestWord returns the length in columns of the longest run of
// characters other than spaces and tabs.
func longestWord(code string) int {
	longest, n := 0, 0
	for _, r := range code {
		if r == ' ' || r == '\t' || r == '\n' {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}

// cleanCode normalizes line ends, drops the characters that have no place
// in printed code (control characters other than tab and newline, and the
// final newlines: the block ends its own last line) and cuts lines longer
// than maxVerbatimCols.
func cleanCode(code string) string {
	code = strings.ReplaceAll(code, "\r\n", "\n")
	code = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r == '\r' {
			return '\n'
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, code)
	code = strings.TrimRight(code, "\n")
	// Cut lines wider than maxVerbatimCols, counting tab stops.
	var b strings.Builder
	col := 0
	for _, r := range code {
		width := 1
		switch r {
		case '\n':
			col, width = 0, 0
		case '\t':
			width = tabWidth - col%tabWidth
		}
		if col+width > maxVerbatimCols {
			b.WriteByte('\n')
			col = 0
			if r == '\t' {
				width = tabWidth
			}
		}
		b.WriteRune(r)
		col += width
	}
	return b.String()
}

// codeFormatter writes tokens line by line: a style macro must open and
// close on one line, because fvextra reads the block line by line.
type codeFormatter struct {
	b   *strings.Builder
	col int // column on the current line, for tab stops
}

func (f *codeFormatter) token(style, text string) {
	for {
		line, rest, more := strings.Cut(text, "\n")
		if line != "" {
			if style != "" && strings.TrimSpace(line) != "" {
				f.b.WriteString(style + "{")
				f.text(line)
				f.b.WriteString("}")
			} else {
				f.text(line)
			}
		}
		if !more {
			return
		}
		f.endLine()
		text = rest
	}
}

func (f *codeFormatter) endLine() {
	f.b.WriteByte('\n')
	f.col = 0
}

// text writes a piece of one line, escaped, with characters the monospace
// font lacks in their fallback font.
func (f *codeFormatter) text(s string) {
	for _, run := range script.CodeRuns(s) {
		if run.Font != "" {
			f.b.WriteString(`\opfont` + run.Font + "{")
		}
		for _, r := range run.Text {
			switch r {
			case '\\':
				f.b.WriteString(`\opvb{}`)
			case '{':
				f.b.WriteString(`\oplb{}`)
			case '}':
				f.b.WriteString(`\oprb{}`)
			case '^':
				f.b.WriteString(`\opcaret{}`)
			case '\t':
				n := tabWidth - f.col%tabWidth
				f.b.WriteString(strings.Repeat(" ", n))
				f.col += n - 1
			default:
				f.b.WriteRune(r)
			}
			f.col++
		}
		if run.Font != "" {
			f.b.WriteString("}")
		}
	}
}

// Macros returns the control sequences Code writes into
// the body, besides the \opfont<key> macros of FontMacros.
func Macros() []string {
	return []string{
		`\begin`, `\end`, `\\`, `\{`, `\}`,
		`\opvb`, `\oplb`, `\oprb`, `\opcaret`,
		`\optkkw`, `\optkty`, `\optkfn`, `\optkbi`, `\optkst`, `\optknu`, `\optkco`,
		`\optkpp`, `\optkta`, `\optkva`, `\optkgd`, `\optkgi`, `\optkgh`,
	}
}
