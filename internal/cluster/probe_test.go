package cluster

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
)

// fakeWorker is a worker's listener reduced to what a gateway calls: its
// /readyz answers as set, and its render route counts the bundles it got
// and answers a PDF.
type fakeWorker struct {
	srv     *httptest.Server
	ready   atomic.Bool
	renders atomic.Int64
}

func startFakeWorker(t *testing.T, ln net.Listener) *fakeWorker {
	t.Helper()
	fw := &fakeWorker{}
	fw.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !fw.ready.Load() {
			http.Error(w, `{"errors":[{"code":"not_ready"}]}`, http.StatusServiceUnavailable)
			return
		}
		// A fake's answers: a failed write shows as the client's error.
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	})
	mux.HandleFunc("POST "+RenderPath, func(w http.ResponseWriter, r *http.Request) {
		fw.renders.Add(1)
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write([]byte("%PDF-1.5 fake"))
	})
	fw.srv = httptest.NewUnstartedServer(mux)
	if ln != nil {
		// The server's own listener, never used: ln replaces it.
		_ = fw.srv.Listener.Close()
		fw.srv.Listener = ln
	}
	fw.srv.Start()
	t.Cleanup(fw.srv.Close)
	return fw
}

func workerReady(rr *Remote, url string) (ready, known bool) {
	for _, w := range rr.Workers() {
		if w.URL == url {
			return w.Ready, true
		}
	}
	return false, false
}

// TestRemoteProbe: the gateway's probe of /readyz steers its renders. A
// worker that answers not ready (draining) gets no render while another
// is ready; a worker that answers ready again, or whose address is
// listening again after it went away, gets renders again; the gateway is
// ready while at least one worker is.
func TestRemoteProbe(t *testing.T) {
	w1, w2 := startFakeWorker(t, nil), startFakeWorker(t, nil)
	rr, err := NewRemote(RemoteConfig{
		Workers: []string{w1.srv.URL, w2.srv.URL}, Secret: "a-secret-of-sixteen",
		ProbeInterval: 20 * time.Millisecond, ProbeTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rr.Ready(); err == nil {
		t.Error("Ready() before any probe = nil, want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr.Probe(ctx)
	}()
	defer wg.Wait()
	defer cancel()

	pl := render.New(render.Config{TempDir: t.TempDir()})
	checked, err := pl.Check(render.Request{Name: "memo.md", Markdown: []byte("# Memo\n")})
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := pl.Fetch(ctx, checked)
	if err != nil {
		t.Fatal(err)
	}
	renders := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := rr.Render(ctx, prepared, nil); err != nil {
				t.Fatalf("render %d: %v", i, err)
			}
		}
	}

	testenv.EventuallyWithin(t, 5*time.Second, "both workers probed ready", func() bool {
		r1, _ := workerReady(rr, w1.srv.URL)
		r2, _ := workerReady(rr, w2.srv.URL)
		return r1 && r2
	})
	if err := rr.Ready(); err != nil {
		t.Errorf("Ready() with two ready workers = %v, want nil", err)
	}
	renders(4)
	if a, b := w1.renders.Load(), w2.renders.Load(); a == 0 || b == 0 {
		t.Errorf("renders on two ready workers = %d and %d, want both used", a, b)
	}

	// Worker 1 drains: its /readyz says not ready, and it gets nothing.
	w1.ready.Store(false)
	testenv.EventuallyWithin(t, 5*time.Second, "worker 1 probed not ready", func() bool {
		r, known := workerReady(rr, w1.srv.URL)
		return known && !r
	})
	before := w1.renders.Load()
	renders(6)
	if got := w1.renders.Load() - before; got != 0 {
		t.Errorf("renders sent to the not-ready worker = %d, want 0", got)
	}
	if err := rr.Ready(); err != nil {
		t.Errorf("Ready() with one ready worker = %v, want nil", err)
	}

	// Worker 1 goes away and comes back on the same address.
	addr := w1.srv.Listener.Addr().String()
	url1 := w1.srv.URL
	w1.srv.Close()
	w2.ready.Store(false)
	testenv.EventuallyWithin(t, 5*time.Second, "no worker ready", func() bool { return rr.Ready() != nil })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	w1 = startFakeWorker(t, ln)
	if w1.srv.URL != url1 {
		t.Fatalf("restarted worker at %s, want %s", w1.srv.URL, url1)
	}
	testenv.EventuallyWithin(t, 5*time.Second, "the restarted worker probed ready", func() bool {
		r, _ := workerReady(rr, url1)
		return r && rr.Ready() == nil
	})
	renders(3)
	if got := w1.renders.Load(); got != 3 {
		t.Errorf("renders on the restarted worker (the only ready one) = %d, want 3", got)
	}
}
