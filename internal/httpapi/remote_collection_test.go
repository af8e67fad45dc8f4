package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/cluster"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/worker"
)

// startWorker runs a worker's listener (cluster.Worker, the route table
// of `outprint worker`) on a loopback port, rendering with real XeLaTeX, and returns
// its URL.
func startWorker(t *testing.T, secret string) string {
	return startWorkerWith(t, secret, limits.Render{})
}

// startWorkerWith is startWorker with the worker's render bounds (zero
// fields take the defaults).
func startWorkerWith(t *testing.T, secret string, bounds limits.Render) string {
	t.Helper()
	pl := render.New(render.Config{Engine: testEngine(t), TempDir: t.TempDir(), Limits: bounds})
	wk, err := cluster.NewWorker(cluster.WorkerConfig{
		Capacity: mustCapacity(t, worker.Config{Pipeline: pl, Admission: mustAdmission(t, admission.Config{Slots: 1, PerUser: 1, MaxWait: time.Minute})}),
		Secret:   secret,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(wk.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestOutlineCollectionThroughWorker: a collection printed through a
// gateway whose Render stage is a worker (Remote → the worker's
// listener) comes back whole, as it does from a local render: the worker
// re-checks the joined document by the collection's limits, not by one
// document's.
func TestOutlineCollectionThroughWorker(t *testing.T) {
	const secret = "a-cluster-secret-for-tests"
	workerURL := startWorker(t, secret)
	f := newCollectionFixtureWith(t, olOptions{tex: true, wrap: func(Renderer) Renderer {
		rr, err := cluster.NewRemote(cluster.RemoteConfig{Workers: []string{workerURL}, Secret: secret})
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
		rr, err := cluster.NewRemote(cluster.RemoteConfig{Workers: []string{workerURL}, Secret: secret})
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
