package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// Leases by beats. A running attempt writes its progress at least every
// ProgressInterval, and that write (heartbeat_at) is its lease; so does
// an attempt that waits for a render budget unit before its claim, on
// its still queued row. The elected
// leader checks every LeaseCheck for running jobs whose beat is older than
// LeaseTimeout — their worker died, froze or lost the database — and takes
// them back: in one transaction the row returns to queued for a new River
// job, and the old River job is cancelled (its worker, if alive, is told
// to stop). A worker killed mid-render thus costs about LeaseTimeout plus
// LeaseCheck, instead of River's RescueAfter (minutes, since it must
// outlast the longest attempt).
//
// Taking a lease back is a compare-and-set on the attempt: the row names
// its River job (river_job_id) and its attempt (attempts), every write of
// an attempt — beat, result check, success, failure, release — carries both
// in its WHERE clause, and the take-back changes both. So a live attempt
// is never run twice at once in the database's eyes: the old attempt's late
// writes match no row, it sees that at its next beat (or before storing
// its result) and stops, and it never deletes or re-stores a result once
// it knows it lost the lease. The one window left is a result PUT that
// started before the lease was taken back; it writes the same job's PDF of
// the same input to the same deterministic key, and the job's state is
// only ever set by the attempt that holds the lease.

// fence identifies one attempt: its River job and its attempt number as
// the row counts them (attempt_base + River's attempt).
type fence struct {
	riverID int64
	attempt int
}

// errLeaseLost is the cause of a render context whose lease another
// attempt holds now.
var errLeaseLost = errors.New("job lease taken back by the leader")

// fenceOf returns the fence of the attempt of rj running in this process,
// or one with attempt 0 before its claim.
func (s *Service) fenceOf(id string, rj *river.Job[renderArgs]) fence {
	if r, ok := s.running.Load(id); ok {
		if f := r.(*runningJob).fence; f.riverID == rj.ID {
			return f
		}
	}
	return fence{riverID: rj.ID}
}

// holds reports whether the row still belongs to the attempt f, whatever
// its state: false once the leader gave the job to another River job or
// attempt. Errors count as holding, so that a database hiccup never makes
// an attempt abandon a job it owns.
func (s *Service) holds(ctx context.Context, id string, f fence) bool {
	var rid *int64
	var attempts int
	err := s.db.pool().queryRow(ctx, `SELECT river_job_id, attempts FROM outprint_jobs WHERE id = $1`, id).Scan(&rid, &attempts)
	if err != nil {
		return true
	}
	return rid != nil && *rid == f.riverID && (f.attempt == 0 || attempts == f.attempt)
}

// leaseArgs is the periodic lease check.
type leaseArgs struct{}

func (leaseArgs) Kind() string { return "outprint_lease" }

// leaseWorker runs Reclaim as River's periodic job, on the elected leader
// only, in a queue of its own so a long sweep never delays it.
type leaseWorker struct {
	river.WorkerDefaults[leaseArgs]
	s *Service
}

func (w *leaseWorker) Work(ctx context.Context, _ *river.Job[leaseArgs]) error {
	n, err := w.s.Reclaim(ctx)
	if n > 0 {
		w.s.cfg.Logger.Warn("jobs: took back expired leases", "jobs", n)
	}
	if err := w.s.forgetInternal(ctx); err != nil {
		w.s.cfg.Logger.Warn("jobs: forget finished lease checks", "err", err)
	}
	return err
}

// forgetInternal deletes the River jobs of the lease checks and sweeps
// that completed: they run every few seconds and every minute, and River
// keeps completed jobs for a day, so they would bury the documents' jobs
// in the queue console (thousands a day). A failed one is kept, for its
// error.
func (s *Service) forgetInternal(ctx context.Context) error {
	_, err := s.db.pool().exec(ctx, `DELETE FROM river_job WHERE state = 'completed' AND kind IN ($1, $2)`,
		leaseArgs{}.Kind(), sweepArgs{}.Kind())
	return err
}

