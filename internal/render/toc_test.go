package render

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestTOCInOneRun renders a long document with a table of contents and
// checks, with pdftotext, that the document took one TeX run and that
// every entry's page number is the page its heading is printed on. The
// sections have pseudo-random lengths, so headings land anywhere on a
// page, some at its foot where TeX moves them to the next one; the
// contents span two pages; one heading sits inside a notice (a framed box).
func TestTOCInOneRun(t *testing.T) {
	p := newPipeline(t)
	rng := rand.New(rand.NewPCG(7, 11))
	filler := "Filler words that make the sections long enough to cross pages at varied points. "
	var md strings.Builder
	md.WriteString("---\ntitle: Contents test\ntoc: true\nnumberSections: true\n---\n\n")
	var titles []string
	for i := 1; i <= 24; i++ {
		title := fmt.Sprintf("Chapter %s", strconv.Itoa(i))
		titles = append(titles, title)
		fmt.Fprintf(&md, "## %s\n\n%s\n\n", title, strings.Repeat(filler, 1+rng.IntN(14)))
		for j := 1; j <= rng.IntN(3); j++ {
			sub := fmt.Sprintf("Part %d of chapter %d", j, i)
			titles = append(titles, sub)
			fmt.Fprintf(&md, "### %s\n\n%s\n\n", sub, strings.Repeat(filler, 1+rng.IntN(10)))
		}
		if i == 12 {
			titles = append(titles, "Framed heading")
			fmt.Fprintf(&md, ":::info\n### Framed heading\n\n%s\n:::\n\n", strings.Repeat(filler, 3))
		}
	}
	res, err := p.Do(context.Background(), Request{Name: "toc.md", Markdown: []byte(md.String())}, nil)
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if res.Runs != 1 {
		t.Errorf("TeX runs = %d, want 1 (the contents need no second run)", res.Runs)
	}
	f := inspectPDF(t, res.PDF)
	path := filepath.Join(t.TempDir(), "toc.pdf")
	if err := os.WriteFile(path, res.PDF, 0o644); err != nil {
		t.Fatal(err)
	}
	pages := make([]string, f.Pages+1)
	for i := 1; i <= f.Pages; i++ {
		out, err := exec.Command("pdftotext", "-layout", "-f", strconv.Itoa(i), "-l", strconv.Itoa(i), path, "-").Output()
		if err != nil {
			t.Fatalf("pdftotext page %d: %v", i, err)
		}
		pages[i] = string(out)
	}
	// An entry ends in its page number after dot leaders or a wide gap;
	// a numbered heading in the body ("3  Chapter 3") has neither.
	entry := regexp.MustCompile(`(?m)^\s*([\d.]+)\s+(.+?)(?:\s*(?:\.\s*){2,}|\s{3,})(\d+)\s*$`)
	listed := map[string]int{}
	lastTOCPage := 0
	for i := 1; i <= f.Pages && i <= 3; i++ {
		for _, m := range entry.FindAllStringSubmatch(pages[i], -1) {
			title := strings.TrimSpace(strings.TrimRight(m[2], ". "))
			if _, dup := listed[title]; !dup && slices.Contains(titles, title) {
				n, _ := strconv.Atoi(m[3])
				listed[title] = n
				lastTOCPage = i
			}
		}
	}
	if len(listed) != len(titles) {
		t.Fatalf("contents list %d of %d headings: %v", len(listed), len(titles), listed)
	}
	if lastTOCPage < 2 {
		t.Errorf("contents end on page %d, want them to span two pages", lastTOCPage)
	}
	for _, title := range titles {
		heading := regexp.MustCompile(`(?m)^\s*[\d.]+\s+` + regexp.QuoteMeta(title) + `\s*$`)
		printed := 0
		for i := lastTOCPage; i <= f.Pages && printed == 0; i++ {
			text := pages[i]
			if i == lastTOCPage {
				// Skip the contents themselves: the body starts after
				// the last entry.
				last := entry.FindAllStringIndex(text, -1)
				text = text[last[len(last)-1][1]:]
			}
			if heading.MatchString(text) {
				printed = i
			}
		}
		if printed == 0 {
			t.Errorf("heading %q not found in the body", title)
			continue
		}
		if listed[title] != printed {
			t.Errorf("contents give %q page %d, it is printed on page %d", title, listed[title], printed)
		}
	}
}
