package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/worker"
)

// instance is one process's Main running in the test process on a
// loopback port.
type instance struct {
	t    *testing.T
	url  string
	stop context.CancelFunc // what SIGTERM does: the command cancels Run's ctx
	code chan int
	logs *testenv.Buffer
	m    *Main
}

// officeOff is the configuration line that turns Office conversion off
// (office.enabled), for the tests about something else: each LibreOffice
// process costs about 10 CPU-seconds to start, and serve is not ready
// before them. TestServeRenders and TestServeShutdown run the default.
const officeOff = "office: {enabled: false}\n"

// writeConfig writes a YAML configuration and loads it as serve does.
func writeConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	return testenv.LoadConfig(t, yaml)
}

// startService runs a serve process (New, Run, Close) on cfg until the
// test stops it; its code is what the command would exit with.
func startService(t *testing.T, cfg *config.Config, wrap func(worker.Renderer) worker.Renderer) *instance {
	t.Helper()
	testenv.Require(t, "xelatex", "pdfinfo")
	ctx, cancel := context.WithCancel(context.Background())
	s := &instance{t: t, stop: cancel, code: make(chan int, 1), logs: &testenv.Buffer{}}
	m, err := New(ctx, cfg, Options{Logger: slogJSON(s.logs), WrapRenderer: wrap, Formats: testFormats(t)})
	if err != nil {
		cancel()
		t.Fatalf("New = %v\n%s", err, s.logs.String())
	}
	s.url = "http://" + m.Addr().String()
	s.m = m
	go func() { // ends when the test cancels ctx and the shutdown is done
		code := exitOK
		if err := m.Run(ctx); err != nil {
			_, _ = s.logs.Write([]byte("Run: " + err.Error() + "\n")) // in memory
			code = exitInternal
		}
		if err := m.Close(); err != nil {
			_, _ = s.logs.Write([]byte("Close: " + err.Error() + "\n"))
			code = exitInternal
		}
		s.code <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.code:
		case <-time.After(2 * time.Minute):
			t.Errorf("the service did not stop")
		}
	})
	return s
}

// What the command makes of Run and Close: exitOK when both returned nil.
const (
	exitOK       = 0
	exitInternal = 3
)

// waitReady polls /readyz until the startup probe has rendered.
func (s *instance) waitReady() {
	s.t.Helper()
	testenv.Eventually(s.t, "/readyz to answer 200", func() bool {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close() // only the status matters
		return resp.StatusCode == http.StatusOK
	})
}

// metric returns the value of a metric line of /metrics, -1 when absent.
func (s *instance) metric(name string) float64 {
	s.t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		s.t.Fatalf("GET /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
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

func (s *instance) waitMetric(name string, want float64) {
	s.t.Helper()
	testenv.Eventually(s.t, fmt.Sprintf("%s to reach %v", name, want), func() bool { return s.metric(name) == want })
}

type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (s *instance) render(key, markdown string) <-chan reply {
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
		defer func() { _ = resp.Body.Close() }()
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
	next    worker.Renderer
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

func (g *gate) wrap(next worker.Renderer) worker.Renderer { g.next = next; return g }

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
	if c := q.code(t); c != httperr.CodeShuttingDown {
		t.Errorf("queued request code = %q, want %q", c, httperr.CodeShuttingDown)
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
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nshutdown: {grace: 300ms}\n%s", data, officeOff))
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
	if c := r.code(t); c != httperr.CodeShuttingDown {
		t.Errorf("code = %q, want %q", c, httperr.CodeShuttingDown)
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
	_ = resp.Body.Close() // read to the end already
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), httperr.CodeNotReady) {
		t.Errorf("/readyz without a data folder = %d %s, want 503 not_ready", resp.StatusCode, body)
	}
	if !strings.Contains(s.logs.String(), "not writable") {
		t.Errorf("the logs do not say why the service is not ready")
	}
}

// testDatabase returns the URL of a fresh, empty database of kind, dropped
// when the test ends.
func testDatabase(t *testing.T, kind, dataDir string) string {
	t.Helper()
	if kind == "sqlite" {
		return "sqlite://" + filepath.Join(dataDir, "outprint.db")
	}
	return testenv.PostgresDatabase(t, "outprint_cmd")
}

// jobReply is a job as the API shows it.
type jobReply struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func (s *instance) submit(markdown string) jobReply {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"markdown": markdown})
	resp, err := http.Post(s.url+"/v1/jobs", "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatalf("POST /v1/jobs: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	var j jobReply
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &j) != nil || j.ID == "" {
		s.t.Fatalf("POST /v1/jobs = %d %s, want 202 with a job", resp.StatusCode, body)
	}
	return j
}

