package binding

import (
	"errors"
	"reflect"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

func ptr(b bool) *bool { return &b }

func TestParseValid(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		meta   string
		want   Binding
		body   string
		offset int
	}{
		{"no front matter", "# Hi\n", "", Binding{}, "# Hi\n", 0},
		{"all fields", "---\ntitle: Handbook\nsubtitle: How\nauthor: Team\nversion: \"3.2\"\ndate: 2026-10-01\nlanguage: pt-BR\npaper: letter\ntoc: true\nnumberSections: false\n---\n# Body\n", "",
			Binding{Title: "Handbook", Subtitle: "How", Author: "Team", Version: "3.2", Date: "2026-10-01", Language: "pt-BR", Paper: "letter", TOC: ptr(true), NumberSections: ptr(false)},
			"# Body\n", 11},
		{"json wins", "---\ntitle: A\nauthor: B\n---\ntext\n", `{"title":"C","toc":false}`, Binding{Title: "C", Author: "B", TOC: ptr(false)}, "text\n", 4},
		{"dots close", "---\ntitle: A\n...\nx", "", Binding{Title: "A"}, "x", 3},
		{"unclosed is body", "---\ntitle: A\n", "", Binding{}, "---\ntitle: A\n", 0},
		{"empty front matter", "---\n---\nx\n", "", Binding{}, "x\n", 2},
		{"crlf", "---\r\ntitle: A\r\n---\r\nx", "", Binding{Title: "A"}, "x", 3},
		{"dialect", "---\ndialect: outline\n---\nx", "", Binding{Dialect: "outline"}, "x", 3},
		{"dialect from json", "x", `{"dialect":"commonmark"}`, Binding{Dialect: "commonmark"}, "x", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Parse([]byte(tt.src), []byte(tt.meta))
			if err != nil {
				t.Fatalf("Parse(%q) error = %v, want nil", tt.src, err)
			}
			if !reflect.DeepEqual(doc.Binding, tt.want) {
				t.Errorf("Parse(%q).Binding = %+v, want %+v", tt.src, doc.Binding, tt.want)
			}
			if string(doc.Body) != tt.body || doc.LineOffset != tt.offset {
				t.Errorf("Parse(%q) body, offset = %q, %d, want %q, %d", tt.src, doc.Body, doc.LineOffset, tt.body, tt.offset)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	type want struct {
		field string
		code  string
		line  int
	}
	tests := []struct {
		name string
		src  string
		meta string
		want []want
	}{
		{"every error at once", "---\ntitle: \"\"\nauthr: x\ndate: 2026-13-45\nversion: 3.2\ntoc: maybe\npaper: a5\nlanguage: \"english language\"\n---\n", "",
			[]want{{"metadata.title", "invalid", 2}, {"metadata.authr", "unknown", 3}, {"metadata.date", "invalid", 4}, {"metadata.version", "invalid", 5}, {"metadata.toc", "invalid", 6}, {"metadata.paper", "invalid", 7}, {"metadata.language", "invalid", 8}}},
		{"duplicate key", "---\ntitle: A\ntitle: B\n---\n", "", []want{{"metadata.title", "invalid", 3}}},
		{"unknown dialect", "---\ndialect: gfm\n---\n", "", []want{{"metadata.dialect", "invalid", 2}}},
		{"not a mapping", "---\n- a\n- b\n---\n", "", []want{{"metadata", "invalid", 2}}},
		{"bad yaml", "---\ntitle: [a\n---\n", "", []want{{"metadata", "invalid", 0}}},
		{"nested value", "---\nauthor:\n  name: x\n---\n", "", []want{{"metadata.author", "invalid", 2}}},
		{"long title", "---\ntitle: " + string(make([]byte, 0)) + repeat("x", 201) + "\n---\n", "", []want{{"metadata.title", "invalid", 2}}},
		{"json unknown and wrong type", "", `{"titel":"x","toc":"yes","date":20260101}`,
			[]want{{"metadata.titel", "unknown", 0}, {"metadata.toc", "invalid", 0}, {"metadata.date", "invalid", 0}}},
		{"json not object", "", `[1]`, []want{{"metadata", "invalid", 0}}},
		{"json trailing", "", `{} {}`, []want{{"metadata", "invalid", 0}}},
		{"json duplicate", "", `{"title":"a","title":"b"}`, []want{{"metadata.title", "invalid", 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), []byte(tt.meta))
			var le *limits.Error
			if !errors.As(err, &le) {
				t.Fatalf("Parse(%q, %q) error = %v, want *limits.Error", tt.src, tt.meta, err)
			}
			if le.Kind != limits.KindDocument {
				t.Errorf("kind = %q, want %q", le.Kind, limits.KindDocument)
			}
			var got []want
			for _, p := range le.Problems {
				if p.Source != limits.SourceMetadata {
					t.Errorf("problem %+v source = %q, want metadata", p, p.Source)
				}
				if p.Message == "" {
					t.Errorf("problem %+v has no message", p)
				}
				got = append(got, want{p.Field, p.Code, p.Line})
			}
			if tt.name == "bad yaml" {
				if len(got) != 1 || got[0].field != "metadata" {
					t.Errorf("problems = %+v, want one metadata problem", got)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for i := 0; i < n; i++ {
		out += s
	}
	return out
}

func TestMerge(t *testing.T) {
	b := Binding{Title: "Mine"}
	b.Merge(Binding{Title: "Outline", Author: "Jane", Date: "2026-05-01", TOC: ptr(true)})
	want := Binding{Title: "Mine", Author: "Jane", Date: "2026-05-01", TOC: ptr(true)}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("Merge = %+v, want %+v", b, want)
	}
}

func TestParseMetadataKeepsRules(t *testing.T) {
	src := "---\ntitle: X\n---\ntext\n"
	doc, err := ParseMetadata([]byte(src), []byte(`{"author":"A"}`))
	if err != nil {
		t.Fatalf("ParseMetadata(%q) error = %v", src, err)
	}
	if string(doc.Body) != src || doc.LineOffset != 0 || doc.Binding.Title != "" || doc.Binding.Author != "A" {
		t.Errorf("ParseMetadata(%q) = %+v, want the whole text as body and only the JSON read", src, doc)
	}
}
