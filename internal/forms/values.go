package forms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/limits"
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
func parseValues(b []byte) ([]value, error) {
	if len(b) > MaxValuesBytes {
		return nil, limits.Invalid(limits.Problem{Field: "values", Source: limits.SourceRequest, Code: limits.CodeInvalid,
			Message: fmt.Sprintf("the values are too large: %d bytes, at most %d", len(b), MaxValuesBytes)})
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	lineAt := func(off int64) int { return bytes.Count(b[:min(int(off), len(b))], []byte("\n")) + 1 }
	bad := func(off int64, msg string) error {
		return limits.Invalid(limits.Problem{Field: "values", Source: limits.SourceRequest, Code: limits.CodeInvalid,
			Message: "the values are not a JSON object of field names: " + msg, Line: lineAt(off)})
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
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(dec.InputOffset(), jsonMessage(err))
		}
		name, _ := tok.(string)
		line := lineAt(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(dec.InputOffset(), jsonMessage(err))
		}
		if first, dup := seen[name]; dup {
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
		return nil, limits.Invalid(problems...)
	}
	return out, nil
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
	for _, v := range vals {
		fl := f.byName[v.name]
		if fl == nil {
			problems = append(problems, limits.Problem{Field: v.name, Source: limits.SourceRequest, Code: CodeUnknownField,
				Message: fmt.Sprintf("the form has no fillable field %q%s", v.name, suggest(f, v.name)), Line: v.line})
			continue
		}
		got, msg := fl.accept(v.raw)
		if msg != "" {
			problems = append(problems, limits.Problem{Field: v.name, Source: limits.SourceRequest, Code: CodeInvalidValue,
				Message: fmt.Sprintf("%q: %s", v.name, msg), Line: v.line})
			continue
		}
		out[fl] = got
		given[fl] = true
	}
	if len(problems) > 0 {
		return nil, limits.Invalid(problems...)
	}
	for _, fl := range f.fields {
		if !given[fl] {
			out[fl] = fl.current()
		}
	}
	return out, nil
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
func (fl *Field) accept(raw json.RawMessage) (fill, string) {
	if len(raw) > MaxValueBytes+2 {
		return fill{}, fmt.Sprintf("the value is too long (more than %d bytes)", MaxValueBytes)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fill{}, "the value is not JSON"
	}
	switch fl.Type {
	case "signature":
		if v == nil {
			return fill{}, ""
		}
		return fill{}, "a signature field cannot be filled; leave it out"
	case "text":
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
	case "checkbox":
		if len(fl.onStates) <= 1 {
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
		fallthrough // a check box with several on-states behaves like a radio group
	case "radio":
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
	case "choice":
		var sel []string
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
					return fill{}, "a list of options must hold strings"
				}
				sel = append(sel, s)
			}
			if len(sel) > 1 && !fl.MultiSelect {
				return fill{}, "the field takes one option, not several"
			}
		default:
			return fill{}, "a choice field takes an option (a string) or, for a multiple-choice list, a list of options"
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
			valid := fl.Options
			if len(fl.Labels) > 0 {
				valid = nil
				for i, o := range fl.Options {
					valid = append(valid, o+" ("+fl.Labels[i]+")")
				}
			}
			return fill{}, fmt.Sprintf("%s not an option; the options are %s", strings.Join(bad, ", ")+map[bool]string{true: " is", false: " are"}[len(bad) == 1], quoteList(valid))
		}
		return fill{chose: shown}, ""
	}
	return fill{}, "the field cannot be filled"
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
