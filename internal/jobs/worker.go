package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"rsc.io/pdf"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/store"
)

// renderWorker is River's worker for render jobs; all logic is in
// Service.work.
type renderWorker struct {
	river.WorkerDefaults[renderArgs]
	s *Service
}

func (w *renderWorker) Work(ctx context.Context, rj *river.Job[renderArgs]) error {
	err := w.s.work(ctx, rj)
	w.s.TestSignals.Settled.Signal(rj.Args.JobID)
	return err
}

// Timeout is River's own deadline for an attempt: longer than the budget
// wait and the render together, so that the worker's own timeouts fire
// first.
func (w *renderWorker) Timeout(*river.Job[renderArgs]) time.Duration {
	return w.s.cfg.attemptLimit()
}

// budgetBusy gives back a job whose attempt waited BudgetWait for a budget
// unit in vain. Renders (synchronous ones too) keep the budget busy: not
// the job's fault, so no attempt is spent. The beat goes with the wait:
// the next fetch starts its own.
func (s *Service) budgetBusy(ctx context.Context, id string, riverID int64, log *slog.Logger) error {
	if _, err := s.db.pool().exec(ctx, `UPDATE outprint_jobs SET heartbeat_at = NULL
		WHERE id = $1 AND state = 'queued' AND river_job_id = $2`, id, riverID); err != nil {
		log.Warn("jobs: clear the beat of a budget wait", "err", err)
	}
	log.Info("jobs: render budget busy, requeued")
	return river.JobSnooze(s.cfg.RetryBase)
}

// errBudgetBusy is the cause of a budget wait that ran out of BudgetWait.
var errBudgetBusy = errors.New("render budget busy")

// errInputMissing marks a job whose stored input is gone: it cannot
// succeed on any attempt.
var errInputMissing = errors.New("job input missing")

// work runs one attempt of a job. Its return value tells River what to do:
// nil after the success transaction (which completed the River job itself),
// JobCancel for jobs that ended (cancelled, failed at once), JobSnooze(0)
// for jobs given back at shutdown, and a plain error for transient failures,
// which River retries with the backoff policy until MaxAttempts.
func (s *Service) work(ctx context.Context, rj *river.Job[renderArgs]) error {
	id := rj.Args.JobID
	log := s.cfg.Logger.With("job", id, "attempt", rj.Attempt)
	job, err := s.load(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// Rows go only after their River job finished; nothing to do.
		return river.JobCancel(fmt.Errorf("job %s has no row", id))
	}
	if err != nil {
		return err
	}
	switch job.State {
	case StateSucceeded:
		return nil
	case StateFailed, StateCancelled:
		return river.JobCancel(fmt.Errorf("job %s already %s", id, job.State))
	}

	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	me := &runningJob{cancel: cancel, fence: fence{riverID: rj.ID}}
	s.running.Store(id, me)
	defer s.running.CompareAndDelete(id, me)

	b := &beat{changed: make(chan struct{}, 1)}
	watchDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		// The watcher is owned by this attempt: it ends when watchDone
		// closes, which the deferred call below does before work returns.
		defer wg.Done()
		s.watch(jctx, id, cancel, b, watchDone, log)
	}()
	defer func() {
		close(watchDone)
		wg.Wait()
	}()

	if s.cfg.Budget != nil {
		// The wait for a budget unit comes before the claim, and may be
		// long. River holds the job as running meanwhile, so it beats
		// too: a worker that dies waiting leaves a queued row whose beat
		// stops, which the leader takes back as it takes back a running
		// one (lease.go), instead of River's rescuer minutes later.
		b.wait(rj.ID)
		if err := s.acquireBudget(jctx); err != nil {
			if errors.Is(err, errBudgetBusy) {
				return s.budgetBusy(ctx, id, rj.ID, log)
			}
			return s.settle(ctx, jctx, rj, job, fmt.Errorf("render budget: %w", err), 0)
		}
		defer s.cfg.Budget.Release()
	}

	now := s.now()
	// The claim is the lease: it names this River job, so a River job the
	// leader replaced (lease.go) claims nothing, and it records the
	// attempt number every later write of this attempt is fenced by.
	var n int
	err = s.db.pool().queryRow(jctx, `UPDATE outprint_jobs SET state = 'running', phase = $2, pages = 0,
			attempts = attempt_base + $3, started_at = COALESCE(started_at, $4), heartbeat_at = $4
		WHERE id = $1 AND state IN ('queued', 'running') AND river_job_id = $5 RETURNING attempts`,
		id, PhasePreparing, rj.Attempt, now, rj.ID).Scan(&n)
	if errors.Is(err, errNoRows) {
		return river.JobCancel(fmt.Errorf("job %s ended or was handed to another River job before it started", id))
	}
	if err != nil {
		return s.settle(ctx, jctx, rj, job, fmt.Errorf("claim: %w", err), 0)
	}
	me.fence = fence{riverID: rj.ID, attempt: n}
	b.claim(me.fence, PhasePreparing)
	s.TestSignals.Claimed.Signal(id)
	if job.StartedAt == nil && s.cfg.Observer != nil {
		s.cfg.Observer.Started(now.Sub(job.CreatedAt))
	}

	start := time.Now()
	pages, err := s.produce(jctx, rj, job, b)
	took := time.Since(start)
	if err != nil {
		return s.settle(ctx, jctx, rj, job, err, took)
	}
	if err := s.succeed(jctx, rj, me.fence, pages); err != nil {
		return s.settle(ctx, jctx, rj, job, err, took)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Finished(StateSucceeded, "", took)
	}
	log.Debug("jobs: succeeded", "pages", pages, "took", took)
	return nil
}

