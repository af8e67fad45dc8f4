package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// The cluster tests run the roles of "Running on several machines" as
// separate processes on loopback: PostgreSQL, a SeaweedFS S3 server,
// `outprint migrate`, gateways and workers, each with its own data folder.

const clusterSecret = "cluster-secret-for-tests-0123456789"

// proc is one outprint process of a role, restartable on the same port.
type proc struct {
	t    *testing.T
	role string
	env  []string
	url  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *testenv.Buffer
}

// startRole starts `outprint ROLE` with env on a port of its own (no other
// test's, so cluster tests run in parallel) and waits for /readyz.
func startRole(t *testing.T, role string, env ...string) *proc {
	t.Helper()
	p := launchRole(t, role, env...)
	p.waitReady()
	return p
}

// launchRole starts `outprint ROLE` as startRole does but returns at once,
// so that the processes of a cluster warm their TeX at the same time;
// the test waits for each with waitReady before using it. The port is
// known before the process listens: a gateway is given the URLs of
// workers that are still starting, and probes them until they are ready.
func launchRole(t *testing.T, role string, env ...string) *proc {
	t.Helper()
	port := testenv.FreePort(t)
	listenVar := "OUTPRINT_LISTEN"
	if role == roleWorker {
		listenVar = "OUTPRINT_WORKER_LISTEN"
	}
	p := &proc{t: t, role: role, url: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &testenv.Buffer{},
		env: append([]string{listenVar + "=127.0.0.1:" + strconv.Itoa(port), "OUTPRINT_DATA_DIR=" + t.TempDir(), officeOff}, env...)}
	p.launch()
	t.Cleanup(p.stop)
	return p
}

// start starts the process (again, after kill or stop) and waits until
// it is ready.
func (p *proc) start() {
	p.t.Helper()
	p.launch()
	p.waitReady()
}

// waitReady waits until the process answers /readyz 200, failing the test
// with its log if it exits first.
func (p *proc) waitReady() {
	p.t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	waitReady(p.t, p.url, done, p.logs)
}

// launch starts the process without waiting for it.
func (p *proc) launch() {
	p.t.Helper()
	cmd := exec.Command(binary, p.role)
	cmd.Env = append(os.Environ(), p.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // ends when the process closes stderr (it exits)
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			// testenv.Buffer is in memory: Write cannot fail.
			_, _ = p.logs.Write([]byte(sc.Text() + "\n"))
		}
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// kill kills the process with SIGKILL, as a machine that dies would.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	// The process may have exited already, and its exit status after a
	// signal is not what the tests check: both errors are dropped.
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	_ = cmd.Wait()
}

// waitRendering waits until the process has a render running (its
// outprint_admission_running gauge is 1), failing the test after within.
func (p *proc) waitRendering(within time.Duration) {
	p.t.Helper()
	testenv.EventuallyWithin(p.t, within, "outprint "+p.role+" to start a render", func() bool {
		return p.metric("outprint_admission_running") == 1
	})
}

// terminate sends SIGTERM and hands the process over to the caller, who
// waits for it (done closes when it exits; then cmd.Wait).
func (p *proc) terminate() (cmd *exec.Cmd, done chan struct{}) {
	p.mu.Lock()
	cmd, done = p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM) // as in kill
	return cmd, done
}

