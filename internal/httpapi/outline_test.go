package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/outline/outlinetest"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/worker"
)

// The tests of the Outline routes run the real server (httpapi over a real
// listener), the real render pipeline with real XeLaTeX where a PDF is
// expected, and the fake Outline of package outlinetest, which answers with
// Outline's real shapes and records every request and every dial.

// olEnv is outprint in front of a fake Outline, with a few readers and
// documents.
type olEnv struct {
	t    testing.TB
	fake *outlinetest.Server
	adm  *admission.Controller
	srv  *httptest.Server
	// rendered counts the calls that reached the Renderer.
	rendered *olCountingRenderer

	jane, bob, olga, sam, rita outlinetest.User
	doc, private, noDL, alien  outlinetest.Document
	janePerson                 outlinetest.Person
	apiKey                     string
}

type olOptions struct {
	// tex runs the real TeX engine behind the pipeline; without it any
	// call that reaches the Renderer fails the test.
	tex       bool
	admission admission.Config
	// wrap wraps the Renderer (the real pipeline, or the refusing one).
	wrap func(Renderer) Renderer
	// fetch adjusts the fetch.Config of the Outline client.
	fetch func(*fetch.Config)
	// outline are options of the Outline client.
	outline []outline.Option
	// engine, when set with tex, replaces the shared pool.
	engine render.Engine
	// diagrams, when set with tex, draws diagrams (render.Config.Diagrams).
	diagrams render.Drawer
}

// olKeys is an Authenticator with one API key, to prove that /v1/render
// keeps its own authentication when Outline is configured.
type olKeys map[string][2]string

func (k olKeys) LookupKey(bearer string) (string, string, bool) {
	v, ok := k[bearer]
	return v[0], v[1], ok
}

// olRefusingRenderer fails the test when a render is reached: the requests
// it stands behind must end before a slot is taken.
type olRefusingRenderer struct{ t testing.TB }

func (r olRefusingRenderer) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	r.t.Errorf("a render was reached; the request should have ended before taking a slot")
	return nil, errors.New("render reached")
}

// olCountingRenderer counts the renders that reached it.
type olCountingRenderer struct {
	next Renderer
	mu   sync.Mutex
	n    int
}

func (r *olCountingRenderer) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return r.next.Render(ctx, pr, progress)
}

func (r *olCountingRenderer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// olGatedRenderer holds the first render it sees until release is closed
// (or the request ends), after telling entered; every later render passes
// straight through.
type olGatedRenderer struct {
	next    Renderer
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *olGatedRenderer) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.next.Render(ctx, pr, progress)
}

