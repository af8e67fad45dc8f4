// Command diagram measures drawing a document's diagrams (internal/diagram),
// in one run:
//
//	cold       the first document with Mermaid diagrams: a Chromium process
//	           starts, prepares its page, draws
//	warm       a document of three Mermaid diagrams (flowchart, sequence,
//	           class; new sources each time, so the cache does not answer)
//	           on a warm pool: the cost the diagrams add to a render
//	dot        the same document's size in Graphviz diagrams: dot's own
//	           process per diagram, the peer without a browser
//	cached     the warm document again: the memory cache answers
//	render     whole renders (warm TeX pool) of a memo with those three
//	           diagrams and of the same memo without them, alternated: the
//	           difference of the medians is the cost three diagrams add to
//	           a render (drawing, writing the PDF, TeX including it),
//	           printed against the target
//
// each as the median of -runs documents, with the CPU seconds of the
// Chromium process groups per document (their processes' own and what they
// reaped). Then -saturate D: as many clients as the pool has browsers draw
// documents of three diagrams for D, and it prints diagrams per second and
// CPU seconds per diagram. Last, the memory of the browsers: resident and
// proportional set size of every process of their groups, idle and at the
// saturation's end.
//
// It is a benchmark, not a test: nothing here asserts a time. The target of
// issue 27 is a warm three-diagram document within 0.3 s on 2 cores. The
// machine's load average is printed with the table: on a shared machine
// the wall-clock columns grow with it, the CPU seconds much less.
//
//	go run ./bench/diagram -runs 9 -saturate 20s
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/tex"
)

var (
	runs     = flag.Int("runs", 9, "documents per measurement")
	saturate = flag.Duration("saturate", 20*time.Second, "length of the saturation run (0: none)")
	browsers = flag.Int("browsers", 2, "Chromium processes in the pool (the render capacity of 2 cores)")
)

// document returns a document's three Mermaid diagrams, new sources for n.
func document(n int) []diagram.Diagram {
	tag := fmt.Sprintf("%%%% document %d\n", n)
	return []diagram.Diagram{
		{Kind: diagram.Mermaid, Line: 1, Source: tag + "flowchart LR\n  Order[Customer order] --> Check{In stock?}\n  Check -->|yes| Pack[Pack parcel]\n  Check -->|no| Back([Backorder])\n  Pack --> Ship[(Shipping log)]\n"},
		{Kind: diagram.Mermaid, Line: 20, Source: tag + "sequenceDiagram\n  participant Browser\n  participant Server\n  Browser->>Server: Render request\n  Server-->>Browser: Accepted job\n  Server->>Browser: Finished document\n"},
		{Kind: diagram.Mermaid, Line: 40, Source: tag + "classDiagram\n  class Vehicle {\n    +String plate\n    +start() bool\n  }\n  class Truck {\n    +int payload\n  }\n  Vehicle <|-- Truck\n"},
	}
}

// dotDocument is the Graphviz peer: three graphs of the same size.
func dotDocument(n int) []diagram.Diagram {
	tag := fmt.Sprintf("// document %d\n", n)
	return []diagram.Diagram{
		{Kind: diagram.Graphviz, Line: 1, Source: tag + "digraph { rankdir=LR; Order -> Check; Check -> Pack [label=yes]; Check -> Backorder [label=no]; Pack -> Ship }"},
		{Kind: diagram.Graphviz, Line: 20, Source: tag + "digraph { Browser -> Server [label=\"Render request\"]; Server -> Browser [label=\"Accepted job\"]; }"},
		{Kind: diagram.Graphviz, Line: 40, Source: tag + "digraph { node [shape=record]; Vehicle [label=\"{Vehicle|+plate\\l|+start()\\l}\"]; Truck [label=\"{Truck|+payload\\l}\"]; Truck -> Vehicle }"},
	}
}

