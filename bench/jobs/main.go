// Command jobs measures outprint's durable job API (SPEC §5 "Jobs") on
// SQLite and PostgreSQL and prints two tables:
//
//   - acceptance: a burst of small jobs POSTed to /v1/jobs by concurrent
//     clients over loopback HTTP, each answered 202 only once its input is
//     stored and its row committed (durable), with no worker running, as a
//     gateway sees it. It reports jobs/s, the answer latency and the
//     process's peak memory (targets: ≥ 300 jobs/s on SQLite, ≥ 1,000 on
//     PostgreSQL; memory < 300 MiB).
//   - split: a smaller burst rendered by the job workers through the real
//     pipeline (XeLaTeX, warm pool), reporting for each job the queue delay
//     (acceptance → claim) and the run time (claim → succeeded), read from
//     the jobs' own startedAt and finishedAt.
//
// The service runs in this process (package httpapi over the real job
// service, artifact store and database), so the peak memory is the
// gateway's own. It only listens on and talks to 127.0.0.1, creates its
// own SQLite file and PostgreSQL database and removes them, and stops by
// itself: every phase is bounded by -timeout.
//
//	go run ./bench/jobs                       # 2,000 jobs, 20 rendered
//	go run ./bench/jobs -jobs 10000 -render 0 # the burst, acceptance only
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outprint/outprint/bench/internal/burst"
	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/httpapi"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/worker"
)

// smallDoc is the burst's document: a few lines, as a job submitted by a
// script would be. Each job gets its own number, so no two are alike.
const smallDoc = "# Receipt %d\n\nThank you for your order. It ships **tomorrow**.\n\n- one item\n- another item\n"

// memo is the rendered burst's document: one page with a title block,
// headings, a list and a table.
const memo = `---
title: Office move %d
author: Facilities team
date: 2026-03-01
---

# Office move on 14 March

The whole team moves to the new building on **Friday 14 March**. Pack your
desk on Thursday afternoon; the movers start at 07:00 on Friday.

## What to do

- Label every box with your name and new desk number.
- Take laptops home on Thursday evening.

| Floor | Teams | Meeting rooms |
|---|---|---|
| 2 | Sales, Support | Ada, Grace |
| 3 | Engineering | Linus, Ken |
`

type options struct {
	jobs, clients, render, slots int
	postgres                     string
	timeout                      time.Duration
	only                         string
	cpuProfile                   string
	// folders collects the phases' data folders, removed when run
	// returns: removing thousands of files between two phases would make
	// the next phase's file creation pay for it (ext4 skips inodes freed
	// in the last seconds, scanning the inode table to do so), charging
	// one phase's cleanup to the next phase's acceptance rate.
	folders *[]string
}

func main() {
	var o options
	flag.IntVar(&o.jobs, "jobs", 2000, "jobs in the acceptance burst (at most 20000)")
	flag.IntVar(&o.clients, "clients", 32, "concurrent HTTP clients")
	flag.IntVar(&o.render, "render", 20, "jobs in the rendered burst (0: skip the split; at most 500)")
	flag.IntVar(&o.slots, "slots", 2, "admission slots and job workers for the rendered burst")
	flag.StringVar(&o.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"PostgreSQL server on loopback to create the bench's database on")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound of each phase")
	flag.StringVar(&o.only, "db", "", "run only sqlite or postgres")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the acceptance bursts to this file")
	flag.Parse()
	if o.jobs < 1 || o.jobs > 20000 || o.clients < 1 || o.render < 0 || o.render > 500 || o.slots < 1 {
		fmt.Fprintln(os.Stderr, "jobs: -jobs 1..20000, -clients ≥ 1, -render 0..500, -slots ≥ 1")
		os.Exit(2)
	}
	if err := checkLoopback(o.postgres); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(2)
	}
	os.Exit(run(o))
}

