package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/outprint/outprint/internal/testenv"
)

// leaseConfig is crashConfig with a short lease and a River rescue so late
// that only the lease can bring a dead worker's job back within the test.
func leaseConfig() Config {
	cfg := crashConfig()
	cfg.LeaseTimeout = 3 * time.Second
	cfg.LeaseCheck = time.Second
	cfg.RescueAfter = time.Hour
	return cfg
}

// TestLeaseTakeover kills a worker process with SIGKILL in the middle of a
// TeX render. Its job stays "running" with a beat that stops; the leader
// of a second process takes the lease back after LeaseTimeout (River's
// rescue would wait an hour here) and the job succeeds on its second
// attempt with one valid PDF. Then every write the dead attempt could
// still make — a beat, the success, a failure — is refused.
func TestLeaseTakeover(t *testing.T) {
	testenv.Require(t, "xelatex")
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, kind := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(kind, func(t *testing.T) { leaseScenario(t, kind) })
		}()
	}
}

func leaseScenario(t *testing.T, kind string) {
	ctx := context.Background()
	r := newTeXRenderer(t)
	h := newHarness(t, kind, r, leaseConfig())
	childID, _ := runCrashChild(t, h.url, h.store.Root(), FailDuringRender, childLeaseEnv+"=1")
	if childID == "" {
		t.Fatal("the child printed no job id")
	}
	var old fence
	var state, riverState string
	if err := h.db.pool().queryRow(ctx, `SELECT j.state, j.river_job_id, j.attempts, r.state FROM outprint_jobs j
		JOIN river_job r ON r.id = j.river_job_id WHERE j.id = $1`, childID).Scan(&state, &old.riverID, &old.attempt, &riverState); err != nil {
		t.Fatal(err)
	}
	if state != StateRunning || riverState != "running" || old.attempt != 1 {
		t.Fatalf("after the kill: row %s (attempt %d), River job %s; want running, 1, running", state, old.attempt, riverState)
	}

	h.start(h.svc)
	final := h.waitTerminal(crashTenant, childID)
	if final.State != StateSucceeded {
		t.Fatalf("job ended %s (%s: %s), want succeeded", final.State, final.ErrorCode, final.ErrorMessage)
	}
	if final.Attempts != 2 {
		t.Errorf("job attempts = %d, want 2 (the killed one and the one after the take-back)", final.Attempts)
	}
	rc, _, err := h.svc.Result(ctx, crashTenant, childID)
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(rc)
	_ = rc.Close()
	checkPDF(t, pdf, 2, "outprint job "+childID)
	r.mu.Lock()
	renders := r.calls[childID]
	r.mu.Unlock()
	if renders != 1 {
		t.Errorf("renders after the take-back = %d, want 1", renders)
	}
	if rid := h.riverJobID(childID); rid == old.riverID {
		t.Errorf("row still names River job %d, want the new River job of the take-back", rid)
	}

	// The dead attempt's late writes.
	if held, err := h.svc.writeProgress(ctx, childID, old, PhaseRendering, 1); err != nil || held {
		t.Errorf("beat of the old attempt = %v, %v, want refused (false)", held, err)
	}
	if h.svc.holds(ctx, childID, old) {
		t.Error("holds(old attempt) = true, want false")
	}
	// Put the row back to running for a live third attempt, as a
	// retry would, and let the old attempt try to finish it.
	if _, err := h.db.pool().exec(ctx, `UPDATE outprint_jobs SET state = 'running', attempts = 3 WHERE id = $1`, childID); err != nil {
		t.Fatal(err)
	}
	rj := &river.Job[renderArgs]{JobRow: &rivertype.JobRow{ID: old.riverID}, Args: renderArgs{JobID: childID}}
	if err := h.svc.succeed(ctx, rj, old, 9); !errors.Is(err, errNotRunning) {
		t.Errorf("success of the old attempt = %v, want errNotRunning", err)
	}
	h.svc.fail(ctx, childID, old, "internal", "late failure", errors.New("late"), 0, quietLogger())
	var pages int
	if err := h.db.pool().queryRow(ctx, `SELECT state, pages FROM outprint_jobs WHERE id = $1`, childID).Scan(&state, &pages); err != nil {
		t.Fatal(err)
	}
	if state != StateRunning || pages == 9 {
		t.Errorf("after the old attempt's late success and failure: state %s, pages %d; want running, unchanged", state, pages)
	}
}

