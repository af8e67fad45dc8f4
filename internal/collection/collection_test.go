package collection

import (
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

func TestMarkdown(t *testing.T) {
	t.Parallel()
	docs := []Doc{
		{Title: "Intro # not a heading", Depth: 0, Text: "# Own heading\n\nText[^1].\n\n[^1]: Note one."},
		{Title: "", Depth: 1, Text: "```\n# in code\n[^1]\n"},
		{Title: "Deep", Depth: 5, Text: "#### Four\n\nMore[^1].\n\n[^1]: Note two."},
	}
	got := string(Markdown(docs, []Skipped{{Title: "Secret *plan*", Why: "no download"}}))
	for _, want := range []string{
		":::info\nNot printed:\n\n- Secret \\*plan\\* (no download)\n\n:::",
		"***\n\n# Intro \\# not a heading\n\n#### Own heading\n",
		"Text[^d1-1].", "[^d1-1]: Note one.",
		"## Untitled\n\n```\n# in code\n[^1]\n\n```\n", // the open fence is closed, code left alone
		"### Deep\n\n###### Four\n", "More[^d3-1].",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Markdown() = %q, want it to contain %q", got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	var imgs strings.Builder
	for i := range limits.MaxImages + 1 {
		imgs.WriteString("![](https://example.com/" + strings.Repeat("x", i+1) + ".png)\n\n")
	}
	tests := []struct {
		name string
		docs []Doc
		kind limits.Kind
	}{
		{"fine", []Doc{{Title: "A", Text: "text $x$"}}, ""},
		{"too large", []Doc{{Title: "A", Text: strings.Repeat("x", limits.MaxMarkdownBytes+1)}}, limits.KindTooLarge},
		{"bad formula", []Doc{{Title: "A", Text: "ok"}, {Title: "B", Text: "$\\input{x}$"}}, limits.KindDocument},
		{"too many images", []Doc{{Title: "A", Text: imgs.String()}}, limits.KindDocument},
	}
	for _, tt := range tests {
		err := Check(tt.docs)
		le, _ := err.(*limits.Error)
		switch {
		case tt.kind == "" && err != nil, tt.kind != "" && (le == nil || le.Kind != tt.kind):
			t.Errorf("%s: Check = %v, want kind %q", tt.name, err, tt.kind)
		}
		if tt.name == "bad formula" && le != nil && !strings.Contains(le.Problems[0].Message, `document "B"`) {
			t.Errorf("%s: problem %q does not name the document", tt.name, le.Problems[0].Message)
		}
	}
}

// TestBodyClosesOpenBlocks: a document that leaves a notice or a toggle
// open has it closed at its end, innermost first, so the next document of
// the collection is not swallowed by it; closed blocks and blocks inside
// code are left alone.
func TestBodyClosesOpenBlocks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{"open notice", ":::info\ntext", ":::info\ntext\n\n:::\n"},
		{"closed notice", ":::info\ntext\n:::", ":::info\ntext\n:::\n"},
		{"nested, inner closed", ":::info\n:::warning\nx\n:::\ny", ":::info\n:::warning\nx\n:::\ny\n\n:::\n"},
		{"open toggle", "+++++\nTitle\n\nbody", "+++++\nTitle\n\nbody\n\n+++++\n"},
		{"closed toggle", "+++++\nTitle\n+++++", "+++++\nTitle\n+++++\n"},
		{"toggle in notice, both open", ":::tip\n+++\nT", ":::tip\n+++\nT\n\n+++\n\n:::\n"},
		{"notice in code", "```\n:::info\n```", "```\n:::info\n```\n"},
	}
	for _, tt := range tests {
		if got := body(tt.text, 0); got != tt.want {
			t.Errorf("%s: body(%q) = %q, want %q", tt.name, tt.text, got, tt.want)
		}
	}
}
