package markdown

// Links: which targets a PDF may keep, and \href with a URL TeX cannot
// misread.

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
)

// target is where a link goes: an external URL (already safe for \href),
// an internal destination, or nothing.
type target struct {
	url, dest string
}

// scheme returns the URL scheme of u ("" when u has none).
func scheme(u string) string {
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case isLetter(c):
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-'):
		case i > 0 && c == ':':
			return u[:i]
		default:
			return ""
		}
	}
	return ""
}

// resolveLink decides what a link destination may become. Only http,
// https and mailto keep their target, plus Outline's relative document,
// collection and attachment paths when the Outline URL is known; a
// fragment reaches a heading of this document.
func (r *writer) resolveLink(dest string) (target, string) {
	dest = strings.TrimSpace(dest)
	if dest == "" {
		return target{}, "empty link target"
	}
	if strings.HasPrefix(dest, "#") {
		if name, ok := r.anchors[dest[1:]]; ok {
			return target{dest: name}, ""
		}
		// A link to a non-ASCII heading may be percent-encoded.
		if frag, err := url.PathUnescape(dest[1:]); err == nil {
			if name, ok := r.anchors[strings.ToLower(frag)]; ok {
				return target{dest: name}, ""
			}
		}
		return target{}, fmt.Sprintf("link to %q: no heading has this name", shorten(dest))
	}
	if sc := scheme(dest); sc != "" {
		switch strings.ToLower(sc) {
		case "http", "https", "mailto":
			return target{url: dest}, ""
		}
		return target{}, fmt.Sprintf("link to %q kept as text: only http, https and mailto links are allowed", shorten(dest))
	}
	if strings.HasPrefix(dest, "/doc/") || strings.HasPrefix(dest, "/collection/") || strings.HasPrefix(dest, "/api/attachments.redirect") {
		if base := strings.TrimRight(r.d.opts.OutlineURL, "/"); base != "" && scheme(base) != "" {
			return target{url: base + dest}, ""
		}
	}
	return target{}, fmt.Sprintf("link to %q kept as text: relative links have no target in a PDF", shorten(dest))
}

func shorten(s string) string {
	if utf8.RuneCountInString(s) > 80 {
		return string([]rune(s)[:80]) + "…"
	}
	return s
}

var (
	attachmentRE = regexp.MustCompile(`^(.*\S)\s+(\d{1,15})$`)
	mediaRE      = regexp.MustCompile(`^(.*\S)\s+(?:pdf:(\d{1,15})|\d{1,6}x\d{1,6})$`)
)

func (r *writer) linkNode(n *ast.Link) {
	dest := resolveEscapes(n.Destination)
	lower := strings.ToLower(dest)
	if strings.HasPrefix(lower, "mention:") || strings.HasPrefix(lower, "date:") {
		// Outline mention, or a date chip ([1 March](date:2026-03-01)):
		// the text the reader saw, no target.
		r.inlines(n)
		return
	}
	if strings.Contains(lower, "/api/attachments.redirect") {
		// Outline's PDF ([report pdf:102400](…)) and video ([clip.mp4
		// 640x480](…)) nodes: the name and what it is, not the raw sizes.
		plain := r.d.plain(n)
		if m := mediaRE.FindStringSubmatch(plain); m != nil {
			t, problem := r.resolveLink(dest)
			if problem != "" {
				r.warn(n, "%s", problem)
			}
			label := strings.TrimSpace(m[1]) + " (video)"
			if m[2] != "" {
				size, _ := strconv.ParseInt(m[2], 10, 64)
				label = strings.TrimSpace(m[1]) + " (PDF, " + formatSize(size) + ")"
			}
			r.hyper(n, t, func() { r.text(label, modeText) })
			return
		}
		if m := attachmentRE.FindStringSubmatch(plain); m != nil {
			size, _ := strconv.ParseInt(m[2], 10, 64)
			t, problem := r.resolveLink(dest)
			if problem != "" {
				r.warn(n, "%s", problem)
			}
			label := m[1] + " (" + formatSize(size) + ")"
			r.hyper(n, t, func() { r.text(label, modeText) })
			return
		}
	}
	t, problem := r.resolveLink(dest)
	if problem != "" {
		r.warn(n, "%s", problem)
	}
	r.hyper(n, t, func() { r.inlines(n) })
}

func (r *writer) autoLink(n *ast.AutoLink) {
	label := string(clean(n.Label(r.d.src)))
	url := string(clean(n.URL(r.d.src)))
	if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(url), "mailto:") {
		url = "mailto:" + url
	}
	t, problem := r.resolveLink(url)
	if problem != "" {
		r.warn(n, "%s", problem)
	}
	r.hyper(n, t, func() {
		r.raw(`\opurl{`)
		r.urlBreaks = true
		r.text(label, modeCode)
		r.urlBreaks = false
		r.raw(`}`)
	})
}

// hyper writes a link around body, or body alone when there is no target
// or the link is inside another link.
func (r *writer) hyper(n ast.Node, t target, body func()) {
	switch {
	case r.link || t.url == "" && t.dest == "":
		body()
	case t.dest != "":
		r.link = true
		r.raw(`\hyperlink{` + t.dest + `}{`)
		r.args++
		body()
		r.args--
		r.raw(`}`)
		r.link = false
	default:
		u := hrefURL(t.url)
		if len(u) > maxURLBytes {
			r.warn(n, "link target of %d bytes kept as text: at most %d", len(t.url), maxURLBytes)
			body()
			return
		}
		r.link = true
		r.raw(`\href{`)
		// hyperref drops a `%` and newline inside the URL, both at top
		// level and in an argument, so long URLs are cut into lines.
		for len(u) > 200 {
			cut := 200
			for cut < len(u) && (u[cut-1] == '\\' || u[cut] == '#' || u[cut] == '%') {
				cut++
			}
			r.raw(u[:cut] + "%\n")
			u = u[cut:]
		}
		r.raw(u + `}{`)
		r.args++
		body()
		r.args--
		r.raw(`}`)
		r.link = false
	}
}

// hrefURL makes a URL safe for \href: characters that are special to TeX
// or outside printable ASCII are percent-encoded (so a brace, backslash,
// caret or tilde can never reach TeX), the first `#`, `%`, `&` and `_` are
// written as hyperref's \#, \%, \& and \_, and a `%` that starts no
// escape becomes %25.
func hrefURL(u string) string {
	var b strings.Builder
	hash := false
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case c == '#' && !hash:
			// The fragment; a later # is not a URL character (and
			// hyperref would end the link there): it is encoded below.
			hash = true
			b.WriteString(`\#`)
		case c == '&':
			b.WriteString(`\&`)
		case c == '_':
			b.WriteString(`\_`)
		case c == '%':
			if i+2 < len(u) && isHex(u[i+1]) && isHex(u[i+2]) {
				b.WriteString(`\%`)
			} else {
				b.WriteString(`\%25`)
			}
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			strings.IndexByte("-._:/?=@!'*+,;", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\%%%02X`, c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// formatSize prints an attachment size the way Outline shows it.
func formatSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1024*1024:
		return fmt.Sprintf("%d KB", (n+512)/1024)
	case n < 1024*1024*1024:
		return strconv.FormatFloat(float64(n)/(1024*1024), 'f', 1, 64) + " MB"
	default:
		return strconv.FormatFloat(float64(n)/(1024*1024*1024), 'f', 1, 64) + " GB"
	}
}