// TestLeaseTakeoverWhileWaiting kills a worker process with SIGKILL while
// its attempt waits for a render budget unit, before the claim: River
// holds the job as running, the row is still queued. The waiting attempt
// beat on the queued row, the beat stops, and the leader of a second
// process takes the job back after LeaseTimeout (River's rescue would
// wait an hour here, as it did before waiting attempts beat). The job
// succeeds on one attempt: the wait never rendered, so it is given back.
func TestLeaseTakeoverWhileWaiting(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t, kind, cannedPDFRenderer{}, leaseConfig())
			childID, _ := runCrashChild(t, h.url, h.store.Root(), waitingForBudget, childLeaseEnv+"=1", childWaitEnv+"=1")
			if childID == "" {
				t.Fatal("the child printed no job id")
			}
			var state, riverState string
			var oldRiverID int64
			var beat *time.Time
			if err := h.db.pool().queryRow(ctx, `SELECT j.state, j.river_job_id, j.heartbeat_at, r.state FROM outprint_jobs j
				JOIN river_job r ON r.id = j.river_job_id WHERE j.id = $1`, childID).Scan(&state, &oldRiverID, &beat, &riverState); err != nil {
				t.Fatal(err)
			}
			if state != StateQueued || riverState != "running" || beat == nil {
				t.Fatalf("after the kill: row %s (beat %v), River job %s; want queued with a beat, running", state, beat, riverState)
			}

			h.start(h.svc)
			final := h.waitTerminal(crashTenant, childID)
			if final.State != StateSucceeded || final.Attempts != 1 {
				t.Errorf("job = %s after %d attempts (%s: %s), want succeeded after 1", final.State, final.Attempts, final.ErrorCode, final.ErrorMessage)
			}
			if rid := h.riverJobID(childID); rid == oldRiverID {
				t.Errorf("row still names River job %d, want the new River job of the take-back", rid)
			}
		})
	}
}

