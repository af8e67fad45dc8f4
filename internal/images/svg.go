package images

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// SVG rules. An SVG is an XML program for a renderer that can load files:
// entities can read files (XXE) or expand exponentially (billion laughs),
// href and CSS url() can point at files or hosts, XInclude can paste a file
// in as text. checkSVG refuses all of these before anything is converted;
// the sandbox of svgToPDF is the second line that holds if a rule here has a
// hole.
const (
	svgNS      = "http://www.w3.org/2000/svg"
	xincludeNS = "http://www.w3.org/2001/XInclude"
	// maxSVGDepth bounds element nesting; real drawings stay far below it,
	// and deep nesting only serves to exhaust a recursive renderer.
	maxSVGDepth = 256
	// maxSVGElements bounds the elements of one SVG (librsvg's own limit is
	// a million; 2 MiB of source cannot reach it, but the check is cheap and
	// the message clearer than a crash).
	maxSVGElements = 200_000
)

// svgInfo is what checkSVG learns about an SVG.
type svgInfo struct {
	width, height int // CSS pixels from width/height/viewBox; 0 when unknown
	// doctype is the byte range of a harmless DOCTYPE (no internal subset),
	// which prepareSVG blanks out so the converter never sees a DTD at all.
	doctype [2]int64
}

// checkSVG parses an SVG with encoding/xml (strict, no entities but the five
// predefined ones, no DTD processing) and returns its size or the client
// message of the first rule it breaks. The caller has bounded its size.
func checkSVG(data []byte) (svgInfo, string) {
	c := svgChecker{root: true}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	// No CharsetReader: an encoding other than UTF-8 (or ASCII) is an error,
	// so no second decoder sees different characters than this check did.
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return c.si, fmt.Sprintf("not well-formed SVG (line %d: %s)", se.Line, se.Msg)
			}
			return c.si, fmt.Sprintf("not well-formed SVG (%v)", err)
		}
		if msg := c.token(tok, start, d.InputOffset()); msg != "" {
			return c.si, msg
		}
	}
	if c.root {
		return c.si, "an XML document without a root element, not an SVG"
	}
	return c.si, ""
}

// svgChecker is the state of checkSVG between tokens.
type svgChecker struct {
	si              svgInfo
	depth, elements int
	root            bool // no element yet: the next is the root
	inStyle         int  // depth of an open <style> element, 0 when none
	style           strings.Builder
}

// token checks one token, which spans start to end of the document, and
// returns the message of the rule it breaks, or "".
func (c *svgChecker) token(tok xml.Token, start, end int64) string {
	switch t := tok.(type) {
	case xml.Directive:
		if msg := checkDirective(t); msg != "" {
			return msg
		}
		c.si.doctype = [2]int64{start, end}
	case xml.ProcInst:
		if strings.EqualFold(t.Target, "xml-stylesheet") {
			return "refers to an outside style sheet (<?xml-stylesheet?>)"
		}
	case xml.StartElement:
		return c.startElement(t)
	case xml.CharData:
		if c.inStyle > 0 {
			c.style.Write(t)
		}
	case xml.EndElement:
		if c.inStyle == c.depth {
			c.inStyle = 0
			if msg := checkCSS(c.style.String()); msg != "" {
				return "<style>: " + msg
			}
		}
		c.depth--
	}
	return ""
}

// startElement checks an element's place (depth, count, the root is
// <svg>) and attributes, and starts collecting a <style>'s text.
func (c *svgChecker) startElement(t xml.StartElement) string {
	c.depth++
	c.elements++
	if c.depth > maxSVGDepth {
		return fmt.Sprintf("elements nested deeper than %d", maxSVGDepth)
	}
	if c.elements > maxSVGElements {
		return fmt.Sprintf("more than %d elements", maxSVGElements)
	}
	if c.root {
		c.root = false
		if t.Name.Local != "svg" || (t.Name.Space != "" && t.Name.Space != svgNS) {
			return fmt.Sprintf("an XML document whose root is <%s>, not an SVG", t.Name.Local)
		}
		w, h, msg := svgSize(t.Attr)
		if msg != "" {
			return msg
		}
		c.si.width, c.si.height = w, h
	}
	if t.Name.Space == xincludeNS {
		return "uses XInclude, which could paste in outside files"
	}
	for _, a := range t.Attr {
		if msg := checkAttr(t.Name.Local, a); msg != "" {
			return msg
		}
	}
	if t.Name.Local == "style" && c.inStyle == 0 {
		c.inStyle = c.depth
		c.style.Reset()
	}
	return ""
}

