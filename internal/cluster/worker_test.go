package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/worker"
)

const testSecret = "a-cluster-secret-for-tests"

// testBundle is one worker's listener on a loopback port and what steers
// it.
type testBundle struct {
	url string
	adm *admission.Controller
	// gate, when set, holds renders until it is closed.
	gate atomic.Pointer[chan struct{}]
	// entered receives the title of every render that holds a slot.
	entered chan string
}

// setup starts a worker's listener on a render pipeline whose Render
// stage is fake (a PDF of the title) unless realTeX, with one slot.
func setup(t *testing.T, realTeX bool, bounds limits.Render) *testBundle {
	t.Helper()
	return setupWith(t, realTeX, bounds, nil)
}

// setupWith is setup with a diagram drawer (nil: none) behind the
// pipeline.
func setupWith(t *testing.T, realTeX bool, bounds limits.Render, drawer render.Drawer) *testBundle {
	t.Helper()
	tb := &testBundle{entered: make(chan string, 16)}
	var eng render.Engine
	if realTeX {
		runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: t.TempDir()})
		if err != nil {
			t.Fatalf("tex.NewRunner: %v", err)
		}
		eng = runner
	}
	pl := render.New(render.Config{Engine: eng, TempDir: t.TempDir(), Limits: bounds, Diagrams: drawer})
	adm, err := admission.New(admission.Config{Slots: 1, PerUser: 1, QueueDepth: 0, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tb.adm = adm
	var r worker.Renderer = pl
	if !realTeX {
		r = fakeRenderer{tb}
	}
	capacity, err := worker.New(worker.Config{Pipeline: pl, Renderer: r, Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	wk, err := NewWorker(WorkerConfig{Capacity: capacity, Secret: testSecret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(wk.Handler())
	t.Cleanup(hs.Close)
	tb.url = hs.URL
	return tb
}

// fakeRenderer answers a one-page "PDF" of the document's title, after
// the test bundle's gate opens.
type fakeRenderer struct{ tb *testBundle }

func (f fakeRenderer) Render(ctx context.Context, pr *render.Prepared, _ func(render.Progress)) (*render.Result, error) {
	f.tb.entered <- pr.Title()
	if gate := f.tb.gate.Load(); gate != nil {
		select {
		case <-*gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &render.Result{PDF: []byte("%PDF-1.5 " + pr.Title()), Title: pr.Title(), Pages: 1, CPU: 70 * time.Millisecond, MaxRSS: 1 << 20,
		Warnings: []limits.Problem{{Source: limits.SourceImage, Code: limits.CodeImage, Line: 2, Message: "a warning"}}}, nil
}

// post sends body to the worker's render route with secret.
func (tb *testBundle) post(t *testing.T, secret string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, tb.url+RenderPath, bytes.NewReader(body))
	if secret != "" {
		req.Header.Set(SecretHeader, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func bundleJSON(t *testing.T, b Bundle) []byte {
	t.Helper()
	j, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestWorkerProtocol: the worker's answers as a gateway reads them — a
// PDF with its pages, title, CPU, memory and warnings in headers; the
// error list of a document problem; 401 without the secret; 400 for a body
// that is not a bundle; busy (429) and draining (503) in SPEC §4's
// {"message","phase"} shape with Retry-After; and Remote reads each back
// into what a local render returns.
func TestWorkerProtocol(t *testing.T) {
	t.Parallel()
	tb := setup(t, false, limits.Render{})
	memo := bundleJSON(t, Bundle{Name: "memo.md", Markdown: []byte("# Memo\n\nText.\n")})

	resp, body := tb.post(t, testSecret, memo)
	if resp.StatusCode != http.StatusOK || string(body) != "%PDF-1.5 Memo" || resp.Header.Get(headerPages) != "1" ||
		resp.Header.Get(headerTitle) != "Memo" || resp.Header.Get(headerWarnings) == "" {
		t.Errorf("render = %d %q %v, want 200, the PDF and its headers", resp.StatusCode, body, resp.Header)
	}
	<-tb.entered

	for _, tc := range []struct {
		name, secret string
		body         []byte
		status       int
		code         string
	}{
		{"no secret", "", memo, http.StatusUnauthorized, "unauthorized"},
		{"wrong secret", testSecret + "x", memo, http.StatusUnauthorized, "unauthorized"},
		{"not a bundle", testSecret, []byte("<html>"), http.StatusBadRequest, limits.CodeInvalid},
		{"math error", testSecret, bundleJSON(t, Bundle{Name: "m.md", Markdown: []byte("# M\n\n$\\frac{1$\n")}), http.StatusUnprocessableEntity, limits.CodeMath},
	} {
		resp, body := tb.post(t, tc.secret, tc.body)
		var v struct{ Errors []limits.Problem }
		if resp.StatusCode != tc.status || json.Unmarshal(body, &v) != nil || len(v.Errors) == 0 || v.Errors[0].Code != tc.code {
			t.Errorf("%s: answer = %d %s, want %d with code %s", tc.name, resp.StatusCode, body, tc.status, tc.code)
		}
	}

	// Busy: the one slot is held, and the worker has no queue.
	gate := make(chan struct{})
	tb.gate.Store(&gate)
	held := make(chan int, 1)
	go func() {
		resp, _ := tb.post(t, testSecret, memo)
		held <- resp.StatusCode
	}()
	<-tb.entered
	resp, body = tb.post(t, testSecret, memo)
	var busy struct{ Message, Phase string }
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		json.Unmarshal(body, &busy) != nil || busy.Phase != phaseAdmission || busy.Message == "" {
		t.Errorf("busy worker = %d %s Retry-After %q, want 429 {message, phase: admission}", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	rr, err := NewRemote(RemoteConfig{Workers: []string{tb.url}, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	pl := render.New(render.Config{TempDir: t.TempDir()})
	checked, err := pl.Check(render.Request{Name: "memo.md", Markdown: []byte("# Memo\n")})
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := pl.Fetch(context.Background(), checked)
	if err != nil {
		t.Fatal(err)
	}
	var ref *admission.Refusal
	if _, err := rr.Render(context.Background(), prepared, nil); !errorsAs(err, &ref) || ref.Code != limits.CodeBusy {
		t.Errorf("Remote.Render on a busy worker = %v, want a busy refusal", err)
	}
	close(gate)
	if s := <-held; s != http.StatusOK {
		t.Errorf("the held render = %d, want 200", s)
	}

	// Through Remote, the PDF and what the headers carry come back.
	tb.gate.Store(nil)
	res, err := rr.Render(context.Background(), prepared, nil)
	if err != nil || string(res.PDF) != "%PDF-1.5 Memo" || res.Pages != 1 || res.Title != "Memo" || res.CPU != 70*time.Millisecond ||
		res.MaxRSS != 1<<20 || len(res.Warnings) != 1 || res.Warnings[0].Line != 2 {
		t.Errorf("Remote.Render = %+v, %v, want the worker's PDF, pages, title, CPU, memory and warning", res, err)
	}
	<-tb.entered

	// Draining: admission closed, the worker answers 503 in its shape.
	tb.adm.Close()
	resp, body = tb.post(t, testSecret, memo)
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &busy) != nil || busy.Phase != phaseDraining {
		t.Errorf("draining worker = %d %s, want 503 {phase: draining}", resp.StatusCode, body)
	}
	if r, err := http.Get(tb.url + "/readyz"); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz of a draining worker = %v %v, want 503", r, err)
	}
	if r, err := http.Get(tb.url + "/v1/render"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("a public route on the worker = %v %v, want 404", r, err)
	}
}

// TestNewWorkerRefusesNoSecret: a worker without the cluster secret would
// render for nobody; it is refused at startup naming the setting.
func TestNewWorkerRefusesNoSecret(t *testing.T) {
	t.Parallel()
	pl := render.New(render.Config{})
	adm, _ := admission.New(admission.Config{})
	capacity, err := worker.New(worker.Config{Pipeline: pl, Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewWorker(WorkerConfig{Capacity: capacity}); err == nil || !strings.Contains(err.Error(), "cluster.secret") {
		t.Errorf("NewWorker without a secret = %v, want an error naming cluster.secret", err)
	}
}

// TestWorkerTakesCollectionBundle: the worker bounds a bundle's bytes by
// the largest request a gateway may send — a collection of
// limits.MaxCollectionBytes of Markdown with limits.MaxTotalImageBytes of
// images, base64 in JSON — and leaves the rest to the pipeline's checks by
// the bundle's Parts. Such a bundle (here with a math error, so that the
// worker's own Check answers without a render) gets the document's 422,
// where a bound made for one document answered 413 too_large.
func TestWorkerTakesCollectionBundle(t *testing.T) {
	testenv.Require(t, "xelatex")
	tb := setup(t, true, limits.Render{})
	var md strings.Builder
	md.WriteString("# Chapter one\n\nBroken math: $\\frac{1$\n\n")
	para := strings.Repeat("Words of a long collection that fill its chapters. ", 20) + "\n\n"
	for i := 0; md.Len() < 9<<20; i++ {
		if i%2000 == 0 {
			fmt.Fprintf(&md, "# Chapter %d\n\n", i/2000+2)
		}
		md.WriteString(para)
	}
	assets := map[string][]byte{}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 5 {
		b := make([]byte, 9<<20)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		assets[fmt.Sprintf("https://wiki.example.com/api/attachments.redirect?id=%d", i)] = b
	}
	// A collection is an Outline document: only then are its parts taken
	// (TestBundlePartsNotTrusted).
	body := bundleJSON(t, Bundle{Name: "Handbook.md", Parts: 10, Markdown: []byte(md.String()), Assets: assets,
		Outline: &render.OutlineDoc{URL: "https://wiki.example.com", Title: "Handbook"}})
	if old := limits.MaxMarkdownBytes*2 + limits.MaxTotalImageBytes*4/3 + 1<<20; len(body) <= old {
		t.Fatalf("the bundle is %d bytes, want more than a one-document bound (%d) to show the difference", len(body), old)
	}
	resp, answer := tb.post(t, testSecret, body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !bytes.Contains(answer, []byte(`"line":3`)) {
		t.Errorf("a collection bundle of %d bytes with a math error = %d %s, want 422 naming line 3", len(body), resp.StatusCode, answer)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestBundlePartsNotTrusted: a bundle that is not an Outline collection is
// one document whatever its "parts" says, so its Markdown is held to one
// document's bound (issue 24: "parts": 10 let 9 MiB through a worker).
func TestBundlePartsNotTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    Bundle
		want int
	}{
		{Bundle{Parts: 10}, 1},
		{Bundle{Parts: 10, Outline: &render.OutlineDoc{Title: "Handbook"}}, 10},
		{Bundle{Parts: 0, Outline: &render.OutlineDoc{Title: "Doc"}}, 1},
	} {
		if got := tc.b.Request().Parts; got != tc.want {
			t.Errorf("Bundle{Parts: %d, Outline: %v}.Request().Parts = %d, want %d", tc.b.Parts, tc.b.Outline != nil, got, tc.want)
		}
	}
}
