package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/testenv"
)

// getAs is GET url with an API key.
func getAs(url, key string) answer {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b.Bytes(), err: err}
}

// TestClusterPreviews: a gateway draws page previews itself, admitted and
// refused as on serve (issue 24): in a pool of their own
// (admission.previewSlots), each reader counted against admission.perUser
// (429 user_limit), never in a render slot. With one render slot and no
// queue on the gateway, a burst of one reader's previews and another
// user's render at once: the previews are 200 or user_limit, at least one
// drawn; the render gets the slot (no busy) and is the only render the
// gateway records; a page drawn before is answered to any number of
// requests at once without admission.
func TestClusterPreviews(t *testing.T) {
	testenv.Require(t, "xelatex", "pdfinfo", "pdftoppm")
	cfgPath := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, serveKeys, config.KeyDigest("ann-key"), config.KeyDigest("bob-key")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := clusterDB(t, "OUTPRINT_STORE=file://"+t.TempDir())
	w := startRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	g := startRole(t, roleGateway, append(env, "OUTPRINT_GATEWAY_WORKERS="+w.url, "OUTPRINT_CONFIG="+cfgPath,
		"OUTPRINT_ADMISSION_SLOTS=1", "OUTPRINT_ADMISSION_QUEUE_DEPTH=0", "OUTPRINT_ADMISSION_PER_USER=1",
		"OUTPRINT_ADMISSION_PREVIEW_SLOTS=1")...)

	var ready struct {
		Admission struct{ Slots int }
		Previews  struct{ Slots, Running, Queued int }
	}
	if a := get(g.url + "/readyz"); a.status != http.StatusOK || json.Unmarshal(a.body, &ready) != nil ||
		ready.Admission.Slots != 1 || ready.Previews.Slots != 1 {
		t.Fatalf("gateway /readyz = %d %s, want 200 with one render slot and one preview slot", a.status, a.body)
	}

	body, _ := json.Marshal(map[string]string{"markdown": longDocument(3)})
	a := post(g.url+"/v1/jobs", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer ann-key"}, body)
	var job struct{ ID, State string }
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &job) != nil {
		t.Fatalf("POST /v1/jobs = %d %s (%v), want 202", a.status, a.body, a.err)
	}
	testenv.EventuallyWithin(t, 2*time.Minute, "the job to end", func() bool {
		// An answer that does not parse leaves the state as it was: ask again.
		_ = json.Unmarshal(getAs(g.url+"/v1/jobs/"+job.ID, "ann-key").body, &job)
		return job.State == "succeeded" || job.State == "failed" || job.State == "cancelled"
	})
	if job.State != "succeeded" {
		t.Fatalf("job state = %s, want succeeded", job.State)
	}

	const renders = `outprint_render_duration_seconds_count{result="ok"}`
	before := g.metric(renders)
	const n = 12
	previews := make([]answer, n)
	var render answer
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { // ends with its request
			defer wg.Done()
			// Distinct pages and widths: none is drawn before.
			previews[i] = getAs(fmt.Sprintf("%s/v1/jobs/%s/pages/%d.png?width=%d", g.url, job.ID, 1+i%3, 100+50*i), "ann-key")
		}()
	}
	wg.Add(1)
	go func() { // ends with its request
		defer wg.Done()
		md, _ := json.Marshal(map[string]string{"markdown": "# Bob\n\nA render while ann's previews are drawn.\n"})
		render = post(g.url+"/v1/render", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer bob-key"}, md)
	}()
	wg.Wait()

	drawn := -1
	for i, p := range previews {
		switch {
		case p.status == http.StatusOK && bytes.HasPrefix(p.body, []byte("\x89PNG")):
			drawn = i
		case p.status == http.StatusTooManyRequests && bytes.Contains(p.body, []byte(`"user_limit"`)):
		default:
			t.Errorf("preview %d on the gateway = %d %.300s (%v), want 200 PNG or 429 user_limit", i, p.status, p.body, p.err)
		}
	}
	if drawn < 0 {
		t.Fatalf("no preview of the burst was drawn, want at least one")
	}
	if render.status != http.StatusOK || !bytes.HasPrefix(render.body, []byte("%PDF")) {
		t.Errorf("bob's render during ann's previews = %d %.300s (%v), want 200 and a PDF (the render slot is not the previews')", render.status, render.body, render.err)
	}
	if after := g.metric(renders); after-before != 1 {
		t.Errorf("renders the gateway recorded over the burst = %v, want 1 (bob's): a preview never holds a render slot", after-before)
	}

	// A page drawn before costs no admission: asked many times at once,
	// it is 200 every time.
	p := previews[drawn]
	path := fmt.Sprintf("%s/v1/jobs/%s/pages/%d.png?width=%d", g.url, job.ID, 1+drawn%3, 100+50*drawn)
	again := make([]answer, n)
	for i := range n {
		wg.Add(1)
		go func() { // ends with its request
			defer wg.Done()
			again[i] = getAs(path, "ann-key")
		}()
	}
	wg.Wait()
	for i, a := range again {
		if a.status != http.StatusOK || !bytes.Equal(a.body, p.body) {
			t.Errorf("drawn page asked again (%d) = %d %.200s, want 200 and the same PNG", i, a.status, a.body)
		}
	}
	if a := get(g.url + "/readyz"); json.Unmarshal(a.body, &ready) != nil || ready.Previews.Running != 0 || ready.Previews.Queued != 0 {
		t.Errorf("gateway preview pool at the end = %+v, want idle", ready.Previews)
	}
}
