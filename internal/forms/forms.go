// Package forms reads the fields of a PDF form and fills and flattens it:
// the values drawn where the widgets were, in embedded fonts for every
// script, and no interactive form left.
//
// How the work is split, and why:
//
//   - qpdf parses the uploaded PDF, in a sandboxed process of its own
//     (qpdf.go): outprint never parses a hostile PDF in its own address
//     space. qpdf's JSON lists the fields (fully qualified names, types,
//     flags, values, widgets and pages) and every object's dictionary
//     (without stream data, so a decompression bomb is never inflated).
//   - The values are typeset by XeLaTeX (overlay.go) with the fonts and font
//     fallback of the Markdown renderer: every script the renderer can set
//     (Latin, CJK, Arabic, Hebrew, Devanagari, Thai, …) comes out right,
//     from embedded fonts, whatever font the form names. The overlay has one
//     page per form page that shows a value, the values at the widget
//     rectangles.
//   - qpdf writes the result (flatten.go): the changes as qpdf update JSON
//     (widgets out of /Annots, /AcroForm out of the catalog, kept
//     appearances drawn into the page content) and the overlay pages laid
//     over their form pages. The page content itself is never rewritten.
//
// Measured on the 2-core development VM (bench/forms), a fill costs a few
// milliseconds of qpdf and one warm TeX render of the overlay.
package forms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/programs"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/tex"
)

// Typesetter runs one TeX job: a tex.Runner (cold, the command line) or a
// tex.Pool (warm, the server).
type Typesetter interface {
	Run(ctx context.Context, job tex.Job) (*tex.Result, error)
}

// Config holds the bounds of a fill.
type Config struct {
	// Timeout bounds one fill, TeX included (default
	// limits.DefaultRenderTimeout).
	Timeout time.Duration
	// MaxPages bounds the pages of a form (default limits.DefaultMaxPages).
	MaxPages int
	// MaxPDFBytes bounds the form and the filled PDF (default
	// limits.MaxPDFBytes).
	MaxPDFBytes int64
	// TempDir is where each fill's scratch folder is made (default
	// os.TempDir()); the server passes its data folder's, since /tmp may
	// be read-only in a container.
	TempDir string
}

// WithDefaults returns the config with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = limits.DefaultRenderTimeout
	}
	if c.MaxPages <= 0 {
		c.MaxPages = limits.DefaultMaxPages
	}
	if c.MaxPDFBytes <= 0 {
		c.MaxPDFBytes = limits.MaxPDFBytes
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	return c
}

// Filler reads and fills forms. It is safe for concurrent use.
type Filler struct {
	cfg Config
	tex Typesetter
	// qpdf and prlimit are the programs' paths, found by New.
	qpdf, prlimit string
}

// New returns a Filler that typesets with ts, or an error when qpdf or
// prlimit is not installed.
func New(cfg Config, ts Typesetter) (*Filler, error) {
	if ts == nil {
		return nil, errors.New("forms: no typesetter")
	}
	qpdf, err := programs.Find(programs.QPDF)
	if err != nil {
		return nil, fmt.Errorf("forms: %w", err)
	}
	prlimit, err := programs.Find(programs.PRLimit)
	if err != nil {
		return nil, fmt.Errorf("forms: %w", err)
	}
	return &Filler{cfg: cfg.WithDefaults(), tex: ts, qpdf: qpdf, prlimit: prlimit}, nil
}

// Phases reported to a fill's progress function.
const (
	PhaseReading     = "reading"
	PhaseTypesetting = "typesetting"
	PhaseFlattening  = "flattening"
)

// Result is a filled and flattened form.
type Result struct {
	PDF []byte
	// Pages is the page count (the form's).
	Pages int
	// Fields is how many fields the form had; Filled how many the values
	// named.
	Fields, Filled int
	// TeX is the overlay's render, nil when nothing needed typesetting.
	TeX *tex.Result
	// Warnings report the fields the form lists but that could not be
	// read (CodeDamagedField), left out of the result.
	Warnings []limits.Problem
}

func (f *Filler) sandbox(timeout time.Duration, out int) qpdfSandbox {
	return qpdfSandbox{
		qpdf:    f.qpdf,
		prlimit: f.prlimit,
		memory:  limits.RenderMemoryBytes,
		cpu:     timeout,
		fsize:   f.cfg.MaxPDFBytes + 1<<20,
		maxOut:  out,
		timeout: timeout,
	}
}

