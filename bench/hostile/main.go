// Command hostile replays the findings of issues 10, 24 and 29 against `outprint serve`
// on loopback, started here with OUTPRINT_TIMEOUT=20s, and prints per
// finding the answers, how long the server stayed busy with it (a slot
// held or its own CPU spent), the server's CPU seconds and peak RSS, and
// /healthz latency throughout. The targets of the issue: nothing busy past
// ~21 s, the server's RSS under 600 MiB, /healthz under 50 ms.
//
//	go run ./bench/hostile -bin bin/outprint
//
// It only talks to the server it started (127.0.0.1) and is bounded: each
// finding waits at most -finding-bound for the server to be idle again,
// and the whole run stops after -bound.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type options struct {
	bin          string
	bound        time.Duration
	findingBound time.Duration
	only         string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/outprint", "the outprint binary")
	flag.DurationVar(&o.bound, "bound", 30*time.Minute, "bound of the whole run")
	flag.DurationVar(&o.findingBound, "finding-bound", 90*time.Second, "longest wait for the server to be idle after one finding")
	flag.StringVar(&o.only, "only", "", "run only the findings whose name contains this")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

// finding is one attack of issue 10: fire sends its requests and returns
// a short description of the answers.
type finding struct {
	name string
	fire func(ctx context.Context, s *server) string
	// bound, when set, replaces -finding-bound (a finding that builds a
	// large backlog first).
	bound time.Duration
}

// row is one line of the table.
type row struct {
	name, answers   string
	answered, busy  time.Duration
	cpu             float64 // server CPU seconds
	peakRSS         int64   // bytes, during the finding
	healthP99, hMax time.Duration
	notIdle         bool
	slot            time.Duration // longest Render stage (slot held) the server logged
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.bound)
	defer cancel()
	s, err := startServer(o.bin)
	if err != nil {
		return err
	}
	defer s.stop()
	if err := waitReady(ctx, s.url); err != nil {
		return err
	}
	mon := startMonitor(ctx, s)
	defer mon.stop()

	var rows []row
	for _, f := range findings() {
		if o.only != "" && !strings.Contains(f.name, o.only) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		mon.reset()
		logOff := s.logSize()
		cpu0 := s.cpu()
		start := time.Now()
		bound := o.findingBound
		if f.bound > 0 {
			bound = f.bound
		}
		fctx, fcancel := context.WithTimeout(ctx, bound)
		answers := f.fire(fctx, s)
		answered := time.Since(start)
		idleAt, ok := s.waitIdle(fctx, mon)
		fcancel()
		peak, p99, hmax := mon.snapshot()
		rows = append(rows, row{
			name: f.name, answers: answers, answered: answered, busy: idleAt.Sub(start),
			cpu: s.cpu() - cpu0, peakRSS: peak, healthP99: p99, hMax: hmax, notIdle: !ok,
			slot: s.longestRender(logOff),
		})
		fmt.Fprintf(os.Stderr, "hostile: %-34s %s\n", f.name, answers)
	}
	peak, p99, hmax := mon.total()
	printTable(rows, peak, p99, hmax, s.tmpBytes())
	return nil
}