func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	// As in kill: exit errors after a signal are dropped.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		p.t.Errorf("outprint %s did not stop on SIGTERM", p.role)
	}
	_ = cmd.Wait()
	if p.t.Failed() {
		p.t.Logf("outprint %s log:\n%s", p.role, tailString(p.logs.String(), 6000))
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// metric returns the value of an unlabelled metric, -1 when absent.
func (p *proc) metric(name string) float64 {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func post(url string, header map[string]string, body []byte) answer {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func get(url string) answer {
	resp, err := http.Get(url)
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// pdfPages checks a PDF with pdfinfo and returns its page count.
func pdfPages(t *testing.T, pdf []byte) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfinfo", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Pages:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("pdfinfo shows no page count:\n%s", out)
	return 0
}

// clusterDB makes a fresh PostgreSQL database and migrates it with the
// command, as an operator would; env is the database setting plus extra.
func clusterDB(t *testing.T, extra ...string) []string {
	t.Helper()
	env := append([]string{"OUTPRINT_DATABASE=" + testenv.PostgresDatabase(t, "cluster"), "OUTPRINT_CLUSTER_SECRET=" + clusterSecret}, extra...)
	if out, errOut, code := runWithEnv(t, env, "migrate"); code != exitOK {
		t.Fatalf("outprint migrate = %d\n%s%s", code, out, errOut)
	}
	return env
}

// bundle is a worker request body: render.Bundle in JSON.
func bundle(markdown string) []byte {
	b, _ := json.Marshal(map[string]any{"markdown": []byte(markdown)})
	return b
}

// longDocument is Markdown that keeps TeX busy for a while: many pages.
func longDocument(pages int) string {
	var b strings.Builder
	b.WriteString("# Long\n\n")
	for i := range pages {
		fmt.Fprintf(&b, "## Section %d\n\n%s\n\n\\newpage\n\n", i+1, strings.Repeat("Words that fill the page. ", 120))
	}
	return b.String()
}

// TestClusterSecret: a worker renders only for callers that present the
// cluster secret; without it, or with a wrong one, it answers 401 and
// renders nothing.
func TestClusterSecret(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "pdfinfo")
	env := clusterDB(t)
	w := startRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	doc := bundle("# Memo\n\nA short memo.\n")
	for name, header := range map[string]map[string]string{
		"missing": nil,
		"wrong":   {"Outprint-Cluster-Secret": clusterSecret + "x"},
		"prefix":  {"Outprint-Cluster-Secret": clusterSecret[:10]},
	} {
		a := post(w.url+"/v1/worker/render", header, doc)
		if a.err != nil || a.status != http.StatusUnauthorized || !bytes.Contains(a.body, []byte(`"code":"unauthorized"`)) {
			t.Errorf("%s secret: %d %s (%v), want 401 unauthorized", name, a.status, a.body, a.err)
		}
	}
	if n := w.metric(`outprint_render_duration_seconds_count{result="ok"}`); n > 0 {
		t.Errorf("renders after refused requests = %v, want none", n)
	}
	a := post(w.url+"/v1/worker/render", map[string]string{"Outprint-Cluster-Secret": clusterSecret}, doc)
	if a.err != nil || a.status != http.StatusOK || a.header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("right secret: %d %s (%v), want 200 application/pdf", a.status, tailString(string(a.body), 400), a.err)
	}
	if n := pdfPages(t, a.body); n != 1 {
		t.Errorf("worker PDF pages = %d, want 1", n)
	}
	// One render in all: the refused requests rendered nothing.
	if n := w.metric(`outprint_render_duration_seconds_count{result="ok"}`); n != 1 {
		t.Errorf("renders = %v, want exactly the one with the right secret", n)
	}
	// A document error from the worker is the error list of SPEC §5.
	a = post(w.url+"/v1/worker/render", map[string]string{"Outprint-Cluster-Secret": clusterSecret}, bundle("# Bad\n\n$\\frac{1$\n"))
	if a.status != http.StatusUnprocessableEntity || !bytes.Contains(a.body, []byte(`"errors"`)) {
		t.Errorf("bad math: %d %s, want 422 with the error list", a.status, a.body)
	}
}

// TestClusterWorkerBusy: two gateways share one worker of capacity 1.
// While it renders, further renders through either gateway answer 429
// with Retry-After and the busy error list, taken from the worker's own
// busy answer.
func TestClusterWorkerBusy(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "pdfinfo")
	env := clusterDB(t)
	w := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	gwEnv := append(env, "OUTPRINT_GATEWAY_WORKERS="+w.url, "OUTPRINT_ADMISSION_SLOTS=4", "OUTPRINT_ADMISSION_PER_USER=4")
	g1 := launchRole(t, roleGateway, gwEnv...)
	g2 := launchRole(t, roleGateway, gwEnv...)
	for _, p := range []*proc{w, g1, g2} {
		p.waitReady() // a gateway is ready once it saw its one worker ready
	}

	// The long render (about 150 pages, near the 1 MiB bound of a
	// document) must still hold the worker's one slot when the two others
	// have been answered; if it ended first, the round is run again.
	const size = 300
	for round := 1; ; round++ {
		long := make(chan answer, 1)
		go func() {
			body, _ := json.Marshal(map[string]string{"markdown": longDocument(size)})
			long <- post(g1.url+"/v1/render", map[string]string{"Content-Type": "application/json"}, body)
		}()
		w.waitRendering(time.Minute)
		var wg sync.WaitGroup
		answers := make([]answer, 2)
		for i, g := range []*proc{g1, g2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, _ := json.Marshal(map[string]string{"markdown": "# Memo\n\nShort.\n"})
				answers[i] = post(g.url+"/v1/render", map[string]string{"Content-Type": "application/json"}, body)
			}()
		}
		wg.Wait()
		stillRunning := w.metric("outprint_admission_running") == 1
		first := <-long
		if first.status != http.StatusOK {
			t.Fatalf("long render: %d %s", first.status, tailString(string(first.body), 400))
		}
		if !stillRunning {
			if round == 3 {
				t.Fatalf("in %d rounds, the long render ended before the two others were answered", round)
			}
			t.Logf("round %d: the long render ended before the others were answered; once more", round)
			continue
		}
		for i, a := range answers {
			if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" || !bytes.Contains(a.body, []byte(`"code":"busy"`)) {
				t.Errorf("gateway %d while the worker is full: %d Retry-After %q %s, want 429 busy with Retry-After", i+1, a.status, a.header.Get("Retry-After"), a.body)
			}
		}
		if n := pdfPages(t, first.body); n < size/2 {
			t.Errorf("long render pages = %d, want at least %d", n, size/2)
		}
		return
	}
}