// read writes pdf into dir and has qpdf read it.
func (f *Filler) read(ctx context.Context, dir string, pdf []byte, deadline time.Duration) (*form, error) {
	if len(pdf) == 0 {
		return nil, invalidPDF("it is empty")
	}
	if int64(len(pdf)) > f.cfg.MaxPDFBytes {
		return nil, tooLarge(fmt.Sprintf("the PDF is too large: %d bytes, at most %d", len(pdf), f.cfg.MaxPDFBytes))
	}
	if err := os.WriteFile(filepath.Join(dir, "in.pdf"), pdf, 0o600); err != nil {
		return nil, fmt.Errorf("forms: write input: %w", err)
	}
	// The passes of read.go: the objects counted, then read and their
	// fields counted, then the pages and fields listed.
	objs, err := f.readObjectTable(ctx, dir, deadline)
	if err != nil {
		return nil, err
	}
	d, err := f.describe(ctx, dir, deadline, objs)
	if err != nil {
		return nil, err
	}
	fm, err := buildForm(d)
	if err != nil {
		return nil, err
	}
	if len(fm.fields) > MaxFields {
		return nil, tooLarge(fmt.Sprintf("the form has %d fields, at most %d", len(fm.fields), MaxFields))
	}
	if fm.hasXFA && len(fm.fields) == 0 {
		return nil, invalidPDF("it is an XFA form without AcroForm fields, which cannot be filled as a PDF form")
	}
	f.readValueStreams(ctx, dir, fm, deadline)
	return fm, nil
}

// tooLarge is the client's error for a PDF past a size bound.
func tooLarge(msg string) error {
	return &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
		Field: "pdf", Source: limits.SourceDocument, Code: limits.CodeTooLarge, Message: msg,
	}}}
}

// readObjectTable is the first two passes of read.go: the objects
// counted, then read as they come, within the bounds.
func (f *Filler) readObjectTable(ctx context.Context, dir string, deadline time.Duration) (*qobjects, error) {
	var le *objectLimitError
	if err := f.countObjects(ctx, dir, deadline); err != nil {
		if errors.As(err, &le) {
			return nil, le.clientError()
		}
		return nil, err
	}
	var objs *qobjects
	res, err := f.sandbox(deadline, 0).runStream(ctx, dir, func(r io.Reader) error {
		var err error
		objs, err = readObjects(r)
		return err
	}, "--json=2", "--json-stream-data=none", "--json-key=qpdf", "in.pdf")
	if errors.As(err, &le) {
		return nil, le.clientError()
	}
	if err != nil && !errors.Is(err, errStreamRead) {
		return nil, err // internal, or ctx ended
	}
	if perr, failed := res.problem("the PDF", deadline); failed {
		return nil, perr
	}
	if err != nil {
		// qpdf ended well and its JSON did not read: not the client's
		// fault, but nothing the client can fill either.
		return nil, invalidPDF("qpdf could not describe it")
	}
	return objs, nil
}

// describe is the last pass of read.go: the pages and fields of a form
// within the bounds, listed by qpdf and joined with the objects read.
func (f *Filler) describe(ctx context.Context, dir string, deadline time.Duration, objs *qobjects) (*qdoc, error) {
	res, err := f.sandbox(deadline, maxListJSONBytes).run(ctx, dir,
		"--json=2", "--json-stream-data=none",
		"--json-key=pages", "--json-key=acroform", "--json-key=encrypt",
		"in.pdf")
	if err != nil {
		return nil, err
	}
	if perr, failed := res.problem("the PDF", deadline); failed {
		return nil, perr
	}
	d, err := parseQDoc(res.stdout, objs)
	if err != nil {
		return nil, invalidPDF("qpdf could not describe it")
	}
	if len(d.Pages) == 0 {
		return nil, invalidPDF("it has no pages")
	}
	if len(d.Pages) > f.cfg.MaxPages {
		return nil, limits.TooManyPages(f.cfg.MaxPages)
	}
	return d, nil
}

// maxValueStreams bounds how many stream values one form gets read.
const maxValueStreams = 16

