package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
	"riverqueue.com/riverui"
)

// Queue names. Renders and maintenance have their own queues so that a
// long render never delays retention, and retention never takes a render
// worker.
const (
	queueRender      = "outprint_render"
	queueMaintenance = "outprint_maintenance"
	// queueLease runs the lease check alone, so a long sweep never
	// delays taking back a dead worker's job.
	queueLease = "outprint_lease"
)

// renderArgs is the whole River payload of a render job: the job id.
// Everything else is in outprint_jobs and the store, so River rows stay
// tiny however large the document.
type renderArgs struct {
	JobID string `json:"job_id"`
}

func (renderArgs) Kind() string { return "outprint_render" }

// sweepArgs is the periodic retention job.
type sweepArgs struct{}

func (sweepArgs) Kind() string { return "outprint_sweep" }

// backend is River as the Service needs it, the same for both engines.
type backend interface {
	// inTx runs fn in one database transaction and commits when fn
	// returns nil. A durable commit survives power loss, not only a
	// crash of the process; acceptance asks for it (see DB for SQLite).
	inTx(ctx context.Context, durable bool, fn func(tx txOps) error) error
	start(ctx context.Context) error
	stop(ctx context.Context) error
	stopAndCancel(ctx context.Context) error
	// console makes River's web console on this client (console.go).
	console(prefix string, log *slog.Logger) (*riverui.Handler, error)
}

// txOps is one transaction: this package's SQL plus River's operations in
// the same transaction.
type txOps interface {
	querier
	// insertMany adds jobs and returns River's ids for them, in order.
	insertMany(ctx context.Context, params []river.InsertManyParams) ([]int64, error)
	// cancel cancels a River job (queued: at once; running: its worker is
	// notified).
	cancel(ctx context.Context, riverID int64) error
	// complete marks the running River job completed, atomically with the
	// row's success.
	complete(ctx context.Context, job *river.Job[renderArgs]) error
}

// riverBackend is backend for one River driver. TTx is the driver's
// transaction type (*sql.Tx for SQLite, pgx.Tx for PostgreSQL).
type riverBackend[TTx any, TDriver riverdriver.Driver[TTx]] struct {
	client *river.Client[TTx]
	// begin opens a transaction and returns it with a querier on it and
	// its commit and rollback.
	begin func(ctx context.Context, durable bool) (TTx, querier, func(context.Context) error, func(context.Context), error)
}

func newBackend(db *DB, cfg *river.Config) (backend, error) {
	if db.dialect == dialectSQLite {
		client, err := river.NewClient(riversqlite.New(db.sqlite), cfg)
		if err != nil {
			return nil, fmt.Errorf("river client: %w", err)
		}
		return &riverBackend[*sql.Tx, *riversqlite.Driver]{
			client: client,
			begin:  db.beginSQLite,
		}, nil
	}
	client, err := river.NewClient(riverpgxv5.New(db.pg), cfg)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &riverBackend[pgx.Tx, *riverpgxv5.Driver]{
		client: client,
		// PostgreSQL commits durably in any case (synchronous_commit).
		begin: func(ctx context.Context, _ bool) (pgx.Tx, querier, func(context.Context) error, func(context.Context), error) {
			tx, err := db.pg.Begin(ctx)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			return tx, pgxQuerier{tx}, tx.Commit, func(ctx context.Context) { _ = tx.Rollback(ctx) }, nil
		},
	}, nil
}

func (b *riverBackend[TTx, TDriver]) inTx(ctx context.Context, durable bool, fn func(tx txOps) error) error {
	tx, q, commit, rollback, err := b.begin(ctx, durable)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(&riverTx[TTx, TDriver]{querier: q, tx: tx, client: b.client}); err != nil {
		// Rollback must run even when ctx is done, or a pooled
		// connection would stay in the transaction.
		rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := commit(ctx); err != nil {
		rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (b *riverBackend[TTx, TDriver]) start(ctx context.Context) error { return b.client.Start(ctx) }
func (b *riverBackend[TTx, TDriver]) stop(ctx context.Context) error  { return b.client.Stop(ctx) }
func (b *riverBackend[TTx, TDriver]) stopAndCancel(ctx context.Context) error {
	return b.client.StopAndCancel(ctx)
}

type riverTx[TTx any, TDriver riverdriver.Driver[TTx]] struct {
	querier
	tx     TTx
	client *river.Client[TTx]
}

func (t *riverTx[TTx, TDriver]) insertMany(ctx context.Context, params []river.InsertManyParams) ([]int64, error) {
	res, err := t.client.InsertManyTx(ctx, t.tx, params)
	if err != nil {
		return nil, fmt.Errorf("river insert: %w", err)
	}
	if len(res) != len(params) {
		return nil, fmt.Errorf("river insert: %d results for %d jobs", len(res), len(params))
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids, nil
}

func (t *riverTx[TTx, TDriver]) cancel(ctx context.Context, riverID int64) error {
	if _, err := t.client.JobCancelTx(ctx, t.tx, riverID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
		return fmt.Errorf("river cancel %d: %w", riverID, err)
	}
	return nil
}

func (t *riverTx[TTx, TDriver]) complete(ctx context.Context, job *river.Job[renderArgs]) error {
	if _, err := river.JobCompleteTx[TDriver](ctx, t.tx, job); err != nil {
		return fmt.Errorf("river complete %d: %w", job.ID, err)
	}
	return nil
}
