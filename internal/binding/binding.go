// Package binding reads the metadata a document binds to its layout (SPEC §2):
// YAML front matter at the top of the Markdown and an optional metadata JSON
// object, which wins field by field. Both are strict: an unknown field, a
// duplicate or a wrong type is an error, and every error is reported at once
// with its field and, for front matter, its line, so that a writer fixes the
// whole header in one round trip.
package binding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/outprint/outprint/internal/limits"
)

// Binding is the metadata of one document. Pointer fields distinguish "not
// given" from a given zero value, so that the JSON part can override front
// matter and defaults apply only where nothing was said.
type Binding struct {
	Title          string
	Subtitle       string
	Author         string
	Version        string
	Date           string // YYYY-MM-DD
	Language       string // BCP 47; default "en"
	Paper          string // "a4" (default) or "letter"
	TOC            *bool  // default: true when the body has at least 4 headings
	NumberSections *bool  // default false
	// Dialect is "commonmark" or "outline": the rules the body is read
	// with. Default: "outline" for Outline's documents, else "commonmark".
	Dialect string
}

// Document is Markdown split into its front matter and its body.
type Document struct {
	Binding Binding
	// Body is the Markdown after the front matter.
	Body []byte
	// LineOffset is how many lines of the original text precede Body, so
	// that a body line n is line n+LineOffset of the file.
	LineOffset int
}

const maxText = 200