func newOlEnv(t testing.TB, o olOptions) *olEnv {
	t.Helper()
	fake := outlinetest.New(t)
	e := &olEnv{t: t, fake: fake}
	e.jane = fake.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-1"})
	e.bob = fake.AddUser(outlinetest.User{Name: "Bob Roe", Token: "tok.bob-2", Role: "viewer"})
	e.olga = fake.AddUser(outlinetest.User{Name: "Olga Other", Token: "tok.olga-3", TeamID: "team-other"})
	e.sam = fake.AddUser(outlinetest.User{Name: "Sam Suspended", Token: "tok.sam-4", Suspended: true})
	e.rita = fake.AddUser(outlinetest.User{Name: "Rita Rate", Token: "tok.rita-5", RateLimited: true})
	e.janePerson = outlinetest.Person{ID: e.jane.ID, Name: e.jane.Name}
	e.doc = fake.AddDocument(outlinetest.Document{
		Title: "Welcome", Text: "Hello **world**\\nsecond line", CreatedBy: e.janePerson,
		UpdatedAt: time.Date(2026, 5, 1, 12, 34, 56, 789e6, time.UTC),
	})
	e.private = fake.AddDocument(outlinetest.Document{
		Title: "Jane only", Text: "secret", CreatedBy: e.janePerson,
		Access: map[string]outlinetest.Access{e.jane.ID: {Read: true, Download: true}},
	})
	e.noDL = fake.AddDocument(outlinetest.Document{
		Title: "Read only", Text: "look, don't take", CreatedBy: e.janePerson,
		Access: map[string]outlinetest.Access{e.jane.ID: {Read: true}},
	})
	e.alien = fake.AddDocument(outlinetest.Document{Title: "Elsewhere", Text: "x", TeamID: "team-other"})

	fc := fake.FetchConfig()
	if o.fetch != nil {
		o.fetch(&fc)
	}
	client := outline.NewClient(fake.URL(), fetch.New(fc), o.outline...)

	var engine render.Engine
	if o.tex {
		testenv.Require(t, "xelatex", "pdfinfo", "pdftotext", "pdfimages", "qpdf")
		engine = o.engine
		if engine == nil {
			engine = testEngine(t)
		}
	}
	pipeline := render.New(render.Config{Engine: engine, TempDir: t.TempDir(), Diagrams: o.diagrams})
	var renderer Renderer = pipeline
	if !o.tex {
		renderer = olRefusingRenderer{t}
	}
	if o.wrap != nil {
		renderer = o.wrap(renderer)
	}
	e.rendered = &olCountingRenderer{next: renderer}

	ac := o.admission
	if ac.Slots == 0 {
		ac = admission.Config{Slots: 1, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute}
	}
	e.adm = mustAdmission(t, ac)
	e.apiKey = "key-alice"
	srv := mustServer(t, Config{
		Capacity: mustCapacity(t, worker.Config{Pipeline: pipeline, Renderer: e.rendered, Admission: e.adm}),
		Auth:     olKeys{e.apiKey: {"alice", "acme"}},
		Outline:  client,
	})
	e.srv = httptest.NewServer(srv.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

// olAnswer is one answer of outprint, body read.
type olAnswer struct {
	status int
	header http.Header
	body   []byte
}

// errors decodes an error list answer.
func (a olAnswer) problems(t *testing.T) []limits.Problem {
	t.Helper()
	var body struct {
		Errors []limits.Problem `json:"errors"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("error answer %d is not the error list: %v: %q", a.status, err, a.body)
	}
	if len(body.Errors) == 0 {
		t.Fatalf("error answer %d has an empty error list: %q", a.status, a.body)
	}
	return body.Errors
}

// get asks outprint for path as the holder of token (no cookie when
// token is ""), with whatever else decorate adds to the request.
func (e *olEnv) get(path, token string, decorate func(*http.Request)) olAnswer {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.AddCookie(&http.Cookie{Name: outline.CookieName, Value: token})
	}
	if decorate != nil {
		decorate(req)
	}
	// The timeout only keeps a broken build from hanging the suite; the
	// bounds under test are far below it.
	c := &http.Client{Timeout: 3 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("GET %s: read body: %v", path, err)
	}
	return olAnswer{status: resp.StatusCode, header: resp.Header, body: body}
}

// olOutlineHits are the fake's hits on Outline's API (not storage or the
// image host).
func olHits(s *outlinetest.Server, server, path string) []outlinetest.Hit {
	var out []outlinetest.Hit
	for _, h := range s.Hits() {
		if h.Server == server && (path == "" || h.Path == path) {
			out = append(out, h)
		}
	}
	return out
}

// olPNG is a real PNG of w×h pixels.
func olPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), 90, uint8(y * 255 / h), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// olPDFTool runs a poppler or qpdf tool on the PDF and returns its output.
func olPDFTool(t *testing.T, pdf []byte, name string, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "doc.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(args, path)
	if name == "pdftotext" {
		args = append(args, "-")
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// olPDFInfo returns one field of pdfinfo.
func olPDFInfo(t *testing.T, info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// olURIs returns the link targets of a PDF, read by qpdf from its
// uncompressed form.
func olURIs(t *testing.T, pdf []byte) string {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pdf"), filepath.Join(dir, "out.pdf")
	if err := os.WriteFile(in, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("qpdf", "--qdf", "--object-streams=disable", in, out).CombinedOutput(); err != nil {
		t.Fatalf("qpdf --qdf: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "/URI"); i >= 0 {
			uris = append(uris, strings.TrimSpace(line[i:]))
		}
	}
	return strings.Join(uris, "\n")
}

// TestOutlineRenderDialect renders a document written in Outline's real
// dialect as its reader and checks the PDF with pdfinfo, pdftotext and
// qpdf: Outline's title, author and date, hard breaks, a notice, a
// mention printed as the name, an attachment image with a size hint
// fetched through storage, a file attachment and document links made
// absolute. It also checks what reached Outline and storage.
func TestOutlineRenderDialect(t *testing.T) {
	e := newOlEnv(t, olOptions{tex: true})
	img := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 300, 200)})
	file := e.fake.AddAttachment(outlinetest.Attachment{ContentType: "application/pdf", Body: []byte("%PDF-1.4 not fetched")})
	text := "Intro line one\\nIntro line two after a break.\n\n" +
		":::info\nRemember the notice body.\n\n:::\n\n" +
		"Reviewed by @[Mina Mentioned](mention://5b2a7c1e-0000-4000-8000-000000000001/user/" + e.bob.ID + ") last week.\n\n" +
		"See [the handbook](/doc/handbook-AbCdEfGhIj) and [Engineering](/collection/eng-7f3a).\n\n" +
		" ![Architecture diagram](" + img + " \" =300x200\")\n\n" +
		"[report.pdf 102400](" + file + ")\n\n" +
		"- [x] done item\n- [ ] open item\n\n" +
		"| Quarter | Total |\n|:---|---:|\n| first<br>second | 42 |\n"
	doc := e.fake.AddDocument(outlinetest.Document{
		Title: "Quarterly Plan", Text: text, CreatedBy: e.janePerson, Language: "en",
		UpdatedAt: time.Date(2026, 5, 1, 12, 34, 56, 0, time.UTC),
	})
	e.fake.ResetHits()

	// The client decorates the request with everything that must not
	// reach Outline: another cookie, an Authorization header, a token
	// parameter, forwarding headers.
	a := e.get("/render/"+doc.ID+"?token="+e.bob.Token, e.jane.Token, func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: "session", Value: "other-cookie"})
		r.Header.Set("Authorization", "Bearer "+e.bob.Token)
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		r.Header.Set("X-User-Id", e.bob.ID)
	})
	if a.status != http.StatusOK {
		t.Fatalf("GET /render/%s = %d, want 200: %s", doc.ID, a.status, a.body)
	}
	for k, want := range map[string]string{
		"Content-Type":           "application/pdf",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := a.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if cd := a.header.Get("Content-Disposition"); !strings.Contains(cd, `filename="Quarterly Plan.pdf"`) {
		t.Errorf("Content-Disposition = %q, want the file named after Outline's title", cd)
	}

	info := olPDFTool(t, a.body, "pdfinfo")
	for field, want := range map[string]string{"Title": "Quarterly Plan", "Author": "Jane Doe"} {
		if got := olPDFInfo(t, info, field); got != want {
			t.Errorf("pdfinfo %s = %q, want %q\n%s", field, got, want, info)
		}
	}
	raw := olPDFTool(t, a.body, "pdftotext", "-enc", "UTF-8")
	txt := strings.Join(strings.Fields(raw), " ")
	for _, want := range []string{
		"Quarterly Plan", "Jane Doe", "2026-05-01",
		"Intro line one", "Intro line two after a break.",
		"Remember the notice body.",
		"Mina Mentioned last week.",
		"the handbook", "Engineering", "report.pdf",
		"done item", "open item", "first", "second", "42",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("pdftotext lacks %q:\n%s", want, raw)
		}
	}
	for _, bad := range []string{`\n`, "mention://", ":::", "=300x200", "attachments.redirect"} {
		if strings.Contains(raw, bad) {
			t.Errorf("pdftotext shows %q, which must not print:\n%s", bad, raw)
		}
	}
	if !regexp.MustCompile(`Intro line one[ \t]*\n[ \t]*Intro line two`).MatchString(raw) {
		t.Errorf("the hard break \\n did not break the line:\n%s", raw)
	}
	// The attachment image is in the PDF, once, at its own pixel size.
	list := olPDFTool(t, a.body, "pdfimages", "-list")
	rows := strings.Split(strings.TrimSpace(list), "\n")[2:] // under the header and its rule
	if len(rows) != 1 {
		t.Errorf("pdfimages -list has %d images, want 1:\n%s", len(rows), list)
	} else if f := strings.Fields(rows[0]); len(f) < 5 || f[3] != "300" || f[4] != "200" {
		t.Errorf("pdfimages -list = %q, want an image of 300x200", rows[0])
	}
	base := e.fake.URL().String()
	uris := olURIs(t, a.body)
	for _, want := range []string{base + "/doc/handbook-AbCdEfGhIj", base + "/collection/eng-7f3a", base + file} {
		if !strings.Contains(uris, "("+want+")") {
			t.Errorf("the PDF has no link to %s; its links:\n%s", want, uris)
		}
	}
	if strings.Contains(uris, "mention:") {
		t.Errorf("a mention kept its target:\n%s", uris)
	}

	// What Outline saw: only the reader's cookie, as the reader.
	api := olHits(e.fake, "outline", "")
	if len(api) == 0 {
		t.Fatal("Outline was never asked")
	}
	for _, h := range api {
		if got := h.Header.Get("Cookie"); got != outline.CookieName+"="+e.jane.Token {
			t.Errorf("%s %s: Cookie = %q, want only the reader's accessToken", h.Method, h.Path, got)
		}
		for _, k := range []string{"Authorization", "X-Forwarded-For", "X-User-Id", "X-Api-Version"} {
			if v := h.Header.Get(k); v != "" {
				t.Errorf("%s %s: header %s = %q reached Outline", h.Method, h.Path, k, v)
			}
		}
		if h.Query.Has("token") || strings.Contains(h.Body, "token") {
			t.Errorf("%s %s: a token parameter reached Outline (query %v, body %q)", h.Method, h.Path, h.Query, h.Body)
		}
	}
	redirects := olHits(e.fake, "outline", "/api/attachments.redirect")
	if len(redirects) != 1 || !strings.HasSuffix(img, redirects[0].Query.Get("id")) {
		t.Errorf("attachments.redirect hits = %+v, want one, for the image only (the file is a link)", redirects)
	}
	stored := olHits(e.fake, "storage", "")
	if len(stored) != 1 {
		t.Fatalf("storage hits = %d, want 1 (the image)", len(stored))
	}
	for _, k := range []string{"Cookie", "Authorization"} {
		if v := stored[0].Header.Get(k); v != "" {
			t.Errorf("storage received %s = %q; credentials must not leave Outline's host", k, v)
		}
	}
	if st := e.adm.Stats(); st.Running != 0 || st.Tickets != 0 {
		t.Errorf("after the render admission holds %d slots and %d tickets, want 0 and 0", st.Running, st.Tickets)
	}
}

// TestOutlineRefusals checks that Outline's refusals become outprint's
// answers, that each ends before anything is counted or rendered, and
// that every answer is the error list with nosniff.
func TestOutlineRefusals(t *testing.T) {
	e := newOlEnv(t, olOptions{})
	unknown := "3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b"
	tests := []struct {
		name, path, token string
		status            int
		source            limits.Source
		code              string
		outlineAsked      bool
	}{
		{"malformed id", "/render/abc", e.jane.Token, 400, limits.SourceRequest, limits.CodeInvalid, false},
		{"malformed id with punctuation", "/render/x%21y%21z%21abcdefghij", e.jane.Token, 400, limits.SourceRequest, limits.CodeInvalid, false},
		{"malformed id without cookie", "/render/abc", "", 400, limits.SourceRequest, limits.CodeInvalid, false},
		{"no cookie", "/render/" + e.doc.ID, "", 401, limits.SourceAuth, httperr.CodeUnauthorized, false},
		{"an API key in the cookie", "/render/" + e.doc.ID, "ol_api_abcdef", 401, limits.SourceAuth, httperr.CodeUnauthorized, false},
		{"unknown session", "/render/" + e.doc.ID, "tok.nobody", 401, limits.SourceAuth, httperr.CodeUnauthorized, true},
		{"reader without access", "/render/" + e.private.ID, e.bob.Token, 403, limits.SourceAuth, httperr.CodeForbidden, true},
		{"another team's document", "/render/" + e.alien.ID, e.jane.Token, 403, limits.SourceAuth, httperr.CodeForbidden, true},
		{"reader of another team", "/render/" + e.doc.ID, e.olga.Token, 403, limits.SourceAuth, httperr.CodeForbidden, true},
		{"suspended user", "/render/" + e.doc.ID, e.sam.Token, 403, limits.SourceAuth, httperr.CodeForbidden, true},
		{"no download right", "/render/" + e.noDL.ID, e.jane.Token, 403, limits.SourceAuth, httperr.CodeForbidden, true},
		{"unknown document", "/render/" + unknown, e.jane.Token, 404, limits.SourceRequest, httperr.CodeNotFound, true},
		{"unknown urlId", "/render/some-title-ZZZZZZZZZZ", e.jane.Token, 404, limits.SourceRequest, httperr.CodeNotFound, true},
		{"rate limited by Outline", "/render/" + e.doc.ID, e.rita.Token, 429, limits.SourceService, CodeRateLimited, true},
		{"status: no cookie", "/status/" + e.doc.ID, "", 401, limits.SourceAuth, httperr.CodeUnauthorized, false},
		{"status: no access", "/status/" + e.private.ID, e.bob.Token, 403, limits.SourceAuth, httperr.CodeForbidden, true},
		{"status: unknown document", "/status/" + unknown, e.jane.Token, 404, limits.SourceRequest, httperr.CodeNotFound, true},
		{"status: malformed id", "/status/abc", e.jane.Token, 400, limits.SourceRequest, limits.CodeInvalid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fake.ResetHits()
			a := e.get(tt.path, tt.token, nil)
			if a.status != tt.status {
				t.Fatalf("GET %s = %d, want %d: %s", tt.path, a.status, tt.status, a.body)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if v := a.header.Get("X-Content-Type-Options"); v != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", v)
			}
			p := a.problems(t)[0]
			if p.Source != tt.source || p.Code != tt.code {
				t.Errorf("problem = %s/%s, want %s/%s (%q)", p.Source, p.Code, tt.source, tt.code, p.Message)
			}
			if strings.Contains(string(a.body), "Authorization error") || strings.Contains(string(a.body), "Authentication required") {
				t.Errorf("Outline's own message reached the client: %s", a.body)
			}
			if tt.status == 429 {
				if got := a.header.Get("Retry-After"); got != "42" {
					t.Errorf("Retry-After = %q, want Outline's 42", got)
				}
			}
			if asked := len(olHits(e.fake, "outline", "")) > 0; asked != tt.outlineAsked {
				t.Errorf("Outline asked = %v, want %v", asked, tt.outlineAsked)
			}
			if n := len(olHits(e.fake, "outline", "/api/attachments.redirect")) + len(olHits(e.fake, "storage", "")); n != 0 {
				t.Errorf("%d attachment requests; a refused request fetches nothing", n)
			}
			if st := e.adm.Stats(); st.Tickets != 0 || st.Running != 0 || st.RefusedUserLimit != 0 {
				t.Errorf("admission after a refusal: %+v, want nothing held or counted", st)
			}
		})
	}
	if n := e.rendered.count(); n != 0 {
		t.Errorf("%d renders reached; every request was refused before", n)
	}
}

// TestOutlineAuthSeparation: with Outline configured, /v1/render still
// wants its API key (the cookie is no credential there), and /render
// wants the cookie (an API key is no credential there).
func TestOutlineAuthSeparation(t *testing.T) {
	e := newOlEnv(t, olOptions{})
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/render", strings.NewReader(`{"markdown":"# Hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: outline.CookieName, Value: e.jane.Token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /v1/render with only an Outline cookie = %d, want 401", resp.StatusCode)
	}

	e.fake.ResetHits()
	a := e.get("/render/"+e.doc.ID, "", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+e.apiKey) })
	if a.status != http.StatusUnauthorized {
		t.Errorf("GET /render with only an API key = %d, want 401: %s", a.status, a.body)
	}
	a = e.get("/render/"+e.doc.ID, "", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+e.jane.Token) })
	if a.status != http.StatusUnauthorized {
		t.Errorf("GET /render with the reader's token as a Bearer header = %d, want 401: %s", a.status, a.body)
	}
	if n := len(e.fake.Hits()); n != 0 {
		t.Errorf("Outline was asked %d times for requests without the cookie", n)
	}
}

