package tex

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/testenv"
)

// Benchmarks: warm (pool) against cold (runner) on a small body, the same
// with a table of contents (two runs), and a larger body. Besides ns/op each reports
//
//	cpu-s/render     CPU seconds of all TeX processes per render, read
//	                 from the kernel's accounting of reaped children, so a
//	                 warm render also pays for warming its replacement
//	engine-ms/render TeX's own time from "go" (warm) or the end of
//	                 \begin{document} (cold) to the PDF written
//
// The warm latency benchmark waits, untimed, until a warm process is ready
// before each render; BenchmarkSaturation does not wait and reports
// renders per second with all cores busy.
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/tex/

// benchBodies are the documents of the benchmarks.
func benchBodies() map[string]string {
	var memo strings.Builder
	memo.WriteString("\\section*{Memo}\n")
	for i := range 4 {
		fmt.Fprintf(&memo, "Paragraph %d of a memo with \\textbf{bold}, \\emph{emphasis} and a \\href{https://example.com}{link}. "+
			"Plain words follow to fill a line or two of text on the page.\n\n", i)
	}
	memo.WriteString("\\begin{itemize}\n\\item one\n\\item two\n\\end{itemize}\n")

	var long strings.Builder
	for s := range 30 {
		fmt.Fprintf(&long, "\\section{Section %d}\n", s)
		for p := range 12 {
			fmt.Fprintf(&long, "Paragraph %d.%d: %s\n\n", s, p, strings.Repeat("Words that fill the page with ordinary running text. ", 6))
		}
	}
	toc := "\\tableofcontents\n" + strings.ReplaceAll(memo.String(), "\\section*{Memo}", "\\section{Memo}\\subsection{Part}")
	return map[string]string{"small": memo.String(), "large": long.String(), "toc": toc}
}

// childCPU is the CPU time of every reaped child of this process so far.
func childCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkRender(b *testing.B) {
	for _, doc := range []string{"small", "toc", "large"} {
		body := benchBodies()[doc]
		job := Job{Preamble: testPreamble, Body: body}
		b.Run(doc+"/cold", func(b *testing.B) {
			r := newTestRunner(b, RunnerConfig{})
			benchRenders(b, r.Run, job, nil)
		})
		b.Run(doc+"/warm", func(b *testing.B) {
			p := newBenchPool(b, PoolConfig{Min: 1, Max: 2})
			benchRenders(b, p.Run, job, func() {
				waitWarm(b, p)
			})
		})
	}
}

func newBenchPool(b *testing.B, cfg PoolConfig) *Pool {
	b.Helper()
	cfg.Runner.TempDir = b.TempDir()
	cfg.Preambles = []string{testPreamble}
	p, err := NewPool(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(context.Background()) })
	waitWarm(b, p)
	return p
}

// waitWarm waits until the pool has a warm process and nothing busy or
// warming.
func waitWarm(b *testing.B, p *Pool) {
	testenv.EventuallyWithin(b, 60*time.Second, "a warm process and none busy or warming", func() bool {
		s := p.Stats()
		return s.Warm > 0 && s.Busy == 0 && s.Warming == 0
	})
}

func benchRenders(b *testing.B, run func(context.Context, Job) (*Result, error), job Job, before func()) {
	// One render first, so formats and caches are in place.
	if _, err := run(context.Background(), job); err != nil {
		b.Fatal(err)
	}
	if before != nil {
		before()
	}
	var engine time.Duration
	cpu0 := childCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if before != nil {
			b.StopTimer()
			before()
			b.StartTimer()
		}
		res, err := run(context.Background(), job)
		if err != nil {
			b.Fatal(err)
		}
		engine += res.Engine
	}
	b.StopTimer()
	if before != nil {
		// Let the last replacement finish warming: its CPU belongs to
		// these renders.
		before()
	}
	b.ReportMetric((childCPU()-cpu0).Seconds()/float64(b.N), "cpu-s/render")
	b.ReportMetric(float64(engine.Milliseconds())/float64(b.N), "engine-ms/render")
}

// BenchmarkSaturation renders the small document from several clients at
// once through a pool of DefaultPoolMax processes and reports renders per
// second and CPU seconds per render (warm-ups included).
func BenchmarkSaturation(b *testing.B) {
	job := Job{Preamble: testPreamble, Body: benchBodies()["small"]}
	p := newBenchPool(b, PoolConfig{Min: 1})
	if _, err := p.Run(context.Background(), job); err != nil {
		b.Fatal(err)
	}
	clients := p.cfg.Max
	var next atomic.Int64
	cpu0 := childCPU()
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := p.Run(context.Background(), job); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	elapsed := time.Since(start)
	waitWarm(b, p)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "renders/s")
	b.ReportMetric((childCPU()-cpu0).Seconds()/float64(b.N), "cpu-s/render")
}
