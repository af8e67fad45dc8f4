package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
)

// The crash tests re-run this test binary as a child process (TestMain
// sees childEnv) that runs a Service whose Config.Failpoint hook kills the
// child with SIGKILL at the failpoint named by failpointEnv, and submits
// one job. A new
// Service on the same database and store must then bring the job to exactly
// one result or one terminal error.
const (
	childEnv      = "OUTPRINT_JOBS_CRASH_CHILD"
	childDBEnv    = "OUTPRINT_JOBS_CRASH_DB"
	childStoreEnv = "OUTPRINT_JOBS_CRASH_STORE"
	failpointEnv  = "OUTPRINT_JOBS_CRASH_FAILPOINT"
	childLeaseEnv = "OUTPRINT_JOBS_CRASH_LEASE"
	// childWaitEnv gives the child a render budget that never grants a
	// unit and kills the process once the waiting attempt has beaten
	// (failpoint waitingForBudget).
	childWaitEnv = "OUTPRINT_JOBS_CRASH_WAIT"
)

// waitingForBudget is the child's kill point of childWaitEnv: not one of
// the service's failpoints, but its budget's.
const waitingForBudget = "waiting-for-budget"

const crashTenant, crashKey = "crash-tenant", "crash-key"

// crashConfig is shared by child and parent. RescueAfter is as short as
// River allows for a JobTimeout that a TeX run survives on a loaded machine
// (all scenarios run at once, under -race).
func crashConfig() Config {
	cfg := testConfig()
	cfg.JobTimeout = 20 * time.Second
	cfg.BudgetWait = time.Second
	cfg.RescueAfter = cfg.attemptLimit() + time.Second
	cfg.TTL = 5 * time.Second
	return cfg
}

// crashChild is the child process. It returns an exit code only when the
// failpoint was not reached, which the parent reports as a failure.
func crashChild() int {
	ctx := context.Background()
	db, err := Open(ctx, os.Getenv(childDBEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	st, err := store.NewFS(os.Getenv(childStoreEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	r := &texRenderer{maxPages: 3, calls: map[string]int{}, ctxDone: map[string]time.Time{},
		reaped: map[string]time.Time{}, started: make(chan string, 10), progress: map[string][]string{}}
	cfg := crashConfig()
	if os.Getenv(childLeaseEnv) != "" {
		cfg = leaseConfig()
	}
	cfg.Failpoint = killAt(os.Getenv(failpointEnv))
	if os.Getenv(childWaitEnv) != "" {
		cfg.Budget = &killWhileWaiting{db: db, kill: cfg.Failpoint}
		cfg.BudgetWait = time.Minute
	}
	svc, err := New(db, st, r, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	if err := svc.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	job, _, err := svc.Submit(ctx, Input{Tenant: crashTenant, User: "u", Markdown: []byte("pages: 2\n"), IdempotencyKey: crashKey})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: submit:", err)
		return 2
	}
	fmt.Printf("JOB %s\n", job.ID)
	// The failpoint kills this process; give up if it never comes.
	<-time.After(60 * time.Second)
	fmt.Fprintln(os.Stderr, "child: the failpoint was never reached")
	return 3
}

// killWhileWaiting is the child's render budget of childWaitEnv: Acquire
// never grants a unit; once a queued job's beat is written (the attempt
// waits, holding its River job), it calls kill at waitingForBudget.
type killWhileWaiting struct {
	db   *DB
	kill func(string)
}

func (b *killWhileWaiting) Acquire(ctx context.Context) error {
	for {
		var n int
		if err := b.db.pool().queryRow(ctx, `SELECT COUNT(*) FROM outprint_jobs WHERE state = 'queued' AND heartbeat_at IS NOT NULL`).Scan(&n); err == nil && n > 0 {
			b.kill(waitingForBudget)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *killWhileWaiting) Release() {}

// killAt returns a Config.Failpoint hook that kills this process with
// SIGKILL at point.
func killAt(point string) func(string) {
	return func(name string) {
		if name != point {
			return
		}
		fmt.Fprintln(os.Stderr, "child: failpoint", name, "reached, killing the process")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL to oneself is delivered before this returns
	}
}

// runCrashChild runs the child until it dies and checks that it died of
// SIGKILL. It returns the job id the child printed, if it got that far, and
// when it died.
func runCrashChild(t *testing.T, databaseURL, storeRoot, failpoint string, env ...string) (string, time.Time) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childDBEnv+"="+databaseURL, childStoreEnv+"="+storeRoot, failpointEnv+"="+failpoint)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "JOB "); ok {
			id = v
		}
	}
	_, _ = io.Copy(io.Discard, out)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child ended with %v, want death by SIGKILL\n%s", err, stderr.String())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want death by SIGKILL at %s\n%s", err, failpoint, stderr.String())
	}
	return id, time.Now()
}

