package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
)

// testDatabase returns the URL of a fresh, empty database of kind, dropped
// when the test ends.
func testDatabase(t *testing.T, kind, dataDir string) string {
	t.Helper()
	if kind == "sqlite" {
		return "sqlite://" + filepath.Join(dataDir, "outprint.db")
	}
	return testenv.PostgresDatabase(t, "outprint_cmd")
}

// runWithEnv runs the outprint binary with extra environment variables.
func runWithEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestMigrateCommand: `outprint migrate` creates the job tables on both
// databases and changes nothing the second time; a database it cannot
// reach is an error, a malformed one a configuration error.
func TestMigrateCommand(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			dbURL := testDatabase(t, kind, filepath.Join(t.TempDir(), "data"))
			env := []string{"OUTPRINT_DATABASE=" + dbURL, "OUTPRINT_DATA_DIR=" + t.TempDir()}
			for i := range 2 {
				out, errOut, code := runWithEnv(t, env, "migrate")
				if code != exitOK || !strings.Contains(out, "up to date") {
					t.Fatalf("migrate #%d = exit %d, stdout %q, stderr %q; want 0 and up to date", i+1, code, out, errOut)
				}
			}
			// The tables are there: a job service accepts a job.
			ctx := context.Background()
			db, err := jobs.Open(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st, err := store.NewFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			svc, err := jobs.New(db, st, nil, jobs.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.Submit(ctx, jobs.Input{Tenant: "t", User: "u", Markdown: []byte("# x\n")}); err != nil {
				t.Errorf("Submit after migrate = %v", err)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		_, errOut, code := runWithEnv(t, []string{"OUTPRINT_DATABASE=postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, "migrate")
		if code != exitInternal || !strings.Contains(errOut, "outprint migrate") {
			t.Errorf("migrate of an unreachable database = exit %d, stderr %q; want %d", code, errOut, exitInternal)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, errOut, code := runWithEnv(t, []string{"OUTPRINT_DATABASE=mysql://x"}, "migrate")
		if code != exitUsage || !strings.Contains(errOut, "OUTPRINT_DATABASE") {
			t.Errorf("migrate of a malformed database URL = exit %d, stderr %q; want %d naming the variable", code, errOut, exitUsage)
		}
	})
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

func (s *service) submit(markdown string) jobReply {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"markdown": markdown})
	resp, err := http.Post(s.url+"/v1/jobs", "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatalf("POST /v1/jobs: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var j jobReply
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &j) != nil || j.ID == "" {
		s.t.Fatalf("POST /v1/jobs = %d %s, want 202 with a job", resp.StatusCode, body)
	}
	return j
}

func (s *service) job(id string) jobReply {
	s.t.Helper()
	resp, err := http.Get(s.url + "/v1/jobs/" + id)
	if err != nil {
		s.t.Fatalf("GET job: %v", err)
	}
	defer resp.Body.Close()
	var j jobReply
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET job = %d, %v", resp.StatusCode, err)
	}
	return j
}

// waitJob polls until the job ended; the bound only stops a broken test.
func (s *service) waitJob(id string) jobReply {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j := s.job(id)
		if j.State == jobs.StateSucceeded || j.State == jobs.StateFailed || j.State == jobs.StateCancelled {
			return j
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("job %s never ended: %+v", id, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited waits for serve's exit code and puts it back for the cleanup.
func (s *service) exited() int {
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
	defer db.Close()
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
				return fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\ndatabase: %s\nshutdown: {grace: %s}\npool: {min: 0}\n", data, dbURL, grace)
			}
			if kind == "postgres" {
				cfg := writeConfig(t, conf("2m"))
				var logs lockedBuffer
				code := serve(context.Background(), cfg, slogJSON(&logs), serveHooks{})
				if code != exitInternal || !strings.Contains(logs.String(), "outprint migrate") {
					t.Fatalf("serve on an unmigrated PostgreSQL = exit %d, want %d telling to run outprint migrate:\n%s", code, exitInternal, logs.String())
				}
				if _, errOut, code := runWithEnv(t, []string{"OUTPRINT_DATABASE=" + dbURL}, "migrate"); code != exitOK {
					t.Fatalf("migrate = %d: %s", code, errOut)
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
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
				t.Fatalf("result = %d %.100q, want a PDF", resp.StatusCode, pdf)
			}
			path := filepath.Join(t.TempDir(), "r.pdf")
			os.WriteFile(path, pdf, 0o600)
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
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nadmission: {slots: 1, queueDepth: 2, perUser: 2}\nshutdown: {grace: 2m}\npool: {min: 0}\n", data))
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