func run(o options) int {
	var folders []string
	o.folders = &folders
	defer func() {
		for _, dir := range folders {
			_ = os.RemoveAll(dir)
		}
	}()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "jobs:", err)
			return 2
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "jobs:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	kinds := []string{"sqlite", "postgres"}
	if o.only != "" {
		kinds = []string{o.only}
	}
	var accepts []acceptResult
	var splits []splitResult
	failed := false
	for _, kind := range kinds {
		a, err := acceptBurst(o, kind)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jobs: %s acceptance: %v\n", kind, err)
			failed = true
			continue
		}
		accepts = append(accepts, a)
		if o.render > 0 {
			s, err := renderBurst(o, kind)
			if err != nil {
				fmt.Fprintf(os.Stderr, "jobs: %s rendered burst: %v\n", kind, err)
				failed = true
				continue
			}
			splits = append(splits, s)
		}
	}
	printAccepts(o, accepts)
	printSplits(o, splits)
	if failed {
		return 1
	}
	return 0
}

// printAccepts prints the table of the acceptance bursts, each against
// its target rate.
func printAccepts(o options, accepts []acceptResult) {
	fmt.Printf("durable acceptance: POST /v1/jobs over loopback HTTP, %d small jobs, %d clients, no worker (GOMAXPROCS %d)\n",
		o.jobs, o.clients, runtime.GOMAXPROCS(0))
	fmt.Printf("%-9s %7s %11s %8s %8s %8s %13s %s\n", "database", "jobs", "accepted/s", "p50 ms", "p99 ms", "max ms", "peak RSS MiB", "target")
	for _, a := range accepts {
		target, ok := 300.0, "≥ 300/s"
		if a.kind == "postgres" {
			target, ok = 1000, "≥ 1000/s"
		}
		verdict := "met"
		if a.rate() < target {
			verdict = "MISSED"
		}
		fmt.Printf("%-9s %7d %11.0f %8.1f %8.1f %8.1f %13d %s %s\n", a.kind, a.jobs, a.rate(), ms(pct(a.latency, 0.5)),
			ms(pct(a.latency, 0.99)), ms(pct(a.latency, 1)), a.peakRSS>>20, ok, verdict)
	}
}

// printSplits prints the table of the rendered bursts (none: nothing).
func printSplits(o options, splits []splitResult) {
	if len(splits) == 0 {
		return
	}
	fmt.Printf("\nqueue delay / run split: %d jobs posted at once, rendered by %d workers through XeLaTeX (warm pool)\n", o.render, o.slots)
	fmt.Printf("%-9s %5s %8s %9s %19s %19s %19s\n", "database", "jobs", "drain s", "jobs/s", "queue delay p50/p95", "run p50/p95 ms", "render p50/p95 ms")
	for _, s := range splits {
		fmt.Printf("%-9s %5d %8.1f %9.2f %9.0f/%-9.0f %9.0f/%-9.0f %9.0f/%-9.0f\n", s.kind, s.jobs, s.drain.Seconds(),
			float64(s.jobs)/s.drain.Seconds(), ms(pct(s.queueDelay, 0.5)), ms(pct(s.queueDelay, 0.95)),
			ms(pct(s.run, 0.5)), ms(pct(s.run, 0.95)), ms(pct(s.render, 0.5)), ms(pct(s.render, 0.95)))
	}
	fmt.Println("(queue delay in ms; run = claim → succeeded, with storage; render = the Render stage alone)")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// env is one service under test: a database, a store, the job service and
// the HTTP server in front of them.
type env struct {
	kind    string
	url     string
	svc     *jobs.Service
	timed   *timedRenderer // the workers' renderer, nil without workers
	cleanup []func()
}

func (e *env) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

// newEnv starts a service on a fresh database of kind. With pipeline nil
// it only accepts (no worker); otherwise workers render through it,
// holding admission slots.
func newEnv(ctx context.Context, o options, kind string, pl *render.Pipeline, adm *admission.Controller) (e *env, err error) {
	e = &env{kind: kind}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	dir, err := os.MkdirTemp("", "outprint-bench-jobs-")
	if err != nil {
		return nil, err
	}
	*o.folders = append(*o.folders, dir)
	dbURL := "sqlite://" + filepath.Join(dir, "outprint.db")
	if kind == "postgres" {
		dbURL, err = createDatabase(ctx, o.postgres, e)
		if err != nil {
			return nil, err
		}
	}
	db, err := jobs.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, func() { _ = db.Close() })
	if err := jobs.Migrate(ctx, db); err != nil {
		return nil, err
	}
	st, err := store.NewFS(filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The bench's one tenant queues thousands of jobs at once, far above
	// the default quota meant for a shared service.
	cfg := jobs.Config{Logger: quiet, FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 200 * time.Millisecond,
		MaxQueuedPerTenant: 1 << 30}
	var renderer jobs.Renderer
	if pl != nil {
		e.timed = &timedRenderer{next: worker.NewJobs(worker.JobsConfig{Pipeline: pl})}
		renderer = e.timed
		cfg.MaxWorkers = o.slots
		cfg.Budget = worker.NewBudget(adm)
	} else {
		pl = render.New(render.Config{})
	}
	e.svc, err = jobs.New(db, st, renderer, cfg)
	if err != nil {
		return nil, err
	}
	if renderer != nil {
		if err := e.svc.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, err
		}
		e.cleanup = append(e.cleanup, func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = e.svc.Stop(sctx)
		})
	}
	if err := e.serve(o, pl, adm, quiet); err != nil {
		return nil, err
	}
	return e, nil
}

