// Package limits holds every bound outprint enforces (SPEC §3) and the error
// list that a broken bound, a bad document or a busy service is reported with
// (SPEC §5). It is a leaf: every other package may import it, and it imports
// nothing of outprint.
//
// The values live here, in one place, so that the gateway, the worker and the
// command line enforce the same numbers and so that operators who read the
// code find every bound at once.
package limits

import "time"

// Document and image bounds. They are not configurable: they protect the
// renderer, and raising them would move the cliff rather than remove it.
const (
	// MaxMarkdownBytes bounds the Markdown text; checked before anything is
	// parsed (413 too_large).
	MaxMarkdownBytes = 1 << 20
	// MaxCollectionBytes bounds the Markdown of a collection printed as
	// one document, all its documents together (each is bounded by
	// MaxMarkdownBytes; 413 too_large).
	MaxCollectionBytes = 10 << 20
	// MaxImages bounds how many images one document may reference (422).
	MaxImages = 50
	// MaxImageBytes bounds the bytes of one image as fetched or read (422).
	MaxImageBytes = 10 << 20
	// MaxTotalImageBytes bounds the canonical images of one document
	// together (422).
	MaxTotalImageBytes = 50 << 20
	// MaxImagePixels bounds width×height, read from the image header before
	// any pixel is decoded (422).
	MaxImagePixels = 40_000_000
	// MaxSVGBytes bounds an SVG source (422).
	MaxSVGBytes = 2 << 20
	// SVGTimeout bounds one SVG conversion (413 resource when exceeded).
	SVGTimeout = 20 * time.Second
	// MaxTeXRuns bounds how often XeLaTeX runs for one document.
	MaxTeXRuns = 2
	// RenderMemoryBytes is the address-space rlimit of a render process.
	RenderMemoryBytes = 1 << 30
	// RenderProcesses is the process-count rlimit of a render process.
	// RLIMIT_NPROC counts every process and thread of the user, and in
	// the image the diagrams' warm Chromium runs as the same user with
	// about 100 threads: at 128 TeX could no longer fork xdvipdfmx (or a
	// zygote its child) once a browser was up. The container's pids limit
	// (512 for a worker in compose.yaml) is the bound that holds the
	// whole process; this one only keeps TeX from multiplying.
	RenderProcesses = 512
	// ScratchBytes bounds the files a render may write (file-size rlimit and
	// the scratch folder's total).
	ScratchBytes = 256 << 20
	// MaxOfficeBytes bounds an Office document as uploaded (413
	// too_large).
	MaxOfficeBytes = 50 << 20
	// MaxOfficeUnpackedBytes bounds the uncompressed sizes of a ZIP-based
	// Office document's entries together (DOCX, XLSX, PPTX, ODF), checked
	// before LibreOffice sees the file (413 too_large).
	MaxOfficeUnpackedBytes = 512 << 20
	// MaxOfficeRatio bounds how much one entry of a ZIP-based Office
	// document may expand (uncompressed : compressed); real documents
	// stay far below it, and a zip bomb far above (413 too_large).
	MaxOfficeRatio = 100
)

// Configurable bounds and their defaults. Settings may lower them (pages, PDF
// size) or change them (render time); see Render.
const (
	// DefaultRenderTimeout is the render time limit (OUTPRINT_TIMEOUT).
	DefaultRenderTimeout = 60 * time.Second
	// DefaultMaxPages is the page limit; TeX stops at page DefaultMaxPages+1
	// (OUTPRINT_MAX_PAGES, lower only).
	DefaultMaxPages = 500
	// MaxPDFBytes is the PDF size limit and its ceiling
	// (OUTPRINT_MAX_PDF_BYTES, at most this).
	MaxPDFBytes = 50 << 20
)

// Render holds the bounds of one render that an operator may set. The zero
// value is not useful; start from DefaultRender.
type Render struct {
	// Timeout is the wall-clock bound of one render (default 60 s).
	Timeout time.Duration
	// MaxPages is the page limit (default 500, never above it).
	MaxPages int
	// MaxPDFBytes is the PDF size limit (default 50 MiB, never above it).
	MaxPDFBytes int64
}

// DefaultRender returns the bounds of SPEC §3.
func DefaultRender() Render {
	return Render{Timeout: DefaultRenderTimeout, MaxPages: DefaultMaxPages, MaxPDFBytes: MaxPDFBytes}
}

// WithDefaults returns r with every unset bound at SPEC §3's, and the
// pages and PDF size never above it (they can only be lowered).
func (r Render) WithDefaults() Render {
	d := DefaultRender()
	if r.Timeout <= 0 {
		r.Timeout = d.Timeout
	}
	if r.MaxPages <= 0 || r.MaxPages > d.MaxPages {
		r.MaxPages = d.MaxPages
	}
	if r.MaxPDFBytes <= 0 || r.MaxPDFBytes > d.MaxPDFBytes {
		r.MaxPDFBytes = d.MaxPDFBytes
	}
	return r
}
