package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/testenv"
)

// countingPool answers Ready with err and counts the questions.
type countingPool struct {
	mu  sync.Mutex
	n   int
	err error
}

func (p *countingPool) Ready(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return p.err
}

// TestReadyCache: the pool is asked again only after readyCacheFor, and a
// changed answer shows from then on.
func TestReadyCache(t *testing.T) {
	pool := &countingPool{}
	clock := &testenv.Clock{}
	c := newReadyCache("TeX pool", pool)
	c.now = clock.Now
	broken := errors.New("warm-ups failed")
	steps := []struct {
		advance time.Duration
		set     error
		wantErr bool
		wantN   int
	}{
		{0, nil, false, 1},
		{readyCacheFor / 2, broken, false, 1}, // cached
		{readyCacheFor / 2, broken, true, 2},  // asked again
		{0, nil, true, 2},                     // cached
		{readyCacheFor, nil, false, 3},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		pool.mu.Lock()
		pool.err = s.set
		pool.mu.Unlock()
		err := c.ready(context.Background())
		if (err != nil) != s.wantErr || pool.n != s.wantN {
			t.Errorf("step %d: ready() = %v after %d questions, want error %v after %d", i, err, pool.n, s.wantErr, s.wantN)
		}
		if err != nil && !strings.Contains(err.Error(), "TeX pool: warm-ups failed") {
			t.Errorf("step %d: ready() = %q, want it to name the pool and its reason", i, err)
		}
	}
}

// TestServeReadyFollowsPool: /readyz asks the TeX pool each time. A
// server that was ready and whose TeX then breaks (the program fails, as
// with a corrupt installation) answers 503 not_ready once the pool's
// warm-ups keep failing, and its log says why.
func TestServeReadyFollowsPool(t *testing.T) {
	testenv.Require(t, "xelatex")
	real, err := exec.LookPath("xelatex")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	marker := filepath.Join(bin, "broken")
	script := fmt.Sprintf("#!/bin/sh\nif [ -e %q ]; then echo 'xelatex: fatal: the format file is corrupt' >&2; exit 3; fi\nexec %q \"$@\"\n", marker, real)
	if err := os.WriteFile(filepath.Join(bin, "xelatex"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\n%s", data, officeOff))
	s := startService(t, cfg, nil)
	s.waitReady()
	if r := <-s.render("", "# Before\n\nTeX works.\n"); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("render before the break = %d %v %s", r.status, r.err, r.body)
	}

	// TeX breaks, and the processes the pool keeps die (as under the OOM
	// killer): every warm-up from now on runs the broken program.
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the pool's TeX processes to die", func() bool {
		procs := texDescendants(t)
		for _, p := range procs {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: it died already; the loop checks again
		}
		return len(procs) == 0
	})
	// The first failed warm-ups may be children of the zygote that
	// started before TeX broke, killed by the loop above; the warm-ups
	// after them run the broken program, and the log then says why.
	var body string
	testenv.Eventually(t, "/readyz to answer 503 and the log to name the broken TeX", func() bool {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close() // read to the end already
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(s.logs.String(), "format file is corrupt")
	})
	if !strings.Contains(body, httperr.CodeNotReady) || !strings.Contains(body, `"errors"`) {
		t.Errorf("/readyz body = %s, want the error list with %s", body, httperr.CodeNotReady)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "warm-ups failed in a row") || !strings.Contains(logs, "format file is corrupt") {
		t.Errorf("the logs do not say why the service is not ready:\n%s", logs)
	}
	if v := s.metric("outprint_ready"); v != 0 {
		t.Errorf("outprint_ready = %v, want 0", v)
	}
}