// serve starts the HTTP API in front of e's job service, its capacity
// from pl and adm (nil: a controller that lets every client accept at
// once), on a port of loopback.
func (e *env) serve(o options, pl *render.Pipeline, adm *admission.Controller, quiet *slog.Logger) error {
	if adm == nil {
		// Acceptance counts its caller (one anonymous user here) while it
		// reads, checks and stores: every client may be in it at once.
		var err error
		if adm, err = admission.New(admission.Config{Slots: 1, QueueDepth: 4, PerUser: o.clients + o.render}); err != nil {
			return err
		}
	}
	capacity, err := worker.New(worker.Config{Pipeline: pl, Admission: adm})
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{Capacity: capacity, Anonymous: true, Jobs: e.svc, Logger: quiet})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }() // ends at Close below
	e.cleanup = append(e.cleanup, func() { _ = hs.Close() })
	e.url = "http://" + ln.Addr().String()
	return nil
}

// createDatabase makes a fresh database on the server at base and returns
// its URL; it is dropped by e.close.
func createDatabase(ctx context.Context, base string, e *env) (string, error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL at %s: %w", redact(base), err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "outprint_bench_" + hex.EncodeToString(rnd[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	e.cleanup = append(e.cleanup, func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jobs: drop database %s: %v\n", name, err)
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "jobs: drop database %s: %v\n", name, err)
		}
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String(), nil
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// checkLoopback refuses a PostgreSQL server that is not on loopback: the
// bench creates and drops databases there.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("-postgres: %w", err)
	}
	switch u.Hostname() {
	case "127.0.0.1", "::1", "localhost":
		return nil
	}
	return fmt.Errorf("-postgres must be on loopback, not %q", u.Hostname())
}

type acceptResult struct {
	kind    string
	jobs    int
	took    time.Duration
	latency []time.Duration
	peakRSS int64
}

func (a acceptResult) rate() float64 { return float64(a.jobs) / a.took.Seconds() }

// acceptBurst POSTs o.jobs small jobs from o.clients clients to a service
// without workers and checks that every one is queued.
func acceptBurst(o options, kind string) (acceptResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	e, err := newEnv(ctx, o, kind, nil, nil)
	if err != nil {
		return acceptResult{}, err
	}
	defer e.close()
	runtime.GC()
	resetPeakRSS()
	ids, lat, took, err := post(ctx, e.url, o.jobs, o.clients, smallDoc)
	if err != nil {
		return acceptResult{}, err
	}
	res := acceptResult{kind: kind, jobs: len(ids), took: took, latency: lat, peakRSS: peakRSS()}
	st, err := e.svc.Stats(ctx)
	if err != nil {
		return res, err
	}
	if st.ByState[jobs.StateQueued] != o.jobs {
		return res, fmt.Errorf("%d jobs queued after the burst, want %d", st.ByState[jobs.StateQueued], o.jobs)
	}
	return res, nil
}