var (
	datePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	// langPattern accepts the shape of a BCP 47 tag: a 2–3 letter primary
	// language, then subtags of 1–8 alphanumerics. It is deliberately a shape
	// check; the tag only ends up in PDF metadata and hyphenation choice.
	langPattern = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$`)
)

// field describes one metadata field: its name and how to set it.
type field struct {
	kind string // "text", "title", "date", "language", "paper", "dialect", "bool"
	set  func(b *Binding, s string, v bool)
}

var fields = map[string]field{
	"title":          {"title", func(b *Binding, s string, _ bool) { b.Title = s }},
	"subtitle":       {"text", func(b *Binding, s string, _ bool) { b.Subtitle = s }},
	"author":         {"text", func(b *Binding, s string, _ bool) { b.Author = s }},
	"version":        {"text", func(b *Binding, s string, _ bool) { b.Version = s }},
	"date":           {"date", func(b *Binding, s string, _ bool) { b.Date = s }},
	"language":       {"language", func(b *Binding, s string, _ bool) { b.Language = s }},
	"paper":          {"paper", func(b *Binding, s string, _ bool) { b.Paper = s }},
	"toc":            {"bool", func(b *Binding, _ string, v bool) { b.TOC = &v }},
	"numberSections": {"bool", func(b *Binding, _ string, v bool) { b.NumberSections = &v }},
	"dialect":        {"dialect", func(b *Binding, s string, _ bool) { b.Dialect = s }},
}

// Parse splits src into front matter and body and reads both the front
// matter and the metadata JSON (nil or empty when absent). The JSON wins
// field by field. The error, when not nil, is a *limits.Error listing every
// problem; the Document is returned with it (the body, and the fields that
// were right), so that a caller can go on checking the body and report
// all problems at once.
func Parse(src, metadataJSON []byte) (*Document, error) {
	return parse(src, metadataJSON, true)
}

// ParseMetadata is Parse for text that has no front matter: Outline's
// stored text, where a leading "---" is a horizontal rule, not YAML.
func ParseMetadata(src, metadataJSON []byte) (*Document, error) {
	return parse(src, metadataJSON, false)
}

func parse(src, metadataJSON []byte, frontMatter bool) (*Document, error) {
	doc := &Document{Body: src}
	var problems []limits.Problem
	front, body, offset, ok := splitFrontMatter(src)
	if ok && frontMatter {
		doc.Body, doc.LineOffset = body, offset
		problems = append(problems, parseYAML(front, &doc.Binding)...)
	}
	if len(bytes.TrimSpace(metadataJSON)) > 0 {
		problems = append(problems, parseJSON(metadataJSON, &doc.Binding)...)
	}
	return doc, limits.Invalid(problems...)
}

// splitFrontMatter finds YAML front matter: a first line "---" and a closing
// line "---" or "...". It returns the YAML text, the body and the number of
// lines before the body.
func splitFrontMatter(src []byte) (front, body []byte, offset int, ok bool) {
	first, rest, found := bytes.Cut(src, []byte("\n"))
	if !found || string(bytes.TrimRight(first, " \t\r")) != "---" {
		return nil, src, 0, false
	}
	lines := 1
	pos := len(first) + 1
	for len(rest) > 0 {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		lines++
		trimmed := string(bytes.TrimRight(line, " \t\r"))
		if trimmed == "---" || trimmed == "..." {
			return src[len(first)+1 : pos], next, lines, true
		}
		pos += len(line) + 1
		rest = next
	}
	return nil, src, 0, false
}

func problem(name string, line int, code, format string, args ...any) limits.Problem {
	return limits.Problem{
		Field: "metadata." + name, Source: limits.SourceMetadata, Code: code,
		Message: fmt.Sprintf(format, args...), Line: line,
	}
}

// check validates one scalar value for a field and sets it. line is the
// Markdown line for front matter, 0 for JSON.
func check(b *Binding, name string, line int, s string, isString bool, boolValue *bool) []limits.Problem {
	f, known := fields[name]
	if !known {
		return []limits.Problem{problem(name, line, limits.CodeUnknown, "unknown metadata field %q", name)}
	}
	if f.kind == "bool" {
		if boolValue == nil {
			return []limits.Problem{problem(name, line, limits.CodeInvalid, "%s must be true or false", name)}
		}
		f.set(b, "", *boolValue)
		return nil
	}
	if !isString {
		return []limits.Problem{problem(name, line, limits.CodeInvalid, "%s must be a string (quote it)", name)}
	}
	if !utf8.ValidString(s) {
		return []limits.Problem{problem(name, line, limits.CodeInvalid, "%s must be valid UTF-8", name)}
	}
	if msg := stringProblem(f.kind, name, s); msg != "" {
		return []limits.Problem{problem(name, line, limits.CodeInvalid, "%s", msg)}
	}
	f.set(b, s, false)
	return nil
}

// stringProblem checks string s, the value of field name of the given
// kind, against that kind's rule, and returns the message of the rule it
// breaks, or "".
func stringProblem(kind, name, s string) string {
	n := utf8.RuneCountInString(s)
	switch kind {
	case "title":
		if strings.TrimSpace(s) == "" || n > maxText {
			return fmt.Sprintf("title must have 1 to %d characters (has %d)", maxText, n)
		}
	case "text":
		if n > maxText {
			return fmt.Sprintf("%s must have at most %d characters (has %d)", name, maxText, n)
		}
	default:
		return formatProblem(kind, s)
	}
	return ""
}

// formatProblem is stringProblem for the kinds with a fixed form: a
// date, a language tag, or one of a few words.
func formatProblem(kind, s string) string {
	switch kind {
	case "date":
		if _, err := time.Parse("2006-01-02", s); err != nil || !datePattern.MatchString(s) {
			return "date must be YYYY-MM-DD"
		}
	case "language":
		if !langPattern.MatchString(s) {
			return "language must be a BCP 47 tag such as en or pt-BR"
		}
	case "paper":
		if s != "a4" && s != "letter" {
			return "paper must be a4 or letter"
		}
	case "dialect":
		if s != "commonmark" && s != "outline" {
			return "dialect must be commonmark or outline"
		}
	}
	return ""
}

func parseYAML(front []byte, b *Binding) []limits.Problem {
	if len(bytes.TrimSpace(front)) == 0 {
		return nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(front, &root); err != nil {
		return []limits.Problem{{Field: "metadata", Source: limits.SourceMetadata, Code: limits.CodeInvalid,
			Message: "front matter is not valid YAML: " + yamlMessage(err), Line: yamlLine(err)}}
	}
	if len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	// Node lines count from the first YAML line, which is line 2 of the
	// file (line 1 is the opening ---).
	const first = 1
	if m.Kind != yaml.MappingNode {
		return []limits.Problem{{Field: "metadata", Source: limits.SourceMetadata, Code: limits.CodeInvalid,
			Message: "front matter must be a mapping of field: value", Line: m.Line + first}}
	}
	var problems []limits.Problem
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		line := k.Line + first
		if seen[k.Value] {
			problems = append(problems, problem(k.Value, line, limits.CodeInvalid, "field %q is given twice", k.Value))
			continue
		}
		seen[k.Value] = true
		if v.Kind != yaml.ScalarNode {
			problems = append(problems, check(b, k.Value, line, "", false, nil)...)
			continue
		}
		isString := v.Tag == "!!str" || (v.Tag == "!!timestamp" && k.Value == "date")
		var bv *bool
		if v.Tag == "!!bool" {
			var x bool
			if v.Decode(&x) == nil {
				bv = &x
			}
		}
		problems = append(problems, check(b, k.Value, line, v.Value, isString, bv)...)
	}
	return problems
}

func yamlMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	if i := strings.Index(msg, ": "); strings.HasPrefix(msg, "line ") && i > 0 {
		msg = msg[i+2:]
	}
	return msg
}

var yamlLinePattern = regexp.MustCompile(`line (\d+)`)

func yamlLine(err error) int {
	m := yamlLinePattern.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	var n int
	_, _ = fmt.Sscan(m[1], &n)
	return n + 1
}

func parseJSON(src []byte, b *Binding) []limits.Problem {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	bad := func(msg string) []limits.Problem {
		return []limits.Problem{{Field: "metadata", Source: limits.SourceMetadata, Code: limits.CodeInvalid, Message: msg}}
	}
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return bad("metadata must be a JSON object")
	}
	var problems []limits.Problem
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return append(problems, bad("metadata is not valid JSON: "+err.Error())...)
		}
		name := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return append(problems, bad("metadata is not valid JSON: "+err.Error())...)
		}
		if seen[name] {
			problems = append(problems, problem(name, 0, limits.CodeInvalid, "field %q is given twice", name))
			continue
		}
		seen[name] = true
		var s string
		isString := json.Unmarshal(raw, &s) == nil && len(raw) > 0 && raw[0] == '"'
		var bv *bool
		var x bool
		if json.Unmarshal(raw, &x) == nil && (string(raw) == "true" || string(raw) == "false") {
			bv = &x
		}
		problems = append(problems, check(b, name, 0, s, isString, bv)...)
	}
	if _, err := dec.Token(); err != nil {
		return append(problems, bad("metadata is not valid JSON: "+err.Error())...)
	}
	if _, err := dec.Token(); err != io.EOF {
		return append(problems, bad("metadata must be a single JSON object")...)
	}
	return problems
}

// Merge fills fields of b that are empty from other, for defaults that come
// from outside the document (Outline's title, date and author).
func (b *Binding) Merge(other Binding) {
	if b.Title == "" {
		b.Title = other.Title
	}
	if b.Subtitle == "" {
		b.Subtitle = other.Subtitle
	}
	if b.Author == "" {
		b.Author = other.Author
	}
	if b.Version == "" {
		b.Version = other.Version
	}
	if b.Date == "" {
		b.Date = other.Date
	}
	if b.Language == "" {
		b.Language = other.Language
	}
	if b.Paper == "" {
		b.Paper = other.Paper
	}
	if b.TOC == nil {
		b.TOC = other.TOC
	}
	if b.NumberSections == nil {
		b.NumberSections = other.NumberSections
	}
	if b.Dialect == "" {
		b.Dialect = other.Dialect
	}
}
