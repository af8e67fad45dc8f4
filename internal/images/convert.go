package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"

	"golang.org/x/image/webp"

	"github.com/outprint/outprint/internal/limits"
)

// Convert writes one canonical file per image into dir and returns them
// keyed by Ref.URL: PNG and JPEG are decoded in full (so a truncated or
// damaged file is an image problem here, never a TeX or xdvipdfmx crash
// later) and copied as they are; the first frame of a GIF and a WebP become
// PNG; an SVG becomes a one-page PDF through rsvg-convert in a sandbox (see
// sandbox).
//
// Broken images are listed in one 422 *limits.Error, as Load does; an SVG
// that needs more than limits.SVGTimeout or the memory bound is a 413
// resource error; a cancelled ctx or a failure of the machine is a plain
// wrapped error. Decoding a raster image takes up to 4 bytes per pixel of
// memory (8 for 16-bit PNG), bounded by the pixel limit Load enforced.
//
// cache, when not nil, holds SVGs converted before (see SVGCache).
func (s *Set) Convert(ctx context.Context, dir string, cache *SVGCache) (map[string]Canonical, error) {
	return s.convert(ctx, dir, defaultSandbox(), cache)
}

func (s *Set) convert(ctx context.Context, dir string, sb sandbox, cache *SVGCache) (map[string]Canonical, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("convert images: %w", err)
	}
	defer func() { _ = root.Close() }()
	out := make(map[string]Canonical, len(s.images))
	var (
		problems []limits.Problem
		total    int64
	)
	for i, im := range s.images {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("convert images: %w", err)
		}
		data, c, err := canonical(ctx, dir, im, sb, cache)
		var se *convError
		switch {
		case errors.As(err, &se) && se.resource:
			return nil, limits.Resource(display(im.url) + ": " + se.msg)
		case errors.As(err, &se):
			problems = append(problems, problemAt(im, se.msg))
			continue
		case err != nil:
			return nil, fmt.Errorf("convert image %q: %w", display(im.url), err)
		}
		total += int64(len(data))
		if total > limits.MaxTotalImageBytes && total-int64(len(data)) <= limits.MaxTotalImageBytes {
			problems = append(problems, limits.Problem{
				Field: "images", Source: limits.SourceImage, Code: limits.CodeImage, Line: im.line,
				Message: fmt.Sprintf("%s: the converted images together exceed %d bytes (%d with this one); remove or shrink images",
					display(im.url), limits.MaxTotalImageBytes, total),
			})
		}
		if len(problems) > 0 {
			continue // the render fails anyway; do not write more
		}
		c.File = fmt.Sprintf("img-%02d.%s", i+1, c.File)
		if err := root.WriteFile(c.File, data, 0o644); err != nil {
			return nil, fmt.Errorf("convert image %q: %w", display(im.url), err)
		}
		out[im.url] = c
	}
	if err := limits.Invalid(problems...); err != nil {
		return nil, err
	}
	return out, nil
}

// canonical converts one image. It returns the canonical bytes and their
// Canonical with File set to the extension only; a problem of the image is
// an *convError (whatever the format, for one code path), anything else is
// internal. scratch is a folder for the converter's working folder.
func canonical(ctx context.Context, scratch string, im *entry, sb sandbox, cache *SVGCache) ([]byte, Canonical, error) {
	switch im.format {
	case formatPNG, formatJPEG, formatGIF, formatWebP:
		return canonicalRaster(im)
	case formatSVG:
		svg, msg := prepareSVG(im.data)
		if msg != "" {
			return nil, Canonical{}, &convError{msg: msg}
		}
		key := sha256.Sum256(svg)
		if pdf, w, h, ok := cache.get(key); ok {
			return pdf, Canonical{File: "pdf", Width: w, Height: h}, nil
		}
		pdf, err := sb.svgToPDF(ctx, scratch, svg)
		if err != nil {
			return nil, Canonical{}, err
		}
		w, h, err := PageSize(pdf)
		if err != nil {
			return nil, Canonical{}, fmt.Errorf("svg to pdf: %w", err)
		}
		cache.put(key, pdf, w, h)
		return pdf, Canonical{File: "pdf", Width: w, Height: h}, nil
	}
	return nil, Canonical{}, &convError{msg: "not a supported image"}
}

// canonicalRaster decodes a raster image: PNG and JPEG stay as they
// are, GIF (its first frame) and WebP become PNG. An image that cannot
// be decoded is a *convError.
func canonicalRaster(im *entry) ([]byte, Canonical, error) {
	bad := func(format string, args ...any) ([]byte, Canonical, error) {
		return nil, Canonical{}, &convError{msg: fmt.Sprintf(format, args...)}
	}
	// The pixel limit is checked again: a Set is only made by Load, but a
	// decode is where the limit protects memory, so it is checked where it
	// is spent.
	w, h, msg := rasterHeader(im.format, im.data)
	if msg == "" {
		msg = pixelProblem(int64(w), int64(h))
	}
	if msg != "" {
		return bad("%s", msg)
	}
	r := bytes.NewReader(im.data)
	var m image.Image
	var err error
	switch im.format {
	case formatPNG:
		if m, err = png.Decode(r); err != nil {
			return bad("truncated or damaged PNG (%v)", err)
		}
		b := m.Bounds()
		return im.data, Canonical{File: "png", Width: float64(b.Dx()), Height: float64(b.Dy())}, nil
	case formatJPEG:
		if m, err = jpeg.Decode(r); err != nil {
			return bad("truncated, damaged or unsupported JPEG (%v)", err)
		}
		b := m.Bounds()
		return im.data, Canonical{File: "jpg", Width: float64(b.Dx()), Height: float64(b.Dy())}, nil
	case formatGIF:
		if m, err = firstFrame(im.data); err != nil {
			return bad("truncated or damaged GIF (%v)", err)
		}
	default:
		if m, err = webp.Decode(r); err != nil {
			return bad("damaged or unsupported WebP (%v)", err)
		}
	}
	return encodePNG(m)
}

// firstFrame decodes the first frame of a GIF and places it on a canvas of
// the GIF's logical screen size, as a viewer shows it. gif.Decode stops
// after the first frame, so an animation costs no more than its first
// picture.
func firstFrame(data []byte) (image.Image, error) {
	cfg, err := gif.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	m, err := gif.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	screen := image.Rect(0, 0, cfg.Width, cfg.Height)
	if m.Bounds() == screen {
		return m, nil // a palette image, encoded as a palette PNG
	}
	canvas := image.NewNRGBA(screen)
	draw.Draw(canvas, m.Bounds(), m, m.Bounds().Min, draw.Src)
	return canvas, nil
}

// encodePNG writes m as a PNG.
func encodePNG(m image.Image) ([]byte, Canonical, error) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		return nil, Canonical{}, fmt.Errorf("encode png: %w", err)
	}
	b := m.Bounds()
	return buf.Bytes(), Canonical{File: "png", Width: float64(b.Dx()), Height: float64(b.Dy())}, nil
}