func (s *instance) job(id string) jobReply {
	s.t.Helper()
	resp, err := http.Get(s.url + "/v1/jobs/" + id)
	if err != nil {
		s.t.Fatalf("GET job: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var j jobReply
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET job = %d, %v", resp.StatusCode, err)
	}
	return j
}

// waitJob polls until the job ended; the bound only stops a broken test.
func (s *instance) waitJob(id string) jobReply {
	s.t.Helper()
	var j jobReply
	testenv.Eventually(s.t, "job "+id+" to end", func() bool {
		j = s.job(id)
		return j.State == jobs.StateSucceeded || j.State == jobs.StateFailed || j.State == jobs.StateCancelled
	})
	return j
}

// exited waits for serve's exit code and puts it back for the cleanup.
func (s *instance) exited() int {
	s.t.Helper()
	select {
	case code := <-s.code:
		s.code <- code
		return code
	case <-time.After(2 * time.Minute):
		s.t.Fatalf("serve did not exit:\n%s", s.logs.String())
	}
	return -1
}

// storedJob reads a job from the database directly, as the next process
// would find it.
func storedJob(t *testing.T, dbURL, dataDir, id string) jobs.Job {
	t.Helper()
	return storedTenantJob(t, dbURL, dataDir, id, "local")
}

// storedTenantJob is storedJob for a job of tenant.
func storedTenantJob(t *testing.T, dbURL, dataDir, id, tenant string) jobs.Job {
	t.Helper()
	ctx := context.Background()
	db, err := jobs.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	st, err := store.NewFS(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := jobs.New(db, st, nil, jobs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := svc.Get(ctx, tenant, id)
	if err != nil {
		t.Fatalf("stored job %s: %v", id, err)
	}
	return j
}

// TestServeJobs runs jobs through `serve` on both databases: PostgreSQL
// must be migrated first, SQLite migrates itself; a job renders and shows
// in /metrics; on SIGTERM a running job finishes within the grace, and one
// that cannot is given back to the queue and finished by the next process.
func TestServeJobs(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			dbURL := testDatabase(t, kind, data)
			conf := func(grace string) string {
				return fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\ndatabase: %s\nshutdown: {grace: %s}\npool: {min: 0}\n%s", data, dbURL, grace, officeOff)
			}
			if kind == "postgres" {
				cfg := writeConfig(t, conf("2m"))
				m, err := New(context.Background(), cfg, Options{Logger: slogJSON(io.Discard)})
				if err == nil {
					_ = m.Close() // New should have failed; the check below says so
				}
				var se *SettingError
				if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "outprint migrate") {
					t.Fatalf("New on an unmigrated PostgreSQL = %v, want an internal error telling to run outprint migrate", err)
				}
				if _, err := Migrate(context.Background(), cfg); err != nil {
					t.Fatalf("Migrate = %v", err)
				}
			}

			// Finish within the grace: the render held at SIGTERM completes
			// once let go, and serve exits after it.
			g := newGate()
			s := startService(t, writeConfig(t, conf("2m")), g.wrap)
			s.waitReady()
			j := s.submit("# Finishes at shutdown\n\nIt was running when SIGTERM came.\n")
			<-g.entered
			// Its first claim recorded the queue delay.
			s.waitMetric("outprint_job_queue_delay_seconds_count", 1)
			s.stop()
			select {
			case code := <-s.code:
				t.Fatalf("serve exited (%d) while a job was running within the grace", code)
			case <-time.After(300 * time.Millisecond):
			}
			close(g.release)
			if code := s.exited(); code != exitOK {
				t.Errorf("serve exit = %d, want 0", code)
			}
			if got := storedJob(t, dbURL, data, j.ID); got.State != jobs.StateSucceeded {
				t.Errorf("job running at SIGTERM = %s, want succeeded", got.State)
			}

			// Released: the grace runs out while the render is held; the
			// job goes back to the queue and the next process finishes it.
			g = newGate()
			s = startService(t, writeConfig(t, conf("300ms")), g.wrap)
			s.waitReady()
			j = s.submit("# Released at shutdown\n\nThe next process renders it.\n")
			<-g.entered
			s.stop()
			if code := s.exited(); code != exitOK {
				t.Errorf("serve exit = %d, want 0", code)
			}
			if got := storedJob(t, dbURL, data, j.ID); got.State != jobs.StateQueued {
				t.Fatalf("job cut off by the grace = %s, want queued again", got.State)
			}
			if left := texDescendants(t); len(left) > 0 {
				t.Errorf("TeX processes left after serve returned: %v", left)
			}

			// The next process renders with a page limit of 1, so that a
			// second job fails and /metrics counts it by code.
			s = startService(t, writeConfig(t, conf("2m")+"render: {maxPages: 1}\n"), nil)
			s.waitReady()
			if got := s.waitJob(j.ID); got.State != jobs.StateSucceeded {
				t.Fatalf("released job after restart = %+v, want succeeded", got)
			}
			long := s.submit("# Too long\n\n" + strings.Repeat("A paragraph that fills a few lines of the page, again and again and again.\n\n", 120))
			if got := s.waitJob(long.ID); got.State != jobs.StateFailed || got.Error == nil || got.Error.Code != "too_many_pages" || got.Attempts != 1 {
				t.Errorf("job over the page limit = %+v, want failed with too_many_pages on its first attempt", got)
			}
			s.waitMetric(`outprint_job_failures_total{code="too_many_pages"}`, 1)
			s.waitMetric(`outprint_jobs{state="failed"}`, 1)
			resp, err := http.Get(s.url + "/v1/jobs/" + j.ID + "/result")
			if err != nil {
				t.Fatal(err)
			}
			pdf, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close() // read to the end already
			if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
				t.Fatalf("result = %d %.100q, want a PDF", resp.StatusCode, pdf)
			}
			path := filepath.Join(t.TempDir(), "r.pdf")
			if err := os.WriteFile(path, pdf, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("pdfinfo", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "Released at shutdown") {
				t.Errorf("pdfinfo = %v\n%s", err, out)
			}

			// /metrics shows the job figures: two succeeded jobs in the
			// table, and the job's render among the render durations.
			s.waitMetric(`outprint_jobs{state="succeeded"}`, 2)
			if n := s.metric(`outprint_render_duration_seconds_count{result="ok"}`); n < 1 {
				t.Errorf("render duration count = %v, want the job's render", n)
			}
			if n := s.metric("outprint_jobs_oldest_queued_age_seconds"); n != 0 {
				t.Errorf("oldest queued age = %v, want 0 with nothing queued", n)
			}
		})
	}
}

