package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// sumMetric adds up every series of a metric whose line contains all of
// the given label pairs; ok is false when the scrape failed.
func (p *proc) sumMetric(name string, labels ...string) (sum float64, ok bool) {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return 0, false
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
next:
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += f
		}
	}
	return sum, true
}

// waitGatewaySees waits until the gateway's probe reports worker w ready
// (or not) and returns how long that took.
func waitGatewaySees(t *testing.T, g, w *proc, ready bool) time.Duration {
	t.Helper()
	want := 0.0
	if ready {
		want = 1
	}
	start := time.Now()
	testenv.EventuallyWithin(t, 15*time.Second, fmt.Sprintf("the gateway to see worker %s ready=%v", w.url, ready), func() bool {
		return g.metric(`outprint_gateway_worker_ready{worker="`+w.url+`"}`) == want
	})
	return time.Since(start)
}

// TestClusterWorkerProbe: a gateway probes its workers' /readyz. A worker
// that drains after SIGTERM (still answering, still rendering what it had)
// answers not ready, and the gateway sends it nothing more; the same
// worker restarted on its address is used again a moment after it is
// ready. The gateway's /readyz is ready while at least one worker is.
func TestClusterWorkerProbe(t *testing.T) {
	// Serial: a 150-page render must end within the worker's 30 s
	// grace, which a machine shared with parallel tests may not give it.
	testenv.Require(t, "xelatex", "pdfinfo")
	env := clusterDB(t)
	w1 := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	w2 := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	g := launchRole(t, roleGateway, append(env, "OUTPRINT_GATEWAY_WORKERS="+w1.url+","+w2.url)...)
	w1.waitReady()
	w2.waitReady()
	g.waitReady()
	waitGatewaySees(t, g, w1, true)
	waitGatewaySees(t, g, w2, true)
	memo, _ := json.Marshal(map[string]string{"markdown": "# Memo\n\nProbed.\n"})
	renders := func(what string, n int) {
		t.Helper()
		for i := range n {
			a := post(g.url+"/v1/render", map[string]string{"Content-Type": "application/json"}, memo)
			if a.err != nil || a.status != http.StatusOK {
				t.Fatalf("%s, render %d: %d %s %v, want 200", what, i, a.status, a.body, a.err)
			}
		}
	}

	// Worker 1 drains a long render after SIGTERM.
	secret := map[string]string{"Outprint-Cluster-Secret": clusterSecret}
	long := make(chan answer, 1)
	go func() { long <- post(w1.url+"/v1/worker/render", secret, bundle(longDocument(300))) }()
	w1.waitRendering(time.Minute)
	cmd, done := w1.terminate()
	t.Logf("the gateway saw the draining worker not ready after %v", waitGatewaySees(t, g, w1, false))
	route := `route="/v1/worker/render"`
	before, ok := w1.sumMetric("outprint_http_request_duration_seconds_count", route)
	if !ok {
		t.Fatal("worker 1 stopped answering before the renders were sent; the long render is too short for this machine")
	}
	renders("worker 1 draining", 4)
	after, ok := w1.sumMetric("outprint_http_request_duration_seconds_count", route)
	if !ok {
		t.Fatal("worker 1 stopped answering during the renders; the long render is too short for this machine")
	}
	if after != before {
		t.Errorf("render requests the draining worker got = %v, want none (the gateway's probe saw it not ready)", after-before)
	}
	if first := <-long; first.status != http.StatusOK {
		t.Errorf("the draining worker's own render: %d, want 200", first.status)
	}
	<-done
	_ = cmd.Wait() // stopped by SIGTERM: its exit status is not checked here

	// Worker 1 back on the same address: used again.
	w1.start()
	t.Logf("the gateway saw the restarted worker ready %v after its /readyz", waitGatewaySees(t, g, w1, true))
	renders("worker 1 back", 4)
	if n := w1.metric(`outprint_render_duration_seconds_count{result="ok"}`); n < 1 {
		t.Errorf("renders on the restarted worker 1 = %v, want some of the 4", n)
	}

	// No worker ready: the gateway is not ready either.
	if a := get(g.url + "/readyz"); a.status != http.StatusOK {
		t.Errorf("gateway /readyz with two workers = %d %s, want 200", a.status, a.body)
	}
	w1.stop()
	w2.stop()
	testenv.EventuallyWithin(t, 15*time.Second, "gateway /readyz with no worker to answer 503", func() bool {
		return get(g.url+"/readyz").status == http.StatusServiceUnavailable
	})
	if v := g.metric("outprint_ready"); v != 0 {
		t.Errorf("gateway outprint_ready with no worker = %v, want 0", v)
	}
}
