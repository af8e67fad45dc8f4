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
package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/binding"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
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
}

// New returns a pipeline for cfg.
func New(cfg Config) *Pipeline {
	l := cfg.Limits
	d := limits.DefaultRender()
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxPages <= 0 || l.MaxPages > d.MaxPages {
		l.MaxPages = d.MaxPages
	}
	if l.MaxPDFBytes <= 0 || l.MaxPDFBytes > d.MaxPDFBytes {
		l.MaxPDFBytes = d.MaxPDFBytes
	}
	p := &Pipeline{engine: cfg.Engine, limits: l, tempDir: cfg.TempDir}
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
	// paper is not part of markdown.Meta because it selects the preamble
	// (the warm pool's profile), not the body.
	paper string
}

// Title is the title the PDF will carry.
func (c *Checked) Title() string { return c.meta.Title }

// Check runs the cheap checks: Markdown size, Binding and the math
// allowlist. It reads nothing and holds nothing.
func (p *Pipeline) Check(req Request) (*Checked, error) {
	if max := maxMarkdown(req.Parts); len(req.Markdown) > max {
		return nil, limits.TooLargeThan(int64(len(req.Markdown)), int64(max))
	}
	parse := binding.Parse
	if req.Outline != nil {
		// Outline's text has no front matter: a leading --- is a rule.
		parse = binding.ParseMetadata
	}
	bd, err := parse(req.Markdown, req.Metadata)
	if err != nil {
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
	doc, err := markdown.Parse(bd.Body, opts)
	if err != nil {
		return nil, err
	}
	paper := b.Paper
	if paper == "" {
		paper = "a4"
	}
	return &Checked{req: req, doc: doc, meta: resolveMeta(b, doc, req.Name), paper: paper}, nil
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
	defer os.RemoveAll(dir)
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
	// The conversion is pure CPU; LaTeXContext stops it within a block
	// when the deadline passes or the client leaves, so the slot is free
	// at once and no CPU is spent after either.
	out, err := pr.doc.LaTeXContext(ctx, pr.meta, imgs)
	if err != nil {
		return nil, nil, err
	}
	m := pr.meta
	scripts := pr.doc.Scripts() | markdown.ScriptsOf(m.Title+m.Subtitle+m.Author+m.Version)
	job := tex.Job{
		Preamble: markdown.Preamble(markdown.Profile{Paper: pr.paper, Scripts: scripts}),
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