// TestOutlineUnavailable: an Outline that fails, is slow or is gone ends
// in a 502 with source service, bounded by the client's timeout.
func TestOutlineUnavailable(t *testing.T) {
	tests := []struct {
		name string
		fail func(*outlinetest.Server)
	}{
		{"500", func(s *outlinetest.Server) { s.SetFailure(500) }},
		{"503 from the proxy", func(s *outlinetest.Server) { s.SetFailure(503) }},
		{"slow", func(s *outlinetest.Server) { s.SetDelay(time.Minute) }},
		{"closed", func(s *outlinetest.Server) { s.Outline.CloseClientConnections(); s.Outline.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newOlEnv(t, olOptions{outline: []outline.Option{outline.WithTimeout(300 * time.Millisecond)}})
			tt.fail(e.fake)
			for _, path := range []string{"/render/" + e.doc.ID, "/status/" + e.doc.ID} {
				a := e.get(path, e.jane.Token, nil)
				if a.status != http.StatusBadGateway {
					t.Fatalf("GET %s = %d, want 502: %s", path, a.status, a.body)
				}
				p := a.problems(t)[0]
				if p.Source != limits.SourceService || p.Code != CodeUnavailable {
					t.Errorf("GET %s: problem = %s/%s, want service/%s", path, p.Source, p.Code, CodeUnavailable)
				}
				if strings.Contains(string(a.body), "<html") || strings.Contains(string(a.body), "127.0.0.1") {
					t.Errorf("GET %s: internal detail reached the client: %s", path, a.body)
				}
			}
			if st := e.adm.Stats(); st.Tickets != 0 {
				t.Errorf("admission tickets = %d after Outline failed, want 0", st.Tickets)
			}
		})
	}
}