// checkDirective allows one directive: a DOCTYPE that only names an
// external DTD by its public identifier, as editors write it. Anything with
// an internal subset can declare entities (XXE, billion laughs) or default
// attributes, and is refused.
func checkDirective(t xml.Directive) string {
	s := strings.TrimSpace(string(t))
	up := strings.ToUpper(s)
	if !strings.HasPrefix(up, "DOCTYPE") {
		return fmt.Sprintf("contains an XML declaration <!%s>", firstWord(s))
	}
	if strings.Contains(up, "ENTITY") {
		return "declares XML entities in its DOCTYPE (refused: they can read files or expand without bound)"
	}
	if strings.ContainsAny(s, "[<") {
		return "has an internal DTD subset in its DOCTYPE (refused: it can declare entities and attributes)"
	}
	return ""
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t\r\n"); i > 0 {
		s = s[:i]
	}
	return display(s)
}

// checkAttr applies the reference rules to one attribute of element elem.
func checkAttr(elem string, a xml.Attr) string {
	switch {
	case a.Name.Local == "href":
		return checkRef(elem, a.Value)
	case a.Name.Local == "base" && (a.Name.Space == "http://www.w3.org/XML/1998/namespace" || a.Name.Space == "xml"):
		return "sets xml:base, which would resolve references against an outside location"
	case a.Name.Local == "src":
		// Not an SVG attribute, but <foreignObject> content (<img src>)
		// could use it in a renderer that draws HTML.
		return checkRef("", a.Value)
	case strings.EqualFold(a.Name.Local, "style"):
		if msg := checkCSS(a.Value); msg != "" {
			return "style attribute: " + msg
		}
		return ""
	}
	// Presentation attributes (fill, filter, mask, clip-path, marker-*)
	// take url() values too.
	if strings.Contains(strings.ToLower(a.Value), "url(") {
		if msg := checkURLs(a.Value); msg != "" {
			return fmt.Sprintf("attribute %s: %s", a.Name.Local, msg)
		}
	}
	return ""
}

// checkRef allows a reference to a fragment of the same document and an
// embedded data: raster image. A hyperlink (<a href>) is not loaded by the
// renderer, only written into the PDF, so it may also be http, https or
// mailto.
func checkRef(elem, v string) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "", strings.HasPrefix(v, "#"):
		return ""
	case hasPrefixFold(v, "data:"):
		return checkDataURI(v)
	case elem == "a" && (hasPrefixFold(v, "http:") || hasPrefixFold(v, "https:") || hasPrefixFold(v, "mailto:")):
		return ""
	}
	return fmt.Sprintf("refers to an outside resource (%q); only #fragments and embedded data: images are allowed", display(v))
}

// checkCSS refuses style sheets that load anything: @import, url() outside
// the document, and backslash escapes, which could spell either so that a
// plain text search misses it.
func checkCSS(s string) string {
	low := strings.ToLower(s)
	if strings.Contains(low, "@import") {
		return "uses @import, which loads an outside style sheet"
	}
	if strings.ContainsRune(s, '\\') {
		return "uses CSS escapes, which could hide an outside reference"
	}
	return checkURLs(s)
}

// checkURLs checks every url(...) of a CSS value or presentation attribute.
func checkURLs(s string) string {
	low := strings.ToLower(s)
	for {
		i := strings.Index(low, "url(")
		if i < 0 {
			return ""
		}
		rest := s[i+4:]
		j := strings.IndexByte(rest, ')')
		if j < 0 {
			return "has an unterminated url("
		}
		arg := strings.Trim(strings.TrimSpace(rest[:j]), `"'`)
		if !strings.HasPrefix(arg, "#") {
			if !hasPrefixFold(arg, "data:") {
				return fmt.Sprintf("refers to an outside resource (url(%s)); only #fragments and embedded data: images are allowed", display(arg))
			}
			if msg := checkDataURI(arg); msg != "" {
				return msg
			}
		}
		s, low = rest[j+1:], low[i+4+j+1:]
	}
}

// checkDataURI allows embedded raster images whose header passes the same
// pixel limit as a referenced image: a data: PNG of 100000×100000 pixels
// would otherwise be a decompression bomb inside the converter. An
// embedded SVG is refused, since its own references would escape these
// checks.
func checkDataURI(v string) string {
	meta, payload, ok := strings.Cut(v[len("data:"):], ",")
	if !ok {
		return "has a malformed data: URI"
	}
	mediatype, isBase64 := strings.CutSuffix(strings.ToLower(strings.TrimSpace(meta)), ";base64")
	if i := strings.IndexByte(mediatype, ';'); i >= 0 {
		mediatype = mediatype[:i]
	}
	switch mediatype {
	case "image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp":
	default:
		return fmt.Sprintf("embeds data of type %q; only PNG, JPEG, GIF and WebP images may be embedded", display(mediatype))
	}
	raw, msg := dataPayload(payload, isBase64)
	if msg != "" {
		return msg
	}
	f := sniff(raw)
	if f == formatUnknown || f == formatSVG {
		return "embeds data that is not a PNG, JPEG, GIF or WebP image"
	}
	w, h, msg := rasterHeader(f, raw)
	if msg == "" {
		msg = pixelProblem(int64(w), int64(h))
	}
	if msg != "" {
		return "embedded image: " + msg
	}
	return ""
}