func printTable(rows []row, peak int64, p99, hmax time.Duration, tmp int64) {
	fmt.Printf("\n%-34s %-40s %9s %9s %9s %8s %9s %10s\n", "finding (issue)", "answers", "answered", "busy", "slot max", "CPU s", "peak RSS", "healthz99")
	worstBusy, worstSlot := time.Duration(0), time.Duration(0)
	for _, r := range rows {
		busy := fmt.Sprintf("%.1fs", r.busy.Seconds())
		if r.notIdle {
			busy = ">" + busy
		}
		worstBusy, worstSlot = max(worstBusy, r.busy), max(worstSlot, r.slot)
		fmt.Printf("%-34s %-40s %8.1fs %9s %8.1fs %8.1f %6d MiB %8.1fms\n", r.name, trim(r.answers, 40), r.answered.Seconds(), busy,
			r.slot.Seconds(), r.cpu, r.peakRSS>>20, float64(r.healthP99.Microseconds())/1000)
	}
	fmt.Printf("\nwhole run: server peak RSS %d MiB (target < 600), /healthz p99 %.1f ms, max %.1f ms (target < 50),\n",
		peak>>20, float64(p99.Microseconds())/1000, float64(hmax.Microseconds())/1000)
	fmt.Printf("longest slot held by one render %.1f s (target ~21 s with OUTPRINT_TIMEOUT=20s), longest busy %.1f s, dataDir/tmp now %d MiB\n",
		worstSlot.Seconds(), worstBusy.Seconds(), tmp>>20)
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// ---------------------------------------------------------------- findings

func findings() []finding {
	doc := func(name, md string) finding {
		return finding{name: name, fire: func(ctx context.Context, s *server) string {
			return s.postJSON(ctx, s.key(name), md).String()
		}}
	}
	fs := []finding{
		doc("1 :::info x8000 (64 KB)", strings.Repeat(":::info\n", 8000)),
		doc("1 +++ a x16000", strings.Repeat("+++ a\n", 16000)),
		doc("2a distinct code languages 114 KB", codeLanguages(114<<10)),
		{name: "2b progressive JPEG 1500 scans", fire: progressiveJPEGFinding},
		doc("2c 16000 headings", strings.Repeat("# a\n\n", 16000)),
		doc("3 [a]( x1 MiB", strings.Repeat("[a](", (1<<20)/4-16)),
		doc("3 > x128 KB", strings.Repeat(">", 128<<10)),
		doc("3 ![a]( x1 MiB", strings.Repeat("![a](", (1<<20)/5-16)),
		{name: "3 [a]( x1 MiB, 4 users at once", fire: func(ctx context.Context, s *server) string {
			return s.parallel(ctx, 4, func(i int) answer {
				return s.postJSON(ctx, s.key(fmt.Sprintf("par-%d", i)), strings.Repeat("[a](", (1<<20)/4-16))
			})
		}},
		{name: "4 slowloris, 20 without a key", fire: slowloris},
		{name: "5 8 x 55 MiB multipart, one user", fire: bigUploads},
		{name: "5 jobs: 6 x 45 MiB of images", fire: jobsStorage},
		{name: "6 formats: 12 script sets", fire: formats},
		doc("8 500 KB first heading", "# "+strings.Repeat("Long title ", 500_000/11)+"\n\ntext\n"),
		doc("8 1. :::info (notice in a list)", "1. :::info\n   note\n   :::\n"),
		doc("8 $\\q$ x1 MiB", strings.Repeat("$\\q$ ", (1<<20)/5-16)),
		doc("9 *a_ x50k", strings.Repeat("*a_ ", 50_000)),
		doc("9 30k one-row tables", strings.Repeat("| a |\n|---|\n\n", 30_000)),
		doc("9 [a x1 KB line", strings.Repeat("[a", 512)+"\n"),
		doc("9 3000 headings", threeThousandHeadings()),
		doc("9 ## A then > ## B", "## A\n\n> ## B\n"),
		doc("9 emphasis nested x1000", strings.Repeat("*", 1000)+"a"+strings.Repeat("*", 1000)+"\n"),
		// Issue 29: link destinations in angle brackets, cmark's "unclosed
		// links A" (24 KB took a minute of CPU before), and the forms
		// found with it.
		doc("29 [a](<b x4000 (24 KB)", strings.Repeat("[a](<b", 4000)),
		doc("29 [a](<b x100k (600 KB)", strings.Repeat("[a](<b", 100_000)),
		doc("29 [a](<b> x4000", strings.Repeat("[a](<b>", 4000)),
		doc("29 [ (]( x100k (500 KB)", strings.Repeat("[ (](", 100_000)),
		doc("29 ``\\ x100k (300 KB)", strings.Repeat("``\\", 100_000)),
	}
	return append(fs, issue24Findings()...)
}

func codeLanguages(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "```lang%d\nx = %d\n```\n\n", i, i)
	}
	return b.String()
}

