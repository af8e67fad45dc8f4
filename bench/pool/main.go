// Command pool measures the warm TeX pool against a cold render and
// against pandoc, per document, in one run:
//
//	warm     outprint's render pipeline with the warm tex.Pool (end to end:
//	         Markdown, images, TeX, checks), a warm process ready before
//	         each render: a child forked from the profile's zygote
//	nozyg    the same with zygotes off: every warm process warms up by
//	         itself (the pool before zygotes, and its fallback)
//	cold     the same pipeline with the cold tex.Runner
//	floor    the engine floor: the warm process's own time from "go" to the
//	         PDF written (tex.Result.Engine)
//	pandoc   pandoc --pdf-engine=xelatex on the same file
//
// with the ratios, and CPU seconds per render: for warm renders the CPU of
// every child process from the render's start until its replacement is
// warm again, so the warm-up a render causes is paid by it, plus what the
// zygotes spent meanwhile (the forks; their warm-ups are in the saturation
// figures).
//
// With -saturate D it then renders the first document from as many clients
// as the pool has processes for D, with zygotes and without, and prints
// renders per second, CPU seconds per render (every TeX process's, zygotes
// included) and whether every PDF was complete. The machine may be shared:
// CPU seconds per render are the steadier figure; renders per second
// depend on what else runs.
//
// It is a benchmark, not a test: nothing here asserts a time.
//
//	go run ./bench/pool -runs 5 -saturate 20s FILE.md...
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
)

// recorder is a render.Engine that keeps the tex.Result of the last run.
type recorder struct {
	engine render.Engine
	mu     sync.Mutex
	last   *tex.Result
}

func (r *recorder) Run(ctx context.Context, job tex.Job) (*tex.Result, error) {
	res, err := r.engine.Run(ctx, job)
	r.mu.Lock()
	r.last = res
	r.mu.Unlock()
	return res, err
}

func (r *recorder) lastResult() *tex.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

type sample struct {
	wall, cpu, floor time.Duration
	pages, runs      int
	pdf              []byte
	err              error
}

