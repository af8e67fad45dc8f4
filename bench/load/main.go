// Command load saturates an outprint server on loopback and reports what
// SPEC §5 promises under load: /healthz stays fast (target p99 < 10 ms),
// refusals are immediate (429 p99 < 10 ms), and the renders that are
// admitted go through at the engine's pace (renders/s).
//
//	go run ./bench/load -bin bin/outprint           # starts its own server
//	go run ./bench/load -url http://127.0.0.1:8080  # targets a running one
//
// It is bounded: it stops by itself after -duration (at most 60 s) or
// -max-requests render requests, whichever comes first, and only ever
// talks to loopback addresses. A server it started is stopped with SIGTERM
// at the end (and killed if it does not stop).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// memo is a memo-sized document: one page with a title block, headings,
// a list, a table and a link, the typical synchronous render.
const memo = `---
title: Office move on 14 March
author: Facilities team
date: 2026-03-01
---

# Office move on 14 March

The whole team moves to the new building on **Friday 14 March**. Pack your
desk on Thursday afternoon; the movers start at 07:00 on Friday.

## What to do

- Label every box with your name and new desk number.
- Take laptops home on Thursday evening.
- Empty the fridge on your floor before 16:00 on Thursday.

## Where things are

| Floor | Teams | Meeting rooms |
|---|---|---|
| 2 | Sales, Support | Ada, Grace |
| 3 | Engineering | Linus, Ken |
| 4 | Finance, People | Barbara |

Questions go to [the facilities desk](https://example.com/facilities).
`

const maxDuration = 60 * time.Second

type options struct {
	bin, target, docPath        string
	duration                    time.Duration
	clients, maxRequests, users int
	slots, queueDepth, perUser  int
	probeEvery, refusalPause    time.Duration
	keys                        []string
	logPath                     string
}

func main() {
	var o options
	var keys string
	flag.StringVar(&o.bin, "bin", "", "outprint binary to start (`outprint serve` on a loopback port)")
	flag.StringVar(&o.target, "url", "", "loopback URL of a running server instead of -bin")
	flag.StringVar(&keys, "keys", "", "comma-separated API keys for -url (default: anonymous)")
	flag.StringVar(&o.docPath, "doc", "", "Markdown file to render (default: a built-in one-page memo)")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long to load the server (at most 60s)")
	flag.IntVar(&o.clients, "clients", 10, "concurrent render clients")
	flag.IntVar(&o.maxRequests, "max-requests", 5000, "bound on render requests sent")
	flag.IntVar(&o.users, "users", 8, "distinct users (API keys) the clients share, for -bin")
	flag.IntVar(&o.slots, "slots", 2, "admission.slots of the started server")
	flag.IntVar(&o.queueDepth, "queue-depth", 4, "admission.queueDepth of the started server")
	flag.IntVar(&o.perUser, "per-user", 1, "admission.perUser of the started server")
	flag.DurationVar(&o.probeEvery, "probe-every", 10*time.Millisecond, "interval of /healthz probes")
	flag.DurationVar(&o.refusalPause, "refusal-pause", 20*time.Millisecond, "pause of a client after a 429 before it asks again")
	flag.StringVar(&o.logPath, "log", "", "file for the started server's logs (default: a temporary file)")
	flag.Parse()
	if keys != "" {
		o.keys = strings.Split(keys, ",")
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "load: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if (o.bin == "") == (o.target == "") {
		return errors.New("give exactly one of -bin and -url")
	}
	if o.duration <= 0 || o.duration > maxDuration {
		return fmt.Errorf("-duration must be within (0, %s]", maxDuration)
	}
	if o.clients < 1 || o.maxRequests < 1 || o.users < 1 {
		return errors.New("-clients, -max-requests and -users must be positive")
	}
	doc := memo
	if o.docPath != "" {
		b, err := os.ReadFile(o.docPath)
		if err != nil {
			return err
		}
		doc = string(b)
	}

	base := o.target
	keys := o.keys
	var srv *server
	if o.bin != "" {
		var err error
		keys = make([]string, o.users)
		for i := range keys {
			keys[i] = randomKey()
		}
		srv, err = startServer(o, keys)
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.stop(); err != nil {
				_, _ = fmt.Fprintf(os.Stderr, "load: the server did not stop cleanly: %v (log %s)\n", err, srv.logPath)
			}
		}()
		base = srv.url
	}
	if err := checkLoopback(base); err != nil {
		return err
	}
	if err := waitReady(base, 90*time.Second); err != nil {
		return err
	}
	res := load(o, base, keys, doc)
	res.print(o, srv)
	return nil
}

func randomKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkLoopback refuses any target that is not a loopback address: the
// script must never load someone else's server.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-url %q is not a URL", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-url %q is not a loopback address; load only runs against this machine", raw)
	}
	return nil
}

// server is an `outprint serve` this program started.
type server struct {
	cmd     *exec.Cmd
	url     string
	logPath string
	done    chan error
}

// writeConfig writes the server's configuration into dir and returns
// its path: the admission settings of o, an API key for each user, the
// data folder in dir.
func writeConfig(dir string, o options, keys []string) (string, error) {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "listen: 127.0.0.1:0\ndataDir: %s\n", filepath.Join(dir, "data"))
	fmt.Fprintf(&cfg, "admission: {slots: %d, queueDepth: %d, perUser: %d}\n", o.slots, o.queueDepth, o.perUser)
	cfg.WriteString("shutdown: {grace: 10s}\nauth:\n  apiKeys:\n")
	for i, k := range keys {
		fmt.Fprintf(&cfg, "    - {user: load-%d, tenant: load, sha256: %s}\n", i, digest(k))
	}
	cfgPath := filepath.Join(dir, "outprint.yaml")
	return cfgPath, os.WriteFile(cfgPath, []byte(cfg.String()), 0o600)
}

// startServer starts `bin serve` on 127.0.0.1 with a port of its choice,
// API keys for the users and a temporary data folder, and learns the
// address from its "listening" log line.
func startServer(o options, keys []string) (*server, error) {
	dir, err := os.MkdirTemp("", "outprint-load-")
	if err != nil {
		return nil, err
	}
	cfgPath, err := writeConfig(dir, o, keys)
	if err != nil {
		return nil, err
	}
	logPath := o.logPath
	if logPath == "" {
		logPath = filepath.Join(dir, "serve.log")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.bin, "serve", "--config", cfgPath)
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", o.bin, err)
	}
	s := &server{cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	addr := make(chan string, 1)
	// The reader copies the server's log to the file and ends when the
	// server closes its stderr (it exited).
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			if !sent {
				var v struct{ Msg, Addr string }
				if json.Unmarshal(line, &v) == nil && v.Msg == "listening" {
					addr <- v.Addr
					sent = true
				}
			}
		}
		_ = logFile.Close()
		err := cmd.Wait()
		// The temporary folder goes; the log stays only when it is in it
		// (no -log given), for the path printed at the end.
		if o.logPath != "" {
			_ = os.RemoveAll(dir)
		} else {
			_ = os.RemoveAll(filepath.Join(dir, "data"))
		}
		s.done <- err
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("server exited before listening (%v); log: %s", err, logPath)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("server did not listen within 30 s; log: %s", logPath)
	}
}

// cleanEnv is the environment without OUTPRINT_* variables, so that the
// operator's own settings cannot change the measured configuration.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTPRINT_") {
			env = append(env, kv)
		}
	}
	return env
}

// stop sends SIGTERM and waits for the graceful shutdown, killing the
// server if it takes longer than its grace period and some.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // an exited server: done tells
	select {
	case err := <-s.done:
		return err
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("killed after 20 s (%w)", <-s.done)
	}
}

// digest is the value auth.apiKeys[].sha256 wants for key.
func digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func waitReady(base string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s/readyz not ready within %s", base, bound)
}

// results are the measurements of one load run.
type results struct {
	elapsed  time.Duration
	renders  []time.Duration // 200 answers
	refusals []time.Duration // 429 answers
	codes    map[string]int  // refusal codes
	statuses map[int]int
	errs     int // transport errors other than our own stop
	health   []time.Duration
	healthKO int
}

// load runs the clients and the /healthz prober until the duration or the
// request bound is reached. Every goroutine it starts ends before it
// returns: the context stops them and the WaitGroup waits for them.
func load(o options, base string, keys []string, doc string) *results {
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"markdown": doc})
	transport := &http.Transport{MaxIdleConnsPerHost: o.clients + 2}
	defer transport.CloseIdleConnections()
	l := &loader{
		o: o, base: base, body: body,
		client: &http.Client{Transport: transport},
		res:    &results{codes: map[string]int{}, statuses: map[int]int{}},
	}
	var wg sync.WaitGroup
	started := time.Now()
	for i := range o.clients {
		key := ""
		if len(keys) > 0 {
			key = keys[i%len(keys)]
		}
		wg.Go(func() { l.renders(ctx, key) })
	}
	wg.Go(func() { l.probe(ctx) })
	wg.Wait()
	l.res.elapsed = time.Since(started)
	return l.res
}

