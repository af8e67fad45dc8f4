package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// Acceptance is group-committed: concurrent Submits whose inputs are stored
// hand their rows to one leader, which commits them all in one durable
// transaction (one log sync, a handful of statements) and wakes the others.
// A durable commit costs a device flush, and SQLite has a single writer, so
// committing one job per transaction caps acceptance at the flush rate;
// batching lifts that cap on both engines while each Submit still returns
// only after its own row is durable.
//
// There is no goroutine for this: the first Submit to find no leader leads,
// commits what is waiting, and hands leadership to the next waiter when it
// is done, so a leader never serves more than one batch beyond its own.

// maxAcceptBatch bounds one transaction (13 parameters a row stays far
// below both engines' parameter limits).
const maxAcceptBatch = 128

// acceptTimeout bounds one batch transaction. A batch serves several
// clients, so it does not run on any one client's context.
const acceptTimeout = 30 * time.Second

// acceptReq is one job waiting to be committed.
type acceptReq struct {
	job      Job
	digest   string
	key      string
	manifest string
	callback *Callback
	bytes    int64 // stored_bytes: the input's size

	// Set by the leader before done closes.
	keyTaken bool
	err      error
	done     chan struct{}
	// lead is signalled when this waiter becomes the leader; woken
	// (guarded by acceptor.mu) records that it was.
	lead  chan struct{}
	woken bool
}

type acceptor struct {
	mu      sync.Mutex
	waiting []*acceptReq
	// leading is whether a batch is being committed. One leader at a time,
	// on both engines: SQLite has a single writer anyway, and on
	// PostgreSQL bench/jobs accepted about 1,300 jobs/s with one leader,
	// 1,100 with two and 800 with four — parallel batches are smaller,
	// so they cost more round trips and commits per job on a machine
	// whose cores the HTTP handlers, the store and PostgreSQL share.
	leading bool
}

// accept commits req (in a batch with others) and returns its outcome.
func (s *Service) accept(ctx context.Context, req *acceptReq) {
	req.done = make(chan struct{})
	req.lead = make(chan struct{}, 1)
	a := &s.acc
	a.mu.Lock()
	a.waiting = append(a.waiting, req)
	if a.leading {
		a.mu.Unlock()
		// The outcome is waited for whatever ctx says: once handed over,
		// the job may commit, and the caller must know whether it did.
		select {
		case <-req.done:
			return
		case <-req.lead:
			// The leader that woke us handed its place on: leading stays true.
		}
		a.mu.Lock()
	} else {
		a.leading = true
	}
	// Take the oldest waiters, ours among them (a woken waiter is taken
	// by its own batch only, so that it is never left waiting).
	batch := []*acceptReq{req}
	rest := a.waiting[:0]
	for _, w := range a.waiting {
		switch {
		case w == req:
		case !w.woken && len(batch) < maxAcceptBatch:
			batch = append(batch, w)
		default:
			rest = append(rest, w)
		}
	}
	a.waiting = rest
	a.mu.Unlock()

	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), acceptTimeout)
	s.commitAccepted(bctx, batch)
	cancel()

	a.mu.Lock()
	// Hand over: the first waiter that no other leader woke leads the
	// next batch in our place.
	handed := false
	for _, w := range a.waiting {
		if !w.woken {
			w.woken = true
			w.lead <- struct{}{}
			handed = true
			break
		}
	}
	if !handed {
		a.leading = false
	}
	a.mu.Unlock()
	for _, r := range batch {
		if r != req {
			close(r.done)
		}
	}
}

// commitAccepted commits a batch; when the batch transaction fails, each
// request is committed alone, so that one bad request fails only itself.
func (s *Service) commitAccepted(ctx context.Context, batch []*acceptReq) {
	err := s.q.inTx(ctx, true, func(tx txOps) error { return s.insertAccepted(ctx, tx, batch) })
	if err == nil {
		return
	}
	if len(batch) == 1 {
		batch[0].err = err
		return
	}
	for _, r := range batch {
		r.keyTaken = false
		r.err = s.q.inTx(ctx, true, func(tx txOps) error { return s.insertAccepted(ctx, tx, []*acceptReq{r}) })
	}
}

// insertAccepted writes the idempotency keys, River jobs and job rows of a
// batch in tx. A request whose key another request (of this batch or
// another) took first is marked keyTaken and inserts nothing.
func (s *Service) insertAccepted(ctx context.Context, tx txOps, batch []*acceptReq) error {
	live := make([]*acceptReq, 0, len(batch))
	for _, r := range batch {
		if r.key == "" {
			live = append(live, r)
			continue
		}
		n, err := tx.exec(ctx, `INSERT INTO outprint_idempotency (tenant, key, request_digest, job_id, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, key) DO NOTHING`,
			r.job.Tenant, r.key, r.digest, r.job.ID, r.job.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert idempotency key: %w", err)
		}
		if n == 0 {
			r.keyTaken = true
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(live))
	for i, r := range live {
		params[i] = river.InsertManyParams{Args: renderArgs{JobID: r.job.ID}, InsertOpts: &river.InsertOpts{Queue: queueRender, MaxAttempts: s.cfg.MaxAttempts}}
	}
	riverIDs, err := tx.insertMany(ctx, params)
	if err != nil {
		return err
	}
	const cols = 14
	var q strings.Builder
	q.WriteString(`INSERT INTO outprint_jobs (id, tenant, user_id, name, state, max_attempts,
		source, outline_document_id, digest, input_manifest, river_job_id, created_at, expires_at, stored_bytes) VALUES `)
	args := make([]any, 0, cols*len(live))
	for i, r := range live {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(")
		for c := range cols {
			if c > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "$%d", i*cols+c+1)
		}
		q.WriteString(")")
		j := r.job
		args = append(args, j.ID, j.Tenant, j.User, j.Name, j.State, s.cfg.MaxAttempts,
			j.Source, j.OutlineDocumentID, r.digest, r.manifest, riverIDs[i], j.CreatedAt, j.ExpiresAt, r.bytes)
	}
	if _, err := tx.exec(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	return insertCallbacks(ctx, tx, live)
}
