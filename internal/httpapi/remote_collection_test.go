package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
)

// startWorker runs a worker's listener (the route table of `outprint
// worker`) on a loopback port, rendering with real XeLaTeX, and returns
// its URL.
func startWorker(t *testing.T, secret string) string {
	return startWorkerWith(t, secret, limits.Render{})
}

// startWorkerWith is startWorker with the worker's render bounds (zero
// fields take the defaults).
func startWorkerWith(t *testing.T, secret string, bounds limits.Render) string {
	t.Helper()
	runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("tex.NewRunner: %v", err)
	}
	pl := render.New(render.Config{Engine: runner, TempDir: t.TempDir(), Limits: bounds})
	srv := mustServer(t, Config{
		WorkerRole:    true,
		ClusterSecret: secret,
		Pipeline:      pl,
		Renderer:      pl,
		Admission:     mustAdmission(t, admission.Config{Slots: 1, PerUser: 1, MaxWait: time.Minute}),
		Logger:        slog.New(slog.DiscardHandler),
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestOutlineCollectionThroughWorker: a collection printed through a
// gateway whose Render stage is a worker (RemoteRenderer → the worker's
// listener) comes back whole, as it does from a local render: the worker
// re-checks the joined document by the collection's limits, not by one
// document's.
func TestOutlineCollectionThroughWorker(t *testing.T) {
	const secret = "a-cluster-secret-for-tests"
	workerURL := startWorker(t, secret)
	f := newCollectionFixtureWith(t, olOptions{tex: true, wrap: func(Renderer) Renderer {
		rr, err := NewRemoteRenderer(RemoteConfig{Workers: []string{workerURL}, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		return rr
	}})
	a := f.e.get("/render/collection/"+f.col.ID, f.e.jane.Token, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET /render/collection through a worker = %d, want 200: %s", a.status, a.body)
	}
	info := olPDFTool(t, a.body, "pdfinfo")
	if n, _ := strconv.Atoi(olPDFInfo(t, info, "Pages")); n < 7 {
		t.Errorf("the collection through a worker has %d pages, want at least one per top-level document", n)
	}
}

// TestRemoteRelaysTimeout: a render that runs out of time on the worker
// is the gateway's 504 with the worker's timeout error list, as it is on
// a local render, not an internal error.
func TestRemoteRelaysTimeout(t *testing.T) {
	const secret = "a-cluster-secret-for-tests"
	workerURL := startWorkerWith(t, secret, limits.Render{Timeout: time.Millisecond})
	e := newOlEnv(t, olOptions{tex: true, wrap: func(Renderer) Renderer {
		rr, err := NewRemoteRenderer(RemoteConfig{Workers: []string{workerURL}, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		return rr
	}})
	a := e.get("/render/"+e.doc.ID, e.jane.Token, nil)
	if a.status != http.StatusGatewayTimeout {
		t.Fatalf("GET /render/{id} through a worker out of time = %d, want 504: %s", a.status, a.body)
	}
	if p := a.problems(t)[0]; p.Code != limits.CodeTimeout {
		t.Errorf("error code = %s, want %s (%s)", p.Code, limits.CodeTimeout, p.Message)
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
	const secret = "a-cluster-secret-for-tests"
	workerURL := startWorker(t, secret)
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
	body, err := json.Marshal(render.Bundle{Name: "Handbook.md", Parts: 10, Markdown: []byte(md.String()), Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	if old := limits.MaxMarkdownBytes*2 + limits.MaxTotalImageBytes*4/3 + 1<<20; len(body) <= old {
		t.Fatalf("the bundle is %d bytes, want more than a one-document bound (%d) to show the difference", len(body), old)
	}
	req, _ := http.NewRequest(http.MethodPost, workerURL+WorkerRenderPath, bytes.NewReader(body))
	req.Header.Set(ClusterHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !bytes.Contains(answer, []byte(`"line":3`)) {
		t.Errorf("a collection bundle of %d bytes with a math error = %d %s, want 422 naming line 3", len(body), resp.StatusCode, answer)
	}
}
