package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/worker"
)

// jobRuntime is the job service of one process with what it stands
// on: the database and the artifact store below the data folder.
type jobRuntime struct {
	db  *jobs.DB
	svc *jobs.Service
}

// jobStartTimeout bounds opening and migrating the database at startup: a
// database that does not answer is an operator's error to report, not a
// hang.
const jobStartTimeout = 30 * time.Second

// openJobs opens the job database named by the database setting, migrates
// it when it is SQLite (PostgreSQL is migrated by `outprint migrate`, run
// once per deployment rather than by every replica at start), and makes
// the job service: its workers render through renderer (worker.Jobs; nil
// for an insert-only gateway), each holding one admission slot while it
// renders, so jobs and synchronous renders share one budget (SPEC §7). The
// caller Starts it, Stops it (drain) and then closes the runtime.
func openJobs(ctx context.Context, cfg *config.Config, renderer jobs.Renderer, adm *admission.Controller, m *metrics.Metrics,
	wh jobs.WebhookConfig, failpoint func(string), log *slog.Logger) (*jobRuntime, error) {
	ctx, cancel := context.WithTimeout(ctx, jobStartTimeout)
	defer cancel()
	db, err := jobs.Open(ctx, databaseURL(cfg))
	if err != nil {
		return nil, fmt.Errorf("job database: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = db.Close() // the setup error is the one to report
		}
	}()
	if driver, _ := databaseDriver(cfg); driver == "sqlite" {
		if err := jobs.Migrate(ctx, db); err != nil {
			return nil, fmt.Errorf("migrate %s: %w", db, err)
		}
	}
	st, _, err := OpenStore(cfg)
	if err != nil {
		return nil, fmt.Errorf("job store: %w", err)
	}
	jc := jobsConfig(cfg)
	jc.MaxWorkers = adm.Stats().Slots
	jc.Budget = worker.NewBudget(adm)
	jc.Observer, jc.Webhooks, jc.Logger, jc.Failpoint = jobObserver{m}, wh, log, failpoint
	// A gateway (renderer nil) inserts jobs and answers for them; workers
	// render them.
	svc, err := jobs.New(db, st, renderer, jc)
	if err != nil {
		return nil, fmt.Errorf("job service: %w", err)
	}
	// A PostgreSQL database nobody migrated fails here, at startup,
	// rather than on the first job.
	if _, err := svc.Stats(ctx); err != nil {
		return nil, fmt.Errorf("job database %s is not ready (run `outprint migrate`): %w", db, err)
	}
	m.SetJobSource(cachedJobStats(svc, log))
	ok = true
	return &jobRuntime{db: db, svc: svc}, nil
}

// drain stops the job service (SPEC §7): it stops claiming at once, lets
// running renders finish until ctx ends, and gives every job still running
// or waiting for a slot back to the queue (jobs.Service.Stop cancels them
// when its context ends and waits a bounded time for them to be written
// back). It ends the wait early, without waiting for ctx, once admission
// is drained: then no job renders in this process any more, and the
// workers left are waiting for a slot that admission, closed for shutdown,
// will not give them.
func (jr *jobRuntime) drain(ctx context.Context, adm *admission.Controller, log *slog.Logger) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends when dctx does, at the latest when drain returns
		select {
		case <-adm.Drained():
			cancel()
		case <-dctx.Done():
		}
	}()
	if err := jr.svc.Stop(dctx); err != nil {
		log.Error("jobs: drain", "err", err)
	}
}

// close closes the database; call it after drain.
// After drain no write is pending, so a failed close loses nothing.
func (jr *jobRuntime) close() { _ = jr.db.Close() }

// jobObserver feeds package jobs' events into the Prometheus collectors.
type jobObserver struct{ m *metrics.Metrics }

func (o jobObserver) Started(queueDelay time.Duration) { o.m.ObserveJobQueueDelay(queueDelay) }

func (o jobObserver) Finished(state, code string, took time.Duration) {
	o.m.JobFinished(state, code)
	// A job's render held an admission slot like a synchronous one, so it
	// is recorded in the same histogram; a job cancelled before it
	// rendered has no duration to record.
	if took > 0 {
		result := "ok"
		switch state {
		case jobs.StateFailed:
			result = code
		case jobs.StateCancelled:
			result = "canceled"
		}
		o.m.ObserveRender(took, result)
	}
}

func (o jobObserver) Retried(string) { o.m.JobRetried() }

// jobStatsMaxAge is how long a scrape reuses the job counts: counting
// rows by state is a query over the whole table, and scrapes must stay
// cheap however many jobs there are.
const jobStatsMaxAge = 5 * time.Second

// jobStatsTimeout bounds the query behind one scrape.
const jobStatsTimeout = 2 * time.Second

// cachedJobStats returns the metrics source of the job gauges: the service's
// Stats, asked at most every jobStatsMaxAge. A failed query keeps the last
// figures.
func cachedJobStats(svc *jobs.Service, log *slog.Logger) func() metrics.JobStats {
	var (
		mu   sync.Mutex
		last metrics.JobStats
		at   time.Time
	)
	return func() metrics.JobStats {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < jobStatsMaxAge {
			return last
		}
		ctx, cancel := context.WithTimeout(context.Background(), jobStatsTimeout)
		defer cancel()
		st, err := svc.Stats(ctx)
		at = time.Now()
		if err != nil {
			log.Warn("jobs: stats for /metrics", "err", err)
			return last
		}
		last = metrics.JobStats{
			Queued: st.ByState[jobs.StateQueued], Running: st.ByState[jobs.StateRunning],
			Succeeded: st.ByState[jobs.StateSucceeded], Failed: st.ByState[jobs.StateFailed],
			Cancelled: st.ByState[jobs.StateCancelled], OldestQueued: st.OldestQueued,
		}
		return last
	}
}
