package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"rsc.io/pdf"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
)

// Office documents (issue 28): a conversion is one more kind of work under
// the capacity, in SPEC §4's order like a render — the user counted
// (Enter), the document recognised and bounded (office.Detect, cheap, no
// LibreOffice), a slot (Ticket.Convert through Do), the conversion under
// the render timeout, its pages and size checked against the render
// limits. Jobs of kind office convert the same way (Jobs.office).

// Converter converts an Office document to PDF: *office.Pool (warm
// LibreOffice processes) in `serve` and `worker`, a gateway's
// *cluster.Remote, which sends the document to a worker.
type Converter interface {
	Convert(ctx context.Context, doc []byte, f office.Format, o office.Options) ([]byte, error)
}

// ErrOfficeUnavailable answers an Office document on a server without
// LibreOffice, or with office.enabled false: the document is fine, this
// server cannot convert it (422, as a diagram the server cannot draw).
// The operator's startup log and `outprint config check` say which.
var ErrOfficeUnavailable = limits.Invalid(limits.Problem{Field: "file", Source: limits.SourceDocument, Code: limits.CodeInvalid,
	Message: "Office conversion is not available on this server"})

// maxOptionsBytes bounds the options JSON of a conversion.
const maxOptionsBytes = 4 << 10

// CheckOffice is the cheap check of a conversion request within t's check
// budget: the file recognised by its content (office.Detect: 415 for what
// is not an Office document, 422 encrypted or damaged, 413 past a bound)
// and its options read from the metadata JSON (OfficeOptions).
func (t *Ticket) CheckOffice(ctx context.Context, doc []byte, fileName string, metadata []byte) (office.Format, office.Options, error) {
	var f office.Format
	err := t.CheckWith(ctx, "its file", func(context.Context) error {
		var err error
		f, err = office.Detect(doc, fileName)
		return err
	})
	if err != nil {
		return office.Format{}, office.Options{}, err
	}
	o, err := OfficeOptions(metadata)
	return f, o, err
}

// OfficeOptions reads a conversion's options from the metadata JSON a
// client sends with it: {"paper": "a4"|"letter", "landscape": bool}, both
// optional, nothing else (an unknown field is a 422, as a Markdown
// document's metadata is strict). Empty or null metadata is no override.
func OfficeOptions(metadata []byte) (office.Options, error) {
	var o office.Options
	t := bytes.TrimSpace(metadata)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return o, nil
	}
	bad := func(field, msg string) error {
		return limits.Invalid(limits.Problem{Field: field, Source: limits.SourceMetadata, Code: limits.CodeInvalid, Message: msg})
	}
	if len(t) > maxOptionsBytes {
		return o, bad("metadata", fmt.Sprintf("the metadata of an Office document is larger than %d bytes", maxOptionsBytes))
	}
	var m struct {
		Paper     *string `json:"paper"`
		Landscape *bool   `json:"landscape"`
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		msg := "the metadata of an Office document is a JSON object with paper (a4 or letter) and landscape (true or false), both optional"
		if err != nil {
			msg += ": " + err.Error()
		}
		return o, bad("metadata", msg)
	}
	if m.Paper != nil {
		switch *m.Paper {
		case "a4", "letter":
			o.Paper = *m.Paper
		default:
			return o, bad("paper", "paper must be a4 or letter")
		}
	}
	o.Landscape = m.Landscape
	return o, nil
}

// OfficeOptionsJSON is the canonical JSON of o, as an office job stores
// it (empty for no override), so that the same overrides digest alike.
func OfficeOptionsJSON(o office.Options) []byte {
	if o.Paper == "" && o.Landscape == nil {
		return nil
	}
	b, _ := json.Marshal(struct {
		Paper     string `json:"paper,omitempty"`
		Landscape *bool  `json:"landscape,omitempty"`
	}{o.Paper, o.Landscape}) // two plain fields cannot fail to encode
	return b
}

// Converted is a converted document.
type Converted struct {
	PDF   []byte
	Pages int
}

// Convert takes a slot and converts doc (recognised as f) with conv under
// it, within the render timeout, its result bounded by the render
// limits: the rest of SPEC §4 for an Office document whose user Enter
// counted. conv nil is a server without LibreOffice.
func (t *Ticket) Convert(ctx context.Context, conv Converter, doc []byte, f office.Format, o office.Options) (*Converted, error) {
	if conv == nil {
		return nil, ErrOfficeUnavailable
	}
	var (
		res  *Converted
		took time.Duration
	)
	err := t.Do(ctx, func(ctx context.Context) (int64, error) {
		t.c.cfg.Observer.ObserveConversionQueue(t.t.Waited())
		start := time.Now()
		var err error
		res, err = Convert(ctx, conv, doc, f, o, t.c.cfg.Pipeline.Limits())
		took = time.Since(start)
		return 0, err
	})
	t.c.cfg.Observer.ObserveConversion(f.Name, Result(ctx, err), took)
	return res, err
}

// Convert runs one conversion with conv within lim's timeout and checks
// its pages and size against lim: the same for a request, a job and
// `outprint convert`. The caller holds a slot, or is the command line.
func Convert(ctx context.Context, conv Converter, doc []byte, f office.Format, o office.Options, lim limits.Render) (*Converted, error) {
	cctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	out, err := conv.Convert(cctx, doc, f, o)
	if err != nil {
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return nil, limits.ConvertTimeout(lim.Timeout)
		}
		return nil, fmt.Errorf("convert %s: %w", f.Name, err)
	}
	if int64(len(out)) > lim.MaxPDFBytes {
		return nil, limits.PDFTooLarge(int64(len(out)), lim.MaxPDFBytes)
	}
	pages, err := countPages(out)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", f.Name, err)
	}
	if pages > lim.MaxPages {
		return nil, limits.TooManyPages(lim.MaxPages)
	}
	return &Converted{PDF: out, Pages: pages}, nil
}

// countPages counts the pages of a PDF LibreOffice wrote.
func countPages(b []byte) (n int, err error) {
	// The parser panics on some malformed files: a broken PDF is an
	// error here, not a crash.
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("read converted PDF: malformed (%v)", p)
		}
	}()
	doc, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return 0, fmt.Errorf("read converted PDF: %w", err)
	}
	return doc.NumPage(), nil
}
