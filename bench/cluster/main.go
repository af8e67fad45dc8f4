// Command cluster measures outprint's roles on several processes (README,
// "Running on several machines") against the targets of issue 12 and
// prints one table, each row with its target and whether it is met:
//
//   - sync: a memo rendered through gateway → worker against the same
//     memo through `outprint serve`, median of -runs each, sent in turns
//     in the same run (target: cluster ≤ 1.15 × serve + 15 ms);
//   - accept: -jobs small jobs POSTed to a gateway on PostgreSQL + S3
//     (SeaweedFS; -store file puts the store in a shared folder instead) by -clients clients, no worker running, so they stay
//     queued: jobs/s and the p50/p99 answer time, and the gateway's peak
//     RSS with them queued (target < 300 MiB; the figure is for
//     10,000 jobs, the default);
//   - backlog: two workers started on that backlog; each worker process's
//     peak RSS over -sample while it works through it (target < 150 MiB;
//     its TeX processes are processes of their own and not counted);
//   - scale: -render memos as jobs through one worker pinned to CPU 0
//     (`taskset -c 0`, capacity 1) and then through two workers pinned to
//     CPU 0 and CPU 1, each on a fresh database: jobs/s from the first
//     POST to the last job done (target: two ≥ 1.8 × one).
//
// It starts everything itself: the binary (-bin, `make build`), a fresh
// PostgreSQL database per phase on -postgres (dropped at the end),
// SeaweedFS's weed (scripts/seaweedfs.sh builds it once), all on loopback
// with data folders in a temporary folder it removes. -quick runs small
// counts, to prove the bench works.
//
//	go run ./bench/cluster -bin bin/outprint
//	go run ./bench/cluster -bin bin/outprint -quick
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outprint/outprint/bench/internal/burst"
)

// memo is the synchronous and rendered document: one page with a title
// block, headings, a list and a table. %d makes each job's text its own.
const memo = `---
title: Office move %d
author: Facilities team
---

# Office move on 14 March

The whole team moves to the new building on **Friday 14 March**. Pack your
desk on Thursday afternoon; the movers start at 07:00 on Friday.

- Label every box with your name and new desk number.
- Take laptops home on Thursday evening.

| Floor | Teams | Meeting rooms |
|---|---|---|
| 2 | Sales, Support | Ada, Grace |
| 3 | Engineering | Linus, Ken |
`

// smallDoc is an accepted-only job's document.
const smallDoc = "# Receipt %d\n\nThank you for your order.\n"

const (
	secret    = "bench-cluster-secret-0123456789"
	accessKey = "outprint-bench"
	secretKey = "outprint-bench-secret-key-0123456789"
)

type options struct {
	bin, postgres, weed string
	store               string
	runs, jobs, clients int
	render              int
	sample, timeout     time.Duration
	quick               bool
	cpuZero, cpuOne     string
	workDir             string

	cleanupMu sync.Mutex
	cleanup   []func()

	// The figures the phases measured, for the table.
	serveMemoMS, gwMemoMS float64
	acceptRate            float64
	acceptP50, acceptP99  time.Duration
	gatewayRSS            int64
	workerRSS             []int64
	oneRate, twoRate      float64
	// oneShare, twoShare: the workers' part (with their TeX processes)
	// of all the CPU the machine spent while the jobs ran.
	oneShare, twoShare float64
	// oneBusy, twoBusy: how many of the machine's CPUs were busy, on
	// average, while the jobs ran.
	oneBusy, twoBusy float64
	failures         []string
}