// acquireBudget takes a unit of the render budget for an attempt, waiting
// at most BudgetWait: errBudgetBusy when the wait ran out while the
// attempt's context lives on.
func (s *Service) acquireBudget(jctx context.Context) error {
	bctx, cancel := context.WithTimeoutCause(jctx, s.cfg.BudgetWait, errBudgetBusy)
	defer cancel()
	err := s.cfg.Budget.Acquire(bctx)
	if err != nil && jctx.Err() == nil && errors.Is(context.Cause(bctx), errBudgetBusy) {
		return errBudgetBusy
	}
	return err
}

// produce makes sure jobs/{id}/result.pdf holds the job's PDF and returns
// its page count. A result already stored is complete (Put is atomic) and
// comes from an earlier attempt that died before its success transition:
// it is kept, so the job converges to the one result it has.
func (s *Service) produce(ctx context.Context, rj *river.Job[renderArgs], job Job, b *beat) (int, error) {
	k := Keys{job.ID}
	if rc, err := s.store.Get(ctx, k.Result()); err == nil {
		defer func() { _ = rc.Close() }()
		// The stored PDF says how many pages it has; the row's count
		// may be gone (a retry or a release resets it).
		if n, err := storedPages(rc); err == nil && n > 0 {
			return n, nil
		}
		return job.Pages, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("check result: %w", err)
	}

	in, err := s.loadInput(ctx, job, rj.Attempt)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%w: %w", errInputMissing, err)
	}
	if err != nil {
		return 0, fmt.Errorf("load input: %w", err)
	}

	tctx, cancel := context.WithTimeoutCause(ctx, s.cfg.JobTimeout, errJobTimeout)
	defer cancel()
	pdf, err := s.renderer.Render(tctx, in, func(phase string, pages int) {
		b.progress(phase, pages)
		if phase == PhaseRendering {
			s.failpoint(FailDuringRender)
		}
	})
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(tctx), errJobTimeout) {
			if in.Office != nil {
				return 0, limits.ConvertTimeout(s.cfg.JobTimeout)
			}
			return 0, limits.Timeout(s.cfg.JobTimeout)
		}
		return 0, err
	}
	if len(pdf) == 0 {
		return 0, errors.New("renderer returned an empty PDF")
	}

	_, pages := b.snapshot()
	b.progress(PhasePackaging, pages)
	// The pages are recorded before the result exists, so that an attempt
	// that finds the result after a crash knows them too.
	// It is also the last check of the lease before the result is
	// written: an attempt whose lease was taken back stops here.
	held, err := s.writeProgress(ctx, job.ID, b.fence, PhasePackaging, pages)
	if err != nil {
		return 0, fmt.Errorf("record progress: %w", err)
	}
	if !held {
		return 0, errNotRunning
	}
	if err := s.store.Put(ctx, k.Result(), bytes.NewReader(pdf)); err != nil {
		return 0, fmt.Errorf("store result: %w", err)
	}
	if err := s.addStoredBytes(ctx, job.ID, len(pdf)); err != nil {
		return 0, fmt.Errorf("record result size: %w", err)
	}
	s.failpoint(FailAfterOutputStore)
	return pages, nil
}

