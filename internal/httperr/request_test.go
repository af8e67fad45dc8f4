package httperr

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log destination safe for the handler's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestQuietRefusalsLoggedOnce: a probe polling /readyz of a server that is
// not ready logs the refusal once per cause, not once per poll (make run
// polls 4 times a second while TeX warms up); after a success, a new
// refusal is logged again. Refusals on other paths are logged each time.
func TestQuietRefusalsLoggedOnce(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	wr := &Writer{Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	var (
		mu    sync.Mutex
		cause error
	)
	setCause := func(err error) { mu.Lock(); cause = err; mu.Unlock() }
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		err := cause
		mu.Unlock()
		if err != nil {
			wr.Error(w, r, NotReady(err))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/v1/render", func(w http.ResponseWriter, r *http.Request) { wr.Error(w, r, NotReady(errors.New("starting"))) })
	srv := httptest.NewServer(wr.Wrap(mux))
	defer srv.Close()
	poll := func(path string, n int) {
		t.Helper()
		for range n {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			if err := resp.Body.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	const refused = `"msg":"request refused"`
	setCause(errors.New("TeX probe running"))
	poll("/readyz", 10)
	if got := logs.count(refused); got != 1 {
		t.Errorf("refusal lines after 10 polls of a starting server = %d, want 1:\n%s", got, logs.b.String())
	}
	setCause(errors.New("job database: connection refused"))
	poll("/readyz", 3)
	if got := logs.count(refused); got != 2 {
		t.Errorf("refusal lines after the cause changed = %d, want 2", got)
	}
	setCause(nil)
	poll("/readyz", 2)
	setCause(errors.New("job database: connection refused"))
	poll("/readyz", 3)
	if got := logs.count(refused); got != 3 {
		t.Errorf("refusal lines after ready, then not ready again = %d, want 3", got)
	}
	poll("/v1/render", 3)
	if got := logs.count(refused); got != 6 {
		t.Errorf("refusal lines after 3 refused renders = %d, want 6 (each render refusal logged)", got)
	}
}
