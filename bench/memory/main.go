// Command memory measures what an `outprint serve` holds in memory, as
// proportional set size (PSS, smaps_rollup) summed over the server and
// every process below it (the TeX zygotes, warm processes and renders):
//
//	ready     right after /readyz first answers 200
//	examples  after the README's examples: the showcase (A4, with its
//	          images), the letter memo and the onboarding form filled
//	retired   once the pool's janitor retired the profiles nobody used
//	          for pool.idleTimeout (-idle; 5 minutes by default in
//	          production, shorter here so the bench need not wait)
//	peak      a second server set up as a worker in 1 GiB (-limit): the
//	          pool's memory budget and process bound derived from that
//	          limit, one render slot; A4, letter and form renders from a
//	          client each for -saturate, PSS sampled every 100 ms
//
// with the targets of issue 23: idle after retirement under about 300 MiB,
// the peak under 80 % of the limit. It is a benchmark, not a test.
//
//	go run ./bench/memory -bin bin/outprint
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/outprint/outprint/internal/tex"
)

type options struct {
	bin      string
	idle     time.Duration
	saturate time.Duration
	limit    int64
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/outprint", "the outprint binary")
	flag.DurationVar(&o.idle, "idle", 20*time.Second, "pool.idleTimeout of the server measured idle")
	flag.DurationVar(&o.saturate, "saturate", 20*time.Second, "how long the worker in -limit is kept busy")
	limitMiB := flag.Int64("limit", 1024, "the worker's memory limit in MiB")
	flag.Parse()
	o.limit = *limitMiB << 20
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}

type row struct{ what, pss, procs, target, ok string }

func run(o options) error {
	var rows []row
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}

	// The idle server: as `make run` starts it, with a short idle timeout.
	s, err := startServer(o.bin, fmt.Sprintf("pool: {idleTimeout: %s}\n", o.idle))
	if err != nil {
		return err
	}
	m := measure(s.pid())
	rows = append(rows, row{"serve, ready", mib(m.pss), strconv.Itoa(m.tex), "", ""})
	if err := examples(s.url); err != nil {
		s.stop()
		return fmt.Errorf("the README's examples: %w", err)
	}
	time.Sleep(2 * time.Second) // spares and zygotes of the profiles used warm up
	m = measure(s.pid())
	rows = append(rows, row{"after A4, letter and a form", mib(m.pss), strconv.Itoa(m.tex), "", ""})
	// The janitor sweeps every idle/4: after idle and two sweeps the
	// unused profiles are gone.
	time.Sleep(o.idle + o.idle/2 + 2*time.Second)
	m = measure(s.pid())
	rows = append(rows, row{fmt.Sprintf("idle, profiles retired (idleTimeout %s)", o.idle), mib(m.pss), strconv.Itoa(m.tex), "< 300 MiB", yes(m.pss < 300<<20)})
	s.stop()

	// A worker in o.limit: what the cgroup limit would derive.
	budget := tex.PoolMemoryFor(o.limit)
	w, err := startServer(o.bin, fmt.Sprintf("pool: {memory: %d, max: 1}\nadmission: {slots: 1, queueDepth: 8, perUser: 8}\n", budget))
	if err != nil {
		return err
	}
	peak, renders, failed := saturate(w, o.saturate)
	w.stop()
	target := o.limit / 5 * 4
	rows = append(rows, row{fmt.Sprintf("peak, every profile in use, %d MiB worker (%d renders, %d failed)", o.limit>>20, renders, failed),
		mib(peak.pss), strconv.Itoa(peak.tex), "< " + mib(target), yes(peak.pss < target && failed == 0)})

	fmt.Printf("outprint serve memory (PSS of the server and its TeX processes), %s\n", time.Now().UTC().Format("2006-01-02"))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	// A stdout that fails fails Flush too, whose error is returned.
	_, _ = fmt.Fprintln(tw, "state\tPSS\tTeX processes\ttarget\tmet\t")
	for _, r := range rows {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.what, r.pss, r.procs, r.target, r.ok)
	}
	return tw.Flush()
}

// The README's examples, as its curl lines send them.
func examples(url string) error {
	if err := showcase(url); err != nil {
		return err
	}
	if err := memo(url, "letter"); err != nil {
		return err
	}
	return fill(url)
}

