// Command forms compares filling and flattening a two-page form with
// outprint (forms.Filler on a warm TeX pool, the path the server takes)
// against pdftk-java (`pdftk FORM fill_form VALUES.xfdf output OUT flatten`)
// on the same form and values, in the same run: fills per second with as
// many concurrent fills as there are cores, peak memory, and how many of the
// values each tool's output carries as text (pdftotext), since pdftk draws
// no glyphs its form font lacks (CJK, Arabic).
//
//	go run ./bench/forms -n 100
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/worker"
)

func main() {
	n := flag.Int("n", 60, "fills per tool")
	form := flag.String("form", "../shared/forms/acrobat-rotated.pdf", "the form (two pages; pdftk-java cannot flatten the hyperref form of examples/)")
	valuesPath := flag.String("values", "", "the values JSON (default: every field, in five scripts)")
	conc := flag.Int("c", runtime.NumCPU(), "concurrent fills")
	nJobs := flag.Int("jobs", 0, "then submit this many fills as durable jobs (SQLite) and wait for all")
	flag.Parse()
	if err := run(*n, *conc, *form, *valuesPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench/forms:", err)
		os.Exit(1)
	}
	if *nJobs == 0 {
		return
	}
	if err := runJobs(*nJobs, *conc, *form, *valuesPath); err != nil {
		fmt.Fprintln(os.Stderr, "bench/forms:", err)
		os.Exit(1)
	}
}

type outcome struct {
	name     string
	fills    int
	wall     time.Duration
	peakRSS  int64 // bytes
	found    int   // values found in the output's text
	total    int
	failures int
}

func run(n, conc int, formPath, valuesPath string) error {
	pdf, err := os.ReadFile(formPath)
	if err != nil {
		return err
	}
	var values []byte
	if valuesPath != "" {
		if values, err = os.ReadFile(valuesPath); err != nil {
			return err
		}
	} else if values, err = scriptValues(pdf); err != nil {
		return err
	}
	var vals map[string]any
	if err := json.Unmarshal(values, &vals); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-forms-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	var results []outcome
	op, err := benchOutprint(n, conc, pdf, values, vals, dir)
	if err != nil {
		return err
	}
	results = append(results, op)
	if _, err := exec.LookPath("pdftk"); err != nil {
		fmt.Println("pdftk is not installed (scripts/setup.sh installs pdftk-java); outprint alone:")
	} else {
		pk, err := benchPdftk(n, conc, formPath, vals, dir)
		if err != nil {
			return err
		}
		results = append(results, pk)
	}
	fmt.Printf("%-28s %6s %9s %9s %12s %10s\n", "tool", "fills", "wall s", "fills/s", "peak MiB", "values")
	for _, r := range results {
		fmt.Printf("%-28s %6d %9.2f %9.2f %12.1f %7d/%d\n", r.name, r.fills, r.wall.Seconds(),
			float64(r.fills-r.failures)/r.wall.Seconds(), float64(r.peakRSS)/(1<<20), r.found, r.total)
	}
	if len(results) == 2 {
		ratio := (float64(results[0].fills) / results[0].wall.Seconds()) / (float64(results[1].fills) / results[1].wall.Seconds())
		fmt.Printf("outprint / pdftk throughput: %.2fx (target >= 3x)\n", ratio)
	}
	return nil
}

// texts are the value strings to look for in an output.
func texts(vals map[string]any) []string {
	var out []string
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, strings.Split(s, "\n")...)
		}
	}
	sort.Strings(out)
	return out
}

func countFound(pdfPath string, vals map[string]any) (int, int) {
	text, _ := exec.Command("pdftotext", pdfPath, "-").Output()
	// pdftotext reports Arabic as presentation forms: fold both sides.
	flat := norm.NFKC.String(strings.Join(strings.Fields(string(text)), " "))
	found := 0
	want := texts(vals)
	for _, w := range want {
		if strings.Contains(flat, norm.NFKC.String(strings.Join(strings.Fields(w), " "))) {
			found++
		}
	}
	return found, len(want)
}