// post sends a burst of n jobs to base through a client of its own.
func post(ctx context.Context, base string, n, clients int, doc string) ([]string, []time.Duration, time.Duration, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	return burst.Post(ctx, hc, base, n, clients, doc)
}

type splitResult struct {
	kind                    string
	jobs                    int
	drain                   time.Duration
	queueDelay, run, render []time.Duration
}

// renderBurst posts o.render memos at once to a service whose workers
// render through the real pipeline, waits until all succeeded and reads
// each job's queue delay and run time.
func renderBurst(o options, kind string) (splitResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	tmp, err := os.MkdirTemp("", "outprint-bench-tex-")
	if err != nil {
		return splitResult{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	pool, err := tex.NewPool(tex.PoolConfig{
		Runner:    tex.RunnerConfig{TempDir: tmp},
		Min:       o.slots,
		Max:       o.slots,
		Preambles: []string{markdown.Preamble(markdown.Profile{Paper: "a4", Scripts: script.Of("Latin")})},
	})
	if err != nil {
		return splitResult{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = pool.Close(cctx)
	}()
	pl := render.New(render.Config{Engine: pool, TempDir: tmp})
	// One render first, so the pool is warm and fonts are cached.
	if _, err := pl.Do(ctx, render.Request{Name: "warm.md", Markdown: []byte(fmt.Sprintf(memo, 0))}, nil); err != nil {
		return splitResult{}, fmt.Errorf("warm-up render: %w", err)
	}
	adm, err := admission.New(admission.Config{Slots: o.slots, QueueDepth: 4, PerUser: o.clients + o.render, MaxWait: time.Minute})
	if err != nil {
		return splitResult{}, err
	}
	e, err := newEnv(ctx, o, kind, pl, adm)
	if err != nil {
		return splitResult{}, err
	}
	defer e.close()

	start := time.Now()
	ids, _, _, err := post(ctx, e.url, o.render, o.clients, memo)
	if err != nil {
		return splitResult{}, err
	}
	views, err := waitAll(ctx, e.url, ids)
	if err != nil {
		return splitResult{}, err
	}
	res := splitResult{kind: kind, jobs: len(ids)}
	var last time.Time
	for _, v := range views {
		if v.State != jobs.StateSucceeded {
			return res, fmt.Errorf("job %s ended %s (%+v)", v.ID, v.State, v.Error)
		}
		res.queueDelay = append(res.queueDelay, v.StartedAt.Sub(v.CreatedAt))
		res.run = append(res.run, v.FinishedAt.Sub(*v.StartedAt))
		if v.FinishedAt.After(last) {
			last = *v.FinishedAt
		}
	}
	res.drain = last.Sub(start)
	res.render = e.timed.durations()
	return res, nil
}

// jobView is what the bench reads of a job.
type jobView struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	Error      any        `json:"error"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// waitAll polls GET /v1/jobs until every job of ids ended.
func waitAll(ctx context.Context, base string, ids []string) ([]jobView, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/jobs?limit="+strconv.Itoa(jobs.MaxListLimit), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		var body struct{ Jobs []jobView }
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var done []jobView
		for _, v := range body.Jobs {
			if want[v.ID] && (v.State == jobs.StateSucceeded || v.State == jobs.StateFailed || v.State == jobs.StateCancelled) {
				done = append(done, v)
			}
		}
		if len(done) == len(ids) {
			return done, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d jobs ended before the timeout", len(done), len(ids))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// timedRenderer records how long each job's Render took.
type timedRenderer struct {
	next jobs.Renderer
	mu   sync.Mutex
	took []time.Duration
}

func (t *timedRenderer) Render(ctx context.Context, in jobs.RenderInput, progress func(string, int)) ([]byte, error) {
	start := time.Now()
	pdf, err := t.next.Render(ctx, in, progress)
	t.mu.Lock()
	t.took = append(t.took, time.Since(start))
	t.mu.Unlock()
	return pdf, err
}

func (t *timedRenderer) durations() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.took)
}

// resetPeakRSS resets the kernel's high-water mark of this process's
// resident memory (Linux: clear_refs 5), so that peakRSS measures one
// phase.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS reads the high-water mark of this process's resident memory.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
