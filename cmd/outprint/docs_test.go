package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// markdownProblems parses a Markdown document as goldmark reads it
// (GitHub's flavour) and lists what a reader would trip over, each with
// its line:
//
//   - a fenced code block that never closes (it swallows the rest of its
//     container), or that holds a line looking like a fence of its own
//     kind — "``` Bad input …" cannot close a fence, so the block runs on
//     and swallows the text and headings after it;
//   - a heading outline that is not a tree: the first heading not of
//     level 1, a second level-1 heading, or a heading more than one level
//     deeper than the one before.
func markdownProblems(src []byte) []string {
	doc := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
	lineOf := func(offset int) int { return bytes.Count(src[:min(offset, len(src))], []byte("\n")) + 1 }
	lineAt := func(offset int) string {
		end := bytes.IndexByte(src[offset:], '\n')
		if end < 0 {
			return string(src[offset:])
		}
		return string(src[offset : offset+end])
	}
	lineStart := func(offset int) int { return bytes.LastIndexByte(src[:offset], '\n') + 1 }
	// The container markers before a fence (a list item's indent, "> ").
	unprefix := func(s string) string { return strings.TrimLeft(s, " \t>") }

	var problems []string
	level := 0
	ones := 0
	// The walker never returns an error.
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			line := 0
			if l := n.Lines(); l.Len() > 0 {
				line = lineOf(l.At(0).Start)
			}
			switch {
			case level == 0 && n.Level != 1:
				problems = append(problems, fmt.Sprintf("line %d: the first heading is of level %d, want 1", line, n.Level))
			case n.Level == 1 && ones > 0:
				problems = append(problems, fmt.Sprintf("line %d: a second level-1 heading", line))
			case level > 0 && n.Level > level+1:
				problems = append(problems, fmt.Sprintf("line %d: a level-%d heading under a level-%d one", line, n.Level, level))
			}
			if n.Level == 1 {
				ones++
			}
			level = n.Level
		case *ast.FencedCodeBlock:
			lines := n.Lines()
			var open int
			switch {
			case n.Info != nil:
				open = lineStart(n.Info.Segment.Start)
			case lines.Len() > 0:
				open = lineStart(max(lineStart(lines.At(0).Start)-1, 0))
			default:
				return ast.WalkContinue, nil
			}
			opening := unprefix(lineAt(open))
			fence := opening[:len(opening)-len(strings.TrimLeft(opening, opening[:1]))]
			closed := regexp.MustCompile(`^` + regexp.QuoteMeta(fence) + regexp.QuoteMeta(fence[:1]) + `*\s*$`)
			after := open + len(lineAt(open)) + 1
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				content := unprefix(string(seg.Value(src)))
				if strings.HasPrefix(content, fence) {
					problems = append(problems, fmt.Sprintf("line %d: %q inside the code block opened on line %d: a fence that does not close it", lineOf(seg.Start), strings.TrimSpace(content), lineOf(open)))
				}
				after = seg.Stop
			}
			if after >= len(src) || !closed.MatchString(unprefix(lineAt(after))) {
				problems = append(problems, fmt.Sprintf("line %d: the code block opened here never closes", lineOf(open)))
			}
		}
		return ast.WalkContinue, nil
	})
	return problems
}