// TestClusterChaos runs the deployment of "Running on several machines" —
// PostgreSQL, an S3 store, `outprint migrate`, one gateway and two workers
// — under jobs and synchronous renders while a worker is killed with
// SIGKILL mid-render and restarted, the S3 server is stopped for five
// seconds and started again, and the gateway is killed with SIGKILL during
// acceptance and restarted. Afterwards every accepted job (202) has
// succeeded with a valid PDF, or failed with a document error when its
// document was bad; none is lost or left running; every synchronous render
// answered 200, or 429/503 with Retry-After.
func TestClusterChaos(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "pdfinfo")
	total := 200
	if testing.Short() {
		total = 40
	}
	s3 := testenv.StartS3(t, "../..")
	env := clusterDB(t,
		"OUTPRINT_STORE=s3://outprint-chaos/deploy?region=us-east-1&endpoint="+s3.Endpoint,
		"AWS_ACCESS_KEY_ID="+testenv.S3AccessKey, "AWS_SECRET_ACCESS_KEY="+testenv.S3SecretKey,
		"OUTPRINT_JOBS_LEASE_TIMEOUT=3s", "OUTPRINT_MAX_PAGES=3")
	w1 := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	w2 := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	g := launchRole(t, roleGateway, append(env, "OUTPRINT_GATEWAY_WORKERS="+w1.url+","+w2.url,
		"OUTPRINT_ADMISSION_SLOTS=2", "OUTPRINT_ADMISSION_PER_USER=8", "OUTPRINT_ADMISSION_QUEUE_DEPTH=8")...)
	for _, p := range []*proc{w1, w2, g} {
		p.waitReady()
	}
	waitGatewaySees(t, g, w1, true)
	waitGatewaySees(t, g, w2, true)

	// Jobs: every tenth document is bad and must fail with its own error.
	type accepted struct {
		id  string
		bad bool
	}
	var (
		mu       sync.Mutex
		jobsDone []accepted
	)
	submit := func(i int) {
		bad := i%10 == 9
		doc := fmt.Sprintf("# Job %d\n\nA memo with a number: %d.\n", i, i*i)
		if bad {
			// Passes every check at acceptance; TeX finds it too long.
			doc = longDocument(8)
		}
		body, _ := json.Marshal(map[string]string{"markdown": doc})
		key := fmt.Sprintf("chaos-%d", i)
		// A client retries until it gets an answer: the gateway may be
		// down for a moment; the idempotency key makes the retry safe.
		var last answer
		for attempt := 0; attempt < 600; attempt++ {
			a := post(g.url+"/v1/jobs", map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}, body)
			// 200 answers a retry whose first try was accepted but
			// whose answer was lost (the gateway went down): the
			// original job, by its idempotency key.
			if a.err == nil && (a.status == http.StatusAccepted || (a.status == http.StatusOK && attempt > 0)) {
				var j struct{ ID string }
				if json.Unmarshal(a.body, &j) != nil || j.ID == "" {
					t.Errorf("job %d: %d without an id: %s", i, a.status, a.body)
					return
				}
				mu.Lock()
				jobsDone = append(jobsDone, accepted{j.ID, bad})
				mu.Unlock()
				return
			}
			if a.err == nil && a.status != http.StatusServiceUnavailable && a.status != http.StatusTooManyRequests && a.status < 500 {
				t.Errorf("job %d: %d %s", i, a.status, a.body)
				return
			}
			last = a
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("job %d was never accepted; last answer %d %s %v", i, last.status, last.body, last.err)
	}

	// Synchronous renders beside the jobs, a few a second: enough to hold
	// a slot through every failure below without taking the workers from
	// the jobs.
	stopSync := make(chan struct{})
	var syncWG sync.WaitGroup
	stopSyncOnce := sync.OnceFunc(func() { close(stopSync); syncWG.Wait() })
	t.Cleanup(stopSyncOnce) // a Fatal below leaves no render running past the test
	var syncCodes []int
	syncWG.Add(1)
	go func() {
		defer syncWG.Done()
		body, _ := json.Marshal(map[string]string{"markdown": "# Sync\n\nRendered while the cluster suffers.\n"})
		pace := time.NewTicker(250 * time.Millisecond)
		defer pace.Stop()
		for {
			select {
			case <-stopSync:
				return
			case <-pace.C:
			}
			a := post(g.url+"/v1/render", map[string]string{"Content-Type": "application/json"}, body)
			if a.err != nil {
				continue // the gateway is down: no answer to judge
			}
			mu.Lock()
			syncCodes = append(syncCodes, a.status)
			mu.Unlock()
			switch {
			case a.status == http.StatusOK:
				if !bytes.HasPrefix(a.body, []byte("%PDF-")) {
					t.Errorf("sync render: 200 without a PDF")
				}
			case a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable:
				if a.header.Get("Retry-After") == "" {
					t.Errorf("sync render: %d without Retry-After: %s", a.status, a.body)
				}
			default:
				t.Errorf("sync render: %d %s, want 200, or 429/503 with Retry-After", a.status, a.body)
			}
		}
	}()

	var subWG sync.WaitGroup
	next := make(chan int)
	for range 4 {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for i := range next {
				submit(i)
			}
		}()
	}
	// Submissions arrive at a steady pace, so that every failure below
	// happens while jobs are being accepted and rendered.
	pace := 60 * time.Millisecond
	if testing.Short() {
		pace = 250 * time.Millisecond
	}
	go func() { // ends when every job was handed to a submitter
		defer close(next)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := range total {
			next <- i
			<-tick.C
		}
	}()
	acceptedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(jobsDone)
	}
	testenv.Eventually(t, "jobs to be accepted", func() bool { return acceptedCount() >= total/5 })
	// The gateway dies during acceptance and comes back.
	g.kill()
	g.start()

	// A worker dies in the middle of a render and comes back.
	w1.waitRendering(2 * time.Minute)
	w1.kill()
	waitGatewaySees(t, g, w1, false) // its probe found the worker gone
	w1.start()

	// The store goes away for five seconds.
	s3.Stop()
	time.Sleep(5 * time.Second)
	s3.Start()
	subWG.Wait()
	// The failures are over: the synchronous renders stop, and the jobs
	// have both workers to themselves for the rest. Renders kept going
	// until the last job ended (977 beside the 200 jobs in one -race run)
	// held one of the two workers for the whole wait.
	stopSyncOnce()

	// Every accepted job ends: succeeded with a valid PDF, or failed with
	// a document error if its document was bad.
	mu.Lock()
	all := append([]accepted(nil), jobsDone...)
	mu.Unlock()
	if len(all) != total {
		t.Errorf("accepted %d jobs, want %d", len(all), total)
	}
	seen := map[string]bool{}
	retried := 0
	deadline := time.Now().Add(15 * time.Minute)
	for _, j := range all {
		if seen[j.id] {
			t.Errorf("job %s accepted twice", j.id)
		}
		seen[j.id] = true
		var st struct {
			State    string
			Attempts int
			Error    *struct{ Code string }
		}
		testenv.EventuallyWithin(t, time.Until(deadline), "job "+j.id+" to end", func() bool {
			a := get(g.url + "/v1/jobs/" + j.id)
			if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &st) != nil {
				t.Fatalf("GET job %s: %d %s %v (lost?)", j.id, a.status, a.body, a.err)
			}
			return st.State == "succeeded" || st.State == "failed" || st.State == "cancelled"
		})
		if st.Attempts > 1 {
			retried++
		}
		switch {
		case j.bad:
			if st.State != "failed" || st.Error == nil || st.Error.Code == "retries_exhausted" || st.Error.Code == "internal" {
				t.Errorf("bad job %s: %s %+v, want failed with a document error", j.id, st.State, st.Error)
			}
		case st.State != "succeeded":
			t.Errorf("job %s: %s %+v after %d attempts, want succeeded", j.id, st.State, st.Error, st.Attempts)
		default:
			a := get(g.url + "/v1/jobs/" + j.id + "/result")
			if a.status != http.StatusOK {
				t.Errorf("result of %s: %d %s", j.id, a.status, a.body)
			} else if n := pdfPages(t, a.body); n != 1 {
				t.Errorf("result of %s: %d pages, want 1", j.id, n)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	ok := 0
	for _, c := range syncCodes {
		if c == http.StatusOK {
			ok++
		}
	}
	t.Logf("%d jobs (%d needed more than one attempt); %d synchronous renders, %d of them 200", len(all), retried, len(syncCodes), ok)
	if ok == 0 {
		t.Error("no synchronous render succeeded")
	}
	_ = w2
}

// TestClusterWorkerDrain: SIGTERM on a worker while it renders. The
// running render finishes and is answered 200; a render sent meanwhile is
// answered 503 at once with Retry-After and the worker's
// {"message","phase"} (a gateway moves on to another worker); then the
// worker exits 0.
func TestClusterWorkerDrain(t *testing.T) {
	// Serial: a 150-page render must end within the worker's 30 s
	// grace, which a machine shared with parallel tests may not give it.
	testenv.Require(t, "xelatex", "pdfinfo")
	env := clusterDB(t)
	w := startRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	secret := map[string]string{"Outprint-Cluster-Secret": clusterSecret}
	long := make(chan answer, 1)
	go func() { long <- post(w.url+"/v1/worker/render", secret, bundle(longDocument(300))) }()
	w.waitRendering(time.Minute)
	cmd, done := w.terminate()
	var a answer
	testenv.EventuallyWithin(t, time.Minute, "a refusal while draining", func() bool {
		a = post(w.url+"/v1/worker/render", secret, bundle("# Memo\n\nShort.\n"))
		// Until the signal is handled the worker is merely full (429).
		return a.err == nil && a.status != http.StatusOK && a.status != http.StatusTooManyRequests
	})
	var body struct{ Message, Phase string }
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" ||
		json.Unmarshal(a.body, &body) != nil || body.Message == "" || body.Phase != "draining" {
		t.Errorf("render while draining: %d Retry-After %q %s, want 503 with Retry-After and {message, phase: draining}",
			a.status, a.header.Get("Retry-After"), a.body)
	}
	first := <-long
	if first.status != http.StatusOK {
		t.Errorf("the running render: %d %s, want 200 (finished within the grace)", first.status, tailString(string(first.body), 300))
	} else if n := pdfPages(t, first.body); n < 150 {
		t.Errorf("the running render: %d pages", n)
	}
	<-done
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker exit after SIGTERM: %v, want 0", err)
	}
}