func main() {
	flag.Parse()
	d, err := diagram.New(diagram.Config{Browsers: *browsers})
	if err != nil {
		fail(err)
	}
	defer func() { _ = d.Close() }()
	a := d.Available()
	if !a.Mermaid {
		fail(fmt.Errorf("mermaid not available: %s", a.MermaidReason))
	}
	if !a.Graphviz {
		// The peer row is left out; the rest measures Mermaid.
		fmt.Printf("(no dot row: %s)\n", a.GraphvizReason)
	}
	ctx := context.Background()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The tables go to stdout: a failed write has no one to tell.
	_, _ = fmt.Fprintf(tw, "case\tdocuments\tmedian s\tmin s\tmax s\tbrowser CPU s/doc\t\n")

	n := 0
	cpu0 := groupsCPU(d)
	t0 := time.Now()
	mustDraw(d, ctx, document(n))
	n++
	row(tw, "cold (start + 3 diagrams)", []time.Duration{time.Since(t0)}, groupsCPU(d)-cpu0, 1)

	waitWarm(d)
	// The browsers warm their pages once; after it, a document's page is
	// the warm one, reset.
	var warm []time.Duration
	cpu0 = groupsCPU(d)
	for range *runs {
		waitWarm(d) // the page is reset off the render's path
		t := time.Now()
		mustDraw(d, ctx, document(n))
		warm = append(warm, time.Since(t))
		n++
	}
	waitWarm(d)
	row(tw, "warm: 3 Mermaid diagrams", warm, groupsCPU(d)-cpu0, *runs)

	if a.Graphviz {
		var dot []time.Duration
		for i := range *runs {
			t := time.Now()
			mustDraw(d, ctx, dotDocument(i))
			dot = append(dot, time.Since(t))
		}
		row(tw, "dot: 3 Graphviz diagrams", dot, 0, *runs)
	}

	var cached []time.Duration
	for range *runs {
		t := time.Now()
		mustDraw(d, ctx, document(n-1))
		cached = append(cached, time.Since(t))
	}
	row(tw, "cached: the same 3 again", cached, 0, *runs)

	with, without, err := renders(ctx, d, &n)
	if err != nil {
		fail(err)
	}
	row(tw, "render: memo + 3 Mermaid diagrams", with, 0, *runs)
	row(tw, "render: the memo alone", without, 0, *runs)
	added := median(with) - median(without)
	_, _ = fmt.Fprintf(tw, "3 diagrams add to a render (target ≤ 0.300)\t%d\t%.3f\t\t\t\t\n", *runs, added.Seconds())
	_ = tw.Flush()
	fmt.Printf("load average: %s\n", loadAverage())

	idle := memory(d)
	fmt.Printf("\nbrowsers idle and warm: %d processes, %d threads (a container's pids limit counts threads), RSS %.0f MiB, PSS %.0f MiB\n",
		idle.procs, idle.threads, mib(idle.rss), mib(idle.pss))

	if *saturate > 0 {
		fmt.Printf("\n== saturation: %d clients, documents of 3 Mermaid diagrams, %s\n", *browsers, *saturate)
		var docs atomic.Int64
		var peak memUse
		var mu sync.Mutex
		var wg sync.WaitGroup
		var next atomic.Int64
		next.Store(int64(n))
		cpu0 := groupsCPU(d)
		start := time.Now()
		deadline := start.Add(*saturate)
		for range *browsers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					mustDraw(d, ctx, document(int(next.Add(1))))
					docs.Add(1)
					m := memory(d)
					mu.Lock()
					if m.pss > peak.pss {
						peak = m
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		cpu := groupsCPU(d) - cpu0
		dia := float64(docs.Load() * 3)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		// Stdout, as above.
		_, _ = fmt.Fprintf(tw, "documents\tdiagrams\tseconds\tdiagrams/s\tbrowser CPU s/diagram\tpeak RSS MiB\tpeak PSS MiB\t\n")
		_, _ = fmt.Fprintf(tw, "%d\t%.0f\t%.1f\t%.2f\t%.3f\t%.0f\t%.0f\t\n", docs.Load(), dia, el.Seconds(), dia/el.Seconds(), cpu/dia, mib(peak.rss), mib(peak.pss))
		_ = tw.Flush()
	}
	fmt.Printf("\npool: %s\n", d.Stats())
}

// memo is a short document; %s is where its diagrams go.
const memo = "# Shipping memo %d\n\nHow an order moves through the warehouse, and who talks to whom.\n\n%s" +
	"The class of vehicles the depot uses is below.\n\nRegards,\nthe depot\n"

// renders renders the memo with the three diagrams of document(n) and
// without them, *runs times each, alternated, through a warm TeX pool and
// the drawer d; n counts the documents drawn.
func renders(ctx context.Context, d *diagram.Drawer, n *int) (with, without []time.Duration, err error) {
	tmp, err := os.MkdirTemp("", "outprint-bench-diagram-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	pool, err := tex.NewPool(tex.PoolConfig{
		Runner:    tex.RunnerConfig{TempDir: tmp},
		Min:       1,
		Max:       1,
		Preambles: []string{markdown.Preamble(markdown.Profile{Paper: "a4", Scripts: script.Of("Latin")})},
	})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = pool.Close(cctx)
	}()
	pl := render.New(render.Config{Engine: pool, TempDir: tmp, Diagrams: d})
	doc := func(k int, diagrams bool) []byte {
		var fences strings.Builder
		if diagrams {
			for _, dg := range document(k) {
				fmt.Fprintf(&fences, "```mermaid\n%s```\n\n", dg.Source)
			}
		}
		return []byte(fmt.Sprintf(memo, k, fences.String()))
	}
	once := func(diagrams bool) (time.Duration, error) {
		waitWarm(d)
		t := time.Now()
		_, err := pl.Do(ctx, render.Request{Name: "memo.md", Markdown: doc(*n, diagrams)}, nil)
		*n++
		return time.Since(t), err
	}
	// Warm both: the pool's process, the fonts, the diagrams' path.
	for _, diagrams := range []bool{false, true} {
		if _, err := once(diagrams); err != nil {
			return nil, nil, err
		}
	}
	for range *runs {
		for _, diagrams := range []bool{true, false} {
			el, err := once(diagrams)
			if err != nil {
				return nil, nil, err
			}
			if diagrams {
				with = append(with, el)
			} else {
				without = append(without, el)
			}
		}
	}
	return with, without, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func mustDraw(d *diagram.Drawer, ctx context.Context, ds []diagram.Diagram) {
	if _, err := d.Draw(ctx, ds); err != nil {
		fail(err)
	}
}

