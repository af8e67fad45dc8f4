package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/httpapi"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
)

// service is one `serve` running in the test process on a loopback port.
type service struct {
	t    *testing.T
	url  string
	stop context.CancelFunc // what SIGTERM does: main cancels serve's ctx
	code chan int
	logs *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeConfig writes a YAML configuration and loads it as serve does.
func writeConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outprint.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return cfg
}

// startService runs serve on cfg until the test stops it.
func startService(t *testing.T, cfg *config.Config, wrap func(httpapi.Renderer) httpapi.Renderer) *service {
	t.Helper()
	testenv.Require(t, "xelatex", "pdfinfo")
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan net.Addr, 1)
	s := &service{t: t, stop: cancel, code: make(chan int, 1), logs: &lockedBuffer{}}
	log := slog.New(slog.NewJSONHandler(s.logs, nil))
	go func() { s.code <- serve(ctx, cfg, log, serveHooks{listening: listening, wrap: wrap}) }()
	select {
	case addr := <-listening:
		s.url = "http://" + addr.String()
	case code := <-s.code:
		t.Fatalf("serve exited with %d before listening:\n%s", code, s.logs.String())
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.code:
		case <-time.After(2 * time.Minute):
			t.Errorf("serve did not stop")
		}
	})
	return s
}

// waitReady polls /readyz until the startup probe has rendered.
func (s *service) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("/readyz never answered 200:\n%s", s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the value of a metric line of /metrics, -1 when absent.
func (s *service) metric(name string) float64 {
	s.t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		s.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func (s *service) waitMetric(name string, want float64) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for s.metric(name) != want {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s never reached %v", name, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (s *service) render(key, markdown string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		b, _ := json.Marshal(map[string]string{"markdown": markdown})
		req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/render", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		ch <- reply{status: resp.StatusCode, header: resp.Header, body: body, err: err}
	}()
	return ch
}

func (r reply) code(t *testing.T) string {
	t.Helper()
	var v struct {
		Errors []struct{ Code string } `json:"errors"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || len(v.Errors) == 0 {
		t.Fatalf("answer %d is not an error list: %s", r.status, r.body)
	}
	return v.Errors[0].Code
}

// gate holds renders before the render stage until opened.
type gate struct {
	next    httpapi.Renderer
	entered chan struct{}
	release chan struct{}
}

func (g *gate) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Render(ctx, pr, progress)
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (g *gate) wrap(next httpapi.Renderer) httpapi.Renderer { g.next = next; return g }

// texDescendants lists the TeX and converter processes below this test
// process, from /proc.
func texDescendants(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		testenv.Missing(t, "/proc is not readable: "+err.Error())
	}
	type proc struct {
		ppid int
		comm string
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		procs[pid] = proc{ppid: ppid, comm: s[open+1 : close]}
	}
	self := os.Getpid()
	var found []string
	for pid, p := range procs {
		for up, n := p.ppid, 0; up > 1 && n < 64; up, n = procs[up].ppid, n+1 {
			if up == self {
				switch p.comm {
				case "xelatex", "xetex", "xdvipdfmx", "rsvg-convert":
					found = append(found, fmt.Sprintf("%d %s", pid, p.comm))
				}
				break
			}
		}
	}
	return found
}

const serveKeys = `
auth:
  apiKeys:
    - {user: ann, tenant: acme, sha256: %s}
    - {user: bob, tenant: acme, sha256: %s}
`

// TestServeShutdown: on SIGTERM serve stops accepting, answers the queued
// request 503 shutting_down at once, lets the running render finish within
// the grace period, and exits 0 with no TeX process left.
func TestServeShutdown(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data") // missing: serve creates it
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nadmission: {slots: 1, queueDepth: 1}\nshutdown: {grace: 2m}\n", data)+
		fmt.Sprintf(serveKeys, config.KeyDigest("ann-key"), config.KeyDigest("bob-key")))
	g := newGate()
	s := startService(t, cfg, g.wrap)
	s.waitReady()

	running := s.render("ann-key", "# Running at shutdown\n\nIt finishes within the grace period.\n")
	<-g.entered
	queued := s.render("bob-key", "# Queued at shutdown\n\nIt is told to come back.\n")
	s.waitMetric("outprint_admission_queued", 1)

	s.stop()
	q := <-queued
	if q.err != nil || q.status != http.StatusServiceUnavailable {
		t.Fatalf("queued request = %d %v, want 503", q.status, q.err)
	}
	if c := q.code(t); c != httpapi.CodeShuttingDown {
		t.Errorf("queued request code = %q, want %q", c, httpapi.CodeShuttingDown)
	}
	if q.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	// The listener is closed: a new client cannot connect any more.
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "http://"), time.Second); err == nil {
		t.Errorf("serve still accepts connections after SIGTERM")
	}

	close(g.release)
	r := <-running
	if r.err != nil || r.status != http.StatusOK || !bytes.HasPrefix(r.body, []byte("%PDF-")) {
		t.Fatalf("running render = %d %v %.200s, want 200 PDF", r.status, r.err, r.body)
	}
	if code := <-s.code; code != exitOK {
		t.Errorf("serve exit code = %d, want 0", code)
	}
	s.code <- exitOK // for the cleanup
	if left := texDescendants(t); len(left) > 0 {
		t.Errorf("TeX processes left after serve returned: %v", left)
	}
	if entries, _ := os.ReadDir(filepath.Join(data, "tmp")); len(entries) > 0 {
		t.Errorf("scratch folders left in %s/tmp: %d", data, len(entries))
	}
	for _, want := range []string{`"msg":"shutting down"`, `"msg":"stopped"`} {
		if !strings.Contains(s.logs.String(), want) {
			t.Errorf("logs lack %s", want)
		}
	}
}

// TestServeGraceRunsOut: a render still running when the grace period
// ends is stopped (its TeX process group killed) and answered 503.
func TestServeGraceRunsOut(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nshutdown: {grace: 300ms}\n", data))
	g := newGate()
	s := startService(t, cfg, g.wrap)
	s.waitReady()

	// Hundreds of pages: TeX is still typesetting when the grace ends.
	var b strings.Builder
	b.WriteString("# Long\n\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "Paragraph %d of a long document, with enough words to fill a line of the page.\n\n", i)
	}
	running := s.render("", b.String())
	<-g.entered
	close(g.release)
	s.stop()
	r := <-running
	if r.err != nil || r.status != http.StatusServiceUnavailable {
		t.Fatalf("render cut off by shutdown = %d %v %.200s, want 503", r.status, r.err, r.body)
	}
	if c := r.code(t); c != httpapi.CodeShuttingDown {
		t.Errorf("code = %q, want %q", c, httpapi.CodeShuttingDown)
	}
	if code := <-s.code; code != exitOK {
		t.Errorf("serve exit code = %d, want 0", code)
	}
	s.code <- exitOK
	if left := texDescendants(t); len(left) > 0 {
		t.Errorf("TeX processes left after serve returned: %v", left)
	}
	if !strings.Contains(s.logs.String(), "grace period over") {
		t.Errorf("logs do not say the grace period ran out:\n%s", s.logs.String())
	}
}

// TestServeRenders: a served render end to end, with the startup probe,
// the data folder created, and metrics from the registry serve made.
func TestServeRenders(t *testing.T) {
	data := filepath.Join(t.TempDir(), "nested", "data")
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\n", data))
	s := startService(t, cfg, nil)
	s.waitReady()
	if fi, err := os.Stat(data); err != nil || !fi.IsDir() {
		t.Fatalf("data folder not created: %v", err)
	}
	r := <-s.render("", "# Served\n\nFrom the test.\n")
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("render = %d %v %s", r.status, r.err, r.body)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="Served.pdf"` {
		t.Errorf("Content-Disposition = %q", cd)
	}
	if v := s.metric(`outprint_render_duration_seconds_count{result="ok"}`); v != 1 {
		t.Errorf("render count metric = %v, want 1", v)
	}
	if v := s.metric("go_goroutines"); v <= 0 {
		t.Errorf("the Go collector is not registered (go_goroutines = %v)", v)
	}

	// A data folder that stops taking files makes the service unready.
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), httpapi.CodeNotReady) {
		t.Errorf("/readyz without a data folder = %d %s, want 503 not_ready", resp.StatusCode, body)
	}
	if !strings.Contains(s.logs.String(), "not writable") {
		t.Errorf("the logs do not say why the service is not ready")
	}
}

