package forms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/script"
)

// Error codes of forms (SPEC §5 shape). A client branches on them.
const (
	CodeInvalidPDF   = "invalid_pdf"   // not a PDF, damaged, encrypted, XFA-only
	CodeUnknownField = "unknown_field" // a value for a field the form lacks
	CodeInvalidValue = "invalid_value" // a value the field cannot take
)

// Bounds of a fill (SPEC §3 adds the document bounds: PDF size in and out,
// pages, time).
const (
	// MaxFields bounds the fields of one form.
	MaxFields = 2000
	// MaxValueBytes bounds one value (a text, or every option of a list
	// together).
	MaxValueBytes = 64 << 10
	// MaxValuesBytes bounds the values JSON.
	MaxValuesBytes = 16 << 20
)

// value is one entry of the values JSON.
type value struct {
	name string
	raw  json.RawMessage
	line int
}

// parseValues reads the values JSON: one object whose keys are field names.
// Duplicate keys and a malformed document are reported with their line.
//
// It is linear in the size of the JSON: lines are counted as the decoder
// moves on (never again from the start for each key), and only the first
// problems are kept, the rest counted.
func parseValues(b []byte) ([]value, error) {
	if len(b) > MaxValuesBytes {
		return nil, limits.Invalid(limits.Problem{Field: "values", Source: limits.SourceRequest, Code: limits.CodeInvalid,
			Message: fmt.Sprintf("the values are too large: %d bytes, at most %d", len(b), MaxValuesBytes)})
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	lines := lineCounter{b: b}
	bad := func(off int64, msg string) error {
		return limits.Invalid(limits.Problem{Field: "values", Source: limits.SourceRequest, Code: limits.CodeInvalid,
			Message: "the values are not a JSON object of field names: " + msg, Line: lines.at(off)})
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, bad(dec.InputOffset(), jsonMessage(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, bad(dec.InputOffset(), "it does not start with {")
	}
	var out []value
	seen := map[string]int{}
	var problems []limits.Problem
	more := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(dec.InputOffset(), jsonMessage(err))
		}
		name, _ := tok.(string)
		line := lines.at(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(dec.InputOffset(), jsonMessage(err))
		}
		if first, dup := seen[name]; dup {
			if len(problems) > limits.MaxProblems {
				more++
				continue
			}
			problems = append(problems, limits.Problem{Field: name, Source: limits.SourceRequest, Code: CodeInvalidValue,
				Message: fmt.Sprintf("%q is given twice (first on line %d)", name, first), Line: line})
			continue
		}
		seen[name] = line
		out = append(out, value{name: name, raw: raw, line: line})
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad(dec.InputOffset(), jsonMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(dec.InputOffset(), "text after the object")
	}
	if len(problems) > 0 {
		return nil, &limits.Error{Kind: limits.KindDocument, Problems: limits.CapProblems(problems, more)}
	}
	return out, nil
}

// lineCounter gives the 1-based line of byte offsets into b. Offsets asked
// for in increasing order cost only the bytes between them; an earlier one
// is counted from the start.
type lineCounter struct {
	b    []byte
	off  int // bytes counted so far
	line int // newlines in b[:off]
}

func (c *lineCounter) at(off int64) int {
	o := min(max(int(off), 0), len(c.b))
	if o < c.off {
		c.off, c.line = 0, 0
	}
	c.line += bytes.Count(c.b[c.off:o], []byte("\n"))
	c.off = o
	return c.line + 1
}

func jsonMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error()
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends too early"
	}
	return err.Error()
}

// fill is what a field shows after the fill: text lines for text and choice
// fields, the appearance state for buttons.
type fill struct {
	text  string   // text field
	chose []string // choice field: the chosen options' display texts
	state string   // button: an on-state name or "Off"
}

// resolveValues checks every value against the form and returns what each
// field shows: the given value, or the current one for fields not named.
// All problems are reported at once.
func resolveValues(f *form, vals []value) (map[*Field]fill, error) {
	out := map[*Field]fill{}
	given := map[*Field]bool{}
	var problems []limits.Problem
	more := 0 // problems past the kept ones, counted
	for _, v := range vals {
		fl := f.byName[v.name]
		if fl == nil {
			if len(problems) > limits.MaxProblems {
				// Not kept: a suggestion looks at every field, and a
				// megabyte of unknown names must not cost names×fields.
				more++
				continue
			}
			problems = append(problems, limits.Problem{Field: v.name, Source: limits.SourceRequest, Code: CodeUnknownField,
				Message: fmt.Sprintf("the form has no fillable field %q%s", v.name, suggest(f, v.name)), Line: v.line})
			continue
		}
		got, msg := fl.accept(v.raw)
		if msg == "" && !fl.pass {
			msg = unprintable(got)
		}
		if msg != "" {
			if len(problems) > limits.MaxProblems {
				more++
				continue
			}
			problems = append(problems, limits.Problem{Field: v.name, Source: limits.SourceRequest, Code: CodeInvalidValue,
				Message: fmt.Sprintf("%q: %s", v.name, msg), Line: v.line})
			continue
		}
		out[fl] = got
		given[fl] = true
	}
	if len(problems) > 0 {
		return nil, &limits.Error{Kind: limits.KindDocument, Problems: limits.CapProblems(problems, more)}
	}
	for _, fl := range f.fields {
		if !given[fl] {
			out[fl] = fl.current()
		}
	}
	return out, nil
}