// readValueStreams reads the text values that a form keeps in streams
// (qpdf's JSON lists no stream data), each with its own bounded qpdf run.
// A value that cannot be read stays empty: it is the form's old value, not
// the user's.
func (f *Filler) readValueStreams(ctx context.Context, dir string, fm *form, deadline time.Duration) {
	n := 0
	for name, ref := range fm.valueStreams {
		fl := fm.byName[name]
		if fl == nil || fl.Type != "text" || n >= maxValueStreams {
			continue
		}
		n++
		num, gen, _ := strings.Cut(strings.TrimSuffix(ref, " R"), " ")
		res, err := f.sandbox(deadline, MaxValueBytes).run(ctx, dir, "--show-object="+num+","+gen, "--filtered-stream-data", "in.pdf")
		// A value over MaxValueBytes is kept cut at that size: it is the
		// form's own text, shown as far as a value may go.
		if err != nil || (res.exit != 0 && !res.overflow) {
			continue
		}
		fl.Value = strings.ToValidUTF8(decodePDFText(res.stdout), "")
	}
}

// Listing is what reading a form finds.
type Listing struct {
	// Fields are the fillable fields (push buttons are not fillable and
	// not listed).
	Fields []Field
	// Warnings report the fields the form lists but that cannot be read
	// (CodeDamagedField): they are not in Fields, and a fill leaves them
	// out.
	Warnings []limits.Problem
}

// Fields lists the fillable fields of a form (push buttons are not
// fillable and not listed).
func (f *Filler) Fields(ctx context.Context, pdf []byte) ([]Field, error) {
	l, err := f.List(ctx, pdf)
	if err != nil {
		return nil, err
	}
	return l.Fields, nil
}

// List reads a form: its fillable fields and the damaged ones.
func (f *Filler) List(ctx context.Context, pdf []byte) (*Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp(f.cfg.TempDir, "outprint-form-")
	if err != nil {
		return nil, fmt.Errorf("forms: %w", err)
	}
	defer removeScratch(dir)
	fm, err := f.read(ctx, dir, pdf, f.cfg.Timeout)
	if err != nil {
		return nil, f.ctxErr(ctx, err)
	}
	out := make([]Field, len(fm.fields))
	for i, fl := range fm.fields {
		out[i] = *fl
	}
	return &Listing{Fields: out, Warnings: fm.damaged}, nil
}

// Check reads the form and checks the values without filling it: what a
// job's acceptance runs before its 202, so that an unusable form or bad
// values are answered at once instead of by a failed job.
func (f *Filler) Check(ctx context.Context, pdf, values []byte) error {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	vals, err := parseValues(values)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(f.cfg.TempDir, "outprint-form-")
	if err != nil {
		return fmt.Errorf("forms: %w", err)
	}
	defer removeScratch(dir)
	fm, err := f.read(ctx, dir, pdf, f.cfg.Timeout)
	if err != nil {
		return f.ctxErr(ctx, err)
	}
	_, err = resolveValues(fm, vals)
	return err
}

