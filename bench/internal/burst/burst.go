// Package burst sends bursts of durable jobs to an outprint API, for the
// benches that measure acceptance (bench/jobs, bench/cluster).
package burst

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Post sends n jobs to base's POST /v1/jobs from clients concurrent
// clients through hc; job i's Markdown is fmt.Sprintf(doc, i). It returns
// the accepted jobs' ids, each answer's latency and the burst's wall time;
// the error is the first failure (a request error, an answer other than
// 202) or a count short of n. It stops early when ctx ends.
func Post(ctx context.Context, hc *http.Client, base string, n, clients int, doc string) ([]string, []time.Duration, time.Duration, error) {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		ids   = make([]string, 0, n)
		lat   = make([]time.Duration, 0, n)
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	start := time.Now()
	for range min(clients, n) {
		wg.Add(1)
		go func() { // ends when the burst is sent or one request failed
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) || ctx.Err() != nil {
					return
				}
				body, _ := json.Marshal(map[string]string{"markdown": fmt.Sprintf(doc, i)})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/jobs", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					fail(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				d := time.Since(t0)
				var v struct{ ID string }
				if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &v) != nil {
					fail(fmt.Errorf("POST /v1/jobs = %d %.200s", resp.StatusCode, b))
					return
				}
				mu.Lock()
				ids, lat = append(ids, v.ID), append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if first == nil && len(ids) != n {
		first = fmt.Errorf("%d of %d jobs accepted", len(ids), n)
	}
	return ids, lat, took, first
}