func main() {
	o := &options{}
	flag.StringVar(&o.bin, "bin", "bin/outprint", "the outprint binary (make build)")
	flag.StringVar(&o.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"PostgreSQL server on loopback to create the bench's databases on")
	flag.StringVar(&o.weed, "weed", "", "SeaweedFS weed binary (default: $SEAWEEDFS_WEED, else scripts/seaweedfs.sh)")
	flag.StringVar(&o.store, "store", "s3", "s3 (SeaweedFS, started here) or file (a folder all the processes share, for a machine without weed)")
	flag.IntVar(&o.runs, "runs", 20, "synchronous memos through each path (median)")
	flag.IntVar(&o.jobs, "jobs", 10000, "jobs in the acceptance burst, left queued")
	flag.IntVar(&o.clients, "clients", 32, "concurrent HTTP clients of the acceptance burst")
	flag.IntVar(&o.render, "render", 80, "memos rendered as jobs by one and by two workers")
	flag.DurationVar(&o.sample, "sample", 10*time.Second, "how long the workers' RSS is sampled on the backlog")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound of each phase")
	flag.BoolVar(&o.quick, "quick", false, "small counts (-runs 3 -jobs 300 -render 6 -sample 3s), to prove the bench works")
	flag.StringVar(&o.cpuZero, "cpu0", "0", "CPU list of the first pinned worker (taskset -c)")
	flag.StringVar(&o.cpuOne, "cpu1", "1", "CPU list of the second pinned worker")
	flag.Parse()
	if o.quick {
		o.runs, o.jobs, o.render, o.sample = 3, 300, 6, 3*time.Second
	}
	if o.store != "s3" && o.store != "file" {
		fmt.Fprintln(os.Stderr, "cluster: -store is s3 or file")
		os.Exit(2)
	}
	if o.runs < 1 || o.jobs < 1 || o.render < 1 || o.clients < 1 {
		fmt.Fprintln(os.Stderr, "cluster: -runs, -jobs, -render and -clients must be at least 1")
		os.Exit(2)
	}
	if u, err := url.Parse(o.postgres); err != nil || !slices.Contains([]string{"127.0.0.1", "::1", "localhost"}, u.Hostname()) {
		fmt.Fprintln(os.Stderr, "cluster: -postgres must be a URL on loopback (the bench creates and drops databases there)")
		os.Exit(2)
	}
	code := run(o)
	os.Exit(code)
}

func run(o *options) int {
	defer o.close()
	dir, err := os.MkdirTemp("", "outprint-bench-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	o.workDir = dir
	o.atClose(func() { _ = os.RemoveAll(dir) })
	if _, err := os.Stat(o.bin); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v (run make build)\n", err)
		return 1
	}
	s3 := ""
	if o.store == "s3" {
		if s3, err = startWeed(o); err != nil {
			fmt.Fprintln(os.Stderr, "cluster: SeaweedFS:", err)
			return 1
		}
	}
	phases := []struct {
		name string
		f    func(*options, string) error
	}{
		{"sync memo: gateway → worker vs serve", syncPhase},
		{"acceptance and backlog", acceptPhase},
		{"two pinned workers vs one", scalePhase},
	}
	for _, p := range phases {
		fmt.Fprintf(os.Stderr, "cluster: %s…\n", p.name)
		if err := p.f(o, s3); err != nil {
			o.failures = append(o.failures, fmt.Sprintf("%s: %v", p.name, err))
			fmt.Fprintf(os.Stderr, "cluster: %s: %v\n", p.name, err)
		}
	}
	report(o)
	if len(o.failures) > 0 {
		return 1
	}
	return 0
}

func (o *options) atClose(f func()) {
	o.cleanupMu.Lock()
	defer o.cleanupMu.Unlock()
	o.cleanup = append(o.cleanup, f)
}

func (o *options) close() {
	for i := len(o.cleanup) - 1; i >= 0; i-- {
		o.cleanup[i]()
	}
}