// dataPayload decodes the payload of a data: URI, base64 (with or
// without padding, white space ignored) or percent-encoded.
func dataPayload(payload string, isBase64 bool) ([]byte, string) {
	if !isBase64 {
		b, err := url.PathUnescape(payload)
		if err != nil {
			return nil, "embeds an image with broken percent-encoding"
		}
		return []byte(b), ""
	}
	clean := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, payload)
	b, err := base64.StdEncoding.DecodeString(clean)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(clean, "="))
	}
	if err != nil {
		return nil, "embeds an image with broken base64 data"
	}
	return b, ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// svgSize reads the intrinsic size of the root element in CSS pixels, the
// way a renderer does: width and height (default 100%, i.e. unknown),
// completed from the viewBox. It returns 0×0 when the SVG names no size.
func svgSize(attrs []xml.Attr) (w, h int, problem string) {
	fw, fh, vbW, vbH := sizeAttrs(attrs)
	if fw < 0 || fh < 0 || vbW < 0 || vbH < 0 || math.IsNaN(fw+fh+vbW+vbH) {
		return 0, 0, "negative or invalid width, height or viewBox"
	}
	fw, fh, ok := completeSize(fw, fh, vbW, vbH)
	if !ok {
		return 0, 0, ""
	}
	return pixels(fw), pixels(fh), ""
}

// completeSize completes a width or height the SVG leaves out from the
// viewBox's aspect ratio, or takes the viewBox's size when it gives
// neither; false when the size stays unknown.
func completeSize(fw, fh, vbW, vbH float64) (float64, float64, bool) {
	vb := vbW > 0 && vbH > 0
	switch {
	case fw > 0 && fh > 0:
	case fw > 0 && vb:
		fh = fw * vbH / vbW
	case fh > 0 && vb:
		fw = fh * vbW / vbH
	case vb:
		fw, fh = vbW, vbH
	default:
		return 0, 0, false
	}
	return fw, fh, true
}

// sizeAttrs reads the width and height (CSS pixels, 0 when not given or
// relative) and the viewBox's width and height of the root's attributes.
func sizeAttrs(attrs []xml.Attr) (fw, fh, vbW, vbH float64) {
	for _, a := range attrs {
		if a.Name.Space != "" && a.Name.Space != svgNS {
			continue
		}
		switch a.Name.Local {
		case "width":
			fw = cssLength(a.Value)
		case "height":
			fh = cssLength(a.Value)
		case "viewBox":
			f := strings.FieldsFunc(a.Value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' || r == '\n' })
			if len(f) == 4 {
				vbW, _ = strconv.ParseFloat(f[2], 64)
				vbH, _ = strconv.ParseFloat(f[3], 64)
			}
		}
	}
	return fw, fh, vbW, vbH
}

// pixels rounds a CSS length up to whole pixels, saturating far above the
// pixel limit so the product of two cannot overflow.
func pixels(f float64) int {
	const ceiling = 1 << 30
	if f > ceiling || math.IsInf(f, 1) {
		return ceiling
	}
	return int(math.Ceil(f))
}

// cssLength converts an SVG length to CSS pixels (96 per inch, as
// rsvg-convert draws by default). A percentage or an unknown unit is 0:
// it says nothing about the intrinsic size.
func cssLength(s string) float64 {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		px     float64
	}{
		{"px", 1}, {"pt", 96.0 / 72}, {"pc", 16}, {"in", 96}, {"cm", 96 / 2.54},
		{"mm", 96 / 25.4}, {"em", 16}, {"ex", 8}, {"", 1},
	}
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil {
			return 0
		}
		return f * u.px
	}
	return 0
}

// prepareSVG returns the SVG as the converter gets it: checked again (the
// worker does not trust the gateway) and with a remaining DOCTYPE blanked
// out by spaces, so that the converter never processes a DTD.
func prepareSVG(data []byte) ([]byte, string) {
	si, msg := checkSVG(data)
	if msg != "" {
		return nil, msg
	}
	if si.doctype[1] <= si.doctype[0] {
		return data, ""
	}
	out := bytes.Clone(data)
	for i := si.doctype[0]; i < si.doctype[1]; i++ {
		if out[i] != '\n' {
			out[i] = ' '
		}
	}
	return out, ""
}