// TestOutlineImageFailures: a document whose images cannot be had — slow,
// failing, missing or forbidden attachments, and images on loopback,
// private and metadata addresses — is a 422 listing each of them, without
// a slot taken, and the internal addresses are never dialed.
func TestOutlineImageFailures(t *testing.T) {
	e := newOlEnv(t, olOptions{fetch: func(c *fetch.Config) {
		c.Timeout = time.Second
		c.AllowHosts = append(c.AllowHosts, outlinetest.PrivateHost, outlinetest.MetadataHost, outlinetest.LoopbackHost,
			"169.254.169.254", "10.1.2.3", "127.0.0.1")
	}})
	good := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 20, 10)})
	slow := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 20, 10), Delay: time.Minute})
	failing := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 20, 10), StorageStatus: 500})
	expired := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 20, 10), StorageStatus: 403})
	foreign := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 20, 10), TeamID: "team-other"})
	notPNG := e.fake.AddAttachment(outlinetest.Attachment{Body: []byte("<html>not an image</html>")})
	missing := "/api/attachments.redirect?id=9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a"
	internal := []string{
		"http://" + outlinetest.PrivateHost + "/x.png",
		"http://" + outlinetest.MetadataHost + "/latest/meta-data/iam",
		"http://" + outlinetest.LoopbackHost + ":8080/admin.png",
		"http://169.254.169.254/latest/meta-data",
		"http://10.1.2.3/a.png",
		"http://127.0.0.1:9/a.png",
	}
	bad := append([]string{slow, failing, expired, foreign, notPNG, missing}, internal...)
	var text strings.Builder
	text.WriteString(" ![fine](" + good + " \" =20x10\")\n\n")
	for i, u := range bad {
		fmt.Fprintf(&text, "Image %d:\n\n ![img %d](%s)\n\n", i, i, u)
	}
	doc := e.fake.AddDocument(outlinetest.Document{Title: "Broken images", Text: text.String(), CreatedBy: e.janePerson})
	e.fake.ResetHits()

	a := e.get("/render/"+doc.ID, e.jane.Token, nil)
	if a.status != http.StatusUnprocessableEntity {
		t.Fatalf("GET /render = %d, want 422: %s", a.status, a.body)
	}
	problems := a.problems(t)
	listed := map[string]limits.Problem{}
	for _, p := range problems {
		if p.Source != limits.SourceImage || p.Code != limits.CodeImage {
			t.Errorf("problem %+v, want source image, code image", p)
		}
		listed[p.Field] = p
	}
	for _, u := range bad {
		p, ok := listed[u]
		if !ok {
			t.Errorf("image %s is not listed; the list: %s", u, a.body)
			continue
		}
		if p.Line == 0 {
			t.Errorf("image %s is listed without its line", u)
		}
	}
	if _, ok := listed[good]; ok || len(problems) != len(bad) {
		t.Errorf("%d problems, want exactly the %d bad images: %s", len(problems), len(bad), a.body)
	}
	for _, d := range e.fake.Dials() {
		if strings.HasPrefix(d, "10.") || strings.HasPrefix(d, "169.254.") || d == "127.0.0.1:8080" || d == "127.0.0.1:9" {
			t.Errorf("dialed %s: an internal address was reached", d)
		}
	}
	for _, h := range olHits(e.fake, "storage", "") {
		if v := h.Header.Get("Cookie"); v != "" {
			t.Errorf("storage received Cookie %q", v)
		}
	}
	if n := e.rendered.count(); n != 0 {
		t.Errorf("%d renders reached with broken images", n)
	}
	if st := e.adm.Stats(); st.Tickets != 0 || st.Running != 0 {
		t.Errorf("admission after the image error: %+v, want nothing held", st)
	}
}

