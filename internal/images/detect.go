package images

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/webp"

	"github.com/outprint/outprint/internal/limits"
)

// format is an image format recognised by its magic bytes.
type format int

const (
	formatUnknown format = iota
	formatPNG
	formatJPEG
	formatGIF
	formatWebP
	formatSVG
)

func (f format) String() string {
	switch f {
	case formatPNG:
		return "PNG"
	case formatJPEG:
		return "JPEG"
	case formatGIF:
		return "GIF"
	case formatWebP:
		return "WebP"
	case formatSVG:
		return "SVG"
	}
	return "unknown"
}

// sniff recognises the format by the first bytes, never by a name or a
// Content-Type, which a document controls.
func sniff(data []byte) format {
	switch {
	case bytes.HasPrefix(data, pngMagic):
		return formatPNG
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF}):
		return formatJPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return formatGIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return formatWebP
	case looksLikeXML(data):
		// Whether the root element is <svg> is for checkSVG to say: it
		// parses the document anyway.
		return formatSVG
	}
	return formatUnknown
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// looksLikeXML reports whether data starts, after an optional UTF-8 byte
// order mark and white space, with "<" followed by "?xml", "!" (a comment
// or DOCTYPE) or "svg".
func looksLikeXML(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	data = bytes.TrimLeft(data, " \t\r\n")
	return bytes.HasPrefix(data, []byte("<?xml")) || bytes.HasPrefix(data, []byte("<!")) ||
		bytes.HasPrefix(data, []byte("<svg"))
}

// info is what the header says about an image.
type info struct {
	format        format
	width, height int // pixels (CSS pixels for SVG); 0 when an SVG names none
}

// inspect checks an image as Load does, cheaply: format, header dimensions
// against the pixel limit, the structure of the file (a PNG or JPEG cut
// short is caught here, before a worker spends time on it) and, for SVG,
// the rules of checkSVG. It returns the client message of the first problem
// found, or "".
func inspect(data []byte) (info, string) {
	f := sniff(data)
	switch f {
	case formatUnknown:
		return info{}, "not a supported image (PNG, JPEG, GIF, WebP or SVG)"
	case formatSVG:
		if len(data) > limits.MaxSVGBytes {
			return info{}, fmt.Sprintf("SVG of %d bytes, at most %d (2 MiB)", len(data), limits.MaxSVGBytes)
		}
		svg, msg := checkSVG(data)
		if msg != "" {
			return info{}, msg
		}
		if msg := pixelProblem(int64(svg.width), int64(svg.height)); msg != "" {
			return info{}, msg
		}
		return info{format: f, width: svg.width, height: svg.height}, ""
	}
	w, h, msg := rasterHeader(f, data)
	if msg != "" {
		return info{}, msg
	}
	if msg := pixelProblem(int64(w), int64(h)); msg != "" {
		return info{}, msg
	}
	if msg := structure(f, data); msg != "" {
		return info{}, msg
	}
	return info{format: f, width: w, height: h}, ""
}

// pixelProblem is the message for dimensions over limits.MaxImagePixels.
func pixelProblem(w, h int64) string {
	if w <= 0 || h <= 0 {
		return ""
	}
	// w and h come from 31- or 32-bit header fields (or a bounded float for
	// SVG), so the product fits an int64.
	if px := w * h; px > limits.MaxImagePixels {
		return fmt.Sprintf("%d pixels, at most %d (%d×%d by its header)", px, limits.MaxImagePixels, w, h)
	}
	return ""
}