// TestMarkdownProblems: the check finds what it is for.
func TestMarkdownProblems(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string // substrings, one per problem, in order
	}{
		{"sound", "# T\n\n## A\n\n```sh\nls\n```\n\n### B\n\n- item\n\n  ```\n  code\n  ```\n\n````md\n```sh\nx\n```\n````\n\n## C\n", nil},
		{"a fence with text after it", "# T\n\n```sh\nls\n``` Bad input is\nanswered.\n\n## Webhooks\n\n```sh\ncurl\n```\n",
			[]string{"line 5: \"``` Bad input is\"", "line 10: \"```sh\""}},
		{"never closed", "# T\n\n```go\nfunc main() {}\n\n## After\n", []string{"line 3: the code block opened here never closes"}},
		{"never closed in a list", "# T\n\n- a\n\n  ```\n  x\n- b\n", []string{"line 5: the code block opened here never closes"}},
		{"first heading", "## T\n", []string{"line 1: the first heading is of level 2"}},
		{"two titles", "# T\n\n# U\n", []string{"line 3: a second level-1 heading"}},
		{"a skipped level", "# T\n\n## A\n\n#### B\n", []string{"line 5: a level-4 heading under a level-2 one"}},
	} {
		got := markdownProblems([]byte(tt.src))
		ok := len(got) == len(tt.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], tt.want[i])
		}
		if !ok {
			t.Errorf("markdownProblems(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestDocsMarkdown: README.md, DEVELOPERS.md and docs/*.md have every code
// fence closed and a sane heading outline.
func TestDocsMarkdown(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md", "../../DEVELOPERS.md"}, files...)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range markdownProblems(src) {
			t.Errorf("%s: %s", strings.TrimPrefix(f, "../../"), p)
		}
	}
}

// fencedBlock returns the first fenced code block of language lang in
// src.
func fencedBlock(t *testing.T, src []byte, lang string) string {
	t.Helper()
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)\n```").FindSubmatch(src)
	if m == nil {
		t.Fatalf("no ```%s block", lang)
	}
	return string(m[1])
}

// TestProxyRecipes: docs/outline.md's nginx and Caddy recipes send every
// route an Outline reader's browser or a collection job needs to outprint
// — POST /outprint/v1/jobs included — and keep the rest of the API and
// the operations endpoints off the wiki's host.
func TestProxyRecipes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/outline.md")
	if err != nil {
		t.Fatal(err)
	}
	public := []string{
		"/outprint/render/hDYep1TPAM", "/outprint/render/collection/engineering-7f3aB9cD1e", "/outprint/status/hDYep1TPAM",
		"/outprint/v1/jobs", "/outprint/v1/jobs/0196abcd", "/outprint/v1/jobs/0196abcd/events", "/outprint/v1/jobs/0196abcd/result",
		"/outprint/assets/app.css", "/outprint/assets/progress.js",
	}
	private := []string{"/outprint/v1/render", "/outprint/v1/forms/fill", "/outprint/metrics", "/outprint/readyz", "/outprint/v1/jobsx", "/doc/welcome-hDYep1TPAM"}

	// nginx: the outprint location's regular expression (PCRE; the
	// subset used reads the same in Go).
	nginx := fencedBlock(t, src, "nginx")
	m := regexp.MustCompile(`location ~ (\S+) \{\s*\n\s*rewrite \^/outprint/\(\.\*\)\$ /\$1 break;`).FindStringSubmatch(nginx)
	if m == nil {
		t.Fatalf("the nginx recipe has no regular-expression location that strips /outprint:\n%s", nginx)
	}
	loc := regexp.MustCompile(m[1])
	// Caddy: the named matcher's paths (a trailing * matches any rest,
	// otherwise the path is exact).
	caddy := fencedBlock(t, src, "caddyfile")
	cm := regexp.MustCompile(`@outprint path (.+)`).FindStringSubmatch(caddy)
	if cm == nil || !strings.Contains(caddy, "uri strip_prefix /outprint") {
		t.Fatalf("the Caddy recipe has no @outprint path matcher that strips /outprint:\n%s", caddy)
	}
	caddyMatch := func(p string) bool {
		for _, pat := range strings.Fields(cm[1]) {
			if prefix, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(p, prefix) || pat == p {
				return true
			}
		}
		return false
	}
	for _, p := range public {
		if !loc.MatchString(p) {
			t.Errorf("nginx recipe: %s does not reach outprint", p)
		}
		if !caddyMatch(p) {
			t.Errorf("Caddy recipe: %s does not reach outprint", p)
		}
	}
	for _, p := range private {
		if loc.MatchString(p) {
			t.Errorf("nginx recipe: %s reaches outprint, want it kept off the wiki's host", p)
		}
		if caddyMatch(p) {
			t.Errorf("Caddy recipe: %s reaches outprint, want it kept off the wiki's host", p)
		}
	}
}