func slogJSON(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// TestServeDrainWaitingWorker: a job worker waiting for the only slot,
// held by a synchronous render, when SIGTERM comes gives its job back to
// the queue as soon as the running render is done, without waiting out
// the grace period.
func TestServeDrainWaitingWorker(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	// perUser 2: the anonymous user's job submission counts against the
	// same user as its sync render while it is accepted.
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nadmission: {slots: 1, queueDepth: 2, perUser: 2}\nshutdown: {grace: 2m}\npool: {min: 0}\n%s", data, officeOff))
	g := newGate()
	s := startService(t, cfg, g.wrap)
	s.waitReady()
	running := s.render("", "# Sync render\n\nIt holds the only slot.\n")
	<-g.entered
	j := s.submit("# Waits for the slot\n\nIts worker is queued in admission at SIGTERM.\n")
	// The worker has claimed the job and waits in the admission queue.
	s.waitMetric("outprint_admission_queued", 1)

	s.stop()
	close(g.release)
	if r := <-running; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("sync render = %d %v, want 200", r.status, r.err)
	}
	stopped := time.Now()
	if code := s.exited(); code != exitOK {
		t.Errorf("serve exit = %d, want 0", code)
	}
	// Bounded far below the 2 min grace: the wait ended with the render.
	if d := time.Since(stopped); d > 30*time.Second {
		t.Errorf("serve took %s after the last render to exit, want it not to wait out the grace", d)
	}
	if got := storedJob(t, "sqlite://"+filepath.Join(data, "outprint.db"), data, j.ID); got.State != jobs.StateQueued {
		t.Errorf("job whose worker waited for a slot = %s, want queued again", got.State)
	}
}