// loader is the state the goroutines of load share.
type loader struct {
	o      options
	base   string
	body   []byte // the render request
	client *http.Client
	sent   atomic.Int64

	mu  sync.Mutex
	res *results
}

// renders is one client: it asks for renders with key, one after the
// other, pausing after a refusal, until ctx ends or the request bound
// is reached.
func (l *loader) renders(ctx context.Context, key string) {
	for ctx.Err() == nil && l.sent.Add(1) <= int64(l.o.maxRequests) {
		status, err := l.render(ctx, key)
		if err != nil {
			continue
		}
		if status == http.StatusTooManyRequests {
			select {
			case <-ctx.Done():
			case <-time.After(l.o.refusalPause):
			}
		}
	}
}

// render asks for one render and records its answer. It returns the
// status, or an error for a request that got none (counted unless the
// run's end cut it off).
func (l *loader) render(ctx context.Context, key string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.base+"/v1/render", bytes.NewReader(l.body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	t0 := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.mu.Lock()
			l.res.errs++
			l.mu.Unlock()
		}
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	d := time.Since(t0)
	if err != nil && ctx.Err() != nil {
		return 0, err // cut off by the end of the run
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.res.statuses[resp.StatusCode]++
	switch resp.StatusCode {
	case http.StatusOK:
		l.res.renders = append(l.res.renders, d)
	case http.StatusTooManyRequests:
		l.res.refusals = append(l.res.refusals, d)
		l.res.codes[errorCode(b)]++
	}
	return resp.StatusCode, nil
}

// probe asks /healthz at a steady pace over its own connection, as an
// orchestrator's liveness check would, until ctx ends.
func (l *loader) probe(ctx context.Context) {
	probe := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	tick := time.NewTicker(l.o.probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t0 := time.Now()
		resp, err := probe.Get(l.base + "/healthz")
		d := time.Since(t0)
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		l.mu.Lock()
		if ok {
			l.res.health = append(l.res.health, d)
		} else if ctx.Err() == nil {
			l.res.healthKO++
		}
		l.mu.Unlock()
	}
}

func errorCode(body []byte) string {
	var v struct {
		Errors []struct{ Code string } `json:"errors"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Errors) == 0 {
		return "?"
	}
	return v.Errors[0].Code
}

// percentile returns the p-th percentile (0 < p ≤ 100) by the nearest-rank
// method; 0 for no samples.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func verdict(d, target time.Duration, n int) string {
	switch {
	case n == 0:
		return "no samples"
	case d < target:
		return "meets the target"
	}
	return "MISSES the target"
}

func (r *results) print(o options, srv *server) {
	fmt.Printf("outprint under load: %s, %d clients", r.elapsed.Round(100*time.Millisecond), o.clients)
	if srv != nil {
		fmt.Printf(", %d users, admission slots=%d queueDepth=%d perUser=%d", o.users, o.slots, o.queueDepth, o.perUser)
	}
	fmt.Println()
	rate := float64(len(r.renders)) / r.elapsed.Seconds()
	fmt.Printf("  renders        %5d x 200   %.2f renders/s   latency p50 %s  p99 %s\n",
		len(r.renders), rate, ms(percentile(r.renders, 50)), ms(percentile(r.renders, 99)))
	var codes []string
	for c, n := range r.codes {
		codes = append(codes, fmt.Sprintf("%s %d", c, n))
	}
	slices.Sort(codes)
	p99 := percentile(r.refusals, 99)
	fmt.Printf("  refusals       %5d x 429   (%s)   latency p50 %s  p99 %s  max %s   target p99 < 10 ms: %s\n",
		len(r.refusals), strings.Join(codes, ", "), ms(percentile(r.refusals, 50)), ms(p99),
		ms(percentile(r.refusals, 100)), verdict(p99, 10*time.Millisecond, len(r.refusals)))
	hp99 := percentile(r.health, 99)
	fmt.Printf("  /healthz       %5d probes  %d failed   latency p50 %s  p99 %s  max %s   target p99 < 10 ms: %s\n",
		len(r.health), r.healthKO, ms(percentile(r.health, 50)), ms(hp99), ms(percentile(r.health, 100)),
		verdict(hp99, 10*time.Millisecond, len(r.health)))
	var other []string
	for s, n := range r.statuses {
		if s != http.StatusOK && s != http.StatusTooManyRequests {
			other = append(other, fmt.Sprintf("%d x %d", n, s))
		}
	}
	if len(other) > 0 || r.errs > 0 {
		fmt.Printf("  other answers  %s; transport errors %d\n", strings.Join(other, ", "), r.errs)
	}
	if srv != nil {
		fmt.Printf("  server log     %s\n", srv.logPath)
	}
}
