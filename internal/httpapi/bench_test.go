package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/outprint/outprint/internal/admission"
)

// atCapacity returns a server whose only slot is held by a gated render
// and whose queue depth is 0, so that every further render request is
// refused busy. It measures the gateway's own cost of a refusal and of a
// health probe at capacity, without TeX competing for the CPU (bench/load
// measures both with TeX running).
func atCapacity(b *testing.B) *testEnv {
	b.Helper()
	g := newGate()
	e := newEnv(b, envOptions{admission: admission.Config{Slots: 1, QueueDepth: 0, PerUser: 1}, keys: users, wrap: g.wrap})
	ctx, cancel := context.WithCancel(context.Background())
	held := async(func() answer { return e.postJSON(ctx, "key-ann", doc("Held"), nil) })
	<-g.entered
	b.Cleanup(func() { cancel(); <-held })
	return e
}

// BenchmarkRefusal is one 429 busy: read the body, parse and check a
// memo-sized document, count the user, refuse the slot, answer.
func BenchmarkRefusal(b *testing.B) {
	e := atCapacity(b)
	body, _ := json.Marshal(map[string]string{"markdown": benchMemo})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/render", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer key-bob")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			b.Fatalf("status %d, want 429", resp.StatusCode)
		}
	}
}

// BenchmarkHealthz is one liveness probe while every slot is busy.
func BenchmarkHealthz(b *testing.B) {
	e := atCapacity(b)
	client := &http.Client{Transport: &http.Transport{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Get(e.url + "/healthz")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// benchMemo is a one-page memo, the typical synchronous render.
const benchMemo = `---
title: Office move on 14 March
author: Facilities team
---

# Office move on 14 March

The whole team moves on **Friday 14 March**. Pack your desk on Thursday.

## What to do

- Label every box with your name and new desk number.
- Take laptops home on Thursday evening.

| Floor | Teams |
|---|---|
| 2 | Sales, Support |
| 3 | Engineering |

Questions go to [the facilities desk](https://example.com/facilities).
`
