package markdown

import (
	"fmt"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/script"
)

// Meta is the binding of a document: what the title block, the document
// information and the layout switches show.
type Meta struct {
	Title, Subtitle, Author, Version, Date, Language string
	TOC, NumberSections                              bool
}

// Output is the body of a document: everything between \begin{document}
// and \end{document}.
type Output struct {
	Body string
	// Lines[i] is the Markdown line (in the original file) that line i+1
	// of Body came from, 0 when none applies.
	Lines []int
	// Warnings lists what was printed differently than written (links
	// without a usable target).
	Warnings []limits.Problem
	// TOC is set when the body has a table of contents. It is typeset in
	// the same run as the rest (see tocBlock), so it needs no second run.
	TOC bool
}

// Nesting bounds. LaTeX allows as many list levels as enumitem's
// \setlistdepth (9, set in the preamble) across lists, quotes and toggles
// together; deeper levels are flattened into the deepest one. Notice frames
// nest a few levels at most, deeper ones print as labelled paragraphs.
const (
	maxListDepth  = 8
	maxFrameDepth = 3
	maxURLBytes   = 4000
	maxBookmark   = 200 // runes of a heading's bookmark text
	maxBodyLine   = 100_000
)

var sectionCommands = [...]string{"section", "subsection", "subsubsection", "paragraph", "subparagraph"}

// LaTeX writes the body of the document. images maps ImageRef.URL to the
// image files the TeX folder holds; an image missing from it prints its
// alternative text (the images stage has reported it already).
func (d *Document) LaTeX(meta Meta, images map[string]Image) (*Output, error) {
	return d.latex(nil, meta, images)
}

// latex is LaTeX that gives up (panics with errStopped, see LaTeXContext)
// at the next block once stop returns true; a nil stop never stops.
func (d *Document) latex(stop func() bool, meta Meta, images map[string]Image) (*Output, error) {
	r := newWriter(d, stop, images)
	r.docRTL = RTLLanguage(meta.Language)
	r.dirs = d.NeedsBidi(meta)
	headings := r.prepareHeadings(meta)
	toc := r.front(meta, headings)
	r.blocks(d.root)
	r.nl()
	if cleanLine(meta.Title) == "" && !toc && d.root.ChildCount() == 0 {
		// TeX makes no PDF without a page: an empty document gets one.
		r.raw("\\null\n")
	}
	out := &Output{Body: string(r.b), Lines: r.lines, Warnings: limits.CapProblems(r.warnings, 0), TOC: toc}
	// A guard, not a limit users meet: TeX's line buffer holds 200,000
	// bytes, and the writer's lines stay far below (code lines are cut to
	// maxCodeLine runes before highlighting).
	if n := longestLine(out.Body); n > maxBodyLine {
		return nil, fmt.Errorf("latex: line of %d bytes", n)
	}
	return out, nil
}

func newWriter(d *Document, stop func() bool, images map[string]Image) *writer {
	r := &writer{d: d, images: images, fnNumber: map[int]int{}, stop: stop}
	r.lookahead = r.nextLetter
	r.emoji = func(name string) (string, bool) {
		img, ok := images[EmojiKey(name)]
		return img.File, ok && safeFile(img.File)
	}
	r.embPrev = script.None
	r.texWriter.b = make([]byte, 0, len(d.src)*2+4096)
	r.firstBreak, r.everyBreak = 20, 6
	return r
}

func longestLine(s string) int {
	longest := 0
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			i = len(s)
		}
		longest = max(longest, i)
		s = s[min(i+1, len(s)):]
	}
	return longest
}

// writer turns the syntax tree into LaTeX.
type writer struct {
	texWriter
	stop     func() bool // true: give up at the next block (LaTeXContext)
	d        *Document
	images   map[string]Image
	warnings []limits.Problem

	skip        ast.Node          // the heading shown as the title
	sectionBase int               // heading level written as \section
	anchors     map[string]string // heading slug -> PDF destination name
	dests       map[*ast.Heading]string
	tocKeys     map[*ast.Heading]string // headings listed in the table of contents -> their page key
	fnNumber    map[int]int             // footnote index -> number it was given
	fnCount     int                     // footnote numbers given so far
	pending     []pendingNote           // footnotes to typeset after this block

	listDepth  int  // open list-like environments (lists, quotes, toggles)
	frameDepth int  // open notice frames
	footnote   bool // inside \footnote: no Verbatim, no longtable, no \section
	cell       bool // inside a table cell
	header     bool // inside a table header row (typeset twice)
	heading    bool // inside a heading: a moving argument
	ulem       int  // inside \opul, \opst or \ophl
	link       bool // inside link text
	caption    bool // inside an image caption (a minipage)
	wrapNext   bool // the next paragraph runs beside a half-width image
	args       int  // open macro arguments around inline text (\textbf{…}, \href{…}{…}): no \par there
	quiet      bool // writing text a second time: no warnings

	// htmlClose holds the closing tags of allowed inline HTML (html.go)
	// whose opening tag has been written: what each one writes.
	htmlClose map[ast.Node]string

	// The bidirectional paragraph being written (bidi.go): its root, the
	// inline node being written, and laStop when a line break ends the
	// current piece of text.
	laRoot, laNode ast.Node
	laStop         bool
	tocCopy        bool // writing a heading's copy for the table of contents

	// Paragraph direction (direction.go): whether the body sets it at all
	// (the preamble then has the bidi package), the document's, and the
	// one the next paragraph has in TeX.
	dirs, docRTL, dir bool

	bounds writerBounds // what keeps the writer's work linear (bounds.go)
}

// boxed reports whether the current place cannot hold a page-breaking
// construct (longtable, Verbatim, sectioning).
func (r *writer) boxed() bool { return r.footnote || r.cell || r.frameDepth > 0 }

func (r *writer) at(n ast.Node) {
	if p := r.d.blockPos(n); p >= 0 {
		r.cur = r.d.line(p)
	}
}

func (r *writer) warn(n ast.Node, format string, args ...any) {
	if r.quiet {
		return
	}
	line := 0
	if p := n.Pos(); p >= 0 {
		line = r.d.line(p)
	}
	r.warnings = append(r.warnings, limits.Problem{
		Source:  limits.SourceDocument,
		Code:    limits.CodeInvalid,
		Line:    line,
		Message: fmt.Sprintf(format, args...),
	})
}

func (r *writer) blocks(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c)
	}
}

func (r *writer) block(n ast.Node) {
	if n == r.skip {
		return
	}
	r.checkStop()
	r.at(n)
	r.nl()
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.paragraph(n)
	case *ast.Heading:
		r.headingBlock(n)
	case *ast.ThematicBreak:
		r.thematicBreak(n)
	case *ast.FencedCodeBlock:
		r.fencedCode(n)
	case *ast.CodeBlock:
		r.code("", r.rawLines(n))
	case *ast.HTMLBlock:
		r.htmlBlock(n)
	case *ast.Blockquote:
		r.nested("quote", "", n)
	case *ast.List:
		r.list(n)
	case *extast.Table:
		r.table(n)
	case *HTMLTable:
		r.htmlTable(n)
	case *extast.FootnoteList:
		// Footnotes are typeset where they are referenced.
	case *Notice:
		r.notice(n)
	case *Toggle:
		r.toggle(n)
	case *MathBlock:
		r.mathBlock(n)
	default:
		r.blocks(n)
	}
	r.flushNotes()
}
