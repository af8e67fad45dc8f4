package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
)

// sweepWorker runs Sweep as River's periodic job, on the elected leader
// only, so that several processes on one database do not sweep at once.
type sweepWorker struct {
	river.WorkerDefaults[sweepArgs]
	s *Service
}

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[sweepArgs]) error {
	res, err := w.s.Sweep(ctx)
	if res != (SweepResult{}) {
		w.s.cfg.Logger.Info("jobs: sweep", "artifacts", res.Artifacts, "rows", res.Rows, "lost", res.Lost, "orphans", res.Orphans)
	}
	return err
}

// SweepResult counts what one Sweep did.
type SweepResult struct {
	// Artifacts is the number of jobs whose input and result were deleted.
	Artifacts int
	// Rows is the number of job rows deleted.
	Rows int
	// Lost is the number of jobs failed because their River job ended
	// without them (a worker lost on the last attempt).
	Lost int
	// Orphans is the number of input folders deleted that had no job row.
	Orphans int
}

// sweepBatch bounds the rows one query of the sweep handles, so that a
// large backlog is worked off in short transactions.
const sweepBatch = 500

// Sweep is the retention task, run every SweepInterval by River's periodic
// job and callable directly (e.g. by an operator command):
//
//   - jobs queued or running whose River job ended or vanished (the rescuer
//     discarded a job whose worker died on its last attempt) become failed
//     with CodeExhausted;
//   - ended jobs past ExpiresAt lose their input and result;
//   - job rows older than RowRetention whose files are gone are deleted,
//     with idempotency keys older than that;
//   - input folders without a job row (a crash between storing the input
//     and committing the row) are deleted once older than TTL.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	var err error
	if res.Lost, err = s.sweepLost(ctx); err != nil {
		return res, err
	}
	if res.Artifacts, err = s.sweepArtifacts(ctx); err != nil {
		return res, err
	}
	if res.Rows, err = s.sweepRows(ctx); err != nil {
		return res, err
	}
	if res.Orphans, err = s.sweepOrphans(ctx); err != nil {
		return res, err
	}
	s.TestSignals.Swept.Signal(res)
	return res, nil
}

func (s *Service) ids(ctx context.Context, query string, args ...any) ([]string, error) {
	rs, err := s.db.pool().query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var ids []string
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rs.Err()
}

func (s *Service) sweepLost(ctx context.Context) (int, error) {
	ids, err := s.ids(ctx, `SELECT j.id FROM outprint_jobs j LEFT JOIN river_job r ON r.id = j.river_job_id
		WHERE j.state IN ('queued', 'running') AND (r.id IS NULL OR r.state IN ('completed', 'cancelled', 'discarded'))
		LIMIT $1`, sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("sweep lost jobs: %w", err)
	}
	n := 0
	for _, id := range ids {
		now := s.now()
		var c int64
		err := s.q.inTx(ctx, false, func(tx txOps) error {
			var err error
			c, err = tx.exec(ctx, `UPDATE outprint_jobs SET state = 'failed', phase = '', error_code = $2,
					error_message = $3, finished_at = $4, expires_at = $5
				WHERE id = $1 AND state IN ('queued', 'running')`,
				id, CodeExhausted, "the job's worker stopped and its attempts are used up", now, now.Add(s.cfg.TTL))
			if err != nil || c == 0 {
				return err
			}
			return s.scheduleWebhook(ctx, tx, id, now)
		})
		if err != nil {
			return n, fmt.Errorf("sweep lost job %s: %w", id, err)
		}
		if c > 0 {
			n++
			if s.cfg.Observer != nil {
				s.cfg.Observer.Finished(StateFailed, CodeExhausted, 0)
			}
		}
	}
	return n, nil
}

func (s *Service) sweepArtifacts(ctx context.Context) (int, error) {
	n := 0
	for {
		ids, err := s.ids(ctx, `SELECT id FROM outprint_jobs
			WHERE files_deleted = FALSE AND expires_at <= $1 AND state IN ('succeeded', 'failed', 'cancelled')
			ORDER BY expires_at LIMIT $2`, s.now(), sweepBatch)
		if err != nil {
			return n, fmt.Errorf("sweep artifacts: %w", err)
		}
		for _, id := range ids {
			if err := s.store.Delete(ctx, Keys{id}.Prefix()); err != nil {
				return n, fmt.Errorf("sweep artifacts of %s: %w", id, err)
			}
			if _, err := s.db.pool().exec(ctx, `UPDATE outprint_jobs SET files_deleted = TRUE WHERE id = $1`, id); err != nil {
				return n, fmt.Errorf("sweep artifacts of %s: %w", id, err)
			}
			n++
		}
		if len(ids) < sweepBatch {
			return n, nil
		}
	}
}

func (s *Service) sweepRows(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.cfg.RowRetention)
	if _, err := s.db.pool().exec(ctx, `DELETE FROM outprint_idempotency WHERE created_at < $1`, cutoff); err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	n, err := s.db.pool().exec(ctx, `DELETE FROM outprint_jobs WHERE created_at < $1 AND files_deleted = TRUE`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("sweep job rows: %w", err)
	}
	// A callback goes with its job's row.
	if _, err := s.db.pool().exec(ctx, `DELETE FROM outprint_webhooks WHERE created_at < $1
		AND NOT EXISTS (SELECT 1 FROM outprint_jobs j WHERE j.id = outprint_webhooks.job_id)`, cutoff); err != nil {
		return 0, fmt.Errorf("sweep webhooks: %w", err)
	}
	return int(n), nil
}

func (s *Service) sweepOrphans(ctx context.Context) (int, error) {
	l, ok := s.store.(Lister)
	if !ok {
		return 0, nil
	}
	names, err := l.List(ctx, "jobs")
	if err != nil {
		return 0, fmt.Errorf("sweep orphans: %w", err)
	}
	cutoff := s.now().Add(-s.cfg.TTL)
	n := 0
	for _, name := range names {
		created, ok := idTime(name)
		if !ok || !created.Before(cutoff) {
			continue
		}
		var count int
		if err := s.db.pool().queryRow(ctx, `SELECT count(*) FROM outprint_jobs WHERE id = $1`, name).Scan(&count); err != nil {
			return n, fmt.Errorf("sweep orphan %s: %w", name, err)
		}
		if count > 0 {
			continue
		}
		if err := s.store.Delete(ctx, Keys{name}.Prefix()); err != nil && !errors.Is(err, context.Canceled) {
			return n, fmt.Errorf("sweep orphan %s: %w", name, err)
		}
		n++
	}
	return n, nil
}
