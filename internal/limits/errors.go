package limits

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Source says who has to act on a problem (SPEC §5).
type Source string

// The sources of SPEC §5. SourceService means nobody has to fix the document:
// waiting helps.
const (
	SourceRequest  Source = "request"
	SourceAuth     Source = "auth"
	SourceDocument Source = "document"
	SourceMetadata Source = "metadata"
	SourceImage    Source = "image"
	SourceService  Source = "service"
)

// Error codes used across outprint. A client branches on these, so they are
// part of the contract and never change meaning.
const (
	CodeInvalid      = "invalid"        // a field or construct is malformed
	CodeUnknown      = "unknown"        // an unknown metadata field
	CodeMath         = "math"           // a formula outside the allowlist
	CodeTeX          = "tex"            // TeX refused the document
	CodeImage        = "image"          // an image that cannot be had or used
	CodeTooLarge     = "too_large"      // the Markdown is over MaxMarkdownBytes
	CodeTooManyPages = "too_many_pages" // the page limit was reached
	CodePDFTooLarge  = "pdf_too_large"  // the PDF is over the size limit
	CodeResource     = "resource"       // memory, processes, scratch or SVG time
	CodeTimeout      = "timeout"        // the render time limit ran out
	CodeBusy         = "busy"           // no slot and no place in the queue
	CodeUserLimit    = "user_limit"     // the user already has renders running
	CodeInternal     = "internal"       // our fault; details only in logs
	CodeNoSpace      = "no_space"       // the server's disk is full; retry later
	CodeFormat       = "format"         // not a file format outprint converts
	CodeEncrypted    = "encrypted"      // a password-protected document
	CodeCorrupt      = "corrupt"        // a damaged file of a known format
)

// Codes returns every error code above, in order: the bounded set of a
// metric label that carries a code.
func Codes() []string {
	return []string{CodeInvalid, CodeUnknown, CodeMath, CodeTeX, CodeImage, CodeTooLarge, CodeTooManyPages,
		CodePDFTooLarge, CodeResource, CodeTimeout, CodeBusy, CodeUserLimit, CodeInternal,
		CodeFormat, CodeEncrypted, CodeCorrupt}
}

// Problem is one entry of the error list. Line is the 1-based Markdown line,
// or 0 when no line applies (it is written as null).
type Problem struct {
	Field   string `json:"field"`
	Source  Source `json:"source"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"-"`
}

