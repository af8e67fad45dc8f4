package forms

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// The values JSON is parsed before the form is read (and, in a job, before
// anything is queued), so its parse must be linear and its answers bounded
// whatever the client sends. These tests need neither qpdf nor TeX.

// textForm is a form of n text fields "f0" … "f<n-1>", without a PDF: what
// resolveValues looks at.
func textForm(n int) *form {
	f := &form{byName: map[string]*Field{}}
	for i := range n {
		fl := &Field{Name: fmt.Sprintf("f%d", i), Type: "text"}
		f.fields = append(f.fields, fl)
		f.byName[fl.Name] = fl
	}
	return f
}

func TestParseValuesLines(t *testing.T) {
	for _, tc := range []struct {
		in    string
		lines map[string]int // name → line
		bad   int            // line of the one problem, 0 for none
	}{
		{in: `{"a": 1, "b": 2}`, lines: map[string]int{"a": 1, "b": 1}},
		{in: "{\n\"a\": 1,\n\n\"b\": \"x\\ny\"\n}", lines: map[string]int{"a": 2, "b": 4}},
		{in: "{\n\"a\": 1,\n\"a\": 2\n}", bad: 3},
		{in: "{\n\"a\": 1,\n}", bad: 3},
		{in: "\n\n[1]", bad: 3},
		{in: "{\"a\": 1}\n\nx", bad: 3},
	} {
		vals, err := parseValues([]byte(tc.in))
		if tc.bad != 0 {
			var le *limits.Error
			if !errors.As(err, &le) || len(le.Problems) != 1 || le.Problems[0].Line != tc.bad {
				t.Errorf("parseValues(%q) = %v, want one problem on line %d", tc.in, err, tc.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseValues(%q) = %v", tc.in, err)
			continue
		}
		got := map[string]int{}
		for _, v := range vals {
			got[v.name] = v.line
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.lines) {
			t.Errorf("parseValues(%q) lines = %v, want %v", tc.in, got, tc.lines)
		}
	}
}

// TestValueLimitCountsText: the 64 KiB bound of a value is on its text,
// not on its JSON spelling; a list's options count together.
func TestValueLimitCountsText(t *testing.T) {
	quoted, _ := json.Marshal(strings.Repeat(`"`, 40<<10))      // 40 KiB of text, 80 KiB of JSON
	controls, _ := json.Marshal(strings.Repeat("\x01", 20<<10)) // 20 KiB of text, 120 KiB of JSON
	over, _ := json.Marshal(strings.Repeat("é", MaxValueBytes/2+1))
	list, _ := json.Marshal([]string{strings.Repeat("a", 40<<10), strings.Repeat("b", 40<<10)})
	text := &Field{Name: "t", Type: "text"}
	choice := &Field{Name: "c", Type: "choice", Editable: true, MultiSelect: true}
	for _, tc := range []struct {
		fl   *Field
		raw  []byte
		fits bool
	}{
		{text, quoted, true},
		{text, controls, true},
		{text, over, false},
		{choice, list, false},
	} {
		_, msg := tc.fl.accept(tc.raw)
		if fits := msg == ""; fits != tc.fits {
			t.Errorf("accept(%d bytes of JSON for a %s field) = %q, want fits %v", len(tc.raw), tc.fl.Type, msg, tc.fits)
		}
	}
}

// TestValueProblemsBounded: a megabyte of the same mistake is answered with
// a short list that says how many more there were.
func TestValueProblemsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	const n = 20000
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `"nope%d": "x"`, i)
	}
	b.WriteString("}")
	vals, err := parseValues([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = resolveValues(textForm(MaxFields), vals)
	var le *limits.Error
	if !errors.As(err, &le) || len(le.Problems) != limits.MaxProblems+1 {
		t.Fatalf("resolveValues(%d unknown names) = %v, want %d problems", n, err, limits.MaxProblems+1)
	}
	if last := le.Problems[limits.MaxProblems].Message; last != fmt.Sprintf("and %d more problems", n-limits.MaxProblems) {
		t.Errorf("last problem = %q, want the count of the rest", last)
	}
	dup := "{" + strings.Repeat(`"a": 1, `, n) + `"a": 1}`
	_, err = parseValues([]byte(dup))
	if !errors.As(err, &le) || len(le.Problems) != limits.MaxProblems+1 || le.Problems[0].Line != 1 {
		t.Fatalf("parseValues(%d duplicates) = %v, want %d problems", n, err, limits.MaxProblems+1)
	}
}

// FuzzParseValues: any bytes give values or a clear answer, never a panic;
// every name's line lies within the input, lines never go back, and the
// values given come back as they were written.
func FuzzParseValues(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a": "b"}`, "{\n\"a\": [\"x\", \"y\"],\n\"b\": true\n}", `{"a": 1, "a": 2}`,
		`{"\u00e9\n": null}`, `[]`, `{"a": {"b": 1}}`, "{\"a\":\"\\\"\"}\n", `{"a"`, ``,
	} {
		f.Add([]byte(s))
	}
	fm := textForm(4)
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := parseValues(b)
		if err != nil {
			var le *limits.Error
			if !errors.As(err, &le) || len(le.Problems) == 0 || len(le.Problems) > limits.MaxProblems+1 {
				t.Fatalf("parseValues(%q) = %v, want values or a bounded problem list", b, err)
			}
			return
		}
		maxLine := strings.Count(string(b), "\n") + 1
		prev := 1
		seen := map[string]bool{}
		for _, v := range vals {
			if v.line < prev || v.line > maxLine {
				t.Fatalf("parseValues(%q): %q on line %d after line %d (input has %d)", b, v.name, v.line, prev, maxLine)
			}
			if seen[v.name] {
				t.Fatalf("parseValues(%q): %q twice", b, v.name)
			}
			seen[v.name] = true
			prev = v.line
			if !json.Valid(v.raw) {
				t.Fatalf("parseValues(%q): value of %q is %q, not JSON", b, v.name, v.raw)
			}
		}
		if _, err := resolveValues(fm, vals); err != nil {
			var le *limits.Error
			if !errors.As(err, &le) || len(le.Problems) == 0 || len(le.Problems) > limits.MaxProblems+1 {
				t.Fatalf("resolveValues(%q) = %v, want a bounded problem list", b, err)
			}
		}
	})
}

// TestUnprintableValues: a value in a script no installed font has (Linear
// B, Cuneiform) is a problem naming the script, not a PDF without it; a
// password field shows bullets, whatever the letters.
func TestUnprintableValues(t *testing.T) {
	fm := textForm(3)
	fm.fields[2].pass = true
	vals, err := parseValues([]byte(`{"f0": "Grüße 𐀀𐀁 ok", "f1": "Ελληνικά 日本 مرحبا 𒀀", "f2": "𐀀"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = resolveValues(fm, vals)
	var le *limits.Error
	if !errors.As(err, &le) || le.Kind != limits.KindDocument || len(le.Problems) != 2 {
		t.Fatalf("resolveValues = %v, want two problems", err)
	}
	for i, want := range []struct{ field, script string }{{"f0", "Linear B script (\"𐀀\", U+10000)"}, {"f1", "Cuneiform script"}} {
		p := le.Problems[i]
		if p.Field != want.field || p.Code != CodeInvalidValue || !strings.Contains(p.Message, want.script) {
			t.Errorf("problem %d = %+v, want %s naming the %s", i, p, want.field, want.script)
		}
	}
	if strings.Contains(le.Problems[1].Message, "Greek") || strings.Contains(le.Problems[1].Message, "Arabic") {
		t.Errorf("problem %q names a script that prints", le.Problems[1].Message)
	}
}