func benchOutprint(n, conc int, pdf, values []byte, vals map[string]any, dir string) (outcome, error) {
	pool, err := tex.NewPool(tex.PoolConfig{Min: 2 * conc, Max: 2 * conc})
	if err != nil {
		return outcome{}, err
	}
	defer func() { _ = pool.Close(context.Background()) }()
	f, err := forms.New(forms.Config{}, pool)
	if err != nil {
		return outcome{}, err
	}
	// Warm-up: the first fill makes the overlay's format and warms the pool
	// for its profile.
	first, err := f.Fill(context.Background(), pdf, values, nil)
	if err != nil {
		return outcome{}, err
	}
	out := filepath.Join(dir, "outprint.pdf")
	_ = os.WriteFile(out, first.PDF, 0o644)
	found, total := countFound(out, vals)
	time.Sleep(2 * time.Second) // let the pool refill

	var peakTeX, texCPU, warmCPU, engine atomic.Int64
	var failures atomic.Int64
	start := time.Now()
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				res, err := f.Fill(context.Background(), pdf, values, nil)
				if err != nil {
					failures.Add(1)
					continue
				}
				if res.TeX != nil {
					texCPU.Add(int64(res.TeX.CPU))
					warmCPU.Add(int64(res.TeX.WarmCPU))
					engine.Add(int64(res.TeX.Engine))
					for {
						old := peakTeX.Load()
						if res.TeX.MaxRSS <= old || peakTeX.CompareAndSwap(old, res.TeX.MaxRSS) {
							break
						}
					}
				}
			}
		}()
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(start)
	per := func(v int64) float64 { return time.Duration(v / int64(n)).Seconds() }
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
	fmt.Printf("outprint per fill: TeX CPU %.3fs (warm-up %.3fs), TeX engine %.3fs, wall %.3fs at concurrency %d\n",
		per(texCPU.Load()), per(warmCPU.Load()), per(engine.Load()), wall.Seconds()/float64(n), conc)
	// Peak memory: this process (the gateway's share) plus the TeX
	// processes that run at once (conc × the largest one).
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	peak := ru.Maxrss*1024 + int64(conc)*peakTeX.Load()
	return outcome{name: "outprint (warm pool)", fills: n, wall: wall, peakRSS: peak, found: found, total: total, failures: int(failures.Load())}, nil
}