func threeThousandHeadings() string {
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "## Heading %d\n\n", i)
	}
	b.WriteString(strings.Repeat("##\n\n", 40))
	return b.String()
}

// progressiveJPEGFinding uploads a 16-megapixel grey JPEG with 1,500
// refinement scans (jpegtran writes the first three, the last is repeated).
func progressiveJPEGFinding(ctx context.Context, s *server) string {
	data, err := manyScans(4000, 1500)
	if err != nil {
		return "setup: " + err.Error()
	}
	md := "# Photo\n\n![p](p.jpg)\n"
	return s.postMultipart(ctx, s.key("jpeg"), "/v1/render", md, map[string][]byte{"p.jpg": data}).String() +
		fmt.Sprintf(" (%d KB)", len(data)>>10)
}

func manyScans(side, extra int) ([]byte, error) {
	dir, err := os.MkdirTemp("", "outprint-hostile-jpeg-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	m := image.NewGray(image.Rect(0, 0, side, side))
	for i := range m.Pix {
		m.Pix[i] = 128
	}
	var base bytes.Buffer
	if err := jpeg.Encode(&base, m, &jpeg.Options{Quality: 90}); err != nil {
		return nil, err
	}
	in, script, out := filepath.Join(dir, "b.jpg"), filepath.Join(dir, "s.txt"), filepath.Join(dir, "p.jpg")
	if err := os.WriteFile(in, base.Bytes(), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(script, []byte("0: 0 0 0 0;\n0: 1 63 0 1;\n0: 1 63 1 0;\n"), 0o600); err != nil {
		return nil, err
	}
	if b, err := exec.Command("jpegtran", "-scans", script, "-outfile", out, in).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("jpegtran: %v %s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	last, end := bytes.LastIndex(data, []byte{0xFF, 0xDA}), bytes.LastIndex(data, []byte{0xFF, 0xD9})
	var b bytes.Buffer
	b.Write(data[:end])
	for range extra {
		b.Write(data[last:end])
	}
	b.Write(data[end:])
	return b.Bytes(), nil
}

// slowloris opens 20 connections without a key that announce 200,000
// bytes and trickle them, and counts how many are still open after 5 s.
func slowloris(ctx context.Context, s *server) string {
	const n = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	open, answered := 0, map[int]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				return
			}
			defer func() { _ = conn.Close() }()
			// A connection the server closed is what is counted below, so
			// failed writes are expected.
			_, _ = fmt.Fprintf(conn, "POST /v1/render HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{")
			stop := time.Now().Add(5 * time.Second)
			br := bufio.NewReader(conn)
			closed := false
			for time.Now().Before(stop) && !closed {
				_, _ = conn.Write([]byte(" "))
				_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				for {
					line, err := br.ReadString('\n')
					if strings.HasPrefix(line, "HTTP/1.1 ") {
						code, _ := strconv.Atoi(strings.Fields(line)[1])
						mu.Lock()
						answered[code]++
						mu.Unlock()
					}
					if err != nil {
						if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
							closed = true
						}
						break
					}
				}
			}
			if !closed {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("%s; %d of %d open after 5 s", codes(answered), open, n)
}

// bigUploads sends 8 multipart bodies of 55 MiB at once as one user.
func bigUploads(ctx context.Context, s *server) string {
	// One body, sent eight times: the client's own memory must not be
	// what slows the /healthz probes down.
	ctype, body := multipartBody("# Big\n\n![a](a.png)\n", map[string][]byte{"a.png": make([]byte, 55<<20)})
	return s.parallel(ctx, 8, func(int) answer {
		return s.post(ctx, s.key("uploader"), "/v1/render", ctype, body)
	})
}

// jobsStorage submits six jobs of five 9 MiB images each as one user; the
// server runs with jobs.maxStoredBytesPerTenant 200 MiB.
func jobsStorage(ctx context.Context, s *server) string {
	var md strings.Builder
	md.WriteString("# Photos\n\n")
	imgs := map[string][]byte{}
	for i := range 5 {
		name := fmt.Sprintf("img/%d.png", i)
		imgs[name] = noisePNG(1500, uint64(i))
		fmt.Fprintf(&md, "![p](%s)\n\n", name)
	}
	got := map[int]int{}
	for range 6 {
		a := s.postMultipart(ctx, s.key("jobs"), "/v1/jobs", md.String(), imgs)
		got[a.status]++
	}
	return codes(got)
}

func noisePNG(side int, seed uint64) []byte {
	m := image.NewNRGBA(image.Rect(0, 0, side, side))
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range m.Pix {
		m.Pix[i] = byte(r.UintN(256))
	}
	var b bytes.Buffer
	// A valid image into a bytes.Buffer: cannot fail.
	_ = (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, m)
	return b.Bytes()
}

// formats renders twelve tiny documents in different scripts and reports
// how much dataDir/tmp grew.
func formats(ctx context.Context, s *server) string {
	before := s.tmpBytes()
	texts := []string{"Latin", "Ελληνικά", "Русский", "العربية", "עברית", "हिन्दी", "ภาษาไทย", "中文", "日本語", "한국어",
		"Ελληνικά Русский", "العربية हिन्दी 中文"}
	got := map[int]int{}
	for i, t := range texts {
		paper := "a4"
		if i%2 == 1 {
			paper = "letter"
		}
		body, _ := json.Marshal(map[string]any{"markdown": "# " + t + "\n\n" + t + "\n", "metadata": map[string]any{"paper": paper}})
		a := s.post(ctx, s.key("formats"), "/v1/render", "application/json", body)
		got[a.status]++
	}
	return fmt.Sprintf("%s; tmp %+d MiB", codes(got), (s.tmpBytes()-before)>>20)
}

func codes(m map[int]int) string {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var parts []string
	for _, k := range ks {
		if k == 0 {
			parts = append(parts, fmt.Sprintf("%d×none", m[k]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d×%d", m[k], k))
	}
	return strings.Join(parts, " ")
}

// ---------------------------------------------------------------- server

type server struct {
	cmd  *exec.Cmd
	dir  string
	url  string
	addr string
	done chan error
	keys map[string]string // user → key
	mu   sync.Mutex
}

var users = []string{"1 :::info x8000 (64 KB)", "jpeg", "uploader", "jobs", "formats", "par-0", "par-1", "par-2", "par-3",
	"forms-uploader", "value-keys", "previewer", "bystander", "owner", "colleague", "abandoner", "form-jobs"}

// key returns the API key of user name (one per finding, so that findings
// do not count against each other).
func (s *server) key(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.keys[name]; ok {
		return k
	}
	return s.keys["default"]
}

func startServer(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "outprint-hostile-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, done: make(chan error, 1), keys: map[string]string{}}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "listen: 127.0.0.1:0\ndataDir: %s\n", filepath.Join(dir, "data"))
	cfg.WriteString("jobs: {maxStoredBytesPerTenant: 200MiB}\nshutdown: {grace: 5s}\n")
	// Finding 24.5's receivers are on loopback, under two host names.
	fmt.Fprintf(&cfg, "webhooks: {allowHosts: [%s, %s], publicUrl: 'http://127.0.0.1'}\n", deadHookHost, healthyHookHost)
	cfg.WriteString("auth:\n  apiKeys:\n")
	names := append([]string{"default"}, users...)
	names = append(names, quietHookUser)
	for i := range noisyHookUsers {
		names = append(names, noisyHookUser(i))
	}
	for _, f := range findings() {
		names = append(names, f.name)
	}
	for i, n := range names {
		if _, dup := s.keys[n]; dup {
			continue
		}
		k := fmt.Sprintf("hostile-key-%d", i)
		s.keys[n] = k
		sum := sha256.Sum256([]byte(k))
		tenant := "hostile"
		switch {
		case n == quietHookUser:
			tenant = "hooks-quiet" // another tenant, whose delivery must not wait
		case strings.HasPrefix(n, "hooks-noisy-"):
			tenant = "hooks-noisy"
		}
		switch n {
		case "bystander":
			tenant = "bystander" // another tenant, whose work must not slow down
		case "previewer", "owner", "colleague", "form-jobs":
			// Issue 24's jobs, apart from the tenant whose stored bytes
			// issue 10's "5 jobs" finding fills to its quota.
			tenant = "hostile-24"
		}
		fmt.Fprintf(&cfg, "    - {user: u%d, tenant: %s, sha256: %s, webhookSecrets: [%s]}\n", i, tenant, hex.EncodeToString(sum[:]), hookSecret)
	}
	cfgPath := filepath.Join(dir, "outprint.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTPRINT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "OUTPRINT_TIMEOUT=20s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.cmd = cmd
	addr := make(chan string, 1)
	logf, _ := os.Create(filepath.Join(dir, "serve.log"))
	go func() { // ends when the server closes stderr
		// Lines can be huge (a log line holds a whole error list): only
		// the first lines are parsed, the rest is copied as is, so the
		// server never blocks on a full pipe.
		br := bufio.NewReaderSize(stderr, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			// The log is a bench aid: losing it must not stop the pipe
			// being drained.
			_, _ = logf.Write(line)
			var v struct{ Msg, Addr string }
			if json.Unmarshal(line, &v) == nil && v.Msg == "listening" {
				addr <- v.Addr
				break
			}
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(logf, br)
		_ = logf.Close()
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.addr, s.url = a, "http://"+a
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("server exited: %v (log %s)", err, filepath.Join(dir, "serve.log"))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("server did not listen")
	}
}

func (s *server) stop() {
	// The process may have exited already; s.done says when it has.
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		err = <-s.done
	}
	// The exit status after SIGTERM or a kill tells the bench nothing.
	_ = err
	_ = os.RemoveAll(s.dir)
}

func waitReady(ctx context.Context, base string) error {
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("server not ready")
}

// cpu is the server process's own CPU seconds (user + system), without
// its TeX children.
func (s *server) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func (s *server) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

func (s *server) logPath() string { return filepath.Join(s.dir, "serve.log") }

func (s *server) logSize() int64 {
	fi, err := os.Stat(s.logPath())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// longestRender is the longest Render stage (the time a slot was held) of
// the synchronous renders and jobs the server logged after offset.
func (s *server) longestRender(offset int64) time.Duration {
	f, err := os.Open(s.logPath())
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }() // read only
	// From the start the log holds other runs' lines: no answer beats a
	// wrong one.
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var longest time.Duration
	for {
		line, err := br.ReadBytes('\n')
		if len(line) < 64<<10 && bytes.Contains(line, []byte(`"render_ms"`)) {
			var v struct {
				RenderMS int64 `json:"render_ms"`
			}
			if json.Unmarshal(line, &v) == nil {
				longest = max(longest, time.Duration(v.RenderMS)*time.Millisecond)
			}
		}
		if err != nil {
			return longest
		}
	}
}

func (s *server) tmpBytes() int64 {
	var n int64
	// Unreadable entries are skipped, and the walk itself never fails.
	_ = filepath.Walk(filepath.Join(s.dir, "data", "tmp"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// waitIdle waits until no render runs or waits (/readyz) and the server's
// own CPU stayed below 10 % for half a second; it returns when that began.
func (s *server) waitIdle(ctx context.Context, mon *monitor) (time.Time, bool) {
	for ctx.Err() == nil {
		t0, c0 := time.Now(), s.cpu()
		time.Sleep(500 * time.Millisecond)
		rate := (s.cpu() - c0) / time.Since(t0).Seconds()
		if rate < 0.1 && s.admissionIdle() {
			return t0, true
		}
	}
	return time.Now(), false
}

func (s *server) admissionIdle() bool {
	resp, err := http.Get(s.url + "/readyz")
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		Admission struct{ Running, Queued int }
	}
	// Undecoded reads as idle; the CPU test next to it still holds.
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v.Admission.Running == 0 && v.Admission.Queued == 0
}

// answer is the status of one request and its first error code.
type answer struct {
	status int
	code   string
	err    error
}

func (a answer) String() string {
	if a.err != nil {
		return "error: " + a.err.Error()
	}
	if a.code != "" {
		return fmt.Sprintf("%d %s", a.status, a.code)
	}
	return strconv.Itoa(a.status)
}

func (s *server) post(ctx context.Context, key, path, ctype string, body []byte) answer {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	a := answer{status: resp.StatusCode}
	var v struct{ Errors []struct{ Code string } }
	if json.Unmarshal(b, &v) == nil && len(v.Errors) > 0 {
		a.code = v.Errors[0].Code
	}
	return a
}

func (s *server) postJSON(ctx context.Context, key, md string) answer {
	body, _ := json.Marshal(map[string]string{"markdown": md})
	return s.post(ctx, key, "/v1/render", "application/json", body)
}

func (s *server) postMultipart(ctx context.Context, key, path, md string, assets map[string][]byte) answer {
	ctype, body := multipartBody(md, assets)
	return s.post(ctx, key, path, ctype, body)
}

func multipartBody(md string, assets map[string][]byte) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	part := func(name, file string, data []byte) {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, name, file))
		w, _ := mw.CreatePart(h)
		_, _ = w.Write(data) // into b, a bytes.Buffer: cannot fail
	}
	part("document", "doc.md", []byte(md))
	for name, data := range assets {
		part("asset", name, data)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// parallel runs n requests at once and sums up their answers.
func (s *server) parallel(ctx context.Context, n int, f func(i int) answer) string {
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := f(i)
			mu.Lock()
			got[a.String()]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	var parts []string
	for k, v := range got {
		parts = append(parts, fmt.Sprintf("%d×%s", v, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// ---------------------------------------------------------------- monitor

// monitor probes /healthz every 50 ms and samples the server's RSS every
// 100 ms, per finding and for the whole run.
type monitor struct {
	mu                sync.Mutex
	peak, allPeak     int64
	health, allHealth []time.Duration
	cancel            context.CancelFunc
	wg                sync.WaitGroup
}

func startMonitor(ctx context.Context, s *server) *monitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &monitor{cancel: cancel}
	m.wg.Add(2)
	go func() { // ends with ctx
		defer m.wg.Done()
		client := &http.Client{Timeout: 5 * time.Second}
		for ctx.Err() == nil {
			t := time.Now()
			resp, err := client.Get(s.url + "/healthz")
			d := time.Since(t)
			if err == nil {
				_ = resp.Body.Close()
			} else {
				d = 5 * time.Second
			}
			m.mu.Lock()
			m.health = append(m.health, d)
			m.allHealth = append(m.allHealth, d)
			m.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	go func() { // ends with ctx
		defer m.wg.Done()
		for ctx.Err() == nil {
			r := s.rss()
			m.mu.Lock()
			m.peak, m.allPeak = max(m.peak, r), max(m.allPeak, r)
			m.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return m
}

func (m *monitor) stop() { m.cancel(); m.wg.Wait() }

func (m *monitor) reset() {
	m.mu.Lock()
	m.peak, m.health = 0, nil
	m.mu.Unlock()
}

func p99(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)], s[len(s)-1]
}

func (m *monitor) snapshot() (int64, time.Duration, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, mx := p99(m.health)
	return m.peak, p, mx
}

func (m *monitor) total() (int64, time.Duration, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, mx := p99(m.allHealth)
	return m.allPeak, p, mx
}