// MarshalJSON writes the problem in the shape of SPEC §5, with "line": null
// when no line applies.
func (p Problem) MarshalJSON() ([]byte, error) {
	var line any
	if p.Line > 0 {
		line = p.Line
	}
	return json.Marshal(struct {
		Field   string `json:"field"`
		Source  Source `json:"source"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Line    any    `json:"line"`
	}{p.Field, p.Source, p.Code, p.Message, line})
}

// UnmarshalJSON reads the shape MarshalJSON writes.
func (p *Problem) UnmarshalJSON(b []byte) error {
	var v struct {
		Field   string `json:"field"`
		Source  Source `json:"source"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Line    *int   `json:"line"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Problem{Field: v.Field, Source: v.Source, Code: v.Code, Message: v.Message}
	if v.Line != nil {
		p.Line = *v.Line
	}
	return nil
}

// Kind says which bound or check refused a render or request: the HTTP
// layer answers each kind with one status (httpapi), the command line with
// one exit code. A kind says nothing about HTTP itself.
type Kind string

// The kinds of *Error.
const (
	// KindDocument: the document, its metadata or its images need fixing
	// (HTTP 422).
	KindDocument Kind = "document"
	// KindRequest: the request around the document is malformed (400).
	KindRequest Kind = "request"
	// KindTooLarge: the input or the output is over a size, page or
	// resource bound (413).
	KindTooLarge Kind = "too_large"
	// KindTimeout: the render ran out of time (504).
	KindTimeout Kind = "timeout"
	// KindBusy: no capacity for the request now; waiting helps (429 with
	// Retry-After).
	KindBusy Kind = "busy"
	// KindNoSpace: the server is out of disk space for the request's
	// files (507 with Retry-After): nothing the client sent is wrong, and
	// the same request succeeds once space is freed (retention deletes
	// old results, an operator grows the volume).
	KindNoSpace Kind = "no_space"
	// KindUnsupported: the file is of a type outprint does not convert
	// (415): a PDF, an image, plain text sent where an Office document
	// is expected. Unlike KindDocument, no edit of the file helps; a
	// file of another type does.
	KindUnsupported Kind = "unsupported"
)

// Error is a failed render or request that the client can act on: a list of
// problems and its kind. The kind is part of the error because the bound
// that produced it knows which answer it deserves (SPEC §3); the HTTP layer
// turns it into a status.
type Error struct {
	Kind     Kind
	Problems []Problem
}

// Error joins the problems into one line for logs.
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Line > 0 {
			parts[i] = fmt.Sprintf("line %d: %s", p.Line, p.Message)
		} else {
			parts[i] = p.Message
		}
	}
	return fmt.Sprintf("%s: %s", e.Kind, strings.Join(parts, "; "))
}

// Code returns the code of the first problem, the one that decides how a
// client or a job retry policy treats the whole list.
func (e *Error) Code() string {
	if len(e.Problems) == 0 {
		return ""
	}
	return e.Problems[0].Code
}

// Invalid returns a KindDocument list: the document, its metadata or its images need
// fixing. It returns nil when there are no problems, so callers can collect
// and return in one step.
func Invalid(problems ...Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &Error{Kind: KindDocument, Problems: CapProblems(problems, 0)}
}

// MaxProblems is how many problems an error or warning list shows; the
// rest are summed up in one more entry, so that a megabyte of one mistake
// repeated is answered with a short list, not one as large as the input.
const MaxProblems = 100

// CapProblems returns problems cut to MaxProblems entries and, when it cut,
// one more entry (a list of MaxProblems+1 entries is kept whole: it is no
// longer than a cut one) "and N more problems" (N counts the cut ones plus extra,
// problems a caller counted without keeping). The entry takes the source
// and code of the last kept one, so a client that branches on codes reads
// the list the same way.
func CapProblems(problems []Problem, extra int) []Problem {
	if extra == 0 && len(problems) <= MaxProblems+1 {
		// Within the bound (a list capped before stays as it is).
		return problems
	}
	more := extra + max(0, len(problems)-MaxProblems)
	kept := problems[:min(len(problems), MaxProblems)]
	out := make([]Problem, len(kept), len(kept)+1)
	copy(out, kept)
	last := Problem{Source: SourceDocument, Code: CodeInvalid}
	if len(kept) > 0 {
		last = kept[len(kept)-1]
	}
	word := "problems"
	if more == 1 {
		word = "problem"
	}
	return append(out, Problem{Source: last.Source, Code: last.Code, Message: fmt.Sprintf("and %d more %s", more, word)})
}

// TooLarge is the KindTooLarge error for a Markdown text over MaxMarkdownBytes.
// A reader that stops one byte past the bound knows no more than that,
// so a size of MaxMarkdownBytes+1 is reported as "more than" the bound.
func TooLarge(size int64) error {
	msg := fmt.Sprintf("the document is too large to render: %d bytes, at most %d", size, MaxMarkdownBytes)
	if size <= MaxMarkdownBytes+1 {
		msg = fmt.Sprintf("the document is too large to render: more than %d bytes (1 MiB)", MaxMarkdownBytes)
	}
	return &Error{Kind: KindTooLarge, Problems: []Problem{{Source: SourceDocument, Code: CodeTooLarge, Message: msg}}}
}

// TooLargeThan is the KindTooLarge error for a Markdown text over max bytes (a
// collection's documents together).
func TooLargeThan(size, max int64) error {
	return &Error{Kind: KindTooLarge, Problems: []Problem{{
		Source: SourceDocument, Code: CodeTooLarge,
		Message: fmt.Sprintf("the document is too large to render: %d bytes, at most %d", size, max),
	}}}
}

// TooManyPages is the KindTooLarge error for a document that reached the page limit.
func TooManyPages(max int) error {
	return &Error{Kind: KindTooLarge, Problems: []Problem{{
		Source: SourceDocument, Code: CodeTooManyPages,
		Message: fmt.Sprintf("the document has too many pages (more than %d); shorten it", max),
	}}}
}

// PDFTooLarge is the KindTooLarge error for a PDF over the size limit.
func PDFTooLarge(size, max int64) error {
	return &Error{Kind: KindTooLarge, Problems: []Problem{{
		Source: SourceDocument, Code: CodePDFTooLarge,
		Message: fmt.Sprintf("the resulting PDF is too large (%d bytes, at most %d); remove or shrink images", size, max),
	}}}
}

// Resource is the KindTooLarge error for a render that hit a process bound (memory,
// processes, scratch space, SVG conversion time).
func Resource(what string) error {
	return &Error{Kind: KindTooLarge, Problems: []Problem{{
		Source: SourceDocument, Code: CodeResource,
		Message: fmt.Sprintf("the document needs more resources than a render may use: %s", what),
	}}}
}

// Timeout is the KindTimeout error for a render that ran out of time.
func Timeout(limit time.Duration) error {
	return &Error{Kind: KindTimeout, Problems: []Problem{{
		Source: SourceDocument, Code: CodeTimeout,
		Message: fmt.Sprintf("rendering took too long (limit %s); shorten the document", limit),
	}}}
}

// ConvertTimeout is Timeout for an Office document: LibreOffice did not
// finish converting it within limit.
func ConvertTimeout(limit time.Duration) error {
	return &Error{Kind: KindTimeout, Problems: []Problem{{
		Source: SourceDocument, Code: CodeTimeout,
		Message: fmt.Sprintf("converting the document took too long (limit %s)", limit),
	}}}
}

// Unsupported is the KindUnsupported error for a file that is not one of
// the formats outprint converts; what names what it is instead ("a PDF
// document", "plain text").
func Unsupported(what string) error {
	return &Error{Kind: KindUnsupported, Problems: []Problem{{
		Source: SourceDocument, Code: CodeFormat,
		Message: fmt.Sprintf("%s is not a document outprint converts (DOCX, DOC, ODT, RTF, XLSX, XLS, ODS, CSV, PPTX, PPT, ODP)", what),
	}}}
}

// Encrypted is the KindDocument error for a password-protected document:
// outprint never asks for or guesses a password.
func Encrypted() error {
	return &Error{Kind: KindDocument, Problems: []Problem{{
		Source: SourceDocument, Code: CodeEncrypted,
		Message: "password-protected documents cannot be converted",
	}}}
}

// Corrupt is the KindDocument error for a damaged file of a known
// format; format names it ("DOCX") and why says what is wrong.
func Corrupt(format, why string) error {
	return &Error{Kind: KindDocument, Problems: []Problem{{
		Source: SourceDocument, Code: CodeCorrupt,
		Message: fmt.Sprintf("the %s file is damaged and cannot be converted: %s", format, why),
	}}}
}

// NoSpaceRetry is how long a client is asked to wait after a KindNoSpace
// refusal: retention and operators free space in minutes, not seconds.
const NoSpaceRetry = 60 * time.Second

// NoSpace is the KindNoSpace error: a file the request needs could not be
// written because the server's disk (or the quota of its volume) is full.
// The reason is the server's, but unlike an internal error it is said, so
// that a client retries later instead of reporting a bug.
func NoSpace() *Error {
	return &Error{Kind: KindNoSpace, Problems: []Problem{{Source: SourceService, Code: CodeNoSpace,
		Message: "the server is out of disk space; retry later"}}}
}