// waitWarm waits until a browser's next page is prepared: what a render
// meets on a warm pool.
func waitWarm(d *diagram.Drawer) {
	deadline := time.Now().Add(2 * time.Minute)
	for d.Stats().Idle == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func row(tw *tabwriter.Writer, name string, ds []time.Duration, cpu float64, docs int) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	cpuCell := "-"
	if cpu > 0 {
		cpuCell = fmt.Sprintf("%.3f", cpu/float64(docs))
	}
	_, _ = fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%s\t\n", name, len(ds), ds[len(ds)/2].Seconds(), ds[0].Seconds(), ds[len(ds)-1].Seconds(), cpuCell)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

// groupsCPU is the CPU seconds of every process in the browsers' process
// groups: their own and what they reaped (a page's renderer, reaped by
// Chromium's zygote when its browser context goes).
func groupsCPU(d *diagram.Drawer) float64 {
	total := 0.0
	for _, p := range groupProcs(d) {
		f := p.stat
		if len(f) < 15 {
			continue
		}
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseFloat(f[i], 64)
			total += v / clockTicks
		}
	}
	return total
}

type proc struct {
	pid  string
	stat []string // fields after the command name: state is [0]
}

// groupProcs lists the processes of the pool's browsers' process groups.
func groupProcs(d *diagram.Drawer) []proc {
	groups := map[string]bool{}
	for _, pid := range d.Stats().Pids {
		groups[strconv.Itoa(pid)] = true
	}
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && groups[f[2]] {
			out = append(out, proc{pid: e.Name(), stat: f})
		}
	}
	return out
}

type memUse struct {
	procs, threads int
	rss, pss       float64 // bytes
}

// memory sums RSS and PSS (smaps_rollup) over the browsers' processes.
func memory(d *diagram.Drawer) memUse {
	var m memUse
	for _, p := range groupProcs(d) {
		b, err := os.ReadFile(filepath.Join("/proc", p.pid, "smaps_rollup"))
		if err != nil {
			continue
		}
		m.procs++
		if len(p.stat) > 17 {
			n, _ := strconv.Atoi(p.stat[17]) // num_threads
			m.threads += n
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "Rss:":
				m.rss += v * 1024
			case "Pss:":
				m.pss += v * 1024
			}
		}
	}
	return m
}

func mib(b float64) float64 { return b / (1 << 20) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/diagram:", err)
	os.Exit(1)
}
