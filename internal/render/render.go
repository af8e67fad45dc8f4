// Package render is one render: Binding → images → Markdown → LaTeX → XeLaTeX
// → checks. It is the single pipeline that the command line, synchronous HTTP
// renders and queued jobs all call, so a fix or a limit here holds for all of
// them.
//
// A render has three stages, split so that the gateway can run admission
// between them (SPEC §4):
//
//	Check   cheap checks: Markdown size, Binding, math. Holds nothing.
//	Fetch   fetch and validate images (the user is counted before this).
//	Render  convert images, write LaTeX, run TeX, check pages and size
//	        (a slot is taken before this).
//
// A document's problems are reported all at once (SPEC §5): the Binding's,
// the formulas' and the scripts' that Check finds come back from Fetch
// with those of the images, in one error list.
package render

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/binding"
	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/tex"
)

// Request is one document to render.
type Request struct {
	// Name is the document's file name (e.g. "memo.md"); the title falls
	// back to it when there is neither a title field nor a heading.
	Name string
	// Markdown is the document text, possibly with YAML front matter.
	Markdown []byte
	// Metadata is an optional JSON Binding that wins over front matter.
	Metadata []byte
	// Images opens the images the document references. Nil means the
	// document can have none: every image is then reported as not found.
	Images images.Source
	// Outline, when set, says the document came from Outline: its fields
	// fill the Binding and its relative links resolve against URL.
	Outline *OutlineDoc
	// Parts, when more than 1, says Markdown joins that many documents (a
	// collection printed whole): the Markdown may be Parts times
	// limits.MaxMarkdownBytes long, at most limits.MaxCollectionBytes, and
	// reference Parts times limits.MaxImages images. The caller bounds
	// each document by the single-document limits.
	Parts int
}

// OutlineDoc is what Outline tells about a document beyond its text.
type OutlineDoc struct {
	URL       string // Outline's public URL, e.g. https://wiki.example.com
	Title     string
	Author    string
	UpdatedAt time.Time
	Language  string
}

// Progress reports where a render is. Pages counts pages TeX has shipped.
type Progress struct {
	Phase string // PhasePreparing, PhaseRendering or PhasePackaging
	Pages int
}

// The phases of SPEC §5 (jobs report them; the CLI shows them).
const (
	PhasePreparing = "preparing"
	PhaseRendering = "rendering"
	PhasePackaging = "packaging"
)

// Result is a finished render.
type Result struct {
	PDF      []byte
	Title    string
	Pages    int
	Runs     int
	Warnings []limits.Problem
	// Duration is the wall time of the Render stage; CPU the user+system
	// time of its TeX processes.
	Duration, CPU time.Duration
	// MaxRSS is the peak resident memory of its TeX processes, in bytes.
	MaxRSS int64
}

// Engine runs TeX on one job: the cold tex.Runner or the warm tex.Pool.
type Engine interface {
	Run(ctx context.Context, job tex.Job) (*tex.Result, error)
}

// Config is the pipeline's configuration.
type Config struct {
	// Engine runs TeX. Required.
	Engine Engine
	// Limits are the render bounds (default limits.DefaultRender()).
	Limits limits.Render
	// TempDir holds each render's image folder (default os.TempDir()).
	TempDir string
	// SVGCacheBytes bounds the PDFs kept of SVGs converted before (see
	// images.SVGCache; default 32 MiB, negative: none).
	SVGCacheBytes int64
	// EmojiDir is the emoji image set (default DefaultEmojiDir; "-":
	// none). Without a set, emoji are the emoji font's outlines.
	EmojiDir string
	// Diagrams draws the document's Mermaid and Graphviz fences
	// (*diagram.Drawer). Nil: diagrams are off and such fences print as
	// code, on purpose (the diagrams.enabled setting).
	Diagrams Drawer
}

// Drawer draws a document's diagrams (*diagram.Drawer): Check refuses what
// cannot be drawn without starting anything, Draw draws them in order.
type Drawer interface {
	Check(ds []diagram.Diagram) error
	Draw(ctx context.Context, ds []diagram.Diagram) ([]diagram.Drawing, error)
}

// defaultSVGCacheBytes is the default of Config.SVGCacheBytes: thousands
// of typical diagrams.
const defaultSVGCacheBytes = 32 << 20

// Pipeline renders documents. It is safe for concurrent use; it holds no
// per-render state; across renders it keeps the PDFs of converted SVGs.
type Pipeline struct {
	engine  Engine
	limits  limits.Render
	tempDir string
	svgs    *images.SVGCache
	// emojiDir is the emoji image set, "" when there is none.
	emojiDir string
	// diagrams draws diagrams; nil when they are off.
	diagrams Drawer
}