// storedPages counts the pages of a stored result (a PDF outprint wrote).
func storedPages(r io.Reader) (n int, err error) {
	// The parser panics on some malformed files: a broken result is an
	// error here, not a crash.
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("read stored result: malformed PDF (%v)", p)
		}
	}()
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, fmt.Errorf("read stored result: %w", err)
	}
	doc, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return 0, fmt.Errorf("read stored result: %w", err)
	}
	return doc.NumPage(), nil
}

// errNotRunning is returned by succeed when the row left the running state
// (it was cancelled) before the success transition.
var errNotRunning = errors.New("job no longer running")

// succeed moves the row to succeeded and completes the River job in one
// transaction, so that neither can happen without the other.
func (s *Service) succeed(ctx context.Context, rj *river.Job[renderArgs], f fence, pages int) error {
	now := s.now()
	err := s.q.inTx(ctx, false, func(tx txOps) error {
		n, err := tx.exec(ctx, `UPDATE outprint_jobs SET state = 'succeeded', phase = '', pages = $2, finished_at = $3,
				expires_at = $4, error_code = '', error_message = ''
			WHERE id = $1 AND state = 'running' AND river_job_id = $5 AND attempts = $6`,
			rj.Args.JobID, pages, now, now.Add(s.cfg.TTL), f.riverID, f.attempt)
		if err != nil {
			return fmt.Errorf("success transition: %w", err)
		}
		if n == 0 {
			return errNotRunning
		}
		if err := s.scheduleWebhook(ctx, tx, rj.Args.JobID, now); err != nil {
			return err
		}
		s.failpoint(FailBeforeSuccess)
		return tx.complete(ctx, rj)
	})
	if err == nil {
		s.failpoint(FailAfterSettle)
	}
	return err
}

// settle decides what a failed attempt means. ctx is River's context for
// the attempt, jctx the render context derived from it.
func (s *Service) settle(ctx, jctx context.Context, rj *river.Job[renderArgs], job Job, err error, took time.Duration) error {
	id := job.ID
	log := s.cfg.Logger.With("job", id, "attempt", rj.Attempt)
	// Writes below must happen even though ctx may be done.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()

	f := s.fenceOf(id, rj)
	if errors.Is(context.Cause(jctx), errLeaseLost) || ((errors.Is(err, errNotRunning) || errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely)) && !s.holds(wctx, id, f)) {
		// The leader took this attempt's lease back and another attempt
		// owns the job now: nothing of this one may be written, not
		// even the deletion of a result (it is the other attempt's key).
		log.Warn("jobs: lease lost, attempt abandoned", "err", err)
		return river.JobCancel(errLeaseLost)
	}
	cancelled := errors.Is(context.Cause(jctx), errCancelled) || errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) ||
		errors.Is(err, errNotRunning)
	switch {
	case cancelled:
		// Cancel already moved the row; a result stored meanwhile must
		// not be served or kept.
		if err := s.store.Delete(wctx, Keys{id}.Result()); err != nil {
			log.Warn("jobs: delete result of cancelled job", "err", err)
		}
		log.Info("jobs: cancelled while running")
		return river.JobCancel(errCancelled)

	case s.stopping.Load() && ctx.Err() != nil:
		// Drain: give the job back without spending an attempt.
		if _, err := s.db.pool().exec(wctx, `UPDATE outprint_jobs SET state = 'queued', phase = '', pages = 0, heartbeat_at = NULL
			WHERE id = $1 AND state = 'running' AND river_job_id = $2 AND attempts = $3`, id, f.riverID, f.attempt); err != nil {
			log.Warn("jobs: release at shutdown", "err", err)
		}
		log.Info("jobs: released at shutdown")
		return river.JobSnooze(0)
	}
	return s.failOrRetry(wctx, rj, id, f, err, took, log)
}

