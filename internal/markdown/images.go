package markdown

// Images: Outline's size and placement hints, figures with captions,
// half-width images beside a paragraph, and inline images.

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
)

// wrapImage returns the image of a paragraph that is one half-width image
// (right-50, left-50) at the top level, followed by a paragraph of text:
// that paragraph runs beside it. Elsewhere (in a list, a notice, before a
// heading or a table) a half-width image stays a figure of its own.
func (r *writer) wrapImage(n ast.Node) *ast.Image {
	img, ok := n.FirstChild().(*ast.Image)
	if !ok || img.NextSibling() != nil || n.Parent() == nil || n.Parent().Kind() != ast.KindDocument {
		return nil
	}
	next, ok := n.NextSibling().(*ast.Paragraph)
	if !ok || r.onlyImages(next) || !parseHints(resolveEscapes(img.Title)).half {
		return nil
	}
	if _, ok := r.images[resolveEscapes(img.Destination)]; !ok {
		return nil
	}
	return img
}

// wrapFigure sets a half-width image with its caption for the next
// paragraph to run beside (\opwrapfig; the paragraph starts with
// \opwrapstart).
func (r *writer) wrapFigure(n *ast.Image) {
	h := parseHints(resolveEscapes(n.Title))
	call, ok := r.imageCall(n, `0.5\linewidth`)
	if !ok {
		r.figure(n)
		return
	}
	r.at(n)
	r.nl()
	r.raw(`\opwrapfig{` + string(h.align) + "}{" + call + "}{")
	if n.ChildCount() > 0 {
		r.captionOf(n)
	}
	r.raw("}\n")
	r.wrapNext = true
}

// onlyImages reports whether a paragraph holds images and nothing but
// white space: such images are set as figures, with their caption.
func (r *writer) onlyImages(n ast.Node) bool {
	if r.heading || r.cell || r.link || r.ulem > 0 {
		return false
	}
	found := false
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Image:
			found = true
		case *ast.Text:
			if strings.TrimSpace(r.d.textValue(c)) != "" {
				return false
			}
		default:
			return false
		}
	}
	return found
}

// safeFile reports whether an image file name is one the images stage
// makes: [A-Za-z0-9._-], not starting with a dot, no "..".
func safeFile(name string) bool {
	if name == "" || len(name) > 200 || name[0] == '.' || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// imageHints reads Outline's image title: " =WxH" (pixels), right-50,
// left-50, full-width and source=…; anything else is an ordinary title.
type imageHints struct {
	w, h       float64 // pixels, 0 when not given
	align      byte    // 'c', 'l' or 'r'
	half, full bool
}

var sizeRE = regexp.MustCompile(`^=(\d{0,6})x(\d{0,6})$`)

func parseHints(title string) imageHints {
	h := imageHints{align: 'c'}
	for _, f := range strings.Fields(title) {
		switch {
		case sizeRE.MatchString(f):
			m := sizeRE.FindStringSubmatch(f)
			h.w, _ = strconv.ParseFloat(m[1], 64)
			h.h, _ = strconv.ParseFloat(m[2], 64)
		case f == "right-50":
			h.align, h.half = 'r', true
		case f == "left-50":
			h.align, h.half = 'l', true
		case f == "full-width":
			h.full = true
		}
	}
	return h
}

// imageSize returns the size (in pt, 0 for "as large as fits") an image
// asks for: the title's hint (pixels at 96 dpi, so × 0.75), else its
// intrinsic size.
func imageSize(img Image, h imageHints) (w, ht float64) {
	aspect := 0.0
	if img.Width > 0 && img.Height > 0 {
		aspect = img.Height / img.Width
	}
	switch {
	case h.w > 0 && h.h > 0:
		return h.w * 0.75, h.h * 0.75
	case h.w > 0:
		w = h.w * 0.75
		return w, w * aspect
	case h.h > 0 && aspect > 0:
		ht = h.h * 0.75
		return ht / aspect, ht
	case img.Width > 0 && img.Height > 0:
		scale := 0.75
		if strings.HasSuffix(strings.ToLower(img.File), ".pdf") {
			scale = 1 // PDF sizes are points already
		}
		return img.Width * scale, img.Height * scale
	}
	return 0, 0
}

// imageCall returns \opimg{max width}{width}{height}{file}: the macro
// bounds the size by the line width and 0.75\textheight and keeps the
// aspect ratio. ok is false when the image is not available.
func (r *writer) imageCall(n *ast.Image, maxWidth string) (string, bool) {
	url := resolveEscapes(n.Destination)
	img, ok := r.images[url]
	if !ok || !safeFile(img.File) {
		return "", false
	}
	h := parseHints(resolveEscapes(n.Title))
	w, ht := imageSize(img, h)
	width, height := `\linewidth`, `0.75\textheight`
	if w > 0 && !h.full {
		width = strconv.FormatFloat(w, 'f', 2, 64) + "pt"
	}
	if ht > 0 && !h.full {
		height = strconv.FormatFloat(ht, 'f', 2, 64) + "pt"
	}
	return `\opimg{` + maxWidth + `}{` + width + `}{` + height + `}{` + img.File + `}`, true
}

// figure sets an image on its own: unbreakable, never floating, scaled to
// fit, with its caption under it.
func (r *writer) figure(n *ast.Image) {
	h := parseHints(resolveEscapes(n.Title))
	maxWidth := `\linewidth`
	if h.half {
		maxWidth = `0.5\linewidth`
	}
	call, ok := r.imageCall(n, maxWidth)
	r.at(n)
	r.nl()
	if !ok {
		r.setDir(r.dirOf(n))
		r.raw(`\opmissing{`)
		r.bidiPara(n)
		r.raw("}\\par\n")
		return
	}
	r.raw(`\begin{opfigure}{` + string(h.align) + "}\n" + call + "\n")
	if n.ChildCount() > 0 {
		r.captionOf(n)
		r.raw("\n")
	}
	r.raw("\\end{opfigure}\n")
}

// captionOf writes an image's description as \opcaption{…}, in its own
// direction.
func (r *writer) captionOf(n *ast.Image) {
	r.raw(`\opcaption{`)
	r.keepDir(func() {
		r.setDir(r.dirOf(n))
		r.caption = true
		r.bidiPara(n)
		r.caption = false
	})
	r.raw("}")
}

// inlineImage sets an image inside text (a link, a cell): scaled to the
// line, without caption. In a heading only its text is shown.
func (r *writer) inlineImage(n *ast.Image) {
	call, ok := r.imageCall(n, `\linewidth`)
	if !ok || r.heading {
		r.raw(`\opmissing{`)
		r.inlines(n)
		r.raw(`}`)
		return
	}
	r.raw(call)
}
