package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Issue 24, item 5: one receiver that never answers must not starve the
// deliveries of other tenants. The finding makes -webhook-deliveries jobs
// of one tenant whose callback is a receiver that accepts connections and
// never answers (each job cancelled at once: a cancelled job is delivered
// like any ended one, and costs no render), then one job of another tenant
// whose callback is a healthy receiver on another host name, and reports
// how long after that job ended its delivery arrived (issue 24: 48 minutes
// before the fix; the target is about a second).

var webhookDeliveries = flag.Int("webhook-deliveries", 10_000, "deliveries to the receiver that never answers (finding 24.5)")

// Both receivers are on loopback, under two host names, since deliveries
// are limited per host name: the dead one at 127.0.0.1, the healthy one
// at localhost. The server allows both (webhooks.allowHosts).
const (
	deadHookHost    = "127.0.0.1"
	healthyHookHost = "localhost"
	// hookSecret signs the deliveries of every key (a tenant without a
	// secret gets no deliveries).
	hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

const (
	noisyHookUsers = 16
	quietHookUser  = "hooks-quiet"
)

func noisyHookUser(i int) string { return fmt.Sprintf("hooks-noisy-%d", i) }

// deadReceiver accepts connections and never answers them, until ctx
// ends; it returns its address.
func deadReceiver(ctx context.Context) (string, error) {
	ln, err := net.Listen("tcp", deadHookHost+":0")
	if err != nil {
		return "", err
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() { // ends when ctx ends and the listener closes
		<-ctx.Done()
		// The bench is over: the listener and its conns only go away.
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	}()
	go func() { // ends when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String(), nil
}

// webhookStarvation is finding 24.5.
func webhookStarvation(ctx context.Context, s *server) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dead, err := deadReceiver(ctx)
	if err != nil {
		return "setup: " + err.Error()
	}
	_, deadPort, _ := net.SplitHostPort(dead)
	arrived := make(chan time.Time, 1)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "setup: " + err.Error()
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- time.Now():
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = hs.Serve(hl) }() // ends with Close below (ErrServerClosed)
	defer func() { _ = hs.Close() }()
	_, healthyPort, _ := net.SplitHostPort(hl.Addr().String())

	// The dead receiver's backlog: submitted and cancelled by several
	// users of one tenant at once.
	deadURL := fmt.Sprintf("http://%s:%s/hook", deadHookHost, deadPort)
	var made, failed atomic.Int64
	var next atomic.Int64
	t0 := time.Now()
	var wg sync.WaitGroup
	for u := range noisyHookUsers {
		wg.Add(1)
		go func() { // ends when the backlog is made or ctx ends
			defer wg.Done()
			user := noisyHookUser(u)
			for next.Add(1) <= int64(*webhookDeliveries) && ctx.Err() == nil {
				id, err := s.submitHook(ctx, user, deadURL)
				if err == nil {
					err = s.cancelJob(ctx, user, id)
				}
				if err != nil {
					failed.Add(1)
					continue
				}
				made.Add(1)
			}
		}()
	}
	wg.Wait()
	backlog := time.Since(t0)

	// Another tenant's delivery to a healthy host.
	submitted := time.Now()
	id, err := s.submitHook(ctx, quietHookUser, fmt.Sprintf("http://%s:%s/hook", healthyHookHost, healthyPort))
	if err != nil {
		return fmt.Sprintf("%d dead made in %.0fs; healthy submit: %v", made.Load(), backlog.Seconds(), err)
	}
	var ended time.Time
	for ctx.Err() == nil && ended.IsZero() {
		if a := s.get(ctx, quietHookUser, "/v1/jobs/"+id); a.status == http.StatusOK {
			var j struct {
				State      string
				FinishedAt *time.Time
			}
			_ = json.Unmarshal(a.body, &j)
			if j.FinishedAt != nil {
				ended = *j.FinishedAt
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "hostile: 24.5: %d deliveries to the dead receiver made in %.0f s (%d submits failed)\n",
		made.Load(), backlog.Seconds(), failed.Load())
	select {
	case at := <-arrived:
		fmt.Fprintf(os.Stderr, "hostile: 24.5: the healthy delivery arrived %.1f s after its job ended, %.1f s after it was submitted\n",
			at.Sub(ended).Seconds(), at.Sub(submitted).Seconds())
		// The table's column is narrow: the figure first.
		return fmt.Sprintf("healthy %.1fs after end; %d dead", at.Sub(ended).Seconds(), made.Load())
	case <-ctx.Done():
		return fmt.Sprintf("healthy none after %.0fs; %d dead", time.Since(submitted).Seconds(), made.Load())
	}
}

// submitHook submits a one-line Markdown job of user whose callback is
// url, and returns its id.
func (s *server) submitHook(ctx context.Context, user, url string) (string, error) {
	return s.submit(ctx, user, map[string]string{"markdown": "# Hook\n", "callbackUrl": url})
}

// submit posts job (the fields of POST /v1/jobs' JSON) as user and
// returns its id once accepted (202).
func (s *server) submit(ctx context.Context, user string, job map[string]string) (string, error) {
	body, _ := json.Marshal(job)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.key(user))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct{ ID string }
	// A body that does not decode leaves v.ID empty, checked below.
	_ = json.NewDecoder(resp.Body).Decode(&v)
	if resp.StatusCode != http.StatusAccepted || v.ID == "" {
		return "", fmt.Errorf("submit: %d", resp.StatusCode)
	}
	return v.ID, nil
}

// cancelJob cancels job id of user (DELETE /v1/jobs/{id}).
func (s *server) cancelJob(ctx context.Context, user, id string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.url+"/v1/jobs/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+s.key(user))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cancel: %d", resp.StatusCode)
	}
	return nil
}