// Fill fills the form pdf with values (a JSON object of field names) and
// flattens it. progress, when set, is called with each phase as it starts.
// Problems the client must fix are a *limits.Error listing every one.
func (f *Filler) Fill(ctx context.Context, pdf, values []byte, progress func(phase string)) (*Result, error) {
	if progress == nil {
		progress = func(string) {}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	vals, err := parseValues(values)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(f.cfg.TempDir, "outprint-form-")
	if err != nil {
		return nil, fmt.Errorf("forms: %w", err)
	}
	defer removeScratch(dir)
	progress(PhaseReading)
	fm, err := f.read(ctx, dir, pdf, f.cfg.Timeout)
	if err != nil {
		return nil, f.ctxErr(ctx, err)
	}
	resolved, err := resolveValues(fm, vals)
	if err != nil {
		return nil, err
	}
	pl := makePlan(fm, resolved)
	res := &Result{Pages: len(fm.pages), Fields: len(fm.fields), Filled: len(vals), Warnings: fm.damaged}

	var tail []string
	if len(pl.overlay) > 0 {
		progress(PhaseTypesetting)
		if res.TeX, tail, err = f.typeset(ctx, dir, fm, pl); err != nil {
			return nil, err
		}
	}
	progress(PhaseFlattening)
	if res.PDF, err = f.flatten(ctx, dir, fm, pl, tail, start); err != nil {
		return nil, err
	}
	return res, nil
}

// typeset renders the plan's overlay pages into dir/overlay.pdf; tail is
// the arguments that lay them over the form's pages.
func (f *Filler) typeset(ctx context.Context, dir string, fm *form, pl *plan) (tr *tex.Result, tail []string, err error) {
	var sc script.Set
	for _, t := range pl.texts {
		sc |= script.Of(t)
	}
	tr, err = f.tex.Run(ctx, tex.Job{
		Preamble: overlayPreamble(sc),
		Body:     overlayBody(fm, pl.overlay),
		MaxPages: len(pl.overlay),
	})
	if err != nil {
		return nil, nil, f.texErr(ctx, err)
	}
	if tr.Pages != len(pl.overlay) {
		return nil, nil, fmt.Errorf("forms: overlay has %d pages, want %d", tr.Pages, len(pl.overlay))
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.pdf"), tr.PDF, 0o600); err != nil {
		return nil, nil, fmt.Errorf("forms: write overlay: %w", err)
	}
	to := make([]string, len(pl.overlay))
	for i, op := range pl.overlay {
		to[i] = strconv.Itoa(op.index + 1)
	}
	tail = []string{"--overlay", "overlay.pdf", "--to=" + strings.Join(to, ","), "--from=1-" + strconv.Itoa(len(pl.overlay)), "--"}
	return tr, tail, nil
}

// flatten has qpdf write the filled form: the form's update applied, the
// overlay (tail, from typeset) laid over its pages, in the time left of
// the fill that began at start.
func (f *Filler) flatten(ctx context.Context, dir string, fm *form, pl *plan, tail []string, start time.Time) ([]byte, error) {
	upd, err := updateJSON(fm, pl)
	if err != nil {
		return nil, fmt.Errorf("forms: update json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "update.json"), upd, 0o600); err != nil {
		return nil, fmt.Errorf("forms: write update: %w", err)
	}
	args := []string{"--decrypt", "--stream-data=preserve", "--update-from-json=update.json", "in.pdf"}
	args = append(args, tail...)
	args = append(args, "out.pdf")
	left := max(time.Until(start.Add(f.cfg.Timeout)), time.Second)
	qr, err := f.sandbox(left, 64<<10).run(ctx, dir, args...)
	if err != nil {
		return nil, f.ctxErr(ctx, err)
	}
	if perr, failed := qr.problem("the filled form", left); failed {
		var le *limits.Error
		if errors.As(perr, &le) && le.Kind == limits.KindDocument {
			// The input read fine a moment ago: a write failure is ours.
			return nil, fmt.Errorf("forms: qpdf write failed (exit %d): %s", qr.exit, firstLine(qr.stderr))
		}
		return nil, perr
	}
	out, err := os.ReadFile(filepath.Join(dir, "out.pdf"))
	if err != nil {
		return nil, fmt.Errorf("forms: read result: %w", err)
	}
	if int64(len(out)) > f.cfg.MaxPDFBytes {
		return nil, limits.PDFTooLarge(int64(len(out)), f.cfg.MaxPDFBytes)
	}
	return out, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// ctxErr turns the end of the fill's context into the time-limit answer;
// other errors pass through.
func (f *Filler) ctxErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return limits.Timeout(f.cfg.Timeout)
	}
	return err
}

// texErr maps a failed overlay render. The overlay is ours, so a TeX
// refusal is an internal error; limits are the client's answer.
func (f *Filler) texErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, tex.ErrTimeout) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return limits.Timeout(f.cfg.Timeout)
	case errors.Is(err, tex.ErrCanceled):
		return fmt.Errorf("forms: %w", context.Canceled)
	case errors.Is(err, tex.ErrResource):
		return limits.Resource("typesetting the values")
	case errors.Is(err, tex.ErrPDFTooLarge):
		return limits.PDFTooLarge(0, f.cfg.MaxPDFBytes)
	}
	return fmt.Errorf("forms: typeset overlay: %w", err)
}

// removeScratch removes a read's or fill's scratch folder. Its error is
// dropped: a folder left behind in the temporary folder costs disk, not
// the answer, which is complete by then.
func removeScratch(dir string) { _ = os.RemoveAll(dir) }
