// Package tex runs XeLaTeX on one document, hardened: a scratch folder of its
// own, its own process group killed whole on timeout or cancellation,
// rlimits, an environment without secrets, no shell escape, reads and writes
// confined to the scratch folder, and the page limit enforced inside TeX. It
// knows nothing about Markdown: a Job is a preamble and a body of LaTeX.
//
// Two engines run a Job. A Runner starts XeLaTeX cold for every run (the
// one-shot command line). A Pool keeps XeLaTeX processes warm: started ahead
// of time, past the preamble and \begin{document} with the fonts loaded,
// waiting for the document; each typesets exactly one document and is then
// replaced (long-lived servers and the benchmark). Warm processes are forked
// from a zygote that did the warm-up once (a preloaded C shim, built with
// the machine's C compiler), or warm up by themselves when that cannot run.
//
// # The LaTeX contract
//
// The runner writes main.tex as the Job's Preamble, then a harness of its
// own, then \begin{document}, \input of body.tex (the Job's Body, so that a
// TeX error's line in body.tex is the Body's line) and \end{document}. The
// harness reports every shipped page on TeX's terminal (Job.Progress), stops
// TeX with an error at page MaxPages+1, and notes which table-of-contents
// files (\@starttoc) the document reads.
//
// A second run happens only when the first says it is needed: a LaTeX or
// package warning asks for a rerun ("Label(s) may have changed", "Rerun to
// get ..."), or the document read a table of contents (.toc, .lof, .lot)
// whose content changed during the run. A preamble that wants one run for
// documents without a table of contents must therefore not provoke rerun
// warnings of its own: with hyperref, use the option pdfpagelabels=false and
// the bookmark package (it writes PDF outlines in one run, where hyperref
// alone asks for a second).
//
// A preamble may contain a line consisting of \csname endofdump\endcsname:
// the Pool dumps everything before it into a format with mylatexformat
// (loading a format is cheaper than loading the packages), so that part must
// load packages only, not fonts (XeTeX cannot dump a loaded OpenType font:
// put \setmainfont and friends after the line). In a cold run the line does
// nothing.
package tex

import (
	"errors"
	"fmt"
	"time"
)

// Job is one document to typeset.
type Job struct {
	// Preamble is everything before \begin{document}. It must depend only
	// on a profile (paper, scripts), never on the document, so that a warm
	// process can load it before the document is known.
	Preamble string
	// Body is everything between \begin{document} and \end{document}.
	Body string
	// Files maps a name inside the scratch folder (a local, relative path
	// such as "img-1.png") to the path of a file that is copied there
	// before TeX starts, such as a canonical image.
	Files map[string]string
	// MaxPages is the page limit: TeX stops when it ships page MaxPages+1.
	// Zero means limits.DefaultMaxPages.
	MaxPages int
	// Progress, when set, is called with the number of pages TeX has
	// shipped so far. It is called from a goroutine of the render, never
	// concurrently with itself and never after Run returns; a slow Progress
	// never blocks TeX (intermediate counts are skipped instead). A second
	// TeX run counts from 1 again.
	Progress func(pages int)
}

// Result is a finished render.
type Result struct {
	PDF   []byte
	Pages int
	// Runs is how often TeX ran (1 or 2).
	Runs int
	// Log is the end of the last run's TeX log, for our own logs; it may
	// contain paths and document text, so it never goes to a client.
	Log string
	// MissingGlyphs lists characters that a font could not draw and TeX
	// dropped ("U+2603 ☃ in font Noto Serif Regular"), at most 50.
	MissingGlyphs []string
	// Wall is the wall time of Run, from the call to the PDF read.
	Wall time.Duration
	// CPU is the user+system time of every TeX process of the render
	// (XeLaTeX and xdvipdfmx), including, for a warm render, the time the
	// process spent warming up.
	CPU time.Duration
	// MaxRSS is the peak resident memory of any TeX process of the
	// render, in bytes (for the peak render memory metric).
	MaxRSS int64
	// WarmCPU is the part of CPU that warm processes spent before they
	// got the document (0 for a cold render).
	WarmCPU time.Duration
	// Engine is TeX's own time: from the document's start (cold: the end
	// of \begin{document}; warm: the moment the process is told to go) to
	// the PDF written, summed over runs.
	Engine time.Duration
	// Processes are the ids of the warm processes that typeset the
	// document, one per run (empty for a cold render). Ids are unique
	// within a Pool, so they prove that no process typeset two documents.
	Processes []uint64
	// Forked is how many of the runs were typeset by a zygote's child
	// (the rest by warm processes that warmed up by themselves).
	Forked int
}

// Errors of a render. The render package maps them to client errors.
var (
	// ErrPageLimit: TeX shipped page MaxPages+1 and was stopped.
	ErrPageLimit = errors.New("page limit reached")
	// ErrTimeout: the context's deadline (or the Runner's Timeout, or the
	// CPU-time rlimit) ran out while TeX ran.
	ErrTimeout = errors.New("time limit reached")
	// ErrResource: an rlimit or bound was hit: memory, processes, a file
	// over the file-size limit, the scratch folder over its total, or
	// TeX's own memory ("TeX capacity exceeded").
	ErrResource = errors.New("resource limit reached")
	// ErrCanceled: the context was canceled.
	ErrCanceled = errors.New("render canceled")
	// ErrPDFTooLarge: the PDF is over the size limit; the error is a
	// *PDFTooLargeError with the sizes.
	ErrPDFTooLarge = errors.New("PDF too large")
)

// CompileError is TeX refusing the document: its first error message.
type CompileError struct {
	// Line is the 1-based line within Job.Body where TeX stopped, or 0
	// when the error is not in the body (the preamble, a package, the end
	// of the document).
	Line int
	// Message is TeX's first error message, without paths of ours
	// (directories are stripped from every absolute path).
	Message string
}

func (e *CompileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("tex error at body line %d: %s", e.Line, e.Message)
	}
	return "tex error: " + e.Message
}

// PDFTooLargeError is a PDF over the size limit. errors.Is(err,
// ErrPDFTooLarge) holds for it.
type PDFTooLargeError struct {
	Size, Limit int64
}

func (e *PDFTooLargeError) Error() string {
	return fmt.Sprintf("PDF too large: %d bytes, limit %d", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrPDFTooLarge) true.
func (e *PDFTooLargeError) Is(target error) bool { return target == ErrPDFTooLarge }