// New returns a pipeline for cfg.
func New(cfg Config) *Pipeline {
	p := &Pipeline{engine: cfg.Engine, limits: cfg.Limits.WithDefaults(), tempDir: cfg.TempDir, diagrams: cfg.Diagrams}
	switch cfg.EmojiDir {
	case "":
		p.emojiDir = EmojiSet(DefaultEmojiDir)
	case "-":
	default:
		p.emojiDir = EmojiSet(cfg.EmojiDir)
	}
	switch {
	case cfg.SVGCacheBytes == 0:
		p.svgs = images.NewSVGCache(defaultSVGCacheBytes)
	case cfg.SVGCacheBytes > 0:
		p.svgs = images.NewSVGCache(cfg.SVGCacheBytes)
	}
	return p
}

// Limits returns the bounds the pipeline enforces.
func (p *Pipeline) Limits() limits.Render { return p.limits }

// Checked is a document that passed the cheap checks.
type Checked struct {
	req  Request
	doc  *markdown.Document
	meta markdown.Meta
	// problems are what Check found wrong with the Binding and the text;
	// Fetch reports them with the images' (the document is never
	// written).
	problems []limits.Problem
	// paper is not part of markdown.Meta because it selects the preamble
	// (the warm pool's profile), not the body.
	paper string
}

// Title is the title the PDF will carry.
func (c *Checked) Title() string { return c.meta.Title }

// Err is the error list of the problems Check found in the Binding and
// the text (nil when there are none), for callers that stop at the cheap
// checks — a status page, say — where Fetch would add the images'.
func (c *Checked) Err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return limits.Invalid(slices.Clone(c.problems)...)
}

// Check runs the cheap checks: Markdown size, Binding and the math
// allowlist. It reads nothing and holds nothing. It fails for what keeps
// the document from being read at all (size, nesting); the problems of a
// document it can read (Binding fields, formulas, scripts) Fetch reports
// together with its images'.
func (p *Pipeline) Check(req Request) (*Checked, error) {
	if max := maxMarkdown(req.Parts); len(req.Markdown) > max {
		return nil, limits.TooLargeThan(int64(len(req.Markdown)), int64(max))
	}
	parse := binding.Parse
	if req.Outline != nil {
		// Outline's text has no front matter: a leading --- is a rule.
		parse = binding.ParseMetadata
	}
	var problems []limits.Problem
	bd, err := parse(req.Markdown, req.Metadata)
	if err != nil && (bd == nil || !documentProblems(err, &problems)) {
		return nil, err
	}
	b := bd.Binding
	opts := markdown.Options{LineOffset: bd.LineOffset}
	if o := req.Outline; o != nil {
		opts.OutlineURL = o.URL
		// Outline's text is in Outline's dialect unless its metadata
		// says otherwise.
		def := binding.Binding{Title: o.Title, Author: o.Author, Language: o.Language, Dialect: string(markdown.DialectOutline)}
		if !o.UpdatedAt.IsZero() {
			def.Date = o.UpdatedAt.UTC().Format("2006-01-02")
		}
		b.Merge(def)
	}
	opts.Dialect = markdown.Dialect(b.Dialect) // "" is CommonMark
	if p.diagrams != nil {
		opts.Diagram = isDiagram
	}
	doc, err := markdown.Parse(bd.Body, opts)
	if err != nil && (doc == nil || !documentProblems(err, &problems)) {
		return nil, err
	}
	if err := p.checkDiagrams(doc, req.Parts); err != nil && !documentProblems(err, &problems) {
		return nil, err
	}
	paper := b.Paper
	if paper == "" {
		paper = "a4"
	}
	return &Checked{req: req, doc: doc, meta: resolveMeta(b, doc, req.Name), paper: paper, problems: problems}, nil
}

// documentProblems adds the problems of err to list when err is the error
// list of a document (a *limits.Error of kind document), and reports
// whether it was.
func documentProblems(err error, list *[]limits.Problem) bool {
	var le *limits.Error
	if !errors.As(err, &le) || le.Kind != limits.KindDocument {
		return false
	}
	*list = append(*list, le.Problems...)
	return true
}