// failOrRetry settles an attempt that ended on err, neither cancelled nor
// stopped by a drain: a document's problem, a missing input or the last
// attempt fails the job; anything else leaves it for River's retry.
func (s *Service) failOrRetry(wctx context.Context, rj *river.Job[renderArgs], id string, f fence, err error, took time.Duration, log *slog.Logger) error {
	var le *limits.Error
	switch {
	case errors.As(err, &le):
		msg := le.Error()
		if len(le.Problems) > 0 {
			msg = le.Problems[0].Message
		}
		s.fail(wctx, id, f, le.Code(), msg, err, took, log)
		return river.JobCancel(documentError(le))
	case errors.Is(err, errInputMissing):
		s.fail(wctx, id, f, CodeInputMissing, "the job's input is no longer stored", err, took, log)
		return river.JobCancel(err)
	case rj.Attempt >= rj.MaxAttempts:
		s.fail(wctx, id, f, CodeExhausted, fmt.Sprintf("the job failed %d times; the service could not complete it", rj.Attempt), err, took, log)
		return err
	}

	if _, werr := s.db.pool().exec(wctx, `UPDATE outprint_jobs SET state = 'queued', phase = '', pages = 0, last_error = $2, heartbeat_at = NULL
		WHERE id = $1 AND state = 'running' AND river_job_id = $3 AND attempts = $4`, id, truncate(err.Error(), 2000), f.riverID, f.attempt); werr != nil {
		log.Warn("jobs: record transient failure", "err", werr)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Retried(limits.CodeInternal)
	}
	log.Warn("jobs: attempt failed, will retry", "err", err)
	return err
}

// documentError is what River records, and its console shows, for an
// attempt that failed on the job's document: the code only. The messages of
// a *limits.Error may quote the document (a TeX line, an image name); they
// stay in outprint_jobs, which only the job's tenant reads, through the API.
func documentError(le *limits.Error) error {
	return fmt.Errorf("document error: %s (the job's row holds the message)", le.Code())
}

// fail moves the row to failed with a client-facing code and message, and
// schedules its webhook in the same transaction; the internal error goes
// to the log and last_error only. The write is fenced by the attempt f:
// before its claim an attempt has no number yet (attempt 0) and may fail
// the job only while the row is still queued for its River job.
func (s *Service) fail(ctx context.Context, id string, f fence, code, message string, cause error, took time.Duration, log interface {
	Warn(string, ...any)
}) {
	now := s.now()
	err := s.q.inTx(ctx, false, func(tx txOps) error {
		n, err := tx.exec(ctx, `UPDATE outprint_jobs SET state = 'failed', phase = '', error_code = $2, error_message = $3,
				last_error = $4, finished_at = $5, expires_at = $6
			WHERE id = $1 AND river_job_id = $7 AND ((state = 'running' AND attempts = $8) OR (state = 'queued' AND $8 = 0))`,
			id, code, message, truncate(cause.Error(), 2000), now, now.Add(s.cfg.TTL), f.riverID, f.attempt)
		if err != nil || n == 0 {
			return err
		}
		return s.scheduleWebhook(ctx, tx, id, now)
	})
	if err != nil {
		log.Warn("jobs: record failure", "code", code, "err", err)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Finished(StateFailed, code, took)
	}
	log.Warn("jobs: failed", "code", code, "err", cause)
}

// writeProgress records a progress beat; it reports whether the row was
// still running.
// The write is the attempt's beat, which renews its lease, and is fenced:
// it matches only while the row is running for this attempt.
func (s *Service) writeProgress(ctx context.Context, id string, f fence, phase string, pages int) (bool, error) {
	n, err := s.db.pool().exec(ctx, `UPDATE outprint_jobs SET phase = $2, pages = $3, heartbeat_at = $4
		WHERE id = $1 AND state = 'running' AND river_job_id = $5 AND attempts = $6`, id, phase, pages, s.now(), f.riverID, f.attempt)
	return n > 0, err
}

