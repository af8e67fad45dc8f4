// Package images resolves, validates and converts the images a document
// references (SPEC §3).
//
// It works in two steps, split along the gateway/worker line:
//
//	Load     gateway side, cheap: fetch every distinct URL once, recognise the
//	         format by its magic bytes, read the dimensions from the header
//	         (nothing is decoded) and enforce the image limits. Every bad
//	         image becomes one problem of a single 422 *limits.Error.
//	Convert  worker side: write one canonical file per image into the
//	         render's folder. PNG and JPEG are checked by a full decode and
//	         copied as they are; GIF (first frame) and WebP become PNG; SVG
//	         becomes PDF through rsvg-convert in a sandboxed process.
//
// An image is hostile input. The rules that keep it harmless are: a URL is
// resolved by a Source that refuses to leave its root (Dir), to invent files
// (Assets) or to reach the network without the SSRF-safe fetcher (Chain);
// the format is never taken from the name; no pixel is decoded before the
// header has passed the pixel limit; and an SVG is converted without a base
// folder, environment or network, under rlimits and a timeout (see svgToPDF).
package images

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/outprint/outprint/internal/limits"
)

// Source opens an image by the URL the Markdown uses. It returns at most
// limits.MaxImageBytes+1 bytes, so that the caller can tell "too large"
// without the source buffering an unbounded body.
//
// A Source reports an image that cannot be had with an error wrapping
// ErrNotFound, ErrNotAllowed or ErrUnavailable; those become image problems
// for the client. Any other error (a bug, a cancelled ctx, a full disk) is
// internal and fails the whole load.
type Source interface {
	Open(ctx context.Context, url string) ([]byte, error)
}

// Sentinels that Source implementations wrap. Their text is never shown to
// a client: Load writes its own message for each, so that an address, a
// path on the server or a remote error text cannot leak into a response.
var (
	// ErrNotFound: there is no image at that URL (no such file or asset, or
	// the remote answered 404).
	ErrNotFound = errors.New("image not found")
	// ErrNotAllowed: the URL points somewhere a document may not read: outside
	// the document's folder, a scheme other than http(s), a remote host
	// without a remote source or not on the allowed list, an internal address.
	ErrNotAllowed = errors.New("image not allowed")
	// ErrUnavailable: the image exists, or may, but could not be fetched this
	// time (the remote failed, timed out, answered with an error).
	ErrUnavailable = errors.New("image unavailable")
)

// Ref is one image reference of the Markdown: the URL as written and the
// 1-based line it is on.
type Ref struct {
	URL  string
	Line int
}

// Canonical is one converted image as written by Convert.
type Canonical struct {
	// File is the base name inside the folder given to Convert, made of
	// [a-z0-9.-] only (e.g. "img-01.png"), so it is safe to emit into TeX.
	File string
	// Width and Height are the natural size: pixels for PNG and JPEG, points
	// for PDF (converted SVG).
	Width, Height float64
}

// Set is the validated images of one document, in the order of their first
// reference. It holds the fetched bytes; Convert may be called more than
// once (each call writes into its own folder).
type Set struct {
	images []*entry
	bytes  int64
}

// entry is one distinct URL after Load.
type entry struct {
	url    string
	line   int
	format format
	data   []byte
	width  int // pixels; for SVG CSS pixels, 0 when the header names none
	height int
}

// Bytes is the total size of the canonical images as known at Load: exact
// for PNG and JPEG (copied as they are) and the source size for GIF, WebP
// and SVG, whose converted size only Convert learns (and checks again
// against limits.MaxTotalImageBytes).
func (s *Set) Bytes() int64 { return s.bytes }

// Len is the number of distinct images.
func (s *Set) Len() int { return len(s.images) }

// Assets returns the fetched bytes keyed by URL, so that a gateway can hand
// the images it fetched to a remote worker, which loads them again from
// Assets (Load is cheap and the worker should not trust the gateway's
// checks). The slices are shared; do not modify them.
func (s *Set) Assets() Assets {
	a := make(Assets, len(s.images))
	for _, im := range s.images {
		a[im.url] = im.data
	}
	return a
}

// fetchers bounds how many images Load fetches at once: enough to hide the
// latency of remote hosts, few enough not to hammer one host or to hold
// 50 images × 10 MiB of half-read bodies at the same time.
const fetchers = 4

// Load fetches every distinct URL of refs once through src and validates it
// (format from magic bytes, size, pixels from the header, SVG rules). Every
// image that cannot be had or used is one problem of a single 422
// *limits.Error; a failure that is not the document's fault (a bug, ctx
// cancelled) is returned as a plain wrapped error instead.
func Load(ctx context.Context, refs []Ref, src Source) (*Set, error) {
	return LoadMax(ctx, refs, src, limits.MaxImages)
}

// LoadMax is Load with another bound on the number of distinct images: a
// collection printed as one document is bounded per document by its
// caller, and as a whole by maxImages.
func LoadMax(ctx context.Context, refs []Ref, src Source, maxImages int) (*Set, error) {
	distinct := distinctRefs(refs)
	if len(distinct) > maxImages {
		// Fetching 51 or 5000 images only to refuse the document would let
		// one request make the gateway do unbounded work, so the count is
		// refused before any fetch, at the first image over the limit.
		return nil, limits.Invalid(limits.Problem{
			Field: "images", Source: limits.SourceImage, Code: limits.CodeImage,
			Line:    distinct[maxImages].line,
			Message: fmt.Sprintf("the document references %d images, at most %d", len(distinct), maxImages),
		})
	}
	if src == nil {
		src = Assets{}
	}
	problems, err := fetchAll(ctx, src, distinct)
	if err != nil {
		return nil, err
	}
	return newSet(distinct, problems)
}