// TestServeConfigErrors: a wrong configuration stops serve at startup with
// exit code 2 and a message naming the setting.
func TestServeConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		file string
		want []string
	}{
		{"bad variable", map[string]string{"OUTPRINT_ADMISSION_SLOTS": "abc"}, "",
			[]string{"OUTPRINT_ADMISSION_SLOTS", `"abc"`}},
		{"anonymous on a public address", map[string]string{"OUTPRINT_LISTEN": "0.0.0.0:8080"}, "",
			[]string{"0.0.0.0:8080", "loopback", "OUTPRINT_LISTEN"}},
		{"unknown key", nil, "admission:\n  slot: 2\n", []string{"admission.slot", "slots"}},
		{"missing file", nil, "-", []string{"read configuration"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := []string{"serve"}
			switch tc.file {
			case "":
			case "-":
				args = append(args, "--config", filepath.Join(t.TempDir(), "missing.yaml"))
			default:
				path := filepath.Join(t.TempDir(), "outprint.yaml")
				os.WriteFile(path, []byte(tc.file), 0o600)
				args = append(args, "--config", path)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			if code != exitUsage {
				t.Fatalf("run(%v) = %d, want %d; stderr:\n%s", args, code, exitUsage, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// TestConfigCheck: `outprint config check` prints the effective values
// with their origins, or every error with exit code 2.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("admission:\n  slots: 3\n"), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("admission:\n  slots: -1\n  queueDepth: many\n"), 0o600)

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", good}, &stdout, &stderr); code != exitOK {
		t.Fatalf("config check good = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"slots: 3 # from " + good + ":2", "queueDepth: 4", "listen: 127.0.0.1:8080"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, stdout.String())
		}
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"config", "check", bad}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("config check bad = %d, want 2", code)
	}
	for _, want := range []string{"admission.slots", "admission.queueDepth"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("config check errors lack %q:\n%s", want, stderr.String())
		}
	}

	t.Setenv("OUTPRINT_CONFIG", good)
	t.Setenv("OUTPRINT_ADMISSION_PER_USER", "2")
	stdout.Reset()
	if code := run(context.Background(), []string{"config", "check"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("config check with OUTPRINT_CONFIG = %d", code)
	}
	for _, want := range []string{"slots: 3", "perUser: 2 # from OUTPRINT_ADMISSION_PER_USER"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, stdout.String())
		}
	}
}
