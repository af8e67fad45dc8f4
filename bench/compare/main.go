// Command compare times outprint against its peer on the same files in the
// same run: `outprint render` (one cold XeLaTeX process per document) versus
// `pandoc --pdf-engine=xelatex`. It prints the median wall time of N runs,
// the CPU seconds per render (user+system of the whole process tree) and the
// ratio outprint/pandoc. It is a benchmark, not a test: nothing here asserts
// a time.
//
//	go run ./bench/compare -bin bin/outprint -runs 5 FILE.md...
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"text/tabwriter"
	"time"
)

type sample struct {
	wall, cpu time.Duration
	err       error
}

func main() {
	bin := flag.String("bin", "bin/outprint", "outprint binary")
	runs := flag.Int("runs", 5, "runs per document and tool (median is reported)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: compare [-bin B] [-runs N] FILE.md...")
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "outprint-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fallback := false
	_, _ = fmt.Fprintln(w, "document\toutprint (s)\tCPU s/render\tpandoc+xelatex (s)\tCPU s/render\toutprint/pandoc\t")
	for _, doc := range flag.Args() {
		abs, _ := filepath.Abs(doc)
		out := filepath.Join(tmp, "out.pdf")
		op := measure(*runs, func() *exec.Cmd {
			return exec.Command(*bin, "render", abs, "-o", out)
		})
		pandoc := func(extra ...string) func() *exec.Cmd {
			return func() *exec.Cmd {
				args := append([]string{abs, "-o", filepath.Join(tmp, "pandoc.pdf"), "--pdf-engine=xelatex",
					"--resource-path", filepath.Dir(abs), "-V", "mainfont=Noto Serif"}, extra...)
				c := exec.Command("pandoc", args...)
				c.Dir = filepath.Dir(abs)
				return c
			}
		}
		pd := measure(*runs, pandoc())
		mark := ""
		if pd.err != nil {
			// Pandoc reads Outline's literal "\n" hard breaks as raw TeX
			// and fails; its best effort is with raw TeX off.
			if pd2 := measure(*runs, pandoc("-f", "markdown-raw_tex")); pd2.err == nil {
				pd, mark, fallback = pd2, "*", true
			}
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t\n", filepath.Base(doc),
			secs(op.wall, op.err), secs(op.cpu, op.err), secs(pd.wall, pd.err)+mark, secs(pd.cpu, pd.err), ratio(op, pd))
	}
	_ = w.Flush()
	if fallback {
		fmt.Println("* pandoc failed on the document as it is (it reads Outline's literal \\n as a TeX command); timed with -f markdown-raw_tex")
	}
}

// measure runs the command n times and returns the medians; the first
// failure is kept so the table says the tool failed rather than a time.
func measure(n int, cmd func() *exec.Cmd) sample {
	var walls, cpus []time.Duration
	for i := 0; i < n; i++ {
		c := cmd()
		start := time.Now()
		out, err := c.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			msg := string(out)
			if len(msg) > 300 {
				msg = msg[len(msg)-300:]
			}
			return sample{err: fmt.Errorf("%v: %s", err, msg)}
		}
		walls = append(walls, wall)
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpus = append(cpus, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		}
	}
	return sample{wall: median(walls), cpu: median(cpus)}
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

func ratio(a, b sample) string {
	if a.err != nil || b.err != nil || b.wall == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a.wall.Seconds()/b.wall.Seconds())
}
