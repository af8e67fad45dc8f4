package tex

import (
	"fmt"
	"strings"

	"github.com/outprint/outprint/internal/limits"
)

// The LaTeX of warm processes and of the formats they load.

// dumpMarker is the preamble line that ends the part a format may hold.
const dumpMarker = `\csname endofdump\endcsname`

// splitAtDump splits a preamble at its dump marker line: head is everything
// before the line, tail everything after it. ok is false when the preamble
// has no such line.
func splitAtDump(preamble string) (head, tail string, ok bool) {
	lines := strings.SplitAfter(preamble, "\n")
	at := 0
	for _, l := range lines {
		if strings.TrimSpace(l) == dumpMarker {
			return preamble[:at], preamble[at+len(l):], true
		}
		at += len(l)
	}
	return "", "", false
}

// lmrShapes are the shapes of XeLaTeX's default font family (TU/lmr) that
// the class and packages may select while the format is being dumped.
var lmrShapes = [][3]string{
	{"m", "n", "cmr10"}, {"bx", "n", "cmbx10"}, {"b", "n", "cmbx10"},
	{"m", "it", "cmti10"}, {"bx", "it", "cmbxti10"}, {"m", "sl", "cmsl10"},
	{"m", "sc", "cmcsc10"},
}

// lmrSizes are the sizes at which the class may load them (\normalsize of
// the 10, 11 and 12 pt options).
var lmrSizes = []string{"10", "10.95", "12"}

// dumpDocument is the file mylatexformat dumps a format from. XeTeX cannot
// dump a format in which an OpenType font was ever loaded, yet
// \documentclass selects the default font (Latin Modern, OpenType) and
// fontspec selects its bold. For the dump only, the default family TU/lmr
// is declared with TFM fonts (dumpable); warmDocument restores it after the
// format is loaded. mylatexformat's own font preloading (which would load
// OpenType fonts too) is switched off.
func dumpDocument(head string) string {
	var b strings.Builder
	b.WriteString("\\DeclareFontFamily{TU}{lmr}{}\n")
	for _, s := range lmrShapes {
		fmt.Fprintf(&b, "\\DeclareFontShape{TU}{lmr}{%s}{%s}{<->%s}{}\n", s[0], s[1], s[2])
	}
	b.WriteString(head)
	if !strings.HasSuffix(head, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("\\makeatletter\\let\\MYLATEX@fontpreloading\\relax\\makeatother\n")
	b.WriteString(dumpMarker + "\n")
	return b.String()
}

// lmrRestore undoes dumpDocument's TU/lmr declarations in a process that
// loaded the format: without the family, shapes and loaded fonts, LaTeX
// reads tulmr.fd again on the next use and loads Latin Modern as usual.
func lmrRestore() string {
	var b strings.Builder
	b.WriteString("\\expandafter\\let\\csname TU+lmr\\endcsname\\relax\n")
	for _, s := range lmrShapes {
		fmt.Fprintf(&b, "\\expandafter\\let\\csname TU/lmr/%s/%s\\endcsname\\relax\n", s[0], s[1])
		for _, size := range lmrSizes {
			fmt.Fprintf(&b, "\\expandafter\\let\\csname TU/lmr/%s/%s/%s\\endcsname\\relax\n", s[0], s[1], size)
		}
	}
	return b.String()
}

// defaultWarmup loads the fonts nearly every document uses, in a box that
// is thrown away: XeTeX loads an OpenType font (each face at each size)
// when it is first selected, and that should happen before the document
// arrives. Each font costs some milliseconds of CPU, paid by every render
// whether its document uses the font or not, so the default is lean: the
// body face upright, italic and bold, and math. A preamble may define
// \outprintwarmup to load the fonts its documents use (heading sizes,
// sans, mono), typeset in that box.
const defaultWarmup = `\normalfont x\itshape x\upshape\bfseries x\mdseries $x$`

// warmDocument is main.tex of a warm process: the preamble (with the
// TU/lmr restore after the dump marker when a format is used), the harness,
// \begin{document}, the font warm-up, then the wait: \openin of the FIFO
// go.tex blocks until outprint writes a byte to it. The FIFO is only a
// gate: XeTeX sniffs the first bytes of a file it opens for a byte-order
// mark and then rewinds, which on a FIFO loses what was read, so the page
// limit comes from the regular file limit.tex, written before the gate
// opens (read with \endlinechar off, so no end-of-line character is left
// to typeset). Then the
// previous run's .aux (prev.aux, present for a second run) is read by hand,
// because \begin{document}, which normally reads it, is already past; the
// .toc files need nothing, \tableofcontents reads them when the body runs.
// A cold run reads the .aux while the preamble-only commands still work
// (\newlabel is one, and hyperref's lines call \AtBeginDocument): their
// preamble meanings are saved before \begin{document} (the list is
// \@preamblecmds) and restored while prev.aux is read, \AtBeginDocument
// running its code at once, as it would right after a cold run's .aux.
func warmDocument(preamble, nonce string, withFormat bool) string {
	var b strings.Builder
	if head, tail, ok := splitAtDump(preamble); ok && withFormat {
		b.WriteString(head)
		b.WriteString(dumpMarker + "\n")
		b.WriteString(lmrRestore())
		b.WriteString(tail)
	} else {
		b.WriteString(preamble)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	m := marker(nonce)
	b.WriteString(harness(nonce, limits.DefaultMaxPages))
	b.WriteString(`\makeatletter\newread\outprint@go
\let\outprint@preamblecmds\@preamblecmds
\begingroup\def\do#1{\expandafter\global\expandafter\let\csname outprint@saved@\string#1\endcsname#1}\outprint@preamblecmds\endgroup
\makeatother
\begin{document}
\makeatletter
\begingroup\setbox\z@\hbox{\ifdefined\outprintwarmup\outprintwarmup\else ` + defaultWarmup + `\fi}\endgroup
\immediate\write16{` + m + `ready}\message{}%
\openin\outprint@go=./go.tex
\closein\outprint@go
\openin\outprint@go=./limit.tex
{\endlinechar=-1 \global\readline\outprint@go to\outprint@goline}%
\closein\outprint@go
\global\outprint@maxpages=\outprint@goline\relax
\def\do#1{\expandafter\let\expandafter#1\csname outprint@saved@\string#1\endcsname}\outprint@preamblecmds
\let\AtBeginDocument\@firstofone
\@input{./prev.aux}%
\def\do#1{\let#1\@notprerr}\outprint@preamblecmds
\let\do\noexpand
\makeatother
\immediate\write16{` + m + `start}\message{}%
\input{./body.tex}
\OutprintEnd
\end{document}
`)
	return b.String()
}
