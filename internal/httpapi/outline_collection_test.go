package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline/outlinetest"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// collectionFixture is a collection of 30 documents nested three deep
// (6 at the top, 2 below each, 1 below each of those), plus one the reader
// may read but not download, in a fake Outline answering as the real one.
type collectionFixture struct {
	e      *olEnv
	ids    []string // the printed documents' ids, in tree order
	col    outlinetest.Collection
	titles []string // the 30 printed documents, in tree order
	depths []int
}

func newCollectionFixture(t *testing.T) *collectionFixture {
	return newCollectionFixtureWith(t, olOptions{tex: true})
}

func newCollectionFixtureWith(t testing.TB, o olOptions) *collectionFixture {
	e := newOlEnv(t, o)
	f := &collectionFixture{e: e}
	f.col = e.fake.AddCollection(outlinetest.Collection{Name: "Engineering Handbook"})
	img := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 90, 60), Local: true})
	filler := "Words that fill the chapter so that documents take up room on their pages. "
	add := func(title, parent string, depth, n int) string {
		text := fmt.Sprintf("%s\n\n## Inside %s\n\n%s", strings.Repeat(filler, 3+n%7), title, strings.Repeat(filler, 2+n%5))
		if n == 4 {
			text += "\n\n ![Diagram](" + img + " \" =90x60\")\n\nSee note[^1].\n\n[^1]: A footnote of document four."
		}
		if n == 9 {
			text += "\n\nAnother note[^1].\n\n[^1]: A footnote of document nine."
		}
		d := e.fake.AddDocument(outlinetest.Document{Title: title, Text: text, CollectionID: f.col.ID,
			ParentID: parent, CreatedBy: e.janePerson})
		f.titles = append(f.titles, title)
		f.ids = append(f.ids, d.ID)
		f.depths = append(f.depths, depth)
		return d.ID
	}
	n := 0
	for i := 1; i <= 6; i++ {
		n++
		top := add(fmt.Sprintf("Doc %02d Chapter", n), "", 0, n)
		for j := 1; j <= 2; j++ {
			n++
			child := add(fmt.Sprintf("Doc %02d Section", n), top, 1, n)
			n++
			add(fmt.Sprintf("Doc %02d Subsection", n), child, 2, n)
		}
	}
	e.fake.AddDocument(outlinetest.Document{Title: "Read-only policy", Text: "secret", CollectionID: f.col.ID,
		CreatedBy: e.janePerson, Access: map[string]outlinetest.Access{e.jane.ID: {Read: true}}})
	return f
}

