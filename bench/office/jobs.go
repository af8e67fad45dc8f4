package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// benchKey is the API key of the server runJobs starts.
const benchKey = "office-bench-key"

// runJobs starts `bin serve` on loopback (its defaults: one LibreOffice
// process per render slot), submits n conversions of doc as durable jobs,
// waits until every one has ended, and prints how many succeeded, the
// wall time and the resident memory of each LibreOffice process the
// server reports. Any job that did not succeed is an error.
func runJobs(bin, doc string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	body, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-office-jobs-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a benchmark's scratch
	sum := sha256.Sum256([]byte(benchKey))
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nauth:\n  apiKeys:\n    - {user: bench, tenant: bench, sha256: %s}\n",
		filepath.Join(dir, "data"), hex.EncodeToString(sum[:]))
	cfgPath := filepath.Join(dir, "outprint.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfgPath)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTPRINT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	base, stop, err := start(cmd, filepath.Join(dir, "serve.log"))
	if err != nil {
		return err
	}
	defer stop()
	hc := &http.Client{Timeout: time.Minute}
	if err := waitReady(ctx, hc, base); err != nil {
		return err
	}
	began := time.Now()
	ids := make([]string, 0, n)
	for i := range n {
		id, err := submit(ctx, hc, base, filepath.Base(doc), body)
		if err != nil {
			return fmt.Errorf("job %d: %w", i+1, err)
		}
		ids = append(ids, id)
	}
	accepted := time.Since(began)
	states := map[string]int{}
	for _, id := range ids {
		st, err := wait(ctx, hc, base, id)
		if err != nil {
			return err
		}
		states[st]++
	}
	wall := time.Since(began)
	fmt.Printf("%d conversions as jobs: accepted in %.2f s, all ended in %.1f s (%.2f jobs/s): %d succeeded, %d failed, %d cancelled\n",
		n, accepted.Seconds(), wall.Seconds(), float64(n)/wall.Seconds(), states["succeeded"], states["failed"], states["cancelled"])
	if states["succeeded"] != n {
		return fmt.Errorf("%d of %d jobs did not succeed (log %s)", n-states["succeeded"], n, filepath.Join(dir, "serve.log"))
	}
	metrics, err := get(ctx, hc, base+"/metrics")
	if err != nil {
		return err
	}
	rss := regexp.MustCompile(`(?m)^outprint_office_process_rss_bytes\{slot="(\d+)"\} (\S+)$`)
	found := rss.FindAllStringSubmatch(string(metrics), -1)
	if len(found) == 0 {
		return fmt.Errorf("no outprint_office_process_rss_bytes in the server's /metrics")
	}
	for _, m := range found {
		var b float64
		if _, err := fmt.Sscan(m[2], &b); err != nil {
			return fmt.Errorf("rss %q: %w", m[2], err)
		}
		fmt.Printf("after the jobs: LibreOffice of slot %s RSS %.0f MiB\n", m[1], b/(1<<20))
	}
	restarts := regexp.MustCompile(`(?m)^outprint_office_restarts_total\{cause="(\w+)"\} (\S+)$`)
	for _, m := range restarts.FindAllStringSubmatch(string(metrics), -1) {
		if m[2] != "0" {
			fmt.Printf("LibreOffice restarts, %s: %s\n", m[1], m[2])
		}
	}
	return nil
}

// start starts cmd, copies its log to logPath and returns the URL it
// listens on and a function that stops it.
func start(cmd *exec.Cmd, logPath string) (string, func(), error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return "", nil, err
	}
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() { // ends when the server closes stderr
		defer close(done)
		br := bufio.NewReader(stderr)
		for {
			line, err := br.ReadBytes('\n')
			_, _ = logf.Write(line) // a bench aid: the pipe must be drained either way
			var v struct{ Msg, Addr string }
			if json.Unmarshal(line, &v) == nil && v.Msg == "listening" {
				addr <- v.Addr
				break
			}
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(logf, br)
		_ = logf.Close()
		_ = cmd.Wait() // its status after SIGTERM tells the bench nothing
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	select {
	case a := <-addr:
		return "http://" + a, stop, nil
	case <-done:
		return "", nil, fmt.Errorf("outprint serve exited (log %s)", logPath)
	case <-time.After(60 * time.Second):
		stop()
		return "", nil, fmt.Errorf("outprint serve did not listen (log %s)", logPath)
	}
}

func waitReady(ctx context.Context, hc *http.Client, base string) error {
	for {
		if _, err := get(ctx, hc, base+"/readyz"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("/readyz never answered 200: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s = %d %.200s", url, resp.StatusCode, b)
	}
	return b, nil
}

// submit posts one office job (the multipart part file) and returns its id.
func submit(ctx context.Context, hc *http.Client, base, name string, doc []byte) (string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(doc); err != nil {
		return "", err
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/jobs", &buf)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var v struct{ ID string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &v) != nil || v.ID == "" {
		return "", fmt.Errorf("POST /v1/jobs = %d %.300s", resp.StatusCode, b)
	}
	return v.ID, nil
}

// wait polls job id until it has ended and returns its state.
func wait(ctx context.Context, hc *http.Client, base, id string) (string, error) {
	for {
		b, err := get(ctx, hc, base+"/v1/jobs/"+id)
		if err != nil {
			return "", err
		}
		var v struct {
			State string          `json:"state"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return "", fmt.Errorf("job %s: %w", id, err)
		}
		switch v.State {
		case "succeeded", "cancelled":
			return v.State, nil
		case "failed":
			fmt.Printf("job %s failed: %s\n", id, v.Error)
			return v.State, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("job %s still %s: %w", id, v.State, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