// resolveMeta applies the defaults of SPEC §2.
func resolveMeta(b binding.Binding, doc *markdown.Document, name string) markdown.Meta {
	m := markdown.Meta{
		Title: b.Title, Subtitle: b.Subtitle, Author: b.Author, Version: b.Version,
		Date: b.Date, Language: b.Language,
	}
	if m.Title == "" {
		m.Title = doc.FirstHeading()
	}
	if m.Title == "" {
		base := filepath.Base(name)
		m.Title = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if m.Title == "" || m.Title == "." {
		m.Title = "Untitled"
	}
	if m.Language == "" {
		m.Language = "en"
	}
	if b.TOC != nil {
		m.TOC = *b.TOC
	} else {
		m.TOC = doc.Headings() >= 4
	}
	if b.NumberSections != nil {
		m.NumberSections = *b.NumberSections
	}
	return m
}

// Prepared is a checked document with its images fetched and validated.
type Prepared struct {
	*Checked
	images *images.Set
}

// Request returns the request p was checked from, its images replaced by
// those fetched and validated: what a remote worker needs to render p
// (cluster.Bundle), with nothing left to fetch.
func (p *Prepared) Request() Request {
	r := p.req
	r.Images = p.images.Assets()
	return r
}

// Fetch fetches and validates the document's images (headers only; nothing
// is decoded). Every bad image is listed in one *limits.Error.
func (p *Pipeline) Fetch(ctx context.Context, c *Checked) (*Prepared, error) {
	imgs := c.doc.Images()
	refs := make([]images.Ref, 0, len(imgs))
	for _, r := range imgs {
		refs = append(refs, images.Ref{URL: r.URL, Line: r.Line})
	}
	src := c.req.Images
	if src == nil {
		src = images.Assets{}
	}
	// Fetching is bounded by the render time limit as a whole, beside
	// each exchange's own timeout: many slow images must not hold the
	// user's count longer than a render may take.
	ctx, cancel := context.WithTimeout(ctx, p.limits.Timeout)
	defer cancel()
	set, err := images.LoadMax(ctx, refs, src, limits.MaxImages*max(1, c.req.Parts))
	if len(c.problems) > 0 {
		// The document has problems: with the images' (if checking them
		// ended in a list; a fetch that failed otherwise adds nothing the
		// author must fix), all of them, by line.
		problems := slices.Clone(c.problems)
		if err != nil {
			documentProblems(err, &problems)
		}
		slices.SortStableFunc(problems, func(a, b limits.Problem) int { return cmp.Compare(a.Line, b.Line) })
		return nil, limits.Invalid(problems...)
	}
	if err != nil {
		return nil, err
	}
	return &Prepared{Checked: c, images: set}, nil
}

// Render converts the images, writes the LaTeX and runs TeX within the
// render time limit. progress may be nil.
func (p *Pipeline) Render(ctx context.Context, pr *Prepared, progress func(Progress)) (*Result, error) {
	start := time.Now()
	report := func(phase string, pages int) {
		if progress != nil {
			progress(Progress{Phase: phase, Pages: pages})
		}
	}
	report(PhasePreparing, 0)
	rctx, cancel := context.WithTimeout(ctx, p.limits.Timeout)
	defer cancel()
	res, warnings, err := p.run(rctx, pr, report)
	if err != nil {
		if ctx.Err() == nil && (errors.Is(rctx.Err(), context.DeadlineExceeded) || errors.Is(err, tex.ErrTimeout)) {
			return nil, limits.Timeout(p.limits.Timeout)
		}
		return nil, err
	}
	report(PhasePackaging, res.Pages)
	if int64(len(res.PDF)) > p.limits.MaxPDFBytes {
		return nil, limits.PDFTooLarge(int64(len(res.PDF)), p.limits.MaxPDFBytes)
	}
	return &Result{
		PDF: res.PDF, Title: pr.meta.Title, Pages: res.Pages, Runs: res.Runs,
		Warnings: warnings, Duration: time.Since(start), CPU: res.CPU, MaxRSS: res.MaxRSS,
	}, nil
}

func (p *Pipeline) run(ctx context.Context, pr *Prepared, report func(string, int)) (*tex.Result, []limits.Problem, error) {
	dir, err := os.MkdirTemp(p.tempDir, "outprint-images-")
	if err != nil {
		return nil, nil, fmt.Errorf("image folder: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }() // best effort: a folder left behind costs only disk
	canon, err := pr.images.Convert(ctx, dir, p.svgs)
	if err != nil {
		return nil, nil, err
	}
	imgs := make(map[string]markdown.Image, len(canon))
	files := make(map[string]string, len(canon))
	for url, c := range canon {
		imgs[url] = markdown.Image{File: c.File, Width: c.Width, Height: c.Height}
		files[c.File] = filepath.Join(dir, c.File)
	}
	emoji, emojiFiles, err := p.emojiImages(ctx, dir, pr.doc.Emoji())
	if err != nil {
		return nil, nil, err
	}
	for k, v := range emoji {
		imgs[k] = v
	}
	for k, v := range emojiFiles {
		files[k] = v
	}
	// The document's images as converted, which its diagrams' PDFs count
	// with toward limits.MaxTotalImageBytes.
	var imageBytes int64
	for _, c := range canon {
		if fi, err := os.Stat(filepath.Join(dir, c.File)); err == nil {
			imageBytes += fi.Size()
		}
	}
	if err := p.drawDiagrams(ctx, dir, pr.doc, pr.req.Parts, imageBytes, imgs, files); err != nil {
		return nil, nil, err
	}
	// The conversion is pure CPU; LaTeXContext stops it within a block
	// when the deadline passes or the client leaves, so the slot is free
	// at once and no CPU is spent after either.
	out, err := pr.doc.LaTeXContext(ctx, pr.meta, imgs)
	if err != nil {
		return nil, nil, err
	}
	m := pr.meta
	scripts := pr.doc.Scripts() | script.Of(m.Title+m.Subtitle+m.Author+m.Version)
	job := tex.Job{
		Preamble: markdown.Preamble(markdown.Profile{Paper: pr.paper, Scripts: scripts, RTL: pr.doc.NeedsBidi(m)}),
		Body:     out.Body,
		Files:    files,
		MaxPages: p.limits.MaxPages,
		Progress: func(pages int) { report(PhaseRendering, pages) },
	}
	report(PhaseRendering, 0)
	res, err := p.engine.Run(ctx, job)
	if err != nil {
		return nil, nil, p.texError(err, out)
	}
	return res, out.Warnings, nil
}

// texError turns the tex package's typed errors into the client's error
// list; anything else stays internal.
func (p *Pipeline) texError(err error, out *markdown.Output) error {
	var ce *tex.CompileError
	switch {
	case errors.As(err, &ce):
		line := 0
		if ce.Line > 0 && ce.Line <= len(out.Lines) {
			line = out.Lines[ce.Line-1]
		}
		return limits.Invalid(limits.Problem{
			Source: limits.SourceDocument, Code: limits.CodeTeX, Line: line,
			Message: "the typesetter refused this part of the document: " + ce.Message,
		})
	case errors.Is(err, tex.ErrPageLimit):
		return limits.TooManyPages(p.limits.MaxPages)
	case errors.Is(err, tex.ErrTimeout):
		return limits.Timeout(p.limits.Timeout)
	case errors.Is(err, tex.ErrResource) && texNesting(err):
		return limits.Resource("the document nests deeper than the typesetter allows (TeX's " + texNestingKind(err) + ")")
	case errors.Is(err, tex.ErrResource):
		return limits.Resource("memory, processes or scratch space")
	case errors.Is(err, tex.ErrPDFTooLarge):
		var size int64
		if pe := (*tex.PDFTooLargeError)(nil); errors.As(err, &pe) {
			size = pe.Size
		}
		return limits.PDFTooLarge(size, p.limits.MaxPDFBytes)
	}
	return fmt.Errorf("tex: %w", err)
}

// Do runs the three stages in a row, for callers without admission between
// them (the command line, job workers).
func (p *Pipeline) Do(ctx context.Context, req Request, progress func(Progress)) (*Result, error) {
	c, err := p.Check(req)
	if err != nil {
		return nil, err
	}
	pr, err := p.Fetch(ctx, c)
	if err != nil {
		return nil, err
	}
	return p.Render(ctx, pr, progress)
}

// texNestingCapacities are the parts of TeX's capacity that run out when a
// document nests too deeply (groups, macros inside macros, lists inside
// lists) rather than when it is too large. Parse refuses the nesting it
// can see (markdown.MaxBlockDepth, MaxInlineDepth); this names the cause
// of what slips through instead of blaming memory or processes.
var texNestingCapacities = []string{"grouping levels", "input stack size", "semantic nest size", "parameter stack size", "save size"}

func texNesting(err error) bool { return texNestingKind(err) != "" }

func texNestingKind(err error) string {
	msg := err.Error()
	for _, c := range texNestingCapacities {
		if strings.Contains(msg, c) {
			return c
		}
	}
	return ""
}

// maxMarkdown is the Markdown bound of a request of parts documents.
func maxMarkdown(parts int) int {
	if parts <= 1 {
		return limits.MaxMarkdownBytes
	}
	return min(parts*limits.MaxMarkdownBytes, limits.MaxCollectionBytes)
}