// Reclaim takes back the running jobs whose beat is older than
// LeaseTimeout and returns how many. A job whose expired attempt was its
// last fails with CodeExhausted; the others get a new River job with the
// attempts left.
func (s *Service) Reclaim(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.cfg.LeaseTimeout)
	// A queued row beats too while its River job runs: its worker waits
	// for a render budget unit before the claim (worker.go). A queued row
	// whose River job is not running is not selected, and the beat of an
	// earlier fetch never stands for the next one: heartbeat_at is
	// cleared whenever a row goes back to the queue.
	rs, err := s.db.pool().query(ctx, `SELECT j.id, j.state, j.created_at, j.river_job_id, j.attempts, r.attempt, r.max_attempts
		FROM outprint_jobs j JOIN river_job r ON r.id = j.river_job_id
		WHERE (j.state = 'running' OR (j.state = 'queued' AND r.state = 'running')) AND j.heartbeat_at < $1 LIMIT $2`, cutoff, sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("lease check: %w", err)
	}
	type expired struct {
		id, state          string
		created            time.Time
		f                  fence
		riverAttempt, maxA int
	}
	var todo []expired
	for rs.Next() {
		var e expired
		if err := rs.Scan(&e.id, &e.state, &e.created, &e.f.riverID, &e.f.attempt, &e.riverAttempt, &e.maxA); err != nil {
			rs.Close()
			return 0, fmt.Errorf("lease check: %w", err)
		}
		todo = append(todo, e)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, fmt.Errorf("lease check: %w", err)
	}
	n := 0
	for _, e := range todo {
		left := e.maxA - e.riverAttempt
		if e.state == StateQueued {
			// The attempt died waiting, before its claim: it never
			// rendered, so it is given back.
			left++
		}
		ok, err := s.reclaim(ctx, e.id, e.state, e.created, e.f, left, cutoff)
		if err != nil {
			return n, fmt.Errorf("take back job %s: %w", e.id, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// errLeaseRenewed aborts a take-back whose attempt beat meanwhile.
var errLeaseRenewed = errors.New("lease renewed")

// reclaim takes one job back from attempt f, unless it beat since cutoff
// or its row left state (running, or queued for an attempt that waits).
// The new River job keeps the job's place in line: it is scheduled at
// the job's acceptance (River orders a queue by priority, then scheduled
// time), so that it runs before the jobs accepted after it, as
// QueuePosition says, instead of after all of them. River makes it
// available at its scheduler's next pass, within seconds.
func (s *Service) reclaim(ctx context.Context, id, state string, created time.Time, f fence, left int, cutoff time.Time) (bool, error) {
	now := s.now()
	exhausted := left <= 0
	err := s.q.inTx(ctx, false, func(tx txOps) error {
		var n int64
		var err error
		if exhausted {
			n, err = tx.exec(ctx, `UPDATE outprint_jobs SET state = 'failed', phase = '', error_code = $2, error_message = $3,
					last_error = $4, finished_at = $5, expires_at = $6
				WHERE id = $1 AND state = $10 AND river_job_id = $7 AND attempts = $8 AND heartbeat_at < $9`,
				id, CodeExhausted, fmt.Sprintf("the job's worker stopped on its last attempt (%d)", f.attempt),
				errLeaseLost.Error(), now, now.Add(s.cfg.TTL), f.riverID, f.attempt, cutoff, state)
		} else {
			ids, ierr := tx.insertMany(ctx, []river.InsertManyParams{{Args: renderArgs{JobID: id},
				InsertOpts: &river.InsertOpts{Queue: queueRender, MaxAttempts: left, ScheduledAt: created}}})
			if ierr != nil {
				return ierr
			}
			n, err = tx.exec(ctx, `UPDATE outprint_jobs SET state = 'queued', phase = '', attempt_base = attempts,
					river_job_id = $2, last_error = $3, heartbeat_at = NULL
				WHERE id = $1 AND state = $7 AND river_job_id = $4 AND attempts = $5 AND heartbeat_at < $6`,
				id, ids[0], errLeaseLost.Error(), f.riverID, f.attempt, cutoff, state)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return errLeaseRenewed
		}
		if exhausted {
			if err := s.scheduleWebhook(ctx, tx, id, now); err != nil {
				return err
			}
		}
		// The old River job stays River's until its worker answers or
		// River's rescuer finds it; cancelling it tells a live worker to
		// stop and makes sure it is never retried.
		return tx.cancel(ctx, f.riverID)
	})
	if errors.Is(err, errLeaseRenewed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s.cfg.Observer != nil {
		if exhausted {
			s.cfg.Observer.Finished(StateFailed, CodeExhausted, 0)
		} else {
			s.cfg.Observer.Retried(CodeLeaseExpired)
		}
	}
	return true, nil
}