// TestOutlineCollection prints a collection of 30 documents nested three
// deep as one PDF and checks it with pdftotext: the contents list all 30
// in tree order, indented by depth, each with the page its chapter heading
// is printed on; the document that may not be downloaded is listed as not
// printed; the documents' own headings are not in the contents; the image
// is embedded; footnotes of different documents keep their own text.
func TestOutlineCollection(t *testing.T) {
	f := newCollectionFixture(t)
	e := f.e
	a := e.get("/render/collection/"+f.col.ID, e.jane.Token, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET /render/collection = %d, want 200: %s", a.status, a.body)
	}
	if cd := a.header.Get("Content-Disposition"); !strings.Contains(cd, "Engineering Handbook.pdf") {
		t.Errorf("Content-Disposition = %q, want the collection's name", cd)
	}
	path := filepath.Join(t.TempDir(), "collection.pdf")
	if *keepPDFs != "" {
		path = filepath.Join(*keepPDFs, "collection.pdf")
	}
	if err := os.WriteFile(path, a.body, 0o644); err != nil {
		t.Fatal(err)
	}
	info := olPDFTool(t, a.body, "pdfinfo")
	pagesN, _ := strconv.Atoi(olPDFInfo(t, info, "Pages"))
	if pagesN < 7 {
		t.Fatalf("the PDF has %d pages, want at least one per top-level document", pagesN)
	}
	pages := make([]string, pagesN+1)
	for i := 1; i <= pagesN; i++ {
		out, err := exec.Command("pdftotext", "-layout", "-enc", "UTF-8", "-f", strconv.Itoa(i), "-l", strconv.Itoa(i), path, "-").Output()
		if err != nil {
			t.Fatalf("pdftotext page %d: %v", i, err)
		}
		pages[i] = string(out)
	}
	if !strings.Contains(pages[1], "Engineering Handbook") || !strings.Contains(pages[1], "Contents") {
		t.Errorf("page 1 has no title or contents:\n%s", pages[1])
	}
	entry := regexp.MustCompile(`(?m)^(\s*)(Doc \d\d \w+)(?:\s*(?:\.\s*){2,}|\s{3,})(\d+)\s*$`)
	type listed struct {
		title  string
		indent int
		page   int
	}
	var toc []listed
	lastTOCPage := 0
	for i := 1; i <= 3 && i <= pagesN; i++ {
		for _, m := range entry.FindAllStringSubmatch(pages[i], -1) {
			p, _ := strconv.Atoi(m[3])
			toc = append(toc, listed{m[2], len(m[1]), p})
			lastTOCPage = i
		}
	}
	var got []string
	for _, l := range toc {
		got = append(got, l.title)
	}
	if strings.Join(got, "|") != strings.Join(f.titles, "|") {
		t.Fatalf("contents list\n%q\nwant, in tree order,\n%q", got, f.titles)
	}
	for i, l := range toc {
		if i > 0 && f.depths[i] > f.depths[i-1] && l.indent <= toc[i-1].indent {
			t.Errorf("contents: %q (depth %d) is not indented below %q", l.title, f.depths[i], toc[i-1].title)
		}
		heading := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(l.title) + `\s*$`)
		printed := 0
		for p := lastTOCPage; p <= pagesN && printed == 0; p++ {
			text := pages[p]
			if p == lastTOCPage {
				last := entry.FindAllStringIndex(text, -1)
				text = text[last[len(last)-1][1]:]
			}
			if heading.MatchString(text) {
				printed = p
			}
		}
		if printed != l.page {
			t.Errorf("contents give %q page %d, it is printed on page %d", l.title, l.page, printed)
		}
	}
	all := strings.Join(pages, "\f")
	squashed := strings.Join(strings.Fields(all), " ")
	for _, want := range []string{"Not printed:", "Read-only policy (you may read it but not download it)",
		"A footnote of document four.", "A footnote of document nine.", "Inside Doc 01 Chapter"} {
		if !strings.Contains(squashed, want) {
			t.Errorf("the PDF lacks %q", want)
		}
	}
	if regexp.MustCompile(`Inside Doc \d\d \w+\s*(?:\.\s*){2,}`).MatchString(strings.Join(pages[1:lastTOCPage+1], "")) {
		t.Errorf("a document's own heading is in the contents")
	}
	list := olPDFTool(t, a.body, "pdfimages", "-list")
	if rows := strings.Split(strings.TrimSpace(list), "\n")[2:]; len(rows) != 1 {
		t.Errorf("pdfimages -list has %d images, want the one attachment:\n%s", len(rows), list)
	}
}

// TestOutlineCollectionRefusals: the collection route answers like the
// document route — no access 403, unknown 404, malformed 400 (Outline not
// asked), no cookie 401 — and a collection over 10 MiB in total is 413.
func TestOutlineCollectionRefusals(t *testing.T) {
	e := newOlEnv(t, olOptions{})
	nina := e.fake.AddUser(outlinetest.User{Name: "Nina NoAccess", Token: "tok.nina"})
	private := e.fake.AddCollection(outlinetest.Collection{Name: "Handbook", Private: true, Members: []string{e.jane.ID}})
	big := e.fake.AddCollection(outlinetest.Collection{Name: "Big"})
	chunk := strings.Repeat("A paragraph of plain words. ", 37_000) // just under 1 MiB
	for i := range 11 {
		e.fake.AddDocument(outlinetest.Document{Title: fmt.Sprintf("Part %d", i), Text: chunk, CollectionID: big.ID, CreatedBy: e.janePerson})
	}
	empty := e.fake.AddCollection(outlinetest.Collection{Name: "Empty"})
	tests := []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"no access", "/render/collection/" + private.ID, nina.Token, 403, httperr.CodeForbidden},
		{"unknown", "/render/collection/3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b", e.jane.Token, 404, httperr.CodeNotFound},
		{"malformed", "/render/collection/a%2Fb", e.jane.Token, 400, limits.CodeInvalid},
		{"no cookie", "/render/collection/" + private.ID, "", 401, httperr.CodeUnauthorized},
		{"too large together", "/render/collection/" + big.ID, e.jane.Token, 413, limits.CodeTooLarge},
		{"empty", "/render/collection/" + empty.URLID, e.jane.Token, 422, limits.CodeInvalid},
	}
	for _, tt := range tests {
		a := e.get(tt.path, tt.token, nil)
		if a.status != tt.status {
			t.Errorf("%s: GET %s = %d, want %d: %.300s", tt.name, tt.path, a.status, tt.status, a.body)
			continue
		}
		if p := a.problems(t)[0]; p.Code != tt.code {
			t.Errorf("%s: code %s, want %s (%s)", tt.name, p.Code, tt.code, p.Message)
		}
	}
	if n := e.rendered.count(); n != 0 {
		t.Errorf("%d refused collections reached the renderer", n)
	}
}