func benchPdftk(n, conc int, formPath string, vals map[string]any, dir string) (outcome, error) {
	var x strings.Builder
	x.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<xfdf xmlns="http://ns.adobe.com/xfdf/" xml:space="preserve"><fields>`)
	for k, v := range vals {
		s := fmt.Sprint(v)
		if b, ok := v.(bool); ok {
			s = "Off"
			if b {
				s = "Yes"
			}
		}
		fmt.Fprintf(&x, `<field name="%s"><value>%s</value></field>`, html.EscapeString(k), html.EscapeString(s))
	}
	x.WriteString("</fields></xfdf>\n")
	xfdf := filepath.Join(dir, "values.xfdf")
	if err := os.WriteFile(xfdf, []byte(x.String()), 0o644); err != nil {
		return outcome{}, err
	}
	fill := func(out string) (int64, error) {
		cmd := exec.Command("pdftk", formPath, "fill_form", xfdf, "output", out, "flatten")
		if b, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("pdftk: %v: %s", err, b)
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024, nil
	}
	first := filepath.Join(dir, "pdftk.pdf")
	if _, err := fill(first); err != nil {
		return outcome{}, err
	}
	found, total := countFound(first, vals)
	var peak atomic.Int64
	var failures atomic.Int64
	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rss, err := fill(filepath.Join(dir, fmt.Sprintf("pdftk-%d.pdf", i)))
				if err != nil {
					failures.Add(1)
					continue
				}
				for {
					old := peak.Load()
					if rss <= old || peak.CompareAndSwap(old, rss) {
						break
					}
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return outcome{name: "pdftk-java fill_form flatten", fills: n, wall: time.Since(start), peakRSS: int64(conc) * peak.Load(),
		found: found, total: total, failures: int(failures.Load())}, nil
}

// scriptValues fills every text field of the form with a value in one of
// five scripts, in turn.
func scriptValues(pdf []byte) ([]byte, error) {
	r, err := tex.NewRunner(tex.RunnerConfig{})
	if err != nil {
		return nil, err
	}
	f, err := forms.New(forms.Config{}, r)
	if err != nil {
		return nil, err
	}
	fields, err := f.Fields(context.Background(), pdf)
	if err != nil {
		return nil, err
	}
	samples := []string{"Zoë Müller", "東京都渋谷区", "مرحبا بالعالم", "नमस्ते भारत", "สวัสดีครับ", "שלום עולם"}
	vals := map[string]any{}
	i := 0
	for _, fl := range fields {
		if fl.Type == "text" {
			vals[fl.Name] = samples[i%len(samples)]
			i++
		}
	}
	return json.Marshal(vals)
}

// runJobs submits n fills of the form as jobs (the path of POST /v1/jobs
// after acceptance) to a job service on SQLite whose workers hold an
// admission slot each, and waits until every job ended.
func runJobs(n, conc int, formPath, valuesPath string) error {
	ctx := context.Background()
	pdf, err := os.ReadFile(formPath)
	if err != nil {
		return err
	}
	var values []byte
	if valuesPath != "" {
		values, err = os.ReadFile(valuesPath)
	} else {
		values, err = scriptValues(pdf)
	}
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-forms-jobs-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var stack closers
	defer stack.close()
	svc, err := startJobs(ctx, dir, conc, &stack)
	if err != nil {
		return err
	}
	start := time.Now()
	ids := make([]string, 0, n)
	for range n {
		job, _, err := svc.Submit(ctx, jobs.Input{Tenant: "bench", User: "bench", Name: "form.pdf",
			Form: &jobs.FormInput{PDF: pdf, Values: values}})
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		ids = append(ids, job.ID)
	}
	accepted := time.Since(start)
	counts, err := waitEnded(ctx, svc, ids)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	fmt.Printf("%d fills as jobs: accepted in %.2fs, all ended in %.1fs (%.2f jobs/s): %d succeeded, %d failed\n",
		n, accepted.Seconds(), wall.Seconds(), float64(n)/wall.Seconds(), counts[jobs.StateSucceeded], counts[jobs.StateFailed])
	if counts[jobs.StateSucceeded] != n {
		return fmt.Errorf("%d of %d jobs did not succeed", n-counts[jobs.StateSucceeded], n)
	}
	return nil
}

// closers are the shutdowns of what startJobs started, run last first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c closers) close() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// startJobs starts a job service for form fills in dir: SQLite, a file
// store, a TeX pool of two processes per concurrent job, and an
// admission controller of conc slots. Its shutdowns go on stack.
func startJobs(ctx context.Context, dir string, conc int, stack *closers) (*jobs.Service, error) {
	db, err := jobs.Open(ctx, "sqlite://"+filepath.Join(dir, "outprint.db"))
	if err != nil {
		return nil, err
	}
	stack.add(func() { _ = db.Close() })
	if err := jobs.Migrate(ctx, db); err != nil {
		return nil, err
	}
	st, err := store.NewFS(filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	pool, err := tex.NewPool(tex.PoolConfig{Min: 2 * conc, Max: 2 * conc})
	if err != nil {
		return nil, err
	}
	stack.add(func() { _ = pool.Close(ctx) })
	filler, err := forms.New(forms.Config{}, pool)
	if err != nil {
		return nil, err
	}
	adm, err := admission.New(admission.Config{Slots: conc, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute})
	if err != nil {
		return nil, err
	}
	svc, err := jobs.New(db, st, worker.NewJobs(worker.JobsConfig{Forms: filler}), jobs.Config{
		MaxWorkers: conc, Budget: worker.NewBudget(adm),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 200 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	if err := svc.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	stack.add(func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = svc.Stop(sctx)
	})
	return svc, nil
}

// waitEnded polls the jobs ids until every one has ended and returns how
// many ended in each state.
func waitEnded(ctx context.Context, svc *jobs.Service, ids []string) (map[string]int, error) {
	counts := map[string]int{}
	for {
		clear(counts)
		for _, id := range ids {
			j, err := svc.Get(ctx, "bench", id)
			if err != nil {
				return nil, err
			}
			counts[j.State]++
		}
		if counts[jobs.StateSucceeded]+counts[jobs.StateFailed]+counts[jobs.StateCancelled] == len(ids) {
			return counts, nil
		}
		time.Sleep(2 * time.Second)
	}
}