func main() {
	runs := flag.Int("runs", 5, "renders per document and engine (the median is reported)")
	saturate := flag.Duration("saturate", 0, "also render the first document from many clients for this long")
	noPandoc := flag.Bool("no-pandoc", false, "skip pandoc")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: pool [-runs N] [-saturate D] [-no-pandoc] FILE.md...")
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "outprint-bench-pool-")
	if err != nil {
		fail(err)
	}
	// The figures are printed by then: the pools' Closes and the removal
	// of the scratch folder are best effort.
	defer func() { _ = os.RemoveAll(tmp) }()

	pool, err := tex.NewPool(tex.PoolConfig{Runner: tex.RunnerConfig{TempDir: tmp}})
	if err != nil {
		fail(err)
	}
	defer func() { _ = pool.Close(context.Background()) }()
	pool0, err := tex.NewPool(tex.PoolConfig{Runner: tex.RunnerConfig{TempDir: tmp}, Zygote: tex.ZygoteConfig{Off: true}})
	if err != nil {
		fail(err)
	}
	defer func() { _ = pool0.Close(context.Background()) }()
	runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: tmp})
	if err != nil {
		fail(err)
	}
	warmEngine := &recorder{engine: pool}
	coldEngine := &recorder{engine: runner}
	warm := render.New(render.Config{Engine: warmEngine, TempDir: tmp})
	warm0 := render.New(render.Config{Engine: &recorder{engine: pool0}, TempDir: tmp})
	cold := render.New(render.Config{Engine: coldEngine, TempDir: tmp})

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	pandocFallback := false
	// A stdout that fails fails Flush too, whose error is checked.
	_, _ = fmt.Fprintln(w, "document\tpages\truns\twarm (s)\tnozyg (s)\tcold (s)\tfloor (s)\tpandoc (s)\twarm/pandoc\tcold/pandoc\twarm/floor\tCPU s warm\tCPU s nozyg\tCPU s cold\tCPU s pandoc\twarm = cold\t")
	for _, doc := range flag.Args() {
		req, err := request(doc)
		if err != nil {
			fail(err)
		}
		// One render of each first: the pool learns the document's
		// preamble (format built, a process warm), caches fill.
		// A document that fails fails the measured renders below too,
		// and the table shows their error.
		_, _ = cold.Do(context.Background(), req, nil)
		_, _ = warm.Do(context.Background(), req, nil)
		_, _ = warm0.Do(context.Background(), req, nil)
		settle(pool)
		settle(pool0)
		// The zygote's process, whose children the first renders were
		// not, is used up: from here on every render is forked.
		_, _ = warm.Do(context.Background(), req, nil)
		settle(pool)

		warmSample := func(pipe *render.Pipeline, pl *tex.Pool, rec *recorder) func() sample {
			return func() sample {
				cpu0, z0 := childCPU(), pl.Stats().ZygoteCPU
				start := time.Now()
				res, err := pipe.Do(context.Background(), req, nil)
				wall := time.Since(start)
				if err != nil {
					return sample{err: err}
				}
				settle(pl) // the replacement's warm-up belongs to this render
				s := sample{wall: wall, cpu: childCPU() - cpu0 + pl.Stats().ZygoteCPU - z0, pages: res.Pages, runs: res.Runs, pdf: res.PDF}
				if rec != nil {
					if last := rec.lastResult(); last != nil {
						s.floor = last.Engine
					}
				}
				return s
			}
		}
		ws := measure(*runs, warmSample(warm, pool, warmEngine))
		w0 := measure(*runs, warmSample(warm0, pool0, nil))
		cs := measure(*runs, func() sample {
			cpu0 := childCPU()
			start := time.Now()
			res, err := cold.Do(context.Background(), req, nil)
			if err != nil {
				return sample{err: err}
			}
			return sample{wall: time.Since(start), cpu: childCPU() - cpu0, pages: res.Pages, runs: res.Runs, pdf: res.PDF}
		})
		ps := sample{err: fmt.Errorf("skipped")}
		mark := ""
		if !*noPandoc {
			ps = measure(*runs, func() sample { return pandoc(doc, tmp) })
			if ps.err != nil {
				// Pandoc reads Outline's literal "\n" hard breaks as raw
				// TeX and fails; its best effort on such a document is
				// with raw TeX off, which is what a user would try next.
				if ps2 := measure(*runs, func() sample { return pandoc(doc, tmp, "-f", "markdown-raw_tex") }); ps2.err == nil {
					ps, mark = ps2, "*"
					pandocFallback = true
				}
			}
		}
		_, _ = fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", filepath.Base(doc),
			ws.pages, ws.runs, secs(ws.wall, ws.err), secs(w0.wall, w0.err), secs(cs.wall, cs.err), secs(ws.floor, ws.err), secs(ps.wall, ps.err)+mark,
			ratio(ws.wall, ps.wall, ws.err, ps.err), ratio(cs.wall, ps.wall, cs.err, ps.err), ratio(ws.wall, ws.floor, ws.err, nil),
			secs(ws.cpu, ws.err), secs(w0.cpu, w0.err), secs(cs.cpu, cs.err), secs(ps.cpu, ps.err), same(ws, cs))
	}
	if err := w.Flush(); err != nil {
		fail(err)
	}
	fmt.Println("warm: a zygote's child; nozyg: zygotes off, each warm process warms up by itself (the pool before zygotes)")
	fmt.Println("renders after each document's first reuse its converted SVGs (render's SVG cache); a new SVG adds one rsvg-convert run, ~40 ms here")
	if pandocFallback {
		fmt.Println("* pandoc failed on the document as it is (it reads Outline's literal \\n as a TeX command); timed with -f markdown-raw_tex")
	}

	if *saturate > 0 {
		req, err := request(flag.Arg(0))
		if err != nil {
			fail(err)
		}
		fmt.Println()
		fmt.Println("saturation (CPU s/render counts every TeX process, zygotes included; the machine may be shared, so renders/s is the noisier figure):")
		saturation("zygote", warm, pool, req, *saturate)
		saturation("nozyg ", warm0, pool0, req, *saturate)
	}
}

