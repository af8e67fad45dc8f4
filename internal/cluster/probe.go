package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// A gateway learns which workers can take renders from their /readyz, not
// only from failed calls: Probe asks every worker address once a
// ProbeInterval, so a worker that drains (SIGTERM makes its /readyz answer
// 503) stops getting renders before a call to it fails, and a worker that
// comes back is used again within a round or two. Each round resolves the
// worker host names again, so Compose replicas that come and go are
// followed.

const (
	// DefaultProbeInterval is the pause between two probe rounds.
	DefaultProbeInterval = time.Second
	// DefaultProbeTimeout bounds one /readyz call. A worker's check pings
	// the database and writes a file; under load that can take a while,
	// and a slow answer only moves the worker to the back of the order.
	DefaultProbeTimeout = 2 * time.Second
)

// probeState is what the last probe of one worker address found.
type probeState struct {
	ready bool
	err   error // why it is not ready
}

// WorkerState is one worker address and its last probe's outcome.
type WorkerState struct {
	URL   string
	Ready bool
}

// Probe polls every worker's /readyz until ctx ends: once at once, then
// every ProbeInterval. The caller owns it: it runs it in a goroutine and
// cancels ctx (and waits) on shutdown. Each round's calls run
// concurrently, each bounded by ProbeTimeout, and the round waits for
// them all.
func (rr *Remote) Probe(ctx context.Context) {
	for {
		rr.probeRound(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(rr.cfg.ProbeInterval):
		}
	}
}

func (rr *Remote) probeRound(ctx context.Context) {
	eps := rr.endpoints(ctx)
	results := make([]probeState, len(eps))
	started := time.Now()
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() { // ends within ProbeTimeout: the call's context bounds it
			defer wg.Done()
			err := rr.probeOne(ctx, ep)
			results[i] = probeState{ready: err == nil, err: err}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	old := rr.probed
	rr.probed = make(map[string]probeState, len(eps))
	for i, ep := range eps {
		st := results[i]
		rr.probed[ep] = st
		prev, known := old[ep]
		switch {
		case st.ready && (!known || !prev.ready):
			rr.log.Info("gateway: worker ready", "worker", ep)
		case !st.ready && (!known || prev.ready):
			rr.log.Warn("gateway: worker not ready", "worker", ep, "err", st.err)
		}
		// A worker that answered ready after a call to it failed is
		// back: it need not sit out the rest of DownFor.
		if until, ok := rr.down[ep]; st.ready && ok && until.Add(-rr.cfg.DownFor).Before(started) {
			delete(rr.down, ep)
		}
	}
	for ep := range rr.down {
		if _, ok := rr.probed[ep]; !ok {
			delete(rr.down, ep) // an address that no longer resolves
		}
	}
	rr.resolved = append([]string{}, eps...)
	rr.probedOnce = true
}

// probeOne asks one worker whether it is ready.
func (rr *Remote) probeOne(ctx context.Context, ep string) error {
	ctx, cancel := context.WithTimeout(ctx, rr.cfg.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := rr.client.Do(req)
	if err != nil {
		return err
	}
	// The status is the answer: a failed drain or Close only costs the
	// connection's reuse.
	defer func() { _ = resp.Body.Close() }()
	// Drain a little so the connection can be reused; the answer is small.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// Workers lists the worker addresses of the last probe round and whether
// each answered ready, sorted by URL. It is empty before the first round.
func (rr *Remote) Workers() []WorkerState {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	out := make([]WorkerState, 0, len(rr.probed))
	for ep, st := range rr.probed {
		out = append(out, WorkerState{URL: ep, Ready: st.ready})
	}
	slices.SortFunc(out, func(a, b WorkerState) int { return strings.Compare(a.URL, b.URL) })
	return out
}

// errNoProbe is Ready's answer before the first probe round ended.
var errNoProbe = errors.New("no worker probed yet")

// Ready returns nil when at least one worker answered its last probe
// ready: the gateway's /readyz. Otherwise it says what the workers
// answered.
func (rr *Remote) Ready() error {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.probedOnce {
		return errNoProbe
	}
	var why []string
	for _, ep := range rr.resolved {
		st := rr.probed[ep]
		if st.ready {
			return nil
		}
		if len(why) < 4 {
			why = append(why, fmt.Sprintf("%s: %v", ep, st.err))
		}
	}
	if len(why) == 0 {
		return errors.New("no worker: gateway.workers resolve to no address")
	}
	return fmt.Errorf("no worker is ready (%s)", strings.Join(why, "; "))
}