// rasterHeader reads the dimensions from the header of a raster image; the
// decoders' DecodeConfig reads the header only and allocates no pixels.
func rasterHeader(f format, data []byte) (w, h int, problem string) {
	var (
		cfg image.Config
		err error
	)
	r := bytes.NewReader(data)
	switch f {
	case formatPNG:
		cfg, err = png.DecodeConfig(r)
	case formatJPEG:
		cfg, err = jpeg.DecodeConfig(r)
	case formatGIF:
		cfg, err = gif.DecodeConfig(r)
	case formatWebP:
		cfg, err = webp.DecodeConfig(r)
	}
	if err != nil {
		return 0, 0, fmt.Sprintf("broken %s header (%v)", f, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, fmt.Sprintf("%s of %d×%d pixels has no area", f, cfg.Width, cfg.Height)
	}
	return cfg.Width, cfg.Height, ""
}

// structure checks that a raster file is whole without decoding it: a PNG
// must be a chain of chunks with good checksums ending in IEND, a JPEG must
// reach its end-of-image marker after the scan, a WebP must hold the bytes
// its RIFF header announces. Convert decodes everything later on the worker;
// this check lets the gateway refuse a truncated upload at once and with the
// other problems of the document.
func structure(f format, data []byte) string {
	switch f {
	case formatPNG:
		return pngStructure(data)
	case formatJPEG:
		return jpegStructure(data)
	case formatWebP:
		if n := int64(binary.LittleEndian.Uint32(data[4:8])); n+8 > int64(len(data)) {
			return fmt.Sprintf("truncated WebP: %d of %d bytes", len(data), n+8)
		}
	case formatGIF:
		// A GIF ends with a trailer byte, but real files often lack it and
		// every decoder copes; the first frame is checked by Convert.
	}
	return ""
}

// pngStructure walks the chunks of a PNG (signature already checked).
func pngStructure(data []byte) string {
	p := data[len(pngMagic):]
	idat := false
	for first := true; ; first = false {
		if len(p) < 12 {
			return "truncated PNG: it ends inside a chunk header"
		}
		n := int64(binary.BigEndian.Uint32(p[:4]))
		typ := string(p[4:8])
		if n > int64(len(p))-12 {
			return fmt.Sprintf("truncated PNG: chunk %q announces %d bytes, %d remain", sanitizeTag(typ), n, max(len(p)-12, 0))
		}
		if first && typ != "IHDR" {
			return "broken PNG: it does not start with IHDR"
		}
		body := p[4 : 8+n]
		if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(p[8+n:12+n]) {
			return fmt.Sprintf("damaged PNG: checksum of chunk %q does not match", sanitizeTag(typ))
		}
		switch typ {
		case "IDAT":
			idat = true
		case "IEND":
			if !idat {
				return "broken PNG: it has no image data (IDAT)"
			}
			return ""
		}
		p = p[12+n:]
	}
}

// sanitizeTag keeps a chunk type printable for a message.
func sanitizeTag(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7E {
			b[i] = '?'
		}
	}
	return string(b)
}

// jpegStructure walks the marker segments of a JPEG up to the first scan
// and then looks for the end-of-image marker. Inside entropy-coded data a
// 0xFF byte is always followed by 0x00 or a restart marker, so an FF D9 pair
// there is the real end.
func jpegStructure(data []byte) string {
	p, msg := jpegScan(data[2:]) // after SOI
	if msg != "" {
		return msg
	}
	if !bytes.Contains(p, []byte{0xFF, 0xD9}) {
		return "truncated JPEG: the end-of-image marker is missing"
	}
	// A progressive JPEG is decoded scan by scan, each a pass over every
	// block of the image; Go's decoder cannot be interrupted. A 78 KB file
	// of 16 megapixels with 1,500 refinement scans kept the server's CPU
	// busy for 26 s, so the scans are counted here, from the markers alone
	// (an FF DA pair inside entropy-coded data is impossible, see above).
	if n := 1 + bytes.Count(p, []byte{0xFF, 0xDA}); n > MaxJPEGScans {
		return fmt.Sprintf("a progressive JPEG with %d scans, at most %d; save it again as an ordinary JPEG", n, MaxJPEGScans)
	}
	return ""
}

// jpegScan walks the marker segments of p, a JPEG after its SOI marker,
// and returns what follows the header of the first scan, or the message
// of a JPEG that ends before it.
func jpegScan(p []byte) ([]byte, string) {
	for {
		for len(p) > 0 && p[0] == 0xFF && len(p) > 1 && p[1] == 0xFF {
			p = p[1:] // fill bytes
		}
		if len(p) < 4 || p[0] != 0xFF {
			return nil, "truncated JPEG: it ends before its image data"
		}
		marker := p[1]
		if marker == 0xD9 {
			return nil, "broken JPEG: it ends before its image data"
		}
		if marker >= 0xD0 && marker <= 0xD7 || marker == 0x01 {
			p = p[2:] // markers without a length
			continue
		}
		n := int(binary.BigEndian.Uint16(p[2:4]))
		if n < 2 || n+2 > len(p) {
			return nil, "truncated JPEG: a segment runs past the end of the file"
		}
		p = p[2+n:]
		if marker == 0xDA { // start of scan
			return p, ""
		}
	}
}

// MaxJPEGScans bounds the scans of a JPEG. Encoders write one scan
// (baseline) or about ten (libjpeg's and mozjpeg's progressive scripts);
// at the pixel limit each scan costs some 40 ms of the server's CPU to
// decode, so 64 scans stay within about 3 s.
const MaxJPEGScans = 64