// TestOutlinePerUserLimit: the per-user count is keyed by Outline's user
// id and by nothing the client adds. While a reader's render runs, a
// second request of the same reader is refused with user_limit whatever
// headers, parameters or cookies it carries — including ones that name
// another user — while another reader still gets their PDF.
func TestOutlinePerUserLimit(t *testing.T) {
	gate := &olGatedRenderer{entered: make(chan struct{}), release: make(chan struct{})}
	e := newOlEnv(t, olOptions{
		tex:       true,
		admission: admission.Config{Slots: 2, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute},
		wrap:      func(r Renderer) Renderer { gate.next = r; return gate },
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(gate.release)
		}
	}
	defer release()

	first := make(chan olAnswer, 1)
	go func() {
		first <- e.get("/render/"+e.doc.ID+"?user=first", e.jane.Token, func(r *http.Request) {
			r.Header.Set("X-Forwarded-For", "198.51.100.1")
		})
	}()
	select {
	case <-gate.entered:
	case a := <-first:
		t.Fatalf("the first render ended before it was released: %d %s", a.status, a.body)
	}

	decorations := []struct {
		name     string
		path     string
		decorate func(*http.Request)
	}{
		{"X-Forwarded-For", "/render/" + e.doc.ID, func(r *http.Request) { r.Header.Set("X-Forwarded-For", "198.51.100.77") }},
		{"X-Real-IP and Forwarded", "/render/" + e.doc.ID, func(r *http.Request) {
			r.Header.Set("X-Real-IP", "198.51.100.78")
			r.Header.Set("Forwarded", "for=198.51.100.78")
		}},
		{"X-User-Id of another reader", "/render/" + e.doc.ID, func(r *http.Request) { r.Header.Set("X-User-Id", e.bob.ID) }},
		{"a second cookie", "/render/" + e.doc.ID, func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "accessToken2", Value: e.bob.Token})
			r.AddCookie(&http.Cookie{Name: "session", Value: "abc"})
		}},
		{"?user= and ?token=", "/render/" + e.doc.ID + "?user=" + e.bob.ID + "&token=" + e.bob.Token, nil},
		{"Authorization of another reader", "/render/" + e.doc.ID, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+e.bob.Token) }},
		{"the slug form of the id", "/render/welcome-" + e.doc.URLID, nil},
	}
	for _, d := range decorations {
		a := e.get(d.path, e.jane.Token, d.decorate)
		if a.status != http.StatusTooManyRequests {
			t.Errorf("%s: second request of the same reader = %d, want 429: %s", d.name, a.status, a.body)
			continue
		}
		if p := a.problems(t)[0]; p.Code != limits.CodeUserLimit || p.Source != limits.SourceService {
			t.Errorf("%s: problem %s/%s, want service/user_limit", d.name, p.Source, p.Code)
		}
		if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("%s: Retry-After = %q, want whole seconds ≥ 1", d.name, a.header.Get("Retry-After"))
		}
	}

	// /status while the reader is at their limit: it counts nothing, so
	// it answers, and it shows the running render.
	st := e.get("/status/"+e.doc.ID, e.jane.Token, nil)
	if st.status != http.StatusOK {
		t.Errorf("GET /status while rendering = %d, want 200: %s", st.status, st.body)
	} else {
		var body struct {
			Admission struct{ Running, Queued int } `json:"admission"`
		}
		if err := json.Unmarshal(st.body, &body); err != nil {
			t.Errorf("/status body: %v: %s", err, st.body)
		} else if body.Admission.Running != 1 {
			t.Errorf("/status admission.running = %d, want 1: %s", body.Admission.Running, st.body)
		}
	}
	if s := e.adm.Stats(); s.Tickets != 1 || s.Running != 1 {
		t.Errorf("while one render runs: %d tickets, %d running, want 1 and 1", s.Tickets, s.Running)
	}

	// Another reader, claiming to be the first one, is counted as
	// themselves and renders.
	other := e.get("/render/"+e.doc.ID, e.bob.Token, func(r *http.Request) { r.Header.Set("X-User-Id", e.jane.ID) })
	if other.status != http.StatusOK || !bytes.HasPrefix(other.body, []byte("%PDF-")) {
		t.Errorf("another reader during the first render = %d, want 200 with a PDF: %.300s", other.status, other.body)
	}

	release()
	a := <-first
	if a.status != http.StatusOK || !bytes.HasPrefix(a.body, []byte("%PDF-")) {
		t.Errorf("the first render = %d, want 200 with a PDF: %.300s", a.status, a.body)
	}
	s := e.adm.Stats()
	if s.Tickets != 0 || s.Running != 0 {
		t.Errorf("after all requests: %d tickets, %d running, want 0", s.Tickets, s.Running)
	}
	if want := uint64(len(decorations)); s.RefusedUserLimit != want {
		t.Errorf("user_limit refusals = %d, want %d", s.RefusedUserLimit, want)
	}
	if n := e.rendered.count(); n != 2 {
		t.Errorf("renders reached = %d, want 2 (the first reader's and the other reader's)", n)
	}
}