func TestCrashRecovery(t *testing.T) {
	testenv.Require(t, "xelatex")
	failpoints := []struct {
		name string
		// rendersAfter is how often the new process must render: never
		// when the killed attempt had already stored the result.
		rendersAfter int
	}{
		{FailAfterInputStore, 1},
		{FailAfterJobCreate, 1},
		{FailDuringRender, 1},
		{FailAfterOutputStore, 0},
		{FailBeforeSuccess, 0},
	}
	// The scenarios spend most of their time waiting for the dead
	// child's River leadership to expire (about 15 s) before the rescuer
	// runs; they run all at once rather than -parallel at a time, since
	// t.Run may be called from several goroutines.
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, kind := range kinds {
		for _, fp := range failpoints {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(kind+"/"+fp.name, func(t *testing.T) { crashScenario(t, kind, fp.name, fp.rendersAfter) })
			}()
		}
	}
}

// crashScenario kills a child at failpoint and checks that a new Service
// brings the job to one result, rendering rendersAfter times.
func crashScenario(t *testing.T, kind, failpoint string, rendersAfter int) {
	ctx := context.Background()
	r := newTeXRenderer(t)
	h := newHarness(t, kind, r, crashConfig())
	childID, killed := runCrashChild(t, h.url, h.store.Root(), failpoint)

	listed, err := h.svc.List(ctx, crashTenant, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var orphan string
	if failpoint == FailAfterInputStore {
		// Killed before the commit: no job exists, the client got
		// no answer, its input is an orphan folder.
		if len(listed) != 0 || childID != "" {
			t.Fatalf("after %s: jobs = %+v, child printed %q; want none", failpoint, listed, childID)
		}
		names, err := h.store.List(ctx, "jobs")
		if err != nil || len(names) != 1 {
			t.Fatalf("after %s: stored folders = %v, %v; want the one orphan", failpoint, names, err)
		}
		orphan = names[0]
	} else if len(listed) != 1 {
		t.Fatalf("after %s: jobs = %+v, want 1", failpoint, listed)
	}

	var riverState string
	if err := h.db.pool().queryRow(ctx, `SELECT state FROM river_job`).Scan(&riverState); err != nil && !errors.Is(err, errNoRows) {
		t.Fatal(err)
	}
	if riverState == "running" {
		// The killed attempt is still "running" for River (also after
		// after-job-create when the child's worker claimed it before the
		// kill). The rescuer runs when this process becomes leader (once
		// the dead child's term ran out) and then every 30 s; starting
		// after RescueAfter lets its first run find the attempt old
		// enough to rescue.
		time.Sleep(time.Until(killed.Add(crashConfig().RescueAfter)))
	}
	h.start(h.svc)
	// The client retries with its idempotency key: the job the
	// child created is found, or (no job yet) one is created.
	job, created, err := h.svc.Submit(ctx, Input{Tenant: crashTenant, User: "u", Markdown: []byte("pages: 2\n"), IdempotencyKey: crashKey})
	if err != nil {
		t.Fatal(err)
	}
	if wantCreated := failpoint == FailAfterInputStore; created != wantCreated {
		t.Errorf("Submit(retry) created = %v, want %v", created, wantCreated)
	}
	if !created && job.ID != listed[0].ID {
		t.Errorf("Submit(retry) = job %s, want the child's %s", job.ID, listed[0].ID)
	}

	final := h.waitTerminal(crashTenant, job.ID)
	if final.State != StateSucceeded {
		t.Fatalf("job ended %s (%s: %s), want succeeded", final.State, final.ErrorCode, final.ErrorMessage)
	}
	rc, _, err := h.svc.Result(ctx, crashTenant, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(rc)
	_ = rc.Close()
	checkPDF(t, pdf, 2, "outprint job "+job.ID)
	if final.Pages != 2 {
		t.Errorf("job pages = %d, want 2", final.Pages)
	}
	files := h.jobFiles(job.ID)
	if want := []string{"document.md", "result.pdf"}; !slices.Equal(files, want) {
		t.Errorf("stored files = %v, want exactly %v (one result, no leftovers)", files, want)
	}
	r.mu.Lock()
	renders := r.calls[job.ID]
	r.mu.Unlock()
	if renders != rendersAfter {
		t.Errorf("renders after restart = %d, want %d", renders, rendersAfter)
	}

	if orphan != "" {
		// The orphan goes once it is older than TTL.
		h.clock.Advance(mustIDTime(t, orphan).Add(crashConfig().TTL + time.Second).Sub(h.clock.Now()))
		// (River's periodic sweep may have been first.)
		if _, err := h.svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(h.store.Root(), "jobs", orphan)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan input %s still stored (%v)", orphan, err)
		}
	}
}

func mustIDTime(t *testing.T, id string) time.Time {
	t.Helper()
	tm, ok := idTime(id)
	if !ok {
		t.Fatalf("%q is not a version-7 job id", id)
	}
	return tm
}