// BenchmarkOutlineCollection measures, it asserts nothing about time: it
// times the collection of TestOutlineCollection as one PDF and as its 30
// documents one by one through the same warm pool, and reports both and
// their ratio (`make bench` runs it):
//
//	go test -run '^$' -bench BenchmarkOutlineCollection ./internal/httpapi/
func BenchmarkOutlineCollection(b *testing.B) {
	testenv.Require(b, "xelatex")
	pool, err := tex.NewPool(tex.PoolConfig{Runner: tex.RunnerConfig{TempDir: b.TempDir()}, Max: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pool.Close(context.Background()) })
	f := newCollectionFixtureWith(b, olOptions{tex: true, engine: pool,
		admission: admission.Config{Slots: 1, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute}})
	e := f.e
	// Warm up both paths once.
	e.get("/render/collection/"+f.col.ID, e.jane.Token, nil)
	e.get("/render/"+f.ids[0], e.jane.Token, nil)
	var whole, single time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if a := e.get("/render/collection/"+f.col.ID, e.jane.Token, nil); a.status != 200 {
			b.Fatalf("collection: %d %s", a.status, a.body)
		}
		whole += time.Since(start)
		start = time.Now()
		for _, id := range f.ids {
			if a := e.get("/render/"+id, e.jane.Token, nil); a.status != 200 {
				b.Fatalf("document: %d %s", a.status, a.body)
			}
		}
		single += time.Since(start)
	}
	b.ReportMetric(whole.Seconds()/float64(b.N), "s/collection")
	b.ReportMetric(single.Seconds()/float64(b.N), "s/30-documents")
	b.ReportMetric(float64(whole)/float64(single), "ratio")
}

// TestOutlineCollectionJob is the job form: POST /v1/jobs with
// {"source":{"outline":{"collectionId":…}}} reads the collection and its
// images as the reader at acceptance; a worker renders it; each download
// asks Outline again whether that request's reader can read the collection.
func TestOutlineCollectionJob(t *testing.T) {
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", outline: true})
	jane := e.fake.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-secret-1"})
	nina := e.fake.AddUser(outlinetest.User{Name: "Nina NoAccess", Token: "tok.nina-secret-2"})
	col := e.fake.AddCollection(outlinetest.Collection{Name: "Policies", Private: true, Members: []string{jane.ID}})
	img := e.fake.AddAttachment(outlinetest.Attachment{Body: pngImage(t, 60, 40)})
	author := outlinetest.Person{ID: jane.ID, Name: jane.Name}
	top := e.fake.AddDocument(outlinetest.Document{Title: "Travel", Text: "Book trains.\n\n ![Map](" + img + ")", CollectionID: col.ID, CreatedBy: author})
	e.fake.AddDocument(outlinetest.Document{Title: "Expenses", Text: "Keep receipts.", CollectionID: col.ID, ParentID: top.ID, CreatedBy: author})
	source := map[string]any{"source": map[string]any{"outline": map[string]any{"collectionId": col.URLID}}}

	e.do(as(jsonBody("", source, nil), nina.Token)).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
	v := e.do(as(jsonBody("", source, nil), jane.Token)).view(t, http.StatusAccepted)
	v = e.waitState(jane.Token, v.ID, jobs.StateSucceeded)
	if v.State != jobs.StateSucceeded {
		t.Fatalf("collection job = %+v (error %+v), want succeeded", v, v.Error)
	}
	pdf := e.do(as(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result"}, jane.Token)).wantPDF(t)
	if got := pdfInfo(t, pdf, "Title"); got != "Policies" {
		t.Errorf("PDF title = %q, want the collection's name", got)
	}
	txt := strings.Join(strings.Fields(pdfText(t, pdf)), " ")
	for _, want := range []string{"Contents", "Travel", "Expenses", "Book trains.", "Keep receipts."} {
		if !strings.Contains(txt, want) {
			t.Errorf("PDF text lacks %q: %s", want, txt)
		}
	}
	// Jane leaves the collection: her next download is refused.
	e.fake.AddCollection(outlinetest.Collection{ID: col.ID, URLID: col.URLID, Name: col.Name, Private: true})
	e.do(as(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result"}, jane.Token)).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
}