// olStatus is the body of GET /status.
type olStatus struct {
	DocumentID string           `json:"documentId"`
	Title      string           `json:"title"`
	Renderable *bool            `json:"renderable"`
	Errors     []limits.Problem `json:"errors"`
	Admission  *struct {
		Running    *int `json:"running"`
		Queued     *int `json:"queued"`
		RetryAfter *int `json:"retryAfter"`
	} `json:"admission"`
}

// TestOutlineStatus: /status answers after the cheap checks only. It
// fetches no image (the fake records no attachment or storage hit), takes
// no slot and counts nothing (admission is exactly as before), and tells a
// readable document that cannot be rendered by renderable false with the
// errors a render would answer.
func TestOutlineStatus(t *testing.T) {
	e := newOlEnv(t, olOptions{})
	img := e.fake.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 20, 10)})
	withImages := e.fake.AddDocument(outlinetest.Document{
		Title: "Pictures", CreatedBy: e.janePerson,
		Text: " ![a](" + img + ")\n\n ![b](" + e.fake.ImagesURL("/b.png") + ")\n\n ![c](http://" + outlinetest.MetadataHost + "/x.png)\n",
	})
	badMath := e.fake.AddDocument(outlinetest.Document{Title: "Math", Text: "Formula $\\input{/etc/passwd}$ here.", CreatedBy: e.janePerson})
	tests := []struct {
		name, id   string
		renderable bool
		title      string
		code       string
	}{
		{"renderable with images", withImages.ID, true, "Pictures", ""},
		{"slug-urlId", "welcome-" + e.doc.URLID, true, "Welcome", ""},
		{"no download right", e.noDL.ID, false, "Read only", httperr.CodeForbidden},
		{"math outside the allowlist", badMath.ID, false, "Math", limits.CodeMath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.fake.ResetHits()
			before := e.adm.Stats()
			a := e.get("/status/"+tt.id, e.jane.Token, nil)
			if a.status != http.StatusOK {
				t.Fatalf("GET /status/%s = %d, want 200: %s", tt.id, a.status, a.body)
			}
			if v := a.header.Get("X-Content-Type-Options"); v != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", v)
			}
			if v := a.header.Get("Cache-Control"); v != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", v)
			}
			var st olStatus
			dec := json.NewDecoder(bytes.NewReader(a.body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&st); err != nil {
				t.Fatalf("status body: %v: %s", err, a.body)
			}
			if st.Renderable == nil || *st.Renderable != tt.renderable || st.Title != tt.title || st.DocumentID == "" {
				t.Errorf("status = %s, want renderable %v, title %q and the document id", a.body, tt.renderable, tt.title)
			}
			if st.Errors == nil || st.Admission == nil || st.Admission.Running == nil || st.Admission.Queued == nil || st.Admission.RetryAfter == nil {
				t.Errorf("status lacks errors or admission fields: %s", a.body)
			}
			if tt.code == "" && len(st.Errors) != 0 || tt.code != "" && (len(st.Errors) == 0 || st.Errors[0].Code != tt.code) {
				t.Errorf("status errors = %+v, want code %q", st.Errors, tt.code)
			}
			for _, h := range e.fake.Hits() {
				if h.Path == "/api/attachments.redirect" || h.Server != "outline" {
					t.Errorf("/status fetched %s %s on %s", h.Method, h.Path, h.Server)
				}
			}
			if d := e.fake.Dials(); len(d) != 0 && !onlyOutline(d, e.fake) {
				t.Errorf("/status dialed %v", d)
			}
			if after := e.adm.Stats(); after != before {
				t.Errorf("admission changed: %+v -> %+v", before, after)
			}
		})
	}
	if n := e.rendered.count(); n != 0 {
		t.Errorf("/status reached %d renders", n)
	}
}

