package tex

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// The harness is the LaTeX the runner puts between the Job's preamble and
// \begin{document}. Its messages start with "OUTPRINT-" and a nonce fresh
// for every process, so no text of a document can forge them even if it
// reached TeX's terminal.

// newNonce returns 12 random hex digits.
func newNonce() string {
	var b [6]byte
	// Since Go 1.24 crypto/rand.Read never returns an error: it crashes
	// the program itself if the kernel's generator fails.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// marker is the prefix of the harness's terminal and log lines.
func marker(nonce string) string { return "OUTPRINT-" + nonce + " " }

// harness returns the LaTeX that goes after the preamble. maxPages is the
// initial page limit (a warm process gets the real one with the document).
//
//   - shipout/after: print "page N" on the terminal (progress; the empty
//     \message flushes the terminal, which \write alone leaves in stdio's
//     buffer when stdout is a pipe), and stop
//     with an error at page maxPages+1. \errmessage under -halt-on-error
//     ends TeX at once, so a 700-page document stops after page 501.
//   - \@starttoc: note on the terminal and in the log which
//     table-of-contents file the document reads, so the runner can tell
//     whether it changed (and the pool can warm a process for the second
//     run while the first one runs).
//   - \OutprintEnd, which main.tex puts right after the body: a \write
//     that TeX carries out only when it ships the page holding it, so
//     "end N" in the log proves the body's end reached page N of the PDF
//     (a document that stopped early or whose last part was dropped never
//     says it; readPDF refuses its PDF). After a body that ends with a
//     page break the current page is empty (\pagegoal is \maxdimen):
//     everything before has gone to the output routine, and the mark is
//     written at once. Otherwise the page builder is made to settle the
//     body's pages before \end{document}: TeX decides a page break only
//     at a breakpoint, so a last line that no longer fits, or the glue a
//     list or quote leaves at its end, moved the body's last lines to a
//     new page only at \clearpage, after \AtEndDocument had taken the
//     page count for the footers' total ("Page 8 of 7"; a batch of
//     CommonMark examples was refused so). \penalty9999 is that
//     breakpoint, too costly to be chosen as a break. Before it, the
//     body's trailing glue is cancelled (at the document's end it can only
//     push the last lines onto a page of their own, and TeX drops glue at
//     a page break anyway) and the last line's depth becomes a kern of
//     its own (the baselines of anything after stay where they were), so
//     the zero-height box of an \AtEndDocument hook (markdown's total)
//     adds nothing to the page and never lands on a page of its own.
//     The mark comes before the breakpoint: when the last page is exactly
//     full TeX breaks at \penalty9999 itself, and a mark after it would
//     sit alone on a page that never ships.
//   - \OutprintTotal{N}, for a preamble whose footer prints "of N": it
//     says the total the footer shows, which must be the number of pages
//     (readPDF), or the PDF ran on past what its footers announce.
//
// @ is made a letter for the harness and its catcode restored afterwards,
// whatever the preamble left it at.
func harness(nonce string, maxPages int) string {
	m := marker(nonce)
	return `%% outprint harness
\edef\OutprintRestoreAt{\catcode64=\the\catcode64\relax}\catcode64=11
\newcount\outprint@maxpages \global\outprint@maxpages=` + fmt.Sprint(maxPages) + `\relax
\AddToHook{shipout/after}{%
  \immediate\write16{` + m + `page \the\ReadonlyShipoutCounter}\message{}%
  \ifnum\ReadonlyShipoutCounter>\outprint@maxpages
    \errmessage{` + m + `page limit}%
  \fi}
\def\OutprintEnd{\par\ifdim\pagegoal=\maxdimen
    \immediate\write16{` + m + `end \the\ReadonlyShipoutCounter}%
  \else
    \ifdim\lastskip=\z@\else\vskip-\lastskip\fi
    \ifdim\prevdepth>\z@\kern-\prevdepth\prevdepth\z@\fi
    \write16{` + m + `end \the\ReadonlyShipoutCounter}%
    \penalty9999 \fi}
\def\OutprintTotal#1{\immediate\write16{` + m + `total #1}\message{}}
\let\outprint@starttoc\@starttoc
\def\@starttoc#1{\immediate\write16{` + m + `toc #1}\message{}\outprint@starttoc{#1}}
\OutprintRestoreAt
`
}

// coldDocument is main.tex of a cold run.
func coldDocument(preamble, nonce string, maxPages int) string {
	var b strings.Builder
	b.WriteString(preamble)
	if !strings.HasSuffix(preamble, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(harness(nonce, maxPages))
	b.WriteString("\\begin{document}\n")
	b.WriteString("\\immediate\\write16{" + marker(nonce) + "start}\\message{}%\n")
	b.WriteString("\\input{./body.tex}\n")
	b.WriteString("\\OutprintEnd\n")
	b.WriteString("\\end{document}\n")
	return b.String()
}

// bodyFile is the body's file: the Body and a final newline, so that its
// last line is complete when \input reaches the end.
func bodyFile(body string) string {
	if strings.HasSuffix(body, "\n") {
		return body
	}
	return body + "\n"
}
