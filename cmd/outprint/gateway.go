package main

import (
	"context"
	"sync"

	"github.com/outprint/outprint/internal/httpapi"
	"github.com/outprint/outprint/internal/metrics"
)

// startWorkerProbe runs the gateway's probe of its workers' /readyz
// (httpapi.RemoteRenderer.Probe) and reports each worker's readiness in
// /metrics. The probe goes on through the shutdown grace, because the
// gateway still sends renders then; the returned stop ends it and waits
// for it, and serve calls it on its way out.
func startWorkerProbe(ctx context.Context, rr *httpapi.RemoteRenderer, m *metrics.Metrics) (stop func()) {
	probeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rr.Probe(probeCtx)
	}()
	m.SetWorkerSource(func() []metrics.WorkerStatus {
		ws := rr.Workers()
		out := make([]metrics.WorkerStatus, len(ws))
		for i, w := range ws {
			out[i] = metrics.WorkerStatus{Worker: w.URL, Ready: w.Ready}
		}
		return out
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