// writeBeat writes the beat beat.take returned: a waiting attempt's with
// writeWaiting, a claimed one's with writeProgress.
func (s *Service) writeBeat(ctx context.Context, id string, f fence, phase string, pages int, stage beatStage) (bool, error) {
	if stage == beatWaiting {
		return s.writeWaiting(ctx, id, f)
	}
	return s.writeProgress(ctx, id, f, phase, pages)
}

// writeWaiting writes the beat of an attempt that waits for its claim
// (beat.wait): on the queued row, fenced by the River job only, as the
// attempt has no number yet. It reports whether the row was written.
func (s *Service) writeWaiting(ctx context.Context, id string, f fence) (bool, error) {
	n, err := s.db.pool().exec(ctx, `UPDATE outprint_jobs SET heartbeat_at = $2
		WHERE id = $1 AND state = 'queued' AND river_job_id = $3`, id, s.now(), f.riverID)
	return n > 0, err
}

// beat is the progress of one attempt, written by the renderer's callback
// and read by the watcher.
type beat struct {
	// fence is the attempt's, set at the claim (before it, wait sets
	// the River job's alone); mu orders it with the watcher's reads.
	fence fence
	mu    sync.Mutex
	stage beatStage
	phase string
	pages int
	dirty bool
	// changed is signalled (non-blocking, capacity 1) on a phase change,
	// which the watcher writes at once.
	changed chan struct{}
}

// beatStage is where an attempt is for its beat: not yet beating, waiting
// for its claim (the beat goes on the queued row), or claimed.
type beatStage int

const (
	beatNone beatStage = iota
	beatWaiting
	beatClaimed
)

func (b *beat) claim(f fence, phase string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fence, b.stage, b.phase = f, beatClaimed, phase
}

// wait starts the beat of an attempt of River job riverID that waits
// before its claim, and has the watcher write it at once.
func (b *beat) wait(riverID int64) {
	b.mu.Lock()
	b.stage, b.fence = beatWaiting, fence{riverID: riverID}
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

func (b *beat) progress(phase string, pages int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if phase != b.phase {
		b.phase = phase
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
	if pages > b.pages {
		b.pages = pages
	}
	b.dirty = true
}

func (b *beat) snapshot() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.phase, b.pages
}

// take returns the progress to write and the stage it belongs to. The
// beat is written whether or not it changed, since it is the lease; at
// beatNone there is nothing to write, at beatWaiting only the beat.
func (b *beat) take() (f fence, phase string, pages int, stage beatStage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stage != beatClaimed {
		return b.fence, "", 0, b.stage
	}
	b.dirty = false
	return b.fence, b.phase, b.pages, beatClaimed
}

// watch runs beside one attempt until done closes. Every CancelPoll it
// checks the row for a cancellation made by any process and cancels the
// render context; it writes progress at phase changes and otherwise at most
// every ProgressInterval.
func (s *Service) watch(ctx context.Context, id string, cancel context.CancelCauseFunc, b *beat, done <-chan struct{}, log interface {
	Debug(string, ...any)
}) {
	t := time.NewTicker(s.cfg.CancelPoll)
	defer t.Stop()
	var lastWrite time.Time
	write := func() {
		f, phase, pages, stage := b.take()
		if stage == beatNone {
			return
		}
		lastWrite = time.Now()
		held, err := s.writeBeat(ctx, id, f, phase, pages, stage)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("jobs: progress", "err", err)
			}
			return
		}
		if !held && !s.holds(ctx, id, f) {
			// Another attempt owns the job (the leader took the lease
			// back while this one could not beat): stop rendering.
			cancel(errLeaseLost)
		}
	}
	for {
		select {
		case <-done:
			return
		case <-b.changed:
			write()
		case <-t.C:
			if time.Since(lastWrite) >= s.cfg.ProgressInterval {
				write()
			}
			var state string
			err := s.db.pool().queryRow(ctx, `SELECT state FROM outprint_jobs WHERE id = $1`, id).Scan(&state)
			if err == nil && state == StateCancelled {
				cancel(errCancelled)
			} else if err != nil && ctx.Err() == nil {
				log.Debug("jobs: cancellation check", "err", err)
			}
		}
	}
}