// TestLeaseTakeoverKeepsPlace: a job taken back keeps its place in line.
// Its new River job comes before those of the jobs accepted after it, in
// River's order (priority, then scheduled time), as QueuePosition tells
// the job's owner; it used to go to the back, behind every later job (a
// job of the cluster's chaos test waited for the whole queue to drain).
func TestLeaseTakeoverKeepsPlace(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t, kind, cannedPDFRenderer{}, leaseConfig())
			var ids []string
			for i := range 4 {
				job, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte(fmt.Sprintf("# %d", i))})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, job.ID)
			}
			// The first job's attempt died in the middle of its render:
			// River holds it as running, its beat is an hour old.
			if _, err := h.db.pool().exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = $2 WHERE id = $1`,
				h.riverJobID(ids[0]), h.svc.now()); err != nil {
				t.Fatal(err)
			}
			if _, err := h.db.pool().exec(ctx, `UPDATE outprint_jobs SET state = 'running', attempts = 1, heartbeat_at = $2 WHERE id = $1`,
				ids[0], h.svc.now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if n, err := h.svc.Reclaim(ctx); err != nil || n != 1 {
				t.Fatalf("Reclaim() = %d, %v, want 1, nil", n, err)
			}
			rs, err := h.db.pool().query(ctx, `SELECT j.id FROM river_job r JOIN outprint_jobs j ON j.river_job_id = r.id
				WHERE r.kind = $1 AND r.state IN ('available', 'scheduled') ORDER BY r.priority, r.scheduled_at, r.id`, renderArgs{}.Kind())
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for rs.Next() {
				var id string
				if err := rs.Scan(&id); err != nil {
					t.Fatal(err)
				}
				order = append(order, id)
			}
			rs.Close()
			if !slices.Equal(order, ids) {
				t.Errorf("River's order of the queued jobs after the take-back = %q, want the order of acceptance %q", order, ids)
			}
			h.start(h.svc)
			if final := h.waitTerminal("t", ids[0]); final.State != StateSucceeded || final.Attempts != 2 {
				t.Errorf("taken-back job = %s after %d attempts, want succeeded after 2", final.State, final.Attempts)
			}
		})
	}
}

// TestLeaseRenewedWhileWaiting: an attempt that waits for a render budget
// unit longer than LeaseTimeout, beating all along, keeps the job: it is
// not taken back, and renders once when the unit comes.
func TestLeaseRenewedWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig()
	cfg.LeaseTimeout = time.Second
	cfg.LeaseCheck = 200 * time.Millisecond
	cfg.Budget = &lateBudget{after: 4 * time.Second}
	cfg.BudgetWait = 10 * time.Second
	cfg.RescueAfter = time.Hour
	r := &sleepRenderer{}
	h := newHarness(t, "sqlite", r, cfg)
	h.start(h.svc)
	job, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte("# waits")})
	if err != nil {
		t.Fatal(err)
	}
	first := h.riverJobID(job.ID)
	final := h.waitTerminal("t", job.ID)
	if final.State != StateSucceeded || final.Attempts != 1 {
		t.Errorf("job = %s after %d attempts, want succeeded after 1", final.State, final.Attempts)
	}
	if last := h.riverJobID(job.ID); last != first {
		t.Errorf("River job %d at the end, %d at acceptance: the waiting attempt lost its lease", last, first)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("renders = %d, want 1", n)
	}
}

// lateBudget grants its first unit after a delay and every later one at
// once.
type lateBudget struct {
	after time.Duration
	once  sync.Once
}

func (b *lateBudget) Acquire(ctx context.Context) error {
	var wait time.Duration
	b.once.Do(func() { wait = b.after })
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *lateBudget) Release() {}

// TestLeaseRenewed checks that a live attempt keeps its lease: a job that
// renders for longer than LeaseTimeout, beating all along, is not taken
// back and renders once.
func TestLeaseRenewed(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.LeaseTimeout = time.Second
	cfg.LeaseCheck = 200 * time.Millisecond
	slow := &sleepRenderer{d: 4 * time.Second}
	h := newHarness(t, "sqlite", slow, cfg)
	h.start(h.svc)
	job, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte("# slow")})
	if err != nil {
		t.Fatal(err)
	}
	final := h.waitTerminal("t", job.ID)
	if final.State != StateSucceeded || final.Attempts != 1 {
		t.Errorf("job = %s after %d attempts, want succeeded after 1", final.State, final.Attempts)
	}
	if n := slow.calls.Load(); n != 1 {
		t.Errorf("renders = %d, want 1 (a beating attempt keeps its lease)", n)
	}
}

// sleepRenderer renders for d, reporting progress, and returns a stand-in
// PDF; the lease tests need a render that outlives LeaseTimeout.
type sleepRenderer struct {
	d     time.Duration
	calls atomic.Int32
}

func (r *sleepRenderer) Render(ctx context.Context, _ RenderInput, progress func(string, int)) ([]byte, error) {
	r.calls.Add(1)
	progress(PhaseRendering, 1)
	select {
	case <-time.After(r.d):
		return []byte("%PDF-1.7 stand-in"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestLeaseChecksLeaveNoRows: the lease check runs every LeaseCheck as a
// River job; once a few have run, at most one completed lease check is
// left in River's table (the queue console shows River's jobs, and a
// lease check every few seconds kept for a day would bury the documents'
// jobs there).
func TestLeaseChecksLeaveNoRows(t *testing.T) {
	t.Parallel()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, kind, nil, leaseConfig())
			h.start(h.svc)
			ctx := context.Background()
			count := func(query string) int {
				var n int
				if err := h.db.pool().queryRow(ctx, query, leaseArgs{}.Kind()).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			// River's job ids count up across kinds; with one sweep
			// besides, a lease check with id 6 is at least the fifth.
			testenv.EventuallyWithin(t, time.Minute, "five lease checks to run", func() bool {
				return count(`SELECT COALESCE(MAX(id), 0) FROM river_job WHERE kind = $1 AND state = 'completed'`) >= 6
			})
			if n := count(`SELECT COUNT(*) FROM river_job WHERE kind = $1 AND state = 'completed'`); n > 1 {
				t.Errorf("completed lease checks in river_job = %d, want at most 1", n)
			}
		})
	}
}