// TestClusterFailover: a gateway whose worker dies goes on rendering on
// the other one, and comes back to the first once it returns (shown by
// killing the second: renders go on, on the first, restarted, worker).
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "pdfinfo")
	env := clusterDB(t)
	w1 := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	w2 := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	g := launchRole(t, roleGateway, append(env, "OUTPRINT_GATEWAY_WORKERS="+w1.url+","+w2.url)...)
	for _, p := range []*proc{w1, w2, g} {
		p.waitReady()
	}
	// Both workers in the gateway's view before the first one dies.
	waitGatewaySees(t, g, w1, true)
	waitGatewaySees(t, g, w2, true)
	renders := func(what string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"markdown": "# Memo\n\nFailover.\n"})
		for i := range 4 {
			a := post(g.url+"/v1/render", map[string]string{"Content-Type": "application/json"}, body)
			if a.err != nil || a.status != http.StatusOK {
				t.Fatalf("%s, render %d: %d %s %v, want 200", what, i, a.status, a.body, a.err)
			}
		}
	}
	renders("both workers up")
	w1.kill()
	renders("worker 1 killed")
	w1.start()
	w2.kill()
	renders("worker 1 back, worker 2 killed")
	if n := w1.metric(`outprint_render_duration_seconds_count{result="ok"}`); n < 4 {
		t.Errorf("renders on the restarted worker 1 = %v, want the last 4", n)
	}
}
