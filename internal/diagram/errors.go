package diagram

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/limits"
)

// field is the error list's field of every diagram problem.
const field = "diagrams"

// problem is one diagram that cannot be drawn. It is an error inside the
// package; Draw collects them into a *limits.Error.
type problem struct {
	p limits.Problem
	// resource: a bound of time or memory stopped it (413), not the
	// source (422).
	resource bool
	// broken: the page that drew it was stopped and its browser must go.
	broken bool
}

func (p *problem) Error() string { return p.p.Message }

// fenceName names a diagram by its opening fence, as the user sees it in
// the document.
func fenceName(dg Diagram) string {
	lang := "mermaid"
	if dg.Kind == Graphviz {
		lang = "dot"
	}
	if dg.Line > 0 {
		return fmt.Sprintf("the %s diagram at line %d", lang, dg.Line)
	}
	return fmt.Sprintf("the %s diagram", lang)
}

// invalid is a problem of the diagram's source (422). srcLine is the line
// of the source the renderer named (1 is the line after the fence), 0 for
// none: the problem's line is then the fence's.
func invalid(dg Diagram, srcLine int, msg string) *problem {
	line := dg.Line
	if srcLine > 0 && dg.Line > 0 {
		// Mermaid names the line after the last for an unexpected end.
		n := strings.Count(strings.TrimRight(dg.Source, "\n"), "\n") + 1
		line = dg.Line + min(srcLine, n)
		// The message names the document's line too, not the source's.
		if loc := lineRE.FindStringSubmatchIndex(msg); loc != nil {
			msg = msg[:loc[2]] + strconv.Itoa(line) + msg[loc[3]:]
		}
	}
	return &problem{p: limits.Problem{
		Field: field, Source: limits.SourceDocument, Code: limits.CodeInvalid, Line: line,
		Message: fmt.Sprintf("%s cannot be drawn: %s", fenceName(dg), msg),
	}}
}

// resource is a problem of a bound of time or memory (413).
func resource(dg Diagram, msg string, broken bool) *problem {
	return &problem{resource: true, broken: broken, p: limits.Problem{
		Field: field, Source: limits.SourceDocument, Code: limits.CodeResource, Line: dg.Line,
		Message: fmt.Sprintf("%s cannot be drawn: %s", fenceName(dg), msg),
	}}
}

// notInstalled is the problem of a diagram this server has no renderer
// for (422: the document cannot print here as it is).
func notInstalled(dg Diagram) *problem {
	return &problem{p: limits.Problem{
		Field: field, Source: limits.SourceDocument, Code: limits.CodeInvalid, Line: dg.Line,
		Message: fmt.Sprintf("%s cannot be drawn: diagrams are not installed on this server", fenceName(dg)),
	}}
}

// problems collects a document's diagram problems.
type problems struct {
	list []indexed
	// resources counts the problems that are resource bounds.
	resources int
}

// indexed is a problem and its diagram's place in the document.
type indexed struct {
	i        int
	p        limits.Problem
	resource bool
}

// add records the problem of the document's i-th diagram.
func (ps *problems) add(i int, p *problem) {
	ps.list = append(ps.list, indexed{i, p.p, p.resource})
	if p.resource {
		ps.resources++
	}
}

// outcome is the Observer's outcome of the document's i-th diagram when
// it has a problem ("" when it has none).
func (ps *problems) outcome(i int) string {
	for _, ip := range ps.list {
		if ip.i == i {
			if ip.resource {
				return OutcomeTooLarge
			}
			return OutcomeInvalid
		}
	}
	return ""
}

// err is the collected list as a *limits.Error: KindTooLarge when every
// problem is a resource bound (the document may be fine, the server's
// bounds are not), KindDocument otherwise.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	// In the document's order (Graphviz diagrams are drawn as they come,
	// Mermaid's together afterwards).
	sort.SliceStable(ps.list, func(a, b int) bool { return ps.list[a].i < ps.list[b].i })
	list := make([]limits.Problem, len(ps.list))
	for k, ip := range ps.list {
		list[k] = ip.p
	}
	if ps.resources == len(list) {
		return &limits.Error{Kind: limits.KindTooLarge, Problems: limits.CapProblems(list, 0)}
	}
	return limits.Invalid(list...)
}

// lineRE finds the line a renderer's message names: Mermaid's jison
// parsers say "Parse error on line 3:", its Langium parsers "at line 3",
// "line: 3"; dot says "syntax error in line 3".
var lineRE = regexp.MustCompile(`(?i)\bline:?\s+(\d+)`)

// sourceLine returns the source line a message names, 0 for none.
func sourceLine(msg string) int {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// maxMessage bounds a renderer's message as a client sees it.
const maxMessage = 600

// clean makes a renderer's message client text: control characters out
// (Mermaid's messages show the line and a caret under it, on lines of their
// own: they become " | "), bounded in length, valid UTF-8.
func clean(msg string) string {
	msg = strings.ToValidUTF8(msg, "?")
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	var keep []string
	for _, l := range lines {
		l = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, l)
		// Mermaid's caret line ("-------^") points into the line above
		// it, which a one-line message cannot show.
		if strings.Trim(l, "-^ ") == "" {
			continue
		}
		if l = strings.TrimRight(l, " "); l != "" {
			keep = append(keep, l)
		}
	}
	msg = strings.Join(keep, " | ")
	// Mermaid's advice to the page's programmer is not the user's.
	if i := strings.Index(msg, " | Initialize mermaid with"); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// mermaidLine turns a line Mermaid names into a line of the source:
// Mermaid parses the text without its front matter (a leading "---" block)
// and its %%{init}%% directive lines, and counts from there.
func mermaidLine(src string, reported int) int {
	if reported <= 0 {
		return 0
	}
	lines := strings.Split(src, "\n")
	i := 0
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for j := 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "---" {
				i = j + 1
				break
			}
		}
	}
	for i < len(lines) {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "%%{") || !strings.HasSuffix(l, "}%%") {
			break
		}
		i++
	}
	return i + reported
}