// distinctRefs returns an entry for each distinct URL of refs, at the
// line of its first reference.
func distinctRefs(refs []Ref) []*entry {
	distinct := make([]*entry, 0, len(refs))
	seen := make(map[string]bool, len(refs))
	for _, r := range refs {
		if seen[r.URL] {
			continue
		}
		seen[r.URL] = true
		distinct = append(distinct, &entry{url: r.URL, line: r.Line})
	}
	return distinct
}

// fetchAll fetches and checks the images of distinct and returns the
// problem of each ("" when fine), or the first failure that is not the
// document's fault.
func fetchAll(ctx context.Context, src Source, distinct []*entry) ([]string, error) {
	// Each image is fetched and checked by one of a few goroutines. They are
	// owned by fetchAll, which waits for all of them before it returns; a
	// goroutine ends when the queue is drained or the load's ctx is
	// cancelled (after the first internal failure).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	problems := make([]string, len(distinct)) // per image, "" when fine
	internal := make([]error, len(distinct))
	next := make(chan int)
	// The running total of the bytes fetched: once it passes
	// MaxTotalImageBytes the document is refused whatever the rest holds,
	// so no further image is fetched (and held in memory). The problem
	// itself is listed by newSet, from the images that were fetched.
	var total atomic.Int64
	over := make(chan struct{})
	var overOnce sync.Once
	var wg sync.WaitGroup
	for range min(fetchers, len(distinct)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// The feeder may still hand out an image after the
				// total passed (a select picks among ready cases at
				// random): it is not fetched.
				select {
				case <-over:
					continue
				default:
				}
				problems[i], internal[i] = loadOne(ctx, src, distinct[i])
				if internal[i] != nil {
					cancel()
				}
				if total.Add(int64(len(distinct[i].data))) > limits.MaxTotalImageBytes {
					overOnce.Do(func() { close(over) })
				}
			}
		}()
	}
feed:
	for i := range distinct {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		case <-over:
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, err := range internal {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load images: %w", err)
	}
	return problems, nil
}

// newSet returns the set of the fetched images, or the 422 error that
// lists their problems and, at the image that passes it, the total size.
func newSet(distinct []*entry, problems []string) (*Set, error) {
	set := &Set{images: distinct}
	var list []limits.Problem
	for i, im := range distinct {
		if problems[i] != "" {
			list = append(list, problemAt(im, problems[i]))
			continue
		}
		set.bytes += int64(len(im.data))
		if set.bytes > limits.MaxTotalImageBytes && (set.bytes-int64(len(im.data))) <= limits.MaxTotalImageBytes {
			list = append(list, limits.Problem{
				Field: "images", Source: limits.SourceImage, Code: limits.CodeImage, Line: im.line,
				Message: fmt.Sprintf("%s: the images together exceed %d bytes (%d with this one); remove or shrink images",
					display(im.url), limits.MaxTotalImageBytes, set.bytes),
			})
		}
	}
	if err := limits.Invalid(list...); err != nil {
		return nil, err
	}
	return set, nil
}

// loadOne fetches and checks one image. It returns the client message of
// its problem ("" when the image is fine) or an internal error.
func loadOne(ctx context.Context, src Source, im *entry) (problem string, internal error) {
	data, err := src.Open(ctx, im.url)
	if err != nil {
		if msg := sourceProblem(im.url, err); msg != "" {
			return msg, nil
		}
		return "", fmt.Errorf("open image %q: %w", display(im.url), err)
	}
	if len(data) > limits.MaxImageBytes {
		return fmt.Sprintf("larger than %d bytes (10 MiB)", limits.MaxImageBytes), nil
	}
	im.data = data
	info, msg := inspect(data)
	if msg != "" {
		return msg, nil
	}
	im.format, im.width, im.height = info.format, info.width, info.height
	return "", nil
}

// sourceProblem is the client message for a Source error, or "" when the
// error is internal. The message is chosen here, from the sentinel and the
// shape of the URL, never from the error text.
func sourceProblem(url string, err error) string {
	switch {
	case errors.Is(err, ErrNotFound):
		return "not found"
	case errors.Is(err, ErrNotAllowed):
		switch kind, scheme := classify(url); kind {
		case urlRemote:
			return "not allowed: remote images are not fetched from this address"
		case urlOther:
			if scheme == "" {
				return "not allowed: a URL without scheme names no host images may be fetched from"
			}
			return fmt.Sprintf("not allowed: %s: URLs are not fetched", scheme)
		default:
			return "not allowed: images must be files inside the document's folder"
		}
	case errors.Is(err, ErrUnavailable):
		return "could not be fetched; try again later"
	}
	return ""
}

// problemAt is the problem of one image: Field is its URL, the message
// starts with it, as in "bomb.png: 10000000000 pixels, at most 40000000".
func problemAt(im *entry, msg string) limits.Problem {
	name, field := display(im.url), display(im.url)
	if im.url == "" {
		name, field = "an image without URL", "images"
	}
	return limits.Problem{
		Field: field, Source: limits.SourceImage, Code: limits.CodeImage, Line: im.line,
		Message: name + ": " + msg,
	}
}

// display shortens a URL for a message: a data: URL or a very long path
// would otherwise flood the error list.
func display(url string) string {
	const max = 120
	if len(url) <= max {
		return url
	}
	cut := max
	for cut > 0 && url[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return url[:cut] + "…"
}