// saturation renders req from as many clients as the pool may run
// processes, for d.
func saturation(name string, p *render.Pipeline, pool *tex.Pool, req render.Request, d time.Duration) {
	clients := tex.DefaultPoolMax()
	var done, bad atomic.Int64
	var wg sync.WaitGroup
	settle(pool)
	stats0 := pool.Stats()
	cpu0 := childCPU() + stats0.ZygoteCPU
	self0 := selfCPU()
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				res, err := p.Do(context.Background(), req, nil)
				if err != nil || !complete(res.PDF) {
					bad.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	settle(pool)
	stats := pool.Stats()
	cpu := childCPU() + stats.ZygoteCPU - cpu0
	self := selfCPU() - self0
	n := done.Load()
	fmt.Printf("%s: %s from %d clients for %s: %d renders, %.2f renders/s, %.3f CPU s/render (warm-ups included), %d incomplete or failed\n",
		name, filepath.Base(req.Name), clients, d, n, float64(n)/elapsed.Seconds(), cpu.Seconds()/float64(max(n, 1)), bad.Load())
	per := (cpu + self).Seconds() / float64(max(n, 1))
	fmt.Printf("        all CPU incl. this process (Markdown, images, checks, pool): %.3f s/render: at most %.1f renders/s on %d cores\n",
		per, float64(runtime.NumCPU())/per, runtime.NumCPU())
	fmt.Printf("        %d processes started, %d forked from zygotes, for %d renders (%d warm at the end), %d failures, %d zygotes retired\n",
		stats.Started-stats0.Started, stats.Forked-stats0.Forked, n, stats.Warm, stats.Failures-stats0.Failures, stats.ZygotesRetired-stats0.ZygotesRetired)
}

// same says whether the warm and the cold PDF have the same text and page
// count (pdftotext, pdfinfo): the pool must typeset exactly as a cold run.
func same(a, b sample) string {
	if a.err != nil || b.err != nil {
		return "-"
	}
	ta, tb := pdfText(a.pdf), pdfText(b.pdf)
	if ta == "" || ta != tb || a.pages != b.pages {
		return "DIFFERENT"
	}
	return "yes"
}

func pdfText(pdf []byte) string {
	c := exec.Command("pdftotext", "-", "-")
	c.Stdin = bytes.NewReader(pdf)
	out, err := c.Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// complete checks a PDF's frame: header and end-of-file marker.
func complete(pdf []byte) bool {
	return bytes.HasPrefix(pdf, []byte("%PDF-")) && bytes.Contains(pdf[max(0, len(pdf)-64):], []byte("%%EOF"))
}

func request(path string) (render.Request, error) {
	md, err := os.ReadFile(path)
	if err != nil {
		return render.Request{}, err
	}
	return render.Request{
		Name: filepath.Base(path), Markdown: md,
		Images: images.Chain(images.Dir(filepath.Dir(path)), nil),
	}, nil
}

// settle waits until the pool has no process busy or warming up.
func settle(pool *tex.Pool) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if s := pool.Stats(); s.Busy == 0 && s.Warming == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pandoc runs pandoc with xelatex on doc, with extra flags.
func pandoc(doc, tmp string, extra ...string) sample {
	abs, _ := filepath.Abs(doc)
	args := append([]string{abs, "-o", filepath.Join(tmp, "pandoc.pdf"), "--pdf-engine=xelatex",
		"--resource-path", filepath.Dir(abs), "-V", "mainfont=Noto Serif"}, extra...)
	c := exec.Command("pandoc", args...)
	c.Dir = filepath.Dir(abs)
	start := time.Now()
	out, err := c.CombinedOutput()
	if err != nil {
		if len(out) > 300 {
			out = out[len(out)-300:]
		}
		return sample{err: fmt.Errorf("%v: %s", err, out)}
	}
	s := sample{wall: time.Since(start)}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s
}

// selfCPU is the CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	// Getrusage fails only on a bad pointer or who: neither here.
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is the CPU time of every reaped child of this process so far.
func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) // as in selfCPU
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure takes n samples and returns the medians; the first failure is
// kept so the table says the engine failed rather than a time.
func measure(n int, one func() sample) sample {
	var walls, cpus, floors []time.Duration
	var last sample
	for range n {
		s := one()
		if s.err != nil {
			return s
		}
		walls, cpus, floors = append(walls, s.wall), append(cpus, s.cpu), append(floors, s.floor)
		last = s
	}
	return sample{wall: median(walls), cpu: median(cpus), floor: median(floors), pages: last.pages, runs: last.runs, pdf: last.pdf}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func secs(d time.Duration, err error) string {
	if err != nil {
		return "failed"
	}
	return fmt.Sprintf("%.3f", d.Seconds())
}

func ratio(a, b time.Duration, aerr, berr error) string {
	if aerr != nil || berr != nil || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a.Seconds()/b.Seconds())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/pool:", err)
	os.Exit(1)
}