func showcase(url string) error {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	part := func(field, name, path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		w, err := mw.CreateFormFile(field, name)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := part("document", "showcase.md", "examples/showcase.md"); err != nil {
		return err
	}
	for _, img := range []string{"images/bars.png", "images/landscape.jpg", "images/flow.svg"} {
		if err := part("asset", img, filepath.Join("examples", img)); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	return post(url+"/v1/render", mw.FormDataContentType(), b.Bytes())
}

func memo(url, paper string) error {
	body, _ := json.Marshal(map[string]any{"markdown": "# Memo\n\nText.", "metadata": map[string]any{"author": "Ann", "paper": paper}})
	return post(url+"/v1/render", "application/json", body)
}

func fill(url string) error {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range []struct{ field, path string }{{"pdf", "examples/onboarding-form.pdf"}, {"values", "examples/onboarding-values.json"}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		w, err := mw.CreateFormFile(f.field, filepath.Base(f.path))
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	return post(url+"/v1/forms/fill", mw.FormDataContentType(), b.Bytes())
}

// errBusy is a 429 or 503: the client tries again.
var errBusy = errors.New("busy")

func post(url, ctype string, body []byte) error {
	resp, err := http.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // only read
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		return errBusy
	case resp.StatusCode != http.StatusOK || !bytes.HasPrefix(b, []byte("%PDF-")):
		return fmt.Errorf("POST %s = %s %.300s", url, resp.Status, b)
	}
	return nil
}

// saturate keeps w busy with a client per profile for d and returns the
// highest PSS sampled, the renders done and the renders that failed.
func saturate(w *server, d time.Duration) (peak usage, renders, failed int64) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var done, bad atomic.Int64
	var wg sync.WaitGroup
	for _, do := range []func() error{
		func() error { return memo(w.url, "a4") },
		func() error { return memo(w.url, "letter") },
		func() error { return fill(w.url) },
	} {
		wg.Go(func() {
			for ctx.Err() == nil {
				switch err := do(); {
				case errors.Is(err, errBusy):
					time.Sleep(50 * time.Millisecond)
				case err != nil:
					bad.Add(1)
					fmt.Fprintln(os.Stderr, "memory:", err)
				default:
					done.Add(1)
				}
			}
		})
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		if m := measure(w.pid()); m.pss > peak.pss {
			peak = m
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	return peak, done.Load(), bad.Load()
}

// usage is the PSS of a process tree and how many TeX processes it has.
type usage struct {
	pss int64
	tex int
}

// measure sums Pss over root and its descendants.
func measure(root int) usage {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	comm := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		comm[pid] = s[open+1 : close]
	}
	var u usage
	for pid := range parent {
		under := pid == root
		for up, n := parent[pid], 0; !under && up > 1 && n < 64; up, n = parent[up], n+1 {
			under = up == root
		}
		if !under {
			continue
		}
		u.pss += pss(pid)
		switch comm[pid] {
		case "xelatex", "xetex", "xdvipdfmx":
			u.tex++
		}
	}
	return u
}

func pss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }() // only read
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// server is an `outprint serve` this command started.
type server struct {
	cmd  *exec.Cmd
	url  string
	dir  string
	done chan struct{}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// startServer starts `bin serve` on a loopback port with extra YAML and
// waits for /readyz.
func startServer(bin, extra string) (*server, error) {
	dir, err := os.MkdirTemp("", "outprint-memory-")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nshutdown: {grace: 5s}\n%s", filepath.Join(dir, "data"), extra)
	cfgPath := filepath.Join(dir, "outprint.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTPRINT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	s := &server{cmd: cmd, dir: dir, done: make(chan struct{})}
	addr := make(chan string, 1)
	// The reader ends when the server closes its stderr (it exited).
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var v struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &v) == nil && v.Msg == "listening" {
				select {
				case addr <- v.Addr:
				default:
				}
			}
		}
		// The server ends on stop's SIGTERM: how it exited tells the
		// table nothing.
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.done:
		return nil, errors.New("serve exited before listening")
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, errors.New("serve did not listen within 60 s")
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close() // unread; only the status counts
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("serve not ready within 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits for the shutdown (killing the server after
// 20 s) and removes its folder.
func (s *server) stop() {
	// Signal and Kill fail only on a server that exited already (done
	// then fires); the folder is scratch in the temp dir.
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	_ = os.RemoveAll(s.dir)
}