func onlyOutline(dials []string, s *outlinetest.Server) bool {
	for _, d := range dials {
		if d != s.Outline.Listener.Addr().String() {
			return false
		}
	}
	return true
}

// TestOutlineNotConfigured: without outline.url the routes answer 404 with
// the error list.
func TestOutlineNotConfigured(t *testing.T) {
	srv := mustServer(t, Config{
		Capacity: mustCapacity(t, worker.Config{Pipeline: render.New(render.Config{}), Renderer: olRefusingRenderer{t}, Admission: mustAdmission(t, admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1})}),
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, path := range []string{"/render/hDYep1TPAM", "/status/hDYep1TPAM"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "outline.url") {
			t.Errorf("GET %s without Outline = %d %s, want 404 naming outline.url", path, resp.StatusCode, body)
		}
	}
}

// TestOutlineAnswer maps every error of package outline.
func TestOutlineAnswer(t *testing.T) {
	tests := []struct {
		err    error
		status int
		source limits.Source
		code   string
		retry  int
	}{
		{&outline.APIError{Status: 401, Code: outline.CodeAuthenticationRequired}, 401, limits.SourceAuth, httperr.CodeUnauthorized, 0},
		{&outline.APIError{Status: 403, Code: outline.CodeUserSuspended}, 403, limits.SourceAuth, httperr.CodeForbidden, 0},
		{&outline.APIError{Status: 403, Code: outline.CodeAuthorization}, 403, limits.SourceAuth, httperr.CodeForbidden, 0},
		{&outline.APIError{Status: 404, Code: outline.CodeNotFound}, 404, limits.SourceRequest, httperr.CodeNotFound, 0},
		{&outline.APIError{Status: 400, Code: outline.CodeValidation}, 400, limits.SourceRequest, limits.CodeInvalid, 0},
		{&outline.APIError{Status: 429, Code: outline.CodeRateLimited, RetryAfter: 1500 * time.Millisecond}, 429, limits.SourceService, CodeRateLimited, 2},
		{&outline.APIError{Status: 429, Code: outline.CodeRateLimited}, 429, limits.SourceService, CodeRateLimited, 1},
		{&outline.APIError{Status: 405, Code: "method_not_allowed"}, 502, limits.SourceService, CodeUnavailable, 0},
		{fmt.Errorf("document x: %w", outline.ErrNoDownload), 403, limits.SourceAuth, httperr.CodeForbidden, 0},
		{fmt.Errorf("documents.info: %w", outline.ErrTooLarge), 413, limits.SourceDocument, limits.CodeTooLarge, 0},
		{fmt.Errorf("%w: auth.info: status 500", outline.ErrUnavailable), 502, limits.SourceService, CodeUnavailable, 0},
		{errOutlineOff, 404, limits.SourceRequest, httperr.CodeNotFound, 0},
		{errNoCookie, 401, limits.SourceAuth, httperr.CodeUnauthorized, 0},
		{errDocumentID, 400, limits.SourceRequest, limits.CodeInvalid, 0},
		{errCollectionID, 400, limits.SourceRequest, limits.CodeInvalid, 0},
		{fmt.Errorf("auth.info: %w", outline.ErrSuspended), 403, limits.SourceAuth, httperr.CodeForbidden, 0},
		{&outline.APIError{Status: 402, Code: outline.CodePaymentRequired}, 403, limits.SourceAuth, httperr.CodeForbidden, 0},
		{fmt.Errorf("document x: %w", outline.ErrDeleted), 410, limits.SourceDocument, CodeDeleted, 0},
	}
	for _, tt := range tests {
		status, problems, retry := errorAnswer(tt.err)
		if status != tt.status || len(problems) != 1 || problems[0].Source != tt.source || problems[0].Code != tt.code || retry != tt.retry {
			t.Errorf("errorAnswer(%v) = %d %+v retry %d, want %d %s/%s retry %d", tt.err, status, problems, retry, tt.status, tt.source, tt.code, tt.retry)
		}
	}
}
