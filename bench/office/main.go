// Command office measures converting Office documents (internal/office),
// in one run:
//
//	naive      soffice --headless --convert-to pdf started per document,
//	           what a user scripts by hand (its profile made ahead, as a
//	           user's is after the first run)
//	warm       the same document on a warm pool (internal/office.Pool)
//	serial     four conversions one after the other on the pool
//	parallel   four conversions at once on the pool's two slots
//
// each as the median of -runs, then the memory of every LibreOffice
// process of the pool (its process group: the bridge and
// soffice.bin); then, with -bin, -jobs conversions of the same document as
// durable jobs (POST /v1/jobs with a file part) against `outprint serve`
// started here, all of which must succeed, and the memory of each of that
// server's LibreOffice processes afterwards (its /metrics). It is a
// benchmark, not a test: nothing here asserts a time. The targets of
// issue 28 are warm ≤ 0.4 × naive and parallel ≥ 1.7 × the throughput of
// serial, on 2 cores.
//
//	go run ./bench/office -runs 5 -bin bin/outprint -jobs 100 ../shared/office/word-google-docs.docx
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/outprint/outprint/internal/office"
)

func main() {
	runs := flag.Int("runs", 5, "runs per measurement (the median is printed)")
	bin := flag.String("bin", "", "outprint's binary: when set, -jobs conversions as durable jobs against its serve")
	nJobs := flag.Int("jobs", 100, "conversions as durable jobs (with -bin)")
	flag.Parse()
	doc := "../shared/office/word-google-docs.docx"
	if flag.NArg() > 0 {
		doc = flag.Arg(0)
	}
	if err := run(doc, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "office bench:", err)
		os.Exit(1)
	}
	if *bin != "" {
		if err := runJobs(*bin, doc, *nJobs); err != nil {
			fmt.Fprintln(os.Stderr, "office bench, jobs:", err)
			os.Exit(1)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func run(doc string, runs int) error {
	ctx := context.Background()
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	f, err := office.Detect(b, filepath.Base(doc))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ob-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a benchmark's scratch

	// Naive: one soffice per document; the first run makes the profile.
	profile := "file://" + filepath.Join(tmp, "profile")
	naiveOnce := func() (time.Duration, error) {
		start := time.Now()
		cmd := exec.Command("soffice", "--headless", "--norestore", "-env:UserInstallation="+profile,
			"--convert-to", "pdf", "--outdir", filepath.Join(tmp, "out"), doc)
		cmd.Env = append(os.Environ(), "HOME="+tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("soffice --convert-to pdf: %w: %s", err, out)
		}
		return time.Since(start), nil
	}
	if _, err := naiveOnce(); err != nil {
		return err
	}
	var naive []time.Duration
	for range runs {
		d, err := naiveOnce()
		if err != nil {
			return err
		}
		naive = append(naive, d)
	}

	pool, err := office.NewPool(ctx, office.Config{Slots: 2, Dir: tmp})
	if err != nil {
		return err
	}
	defer func() { _ = pool.Close() }() // the benchmark's end
	startWarm := time.Now()
	if err := pool.Warm(ctx); err != nil {
		return err
	}
	warmUp := time.Since(startWarm)
	convert := func() error {
		_, err := pool.Convert(ctx, b, f, office.Options{})
		return err
	}
	// One conversion per process first: its first document loads the
	// import filter's libraries.
	for range 2 {
		if err := convert(); err != nil {
			return err
		}
	}
	var warm, serial, parallel []time.Duration
	var groups []int
	for _, ps := range pool.Stats().Processes {
		groups = append(groups, ps.Pid)
	}
	cpu0, self0 := groupsCPU(groups), selfCPU()
	for range runs {
		start := time.Now()
		if err := convert(); err != nil {
			return err
		}
		warm = append(warm, time.Since(start))
	}
	cpuPer := (groupsCPU(groups) - cpu0) / time.Duration(runs)
	selfPer := (selfCPU() - self0) / time.Duration(runs)
	var serialCPU, parallelCPU time.Duration
	for range runs {
		start, c := time.Now(), groupsCPU(groups)
		for range 4 {
			if err := convert(); err != nil {
				return err
			}
		}
		serial = append(serial, time.Since(start))
		serialCPU += groupsCPU(groups) - c
		start, c = time.Now(), groupsCPU(groups)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = convert()
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		parallel = append(parallel, time.Since(start))
		parallelCPU += groupsCPU(groups) - c
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The tabwriter buffers until Flush, whose error is returned.
	row := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	row("document\t%s (%s)\t\n", filepath.Base(doc), f.Name)
	row("pool start (2 processes, warm)\t%.2f s\t\n", warmUp.Seconds())
	row("naive soffice --convert-to per document\t%.3f s\t\n", median(naive).Seconds())
	row("warm pool, one document\t%.3f s\t\n", median(warm).Seconds())
	row("ratio warm/naive (target <= 0.4)\t%.2f\t\n", median(warm).Seconds()/median(naive).Seconds())
	row("LibreOffice CPU per warm conversion (its process groups)\t%.3f s\t\n", cpuPer.Seconds())
	row("outprint's own CPU per warm conversion (this process)\t%.3f s\t\n", selfPer.Seconds())
	row("4 one after the other\t%.3f s\t\n", median(serial).Seconds())
	row("4 at once on 2 slots\t%.3f s\t\n", median(parallel).Seconds())
	row("throughput at once / one at a time (target >= 1.7)\t%.2f\t\n", median(serial).Seconds()/median(parallel).Seconds())
	row("LibreOffice CPU per conversion, one at a time / at once\t%.3f / %.3f s\t\n",
		serialCPU.Seconds()/float64(4*runs), parallelCPU.Seconds()/float64(4*runs))
	st := pool.Stats()
	for _, ps := range st.Processes {
		row("slot %d: pid %d, %d conversions\tRSS %.0f MiB\t\n", ps.Slot, ps.Pid, ps.Conversions, float64(ps.RSS)/(1<<20))
	}
	row("isolated (user+network namespaces)\t%v\t\n", st.Isolated)
	return w.Flush()
}

// groupsCPU is the CPU time (user and system) used so far by the live
// processes of the process groups pgids, from /proc (clock ticks of 10 ms).
func groupsCPU(pgids []int) time.Duration {
	want := map[int]bool{}
	for _, g := range pgids {
		want[g] = true
	}
	entries, _ := os.ReadDir("/proc") // a bench aid: nothing counted without /proc
	var ticks int64
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		// After the name: state ppid pgrp session tty tpgid flags minflt
		// cminflt majflt cmajflt utime stime.
		if len(f) < 13 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		if !want[pgrp] {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// selfCPU is the CPU time (user and system) this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