// report prints the table: figure, target, met.
func report(o *options) {
	type row struct{ what, value, target, met string }
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	var rows []row
	if o.serveMemoMS > 0 && o.gwMemoMS > 0 {
		limit := o.serveMemoMS*1.15 + 15
		rows = append(rows,
			row{"sync memo via serve, median of " + strconv.Itoa(o.runs), fmt.Sprintf("%.0f ms", o.serveMemoMS), "", ""},
			row{"sync memo via gateway → worker", fmt.Sprintf("%.0f ms (%.2f×)", o.gwMemoMS, o.gwMemoMS/o.serveMemoMS),
				fmt.Sprintf("≤ %.0f ms (1.15× + 15 ms)", limit), yes(o.gwMemoMS <= limit)})
	}
	if o.acceptRate > 0 {
		rows = append(rows,
			row{fmt.Sprintf("acceptance, %d jobs, PostgreSQL + %s", o.jobs, o.store), fmt.Sprintf("%.0f jobs/s", o.acceptRate), "", ""},
			row{"POST /v1/jobs p50 / p99", fmt.Sprintf("%.1f / %.1f ms", ms(o.acceptP50), ms(o.acceptP99)), "", ""},
			row{fmt.Sprintf("gateway peak RSS, %d jobs queued", o.jobs), mib(o.gatewayRSS), "< 300 MiB", yes(o.gatewayRSS < 300<<20)})
	}
	for i, r := range o.workerRSS {
		rows = append(rows, row{fmt.Sprintf("worker %d peak RSS on the backlog", i+1), mib(r), "< 150 MiB", yes(r < 150<<20)})
	}
	if o.oneRate > 0 && o.twoRate > 0 {
		rows = append(rows,
			row{fmt.Sprintf("%d memo jobs, one worker on CPU %s", o.render, o.cpuZero), fmt.Sprintf("%.2f jobs/s", o.oneRate), "", ""},
			row{"  CPUs busy / the workers' share, one", fmt.Sprintf("%.2f / %.0f %%", o.oneBusy, 100*o.oneShare), "", ""},
			row{"  CPUs busy / the workers' share, two", fmt.Sprintf("%.2f / %.0f %%", o.twoBusy, 100*o.twoShare), "", ""},
			row{fmt.Sprintf("%d memo jobs, two workers on CPU %s and %s", o.render, o.cpuZero, o.cpuOne), fmt.Sprintf("%.2f jobs/s (%.2f×)", o.twoRate, o.twoRate/o.oneRate),
				"≥ 1.8× one", yes(o.twoRate >= 1.8*o.oneRate)})
	}
	fmt.Printf("%-48s %-22s %-26s %s\n", "measure", "value", "target", "met")
	for _, r := range rows {
		fmt.Printf("%-48s %-22s %-26s %s\n", r.what, r.value, r.target, r.met)
	}
	for _, f := range o.failures {
		fmt.Printf("FAILED: %s\n", f)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mib(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

// ---- processes ----

// proc is one outprint process.
type proc struct {
	role string
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// freePort returns a loopback port that was free a moment ago; with pair,
// the next port is free too (weed's gRPC ports are port+1).
func freePort(pair bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		if !pair {
			_ = l.Close()
			return p, nil
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		_ = l.Close()
		if err == nil {
			_ = l2.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port pair")
}

// start starts `outprint ROLE` (behind `taskset -c CPUS` when cpus is set)
// with env plus its own listen address and data folder, and waits until
// wait (a path) answers 200.
func start(o *options, role, cpus, wait string, env []string) (*proc, error) {
	port, err := freePort(false)
	if err != nil {
		return nil, err
	}
	listenVar := "OUTPRINT_LISTEN"
	if role == "worker" {
		listenVar = "OUTPRINT_WORKER_LISTEN"
	}
	data, err := os.MkdirTemp(o.workDir, role+"-")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(data + ".log")
	if err != nil {
		return nil, err
	}
	args := []string{role}
	name := o.bin
	if cpus != "" {
		name, args = "taskset", append([]string{"-c", cpus, o.bin}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(baseEnv(), append([]string{
		listenVar + "=127.0.0.1:" + strconv.Itoa(port), "OUTPRINT_DATA_DIR=" + data,
	}, env...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &proc{role: role, url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{}), log: log}
	go func() { // ends when the process does
		_ = cmd.Wait()
		close(p.done)
	}()
	o.atClose(p.stop)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if resp, err := http.Get(p.url + wait); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("outprint %s exited before it was ready (log %s): %s", role, log.Name(), tailFile(log.Name()))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("outprint %s not ready after 3 min (log %s)", role, log.Name())
		}
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 20 s. Idempotent.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.log.Close()
}

// kill ends the process at once (SIGKILL): the bench's jobs need no drain.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = p.log.Close()
}

// pid is the outprint process's id (taskset execs outprint in place).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// baseEnv is this process's environment for outprint's processes.
func baseEnv() []string { return os.Environ() }

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return string(b)
}

// status reads a figure (kB) of /proc/PID/status: VmRSS, VmHWM.
func status(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// startWeed starts a SeaweedFS S3 server (master, volume, filer and S3 in
// one `weed server`) and returns its S3 endpoint.
func startWeed(o *options) (string, error) {
	bin := o.weed
	if bin == "" {
		bin = os.Getenv("SEAWEEDFS_WEED")
	}
	if bin == "" {
		out, err := exec.Command("scripts/seaweedfs.sh").Output()
		if err != nil {
			return "", fmt.Errorf("scripts/seaweedfs.sh: %w", err)
		}
		bin = strings.TrimSpace(string(out))
	}
	dir := filepath.Join(o.workDir, "s3")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o750); err != nil {
		return "", err
	}
	conf := filepath.Join(dir, "s3.json")
	cfg := fmt.Sprintf(`{"identities":[{"name":"outprint","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`, accessKey, secretKey)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	var ports [4]int
	for i := range ports {
		p, err := freePort(true)
		if err != nil {
			return "", err
		}
		ports[i] = p
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+filepath.Join(dir, "data"),
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-master.port.grpc=%d", ports[0]+1),
		fmt.Sprintf("-volume.port=%d", ports[1]), fmt.Sprintf("-volume.port.grpc=%d", ports[1]+1),
		fmt.Sprintf("-filer.port=%d", ports[2]), fmt.Sprintf("-filer.port.grpc=%d", ports[2]+1),
		fmt.Sprintf("-s3.port=%d", ports[3]), fmt.Sprintf("-s3.port.grpc=%d", ports[3]+1),
		"-filer.localSocket="+filepath.Join(dir, "filer.sock"),
		"-filer", "-s3", "-s3.config="+conf,
		"-master.volumeSizeLimitMB=64", "-volume.max=50", "-master.telemetry=false")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	o.atClose(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = log.Close()
	})
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", ports[3])
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(endpoint + "/"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 500 {
				return endpoint, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("weed's S3 gateway at %s did not come up (log %s)", endpoint, log.Name())
		}
	}
}

// cluster makes a fresh database and S3 prefix (or store folder, with
// -store file), runs `outprint migrate`
// on them and returns the environment of the cluster's roles.
func cluster(o *options, s3 string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, o.postgres)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "outprint_bench_cluster_" + hex.EncodeToString(rnd[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	o.atClose(func() {
		c, err := pgx.Connect(context.Background(), o.postgres)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cluster: drop database %s: %v\n", name, err)
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: drop database %s: %v\n", name, err)
		}
	})
	u, _ := url.Parse(o.postgres)
	u.Path = "/" + name
	store := "file://" + filepath.Join(o.workDir, "store-"+name)
	if s3 != "" {
		store = "s3://outprint-bench/" + name + "?endpoint=" + url.QueryEscape(s3) + "&region=us-east-1"
	}
	env := []string{
		"OUTPRINT_DATABASE=" + u.String(), "OUTPRINT_STORE=" + store,
		"AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey,
		"OUTPRINT_CLUSTER_SECRET=" + secret,
	}
	cmd := exec.Command(o.bin, "migrate")
	cmd.Env = append(baseEnv(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("outprint migrate: %v\n%s", err, out)
	}
	return env, nil
}

// ---- phases ----

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Minute}

func renderMemo(base string, i int) (time.Duration, error) {
	body, _ := json.Marshal(map[string]string{"markdown": fmt.Sprintf(memo, i)})
	t0 := time.Now()
	resp, err := client.Post(base+"/v1/render", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(b, []byte("%PDF-")) {
		return 0, fmt.Errorf("POST %s/v1/render = %d %.200s", base, resp.StatusCode, b)
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// syncPhase: the same memo through `outprint serve` and through a gateway
// and one worker, in turns, after three warm-up renders each.
func syncPhase(o *options, s3 string) error {
	env, err := cluster(o, s3)
	if err != nil {
		return err
	}
	serve, err := start(o, "serve", "", "/readyz", nil)
	if err != nil {
		return err
	}
	defer serve.stop()
	w, err := start(o, "worker", "", "/readyz", append(env, "OUTPRINT_WORKER_CAPACITY=2"))
	if err != nil {
		return err
	}
	defer w.stop()
	g, err := start(o, "gateway", "", "/readyz", append(env, "OUTPRINT_GATEWAY_WORKERS="+w.url))
	if err != nil {
		return err
	}
	defer g.stop()
	var viaServe, viaGateway []time.Duration
	for i := range o.runs + 3 {
		a, err := renderMemo(serve.url, i)
		if err != nil {
			return err
		}
		b, err := renderMemo(g.url, i)
		if err != nil {
			return err
		}
		if i >= 3 {
			viaServe, viaGateway = append(viaServe, a), append(viaGateway, b)
		}
	}
	o.serveMemoMS, o.gwMemoMS = ms(median(viaServe)), ms(median(viaGateway))
	return nil
}

// acceptPhase: the acceptance burst into a gateway with no worker, its
// RSS with the jobs queued, then two workers' RSS on that backlog.
func acceptPhase(o *options, s3 string) error {
	env, err := cluster(o, s3)
	if err != nil {
		return err
	}
	// Workers are started later: the gateway listens, and accepts jobs,
	// before any worker is ready (its /readyz waits for one).
	placeholder, err := freePort(false)
	if err != nil {
		return err
	}
	g, err := start(o, "gateway", "", "/healthz", append(env,
		"OUTPRINT_GATEWAY_WORKERS=http://127.0.0.1:"+strconv.Itoa(placeholder), "OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT=100000",
		// The bench is one anonymous user with many clients.
		"OUTPRINT_ADMISSION_PER_USER="+strconv.Itoa(o.clients)))
	if err != nil {
		return err
	}
	defer g.stop()
	_, lat, took, err := burst.Post(context.Background(), client, g.url, o.jobs, o.clients, smallDoc)
	if err != nil {
		return err
	}
	o.acceptRate = float64(len(lat)) / took.Seconds()
	o.acceptP50, o.acceptP99 = pct(lat, 0.5), pct(lat, 0.99)
	// Status scrapes and a listing with every job queued, then the peak.
	for range 3 {
		if resp, err := client.Get(g.url + "/v1/jobs?limit=100"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		if resp, err := client.Get(g.url + "/metrics"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	o.gatewayRSS = status(g.pid(), "VmHWM")

	var workers []*proc
	for range 2 {
		w, err := start(o, "worker", "", "/readyz", append(env, "OUTPRINT_WORKER_CAPACITY=1"))
		if err != nil {
			return err
		}
		defer w.kill()
		workers = append(workers, w)
	}
	peaks := make([]int64, len(workers))
	for end := time.Now().Add(o.sample); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for i, w := range workers {
			peaks[i] = max(peaks[i], status(w.pid(), "VmRSS"))
		}
	}
	for i, w := range workers {
		peaks[i] = max(peaks[i], status(w.pid(), "VmHWM"))
	}
	o.workerRSS = peaks
	return nil
}

// scalePhase: o.render memo jobs through one worker pinned to one CPU,
// then through two pinned to one CPU each, each on a fresh database.
func scalePhase(o *options, s3 string) error {
	one, oneShare, oneBusy, err := throughput(o, s3, []string{o.cpuZero})
	if err != nil {
		return fmt.Errorf("one worker: %w", err)
	}
	two, twoShare, twoBusy, err := throughput(o, s3, []string{o.cpuZero, o.cpuOne})
	if err != nil {
		return fmt.Errorf("two workers: %w", err)
	}
	o.oneRate, o.twoRate = one, two
	o.oneShare, o.twoShare = oneShare, twoShare
	o.oneBusy, o.twoBusy = oneBusy, twoBusy
	return nil
}

// throughput starts a worker per CPU list (capacity 1 each) and a
// gateway, posts o.render memo jobs and returns jobs/s from the first POST
// to the moment every job has succeeded, the workers' share of the CPU
// the whole machine spent meanwhile (the rest is PostgreSQL, the store,
// the gateway and this bench, which share the same cores) and how many
// CPUs were busy on average.
func throughput(o *options, s3 string, cpus []string) (rate, share, cpusBusy float64, err error) {
	env, err := cluster(o, s3)
	if err != nil {
		return 0, 0, 0, err
	}
	var urls []string
	var workers []*proc
	for _, c := range cpus {
		w, err := start(o, "worker", c, "/readyz", append(env, "OUTPRINT_WORKER_CAPACITY=1"))
		if err != nil {
			return 0, 0, 0, err
		}
		defer w.kill()
		urls = append(urls, w.url)
		workers = append(workers, w)
	}
	g, err := start(o, "gateway", "", "/readyz", append(env, "OUTPRINT_GATEWAY_WORKERS="+strings.Join(urls, ","),
		"OUTPRINT_ADMISSION_PER_USER=8", "OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT=100000"))
	if err != nil {
		return 0, 0, 0, err
	}
	defer g.stop()
	// Warm up: a few jobs per worker first, so that the figure is the
	// steady state (warm TeX processes, River's fetchers running), not
	// the workers' start.
	warm, _, _, err := burst.Post(context.Background(), client, g.url, 2*len(cpus), 8, memo)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := waitJobs(g.url, warm, o.timeout); err != nil {
		return 0, 0, 0, err
	}
	t0, busy0, cpu0 := time.Now(), machineBusy(), workersCPU(workers)
	ids, _, _, err := burst.Post(context.Background(), client, g.url, o.render, 8, memo)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := waitJobs(g.url, ids, o.timeout); err != nil {
		return 0, 0, 0, err
	}
	elapsed := time.Since(t0).Seconds()
	rate = float64(len(ids)) / elapsed
	if busy := machineBusy() - busy0; busy > 0 {
		share = float64(workersCPU(workers)-cpu0) / float64(busy)
		cpusBusy = float64(busy) / clockTicks / elapsed
	}
	return rate, share, cpusBusy, nil
}

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// machineBusy is the CPU time, in clock ticks, all CPUs spent on anything
// but idling since boot (/proc/stat).
func machineBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy
}

// workersCPU is the CPU time, in clock ticks, of the worker processes and
// every process in their process trees (their TeX processes, zygotes and
// xdvipdfmx): each live process's own time plus its reaped children's.
func workersCPU(ws []*proc) int64 {
	var total int64
	for _, w := range ws {
		total += treeCPU(w.pid())
	}
	return total
}

func treeCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from field 3, state
	var t int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14–17)
		n, _ := strconv.ParseInt(f[i], 10, 64)
		t += n
	}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, k := range strings.Fields(string(kids)) {
		if c, err := strconv.Atoi(k); err == nil {
			t += treeCPU(c)
		}
	}
	return t
}

// waitJobs polls each job until all succeeded; a failed or cancelled job
// is an error.
func waitJobs(base string, ids []string, timeout time.Duration) error {
	pending := slices.Clone(ids)
	deadline := time.Now().Add(timeout)
	for len(pending) > 0 {
		// Jobs finish about in the order they were posted: ask about
		// them in order and stop at the first one not done, so that the
		// polling (a request and a query per job) does not take the CPU
		// the workers are measured on.
		var still []string
		for i, id := range pending {
			if len(still) > 0 {
				still = append(still, pending[i:]...)
				break
			}
			resp, err := client.Get(base + "/v1/jobs/" + id)
			if err != nil {
				return err
			}
			var v struct {
				State string
				Error json.RawMessage
			}
			err = json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&v)
			_ = resp.Body.Close()
			if err != nil {
				return fmt.Errorf("GET /v1/jobs/%s: %w", id, err)
			}
			switch v.State {
			case "succeeded":
			case "failed", "cancelled":
				return fmt.Errorf("job %s %s: %s", id, v.State, v.Error)
			default:
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs not done after %v", len(pending), len(ids), timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