// unprintable is the problem of a value with letters of a script no
// installed font draws ("" if none): the overlay would set them as nothing,
// a PDF that silently lacks part of the value. Markdown answers the same
// letters in a document so (markdown's Document.unprintable). It is linear
// in the value: a letter of a script already named costs a lookup in that
// script's table.
func unprintable(v fill) string {
	var names []string
	var tables []*unicode.RangeTable
	unknown := false // a letter of no script was named
	for _, t := range append([]string{v.text}, v.chose...) {
		for _, r := range t {
			if r < 0x80 || !unicode.IsLetter(r) || script.Drawable(r) || unicode.IsOneOf(tables, r) {
				continue
			}
			// Scripts other than Common and Inherited are disjoint: the
			// first table that has r is its script.
			name := ""
			for n, t := range unicode.Scripts {
				if n != "Common" && n != "Inherited" && unicode.Is(t, r) {
					name = n
					tables = append(tables, t)
					break
				}
			}
			if name == "" {
				if unknown {
					continue
				}
				unknown = true
				name = "unknown"
			}
			names = append(names, fmt.Sprintf("the %s script (%q, U+%04X)", strings.ReplaceAll(name, "_", " "), string(r), r))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "no installed font has " + strings.Join(names, " or ") + ", so the value cannot be printed"
}

// suggest names the fields a mistyped name may have meant (same name
// ignoring case, or the last part of a qualified name).
func suggest(f *form, name string) string {
	var near []string
	for _, fl := range f.fields {
		if strings.EqualFold(fl.Name, name) || strings.HasSuffix(fl.Name, "."+name) {
			near = append(near, fmt.Sprintf("%q", fl.Name))
		}
	}
	if len(near) == 0 || len(near) > 3 {
		return ""
	}
	return "; did you mean " + strings.Join(near, " or ") + "?"
}

// current is what the field shows when the values do not name it.
func (fl *Field) current() fill {
	switch fl.Type {
	case "text":
		s, _ := fl.Value.(string)
		return fill{text: s}
	case "choice":
		var sel []string
		switch v := fl.Value.(type) {
		case string:
			sel = []string{v}
		case []string:
			sel = v
		}
		var shown []string
		for _, s := range sel {
			shown = append(shown, fl.display(s))
		}
		return fill{chose: shown}
	case "checkbox", "radio":
		for _, w := range fl.widgets {
			if w.state != "Off" && w.state != "" {
				return fill{state: w.state}
			}
		}
		return fill{state: "Off"}
	}
	return fill{}
}

// display is the display text of a choice option given by export value.
func (fl *Field) display(export string) string {
	if i := slices.Index(fl.Options, export); i >= 0 && i < len(fl.Labels) {
		return fl.Labels[i]
	}
	return export
}

// accept checks one value for the field; msg is the problem, "" if none.
// It decodes the value once, under the size bound, and hands it to the
// check of the field's type, so each type's rules read on their own.
func (fl *Field) accept(raw json.RawMessage) (fill, string) {
	v, msg := decodeValue(raw)
	if msg != "" {
		return fill{}, msg
	}
	switch fl.Type {
	case "signature":
		if v == nil {
			return fill{}, ""
		}
		return fill{}, "a signature field cannot be filled; leave it out"
	case "text":
		return fl.acceptText(v)
	case "checkbox":
		if len(fl.onStates) <= 1 {
			return fl.acceptCheckbox(v)
		}
		// A check box with several on-states behaves like a radio group.
		return fl.acceptRadio(v)
	case "radio":
		return fl.acceptRadio(v)
	case "choice":
		return fl.acceptChoice(v)
	}
	return fill{}, "the field cannot be filled"
}

// decodeValue decodes one value under MaxValueBytes; msg is the problem,
// "" if none. The bound is on the value as the field gets it, not on its
// JSON spelling: "\"" and "\u00e9" are one character each. No escape is
// longer than six times what it stands for, so a longer spelling is
// refused before it is decoded.
func decodeValue(raw json.RawMessage) (v any, msg string) {
	if len(raw) > maxEscape*MaxValueBytes+2 {
		return nil, fmt.Sprintf("the value is too long (more than %d bytes)", MaxValueBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, "the value is not JSON"
	}
	if n := valueBytes(v); n > MaxValueBytes {
		return nil, fmt.Sprintf("the value is too long (%d bytes of text, at most %d)", n, MaxValueBytes)
	}
	return v, ""
}

// acceptText checks a text field's value: a string, or a number taken as
// it is written, within MaxLen characters.
func (fl *Field) acceptText(v any) (fill, string) {
	var s string
	switch x := v.(type) {
	case nil:
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		return fill{}, "a text field takes a string"
	}
	if n := utf8.RuneCountInString(s); fl.MaxLen > 0 && n > fl.MaxLen {
		return fill{}, fmt.Sprintf("the text has %d characters, the field takes at most %d", n, fl.MaxLen)
	}
	return fill{text: s}, ""
}

// acceptCheckbox checks the value of a check box with at most one on
// state: true or false, or the on state's name or export value, or "Off".
func (fl *Field) acceptCheckbox(v any) (fill, string) {
	on := ""
	if len(fl.onStates) == 1 {
		on = fl.onStates[0]
	}
	switch x := v.(type) {
	case bool:
		if x && on == "" {
			return fill{}, "the check box has no on state to show"
		}
		if x {
			return fill{state: on}, ""
		}
		return fill{state: "Off"}, ""
	case nil:
		return fill{state: "Off"}, ""
	case string:
		if on != "" && (x == on || x == fl.exports[on]) {
			return fill{state: on}, ""
		}
		if x == "Off" {
			return fill{state: "Off"}, ""
		}
	}
	return fill{}, "a check box takes true or false"
}

// acceptRadio checks the value of a radio group (or of a check box with
// several on states): one on state by name or export value; null, false,
// "" or "Off" turn it off.
func (fl *Field) acceptRadio(v any) (fill, string) {
	switch x := v.(type) {
	case nil:
		return fill{state: "Off"}, ""
	case bool:
		if !x {
			return fill{state: "Off"}, ""
		}
	case string:
		if x == "Off" || x == "" {
			return fill{state: "Off"}, ""
		}
		for _, st := range fl.onStates {
			if x == st || x == fl.exports[st] {
				return fill{state: st}, ""
			}
		}
		return fill{}, fmt.Sprintf("%q is not an option; the options are %s", x, quoteList(fl.Options))
	}
	return fill{}, "the field takes one of the options " + quoteList(fl.Options)
}

// acceptChoice checks a choice field's value: the options chosen, each by
// export value or by label, shown by their labels.
func (fl *Field) acceptChoice(v any) (fill, string) {
	sel, msg := fl.choiceSelection(v)
	if msg != "" {
		return fill{}, msg
	}
	var shown []string
	var bad []string
	for _, s := range sel {
		if i := slices.Index(fl.Options, s); i >= 0 {
			shown = append(shown, fl.display(s))
			continue
		}
		if i := slices.Index(fl.Labels, s); i >= 0 {
			shown = append(shown, s)
			continue
		}
		if fl.Editable || len(fl.Options) == 0 {
			shown = append(shown, s)
			continue
		}
		bad = append(bad, fmt.Sprintf("%q", s))
	}
	if len(bad) > 0 {
		return fill{}, fl.notOptions(bad)
	}
	return fill{chose: shown}, ""
}

// choiceSelection is the list of options a choice field's value names:
// none for null or "", one for a string, several for a list of strings
// (only where the field allows several).
func (fl *Field) choiceSelection(v any) (sel []string, msg string) {
	switch x := v.(type) {
	case nil:
	case string:
		if x != "" {
			sel = []string{x}
		}
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, "a list of options must hold strings"
			}
			sel = append(sel, s)
		}
		if len(sel) > 1 && !fl.MultiSelect {
			return nil, "the field takes one option, not several"
		}
	default:
		return nil, "a choice field takes an option (a string) or, for a multiple-choice list, a list of options"
	}
	return sel, ""
}

// notOptions is the problem with choices that are not options (bad holds
// them quoted): it lists the valid options, with their labels where the
// field has labels, so the caller can correct the value in one go.
func (fl *Field) notOptions(bad []string) string {
	valid := fl.Options
	if len(fl.Labels) > 0 {
		valid = nil
		for i, o := range fl.Options {
			valid = append(valid, o+" ("+fl.Labels[i]+")")
		}
	}
	verb := " are"
	if len(bad) == 1 {
		verb = " is"
	}
	return fmt.Sprintf("%s not an option; the options are %s", strings.Join(bad, ", ")+verb, quoteList(valid))
}

// maxEscape is how many bytes of JSON one byte of a value can take at
// most: a control character is "\u0001", six bytes for one.
const maxEscape = 6

// valueBytes is the size of a decoded value: a string's UTF-8 bytes, a
// list's strings together, a number's digits.
func valueBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case json.Number:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n += valueBytes(e)
		}
		return n
	}
	return 0
}

func quoteList(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	q := make([]string, len(s))
	for i, e := range s {
		q[i] = fmt.Sprintf("%q", e)
	}
	return strings.Join(q, ", ")
}
