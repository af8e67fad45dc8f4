package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testsignal"
)

// Service accepts, runs and answers for jobs. Create it with New, Start it
// to run workers and maintenance, Stop it to drain. Submit, Get, Result,
// Cancel and List work before Start too (an insert-only gateway never needs
// workers of its own, but should Start for retention and rescue).
type Service struct {
	db       *DB
	store    Store
	renderer Renderer
	cfg      Config
	q        backend

	// running maps the ids of jobs this process renders to the cancel
	// function of their render context, so that Cancel reaches a render in
	// this process at once rather than at the watcher's next poll.
	running sync.Map // string → *runningJob
	// acc group-commits acceptance (accept.go).
	acc acceptor
	// stopping is set by Stop: a job whose context ends while it is set is
	// given back to the queue instead of failed.
	stopping atomic.Bool
	// hosts bounds the webhook deliveries in flight per receiver host.
	hosts hostLimiter
	// tenants bounds them per tenant.
	tenants tenantLimiter
	// bursts orders the deliveries to a host sent many at once after
	// everybody else's (webhookBacklogPriority).
	bursts hostBursts

	// TestSignals are the service's events for tests; they do nothing
	// unless a test calls their Init.
	TestSignals TestSignals
}

// TestSignals are the job service's events a test can wait on (package
// testsignal) instead of sleeping or polling.
type TestSignals struct {
	// Claimed is a job's id when an attempt claimed it: its row is
	// running, with this attempt's lease.
	Claimed testsignal.Signal[string]
	// Settled is a job's id when an attempt ended, whatever it wrote:
	// succeeded, failed, cancelled, given back or left for a retry.
	Settled testsignal.Signal[string]
	// Swept is what a sweep removed, when one ended.
	Swept testsignal.Signal[SweepResult]
}

// Init makes every signal record its events for tb.
func (ts *TestSignals) Init(tb testsignal.TB) {
	ts.Claimed.Init(tb)
	ts.Settled.Init(tb)
	ts.Swept.Init(tb)
}

type runningJob struct {
	cancel context.CancelCauseFunc
	// fence is the attempt's lease (lease.go), set by its claim; written
	// and read by the attempt's own goroutine only.
	fence fence
}

// errCancelled is the cause of a render context cancelled by Cancel.
var errCancelled = errors.New("job cancelled")

// errJobTimeout is the cause of a render context that ran out of
// JobTimeout.
var errJobTimeout = errors.New("job timeout")

// New returns a Service on db (migrated) and st. A nil renderer makes an
// insert-only Service: it accepts and answers for jobs and runs retention,
// but renders nothing (the `gateway` role).
func New(db *DB, st Store, r Renderer, cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Service{db: db, store: st, renderer: r, cfg: cfg}

	workers := river.NewWorkers()
	river.AddWorker(workers, &renderWorker{s: s})
	river.AddWorker(workers, &sweepWorker{s: s})
	// The delivery worker is registered even without a Sender: River
	// refuses to insert a job of a kind it does not know, and settling a
	// job inserts its delivery whoever will make it.
	river.AddWorker(workers, &webhookWorker{s: s})
	river.AddWorker(workers, &leaseWorker{s: s})
	queues := map[string]river.QueueConfig{queueMaintenance: {MaxWorkers: 1}, queueLease: {MaxWorkers: 1}}
	if r != nil {
		queues[queueRender] = river.QueueConfig{MaxWorkers: cfg.MaxWorkers}
	}
	if cfg.Webhooks.Sender != nil {
		queues[queueWebhook] = river.QueueConfig{MaxWorkers: cfg.Webhooks.MaxWorkers}
	}
	rc := &river.Config{
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           cfg.attemptLimit(),
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          cfg.MaxAttempts,
		RetryPolicy:          backoff{base: cfg.RetryBase, max: cfg.RetryMax},
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		Logger:               riverLogger(cfg.Logger),
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(
			river.PeriodicInterval(cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return sweepArgs{}, &river.InsertOpts{Queue: queueMaintenance, MaxAttempts: 1}
			},
			&river.PeriodicJobOpts{ID: "outprint_sweep", RunOnStart: true},
		), river.NewPeriodicJob(
			river.PeriodicInterval(cfg.LeaseCheck),
			func() (river.JobArgs, *river.InsertOpts) {
				return leaseArgs{}, &river.InsertOpts{Queue: queueLease, MaxAttempts: 1}
			},
			&river.PeriodicJobOpts{ID: "outprint_lease"},
		)},
	}
	q, err := newBackend(db, rc)
	if err != nil {
		return nil, err
	}
	s.q = q
	return s, nil
}

// Start starts River: the render workers (when the Service has a renderer)
// and the maintenance River runs on its elected leader (rescue of jobs whose
// worker died, retries, the periodic sweep). It returns at once; Stop ends
// it.
func (s *Service) Start(ctx context.Context) error {
	if err := s.q.start(ctx); err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	return nil
}

// Stop drains: it stops claiming jobs and waits for running renders until
// ctx ends; renders still running then are cancelled and their jobs given
// back to the queue (state queued, no attempt used) for the next process.
func (s *Service) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	err := s.q.stop(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return fmt.Errorf("stop jobs: %w", err)
	}
	// The grace period is over: cancel what still runs. Workers return
	// within moments (their renders are killed through the context), and
	// StopAndCancel waits for their jobs to be written back.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := s.q.stopAndCancel(hctx); err != nil {
		return fmt.Errorf("stop jobs: %w", err)
	}
	return nil
}

// now is the service's time (Config.Clock), at the precision the
// databases keep.
func (s *Service) now() time.Time { return s.cfg.Clock.Now().UTC().Truncate(time.Microsecond) }

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

func validateInput(in Input) error {
	if in.Tenant == "" || in.User == "" {
		return errors.New("submit: tenant and user are required")
	}
	maxBytes := limits.MaxMarkdownBytes
	if in.Outline != nil && in.Outline.Parts > 1 {
		// A collection: each document was bounded at acceptance.
		maxBytes = limits.MaxCollectionBytes
	}
	if len(in.Markdown) > maxBytes {
		return limits.TooLargeThan(int64(len(in.Markdown)), int64(maxBytes))
	}
	if in.Form != nil && (len(in.Form.PDF) == 0 || in.Outline != nil || len(in.Markdown) > 0) {
		return errors.New("submit: a forms job takes a PDF and values only")
	}
	if in.Office != nil && (len(in.Office.Doc) == 0 || in.Office.Format == "" || in.Form != nil || in.Outline != nil || len(in.Markdown) > 0) {
		return errors.New("submit: an office job takes a document and its format only")
	}
	if in.Office != nil && len(in.Office.Doc) > limits.MaxOfficeBytes {
		return limits.TooLargeThan(int64(len(in.Office.Doc)), limits.MaxOfficeBytes)
	}
	if in.Outline != nil && in.Outline.DocumentID == "" {
		return errors.New("submit: outline source without document id")
	}
	if err := validateCallback(in.Callback); err != nil {
		return err
	}
	return validateKey(in.IdempotencyKey)
}

// validateKey refuses an Idempotency-Key that is not 1 to
// maxIdempotencyKey visible ASCII characters ("" is no key).
func validateKey(k string) error {
	ok := len(k) <= maxIdempotencyKey
	for i := 0; ok && i < len(k); i++ {
		ok = k[i] > 0x20 && k[i] < 0x7f
	}
	if ok {
		return nil
	}
	return limits.Invalid(limits.Problem{
		Field: "Idempotency-Key", Source: limits.SourceRequest, Code: limits.CodeInvalid,
		Message: fmt.Sprintf("the Idempotency-Key header must be 1 to %d visible ASCII characters", maxIdempotencyKey),
	})
}

// Submit accepts a job: it stores the input under jobs/{id}/ and then,
// in one durable transaction, records the idempotency key, inserts the
// River job (args: the id only) and the job row; concurrent Submits share
// that transaction (group commit, accept.go). When Submit returns a job, it
// is durable; when it returns an error, no job exists and the input was
// removed (or, after a crash, is left for the sweep). A repeated
// (tenant, key) with the same digest returns the original job and created
// false; with another digest ErrIdempotencyMismatch. Client-facing problems
// (Markdown too large, malformed key) are *limits.Error.
func (s *Service) Submit(ctx context.Context, in Input) (job Job, created bool, err error) {
	if err := validateInput(in); err != nil {
		return Job{}, false, err
	}
	digest := in.Digest
	if digest == "" {
		digest = RequestDigest(in)
	}
	if in.IdempotencyKey != "" {
		if job, err := s.byKey(ctx, in.Tenant, in.IdempotencyKey, digest); !errors.Is(err, ErrNotFound) {
			return job, false, err
		}
	}

	u, err := uuid.NewV7()
	if err != nil {
		return Job{}, false, fmt.Errorf("submit: job id: %w", err)
	}
	now := s.now()
	job = Job{
		ID: u.String(), Tenant: in.Tenant, User: in.User, Name: in.Name,
		State: StateQueued, CreatedAt: now, ExpiresAt: now.Add(s.cfg.TTL), Source: SourceMarkdown,
	}
	if in.Outline != nil {
		job.Source = SourceOutline
		job.OutlineDocumentID = in.Outline.DocumentID
	}
	keys := Keys{job.ID}
	manifest, err := s.storeInput(ctx, keys, in)
	if err != nil {
		s.discardInput(ctx, keys)
		if errors.Is(err, store.ErrNoSpace) {
			// The operator's to fix, and a retry later succeeds: the
			// client is told so (507 with Retry-After), not "internal".
			return Job{}, false, fmt.Errorf("submit %s: store input: %w (%w)", job.ID, limits.NoSpace(), err)
		}
		return Job{}, false, fmt.Errorf("submit %s: store input: %w", job.ID, err)
	}
	s.failpoint(FailAfterInputStore)

	req := &acceptReq{job: job, digest: digest, key: in.IdempotencyKey, manifest: manifest, callback: in.Callback, bytes: inputBytes(in)}
	s.accept(ctx, req)
	if req.err != nil || req.keyTaken {
		s.discardInput(ctx, keys)
	}
	if req.err != nil {
		return Job{}, false, fmt.Errorf("submit %s: %w", job.ID, req.err)
	}
	if req.keyTaken {
		// A concurrent request with the same key committed first.
		job, err := s.byKey(ctx, in.Tenant, in.IdempotencyKey, digest)
		return job, false, err
	}
	s.failpoint(FailAfterJobCreate)
	if in.Callback != nil {
		job.Webhook = &WebhookStatus{State: WebhookPending}
	}
	return job, true, nil
}

// byKey returns the job recorded for (tenant, key), ErrIdempotencyMismatch
// when it was recorded with another digest, or ErrNotFound.
func (s *Service) byKey(ctx context.Context, tenant, key, digest string) (Job, error) {
	var id, recorded string
	err := s.db.pool().queryRow(ctx, `SELECT job_id, request_digest FROM outprint_idempotency WHERE tenant = $1 AND key = $2`,
		tenant, key).Scan(&id, &recorded)
	if errors.Is(err, errNoRows) {
		return Job{}, ErrNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("idempotency key: %w", err)
	}
	if recorded != digest {
		return Job{}, ErrIdempotencyMismatch
	}
	job, err := s.Get(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		// The key outlived its job row (both go after RowRetention);
		// report the conflict rather than silently making a new job.
		return Job{}, fmt.Errorf("idempotency key %q names a deleted job: %w", key, ErrIdempotencyMismatch)
	}
	return job, err
}

// storeInput writes the input files and returns the manifest (JSON) that
// the job row records.
func (s *Service) storeInput(ctx context.Context, k Keys, in Input) (string, error) {
	m := manifest{Version: 1, Name: in.Name, Metadata: len(in.Metadata) > 0, Outline: in.Outline, Form: in.Form != nil}
	objects := map[string][]byte{k.Document(): in.Markdown}
	if m.Form {
		objects = map[string][]byte{k.FormPDF(): in.Form.PDF, k.FormValues(): in.Form.Values}
	}
	if in.Office != nil {
		m.Office = &manifestOffice{Format: in.Office.Format}
		if len(in.Office.Options) > 0 {
			m.Office.Options = in.Office.Options
		}
		objects = map[string][]byte{k.Office(): in.Office.Doc}
	}
	if m.Metadata {
		objects[k.Metadata()] = in.Metadata
	}
	names := make([]string, 0, len(in.Assets))
	for name := range in.Assets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		key := k.Asset(name)
		if _, dup := objects[key]; dup {
			return "", fmt.Errorf("assets %q and another name map to the same key", name)
		}
		objects[key] = in.Assets[name]
		m.Assets = append(m.Assets, manifestAsset{Name: name, Key: key, Size: len(in.Assets[name])})
	}
	if c, ok := s.store.(creator); ok {
		if err := c.CreateAll(ctx, objects); err != nil {
			return "", err
		}
	} else {
		for _, key := range slices.Sorted(maps.Keys(objects)) {
			if err := s.store.Put(ctx, key, bytes.NewReader(objects[key])); err != nil {
				return "", err
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// discardInput removes an input whose job was not created. Failing here
// only leaves an orphan for the sweep.
func (s *Service) discardInput(ctx context.Context, k Keys) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.store.Delete(dctx, k.Prefix()); err != nil {
		s.cfg.Logger.Warn("jobs: discard input", "job", k.ID, "err", err)
	}
}

// loadInput reads a job's stored input.
func (s *Service) loadInput(ctx context.Context, job Job, attempt int) (RenderInput, error) {
	k := Keys{job.ID}
	var mj string
	if err := s.db.pool().queryRow(ctx, `SELECT input_manifest FROM outprint_jobs WHERE id = $1`, job.ID).Scan(&mj); err != nil {
		return RenderInput{}, fmt.Errorf("manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal([]byte(mj), &m); err != nil {
		return RenderInput{}, fmt.Errorf("manifest: %w", err)
	}
	var err error
	in := RenderInput{
		JobID: job.ID, Attempt: attempt, Tenant: job.Tenant, User: job.User, Name: m.Name,
		Outline: m.Outline, Assets: make(map[string][]byte, len(m.Assets)),
	}
	if m.Form {
		in.Form = &FormInput{}
		if in.Form.PDF, err = s.readAll(ctx, k.FormPDF()); err != nil {
			return RenderInput{}, err
		}
		if in.Form.Values, err = s.readAll(ctx, k.FormValues()); err != nil {
			return RenderInput{}, err
		}
		return in, nil
	}
	if m.Office != nil {
		in.Office = &OfficeInput{Format: m.Office.Format, Options: []byte(m.Office.Options)}
		if in.Office.Doc, err = s.readAll(ctx, k.Office()); err != nil {
			return RenderInput{}, err
		}
		return in, nil
	}
	if in.Markdown, err = s.readAll(ctx, k.Document()); err != nil {
		return RenderInput{}, err
	}
	if m.Metadata {
		if in.Metadata, err = s.readAll(ctx, k.Metadata()); err != nil {
			return RenderInput{}, err
		}
	}
	for _, a := range m.Assets {
		if in.Assets[a.Name], err = s.readAll(ctx, a.Key); err != nil {
			return RenderInput{}, err
		}
	}
	return in, nil
}

func (s *Service) readAll(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read only: ReadAll saw every error
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// jobColumns are the columns scanJob reads, in order.
const jobColumns = `id, tenant, user_id, name, state, phase, pages, attempts, error_code, error_message,
	created_at, started_at, finished_at, expires_at, source, outline_document_id`

func scanJob(r row) (Job, error) {
	var j Job
	err := r.Scan(&j.ID, &j.Tenant, &j.User, &j.Name, &j.State, &j.Phase, &j.Pages, &j.Attempts,
		&j.ErrorCode, &j.ErrorMessage, &j.CreatedAt, &j.StartedAt, &j.FinishedAt, &j.ExpiresAt,
		&j.Source, &j.OutlineDocumentID)
	if err != nil {
		return Job{}, err
	}
	j.CreatedAt = j.CreatedAt.UTC()
	j.ExpiresAt = j.ExpiresAt.UTC()
	for _, t := range []**time.Time{&j.StartedAt, &j.FinishedAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return j, nil
}

// parseID accepts only the canonical 36-character form, so that a path
// parameter in another spelling is simply not found.
func parseID(id string) (uuid.UUID, error) {
	if len(id) != 36 {
		return uuid.UUID{}, errors.New("not a job id")
	}
	return uuid.Parse(id)
}

// Get returns the job id of tenant. Another tenant's job, and an id that
// is no job id, are ErrNotFound.
func (s *Service) Get(ctx context.Context, tenant, id string) (Job, error) {
	if _, err := parseID(id); err != nil {
		return Job{}, ErrNotFound
	}
	job, err := scanJob(s.db.pool().queryRow(ctx, `SELECT `+jobColumns+` FROM outprint_jobs WHERE id = $1 AND tenant = $2`, id, tenant))
	if errors.Is(err, errNoRows) {
		return Job{}, ErrNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("get job %s: %w", id, err)
	}
	if job.Webhook, err = s.webhookStatus(ctx, id); err != nil {
		return Job{}, err
	}
	return job, nil
}

// load returns a job by id alone, for the worker.
func (s *Service) load(ctx context.Context, id string) (Job, error) {
	job, err := scanJob(s.db.pool().queryRow(ctx, `SELECT `+jobColumns+` FROM outprint_jobs WHERE id = $1`, id))
	if errors.Is(err, errNoRows) {
		return Job{}, ErrNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("load job %s: %w", id, err)
	}
	return job, nil
}

// Result opens the PDF of a succeeded job: ErrNotReady while the job is
// not succeeded (also when it failed or was cancelled), ErrExpired once its
// TTL passed. For Outline jobs the caller checks the reader's right to
// job.OutlineDocumentID before sending the body. The caller closes the
// reader.
func (s *Service) Result(ctx context.Context, tenant, id string) (io.ReadCloser, Job, error) {
	job, err := s.readable(ctx, tenant, id)
	if err != nil {
		return nil, job, err
	}
	rc, err := s.store.Get(ctx, Keys{id}.Result())
	if errors.Is(err, store.ErrNotFound) {
		return nil, job, ErrExpired
	}
	if err != nil {
		return nil, job, fmt.Errorf("result %s: %w", id, err)
	}
	return rc, job, nil
}

// readable returns job id of tenant when its result may be read: the
// errors of Get, ErrNotReady before it succeeded, ErrExpired after its
// retention.
func (s *Service) readable(ctx context.Context, tenant, id string) (Job, error) {
	job, err := s.Get(ctx, tenant, id)
	if err != nil {
		return Job{}, err
	}
	if job.State != StateSucceeded {
		return job, ErrNotReady
	}
	if !s.now().Before(job.ExpiresAt) {
		return job, ErrExpired
	}
	return job, nil
}

// Cancel cancels a queued or running job of tenant and returns it. A
// running render's context is cancelled at once when it runs in this
// process, and within CancelPoll when it runs in another. Cancelling a job
// that already ended changes nothing and returns it as it is.
func (s *Service) Cancel(ctx context.Context, tenant, id string) (Job, error) {
	if _, err := parseID(id); err != nil {
		return Job{}, ErrNotFound
	}
	now := s.now()
	cancelled := false
	err := s.q.inTx(ctx, true, func(tx txOps) error {
		var riverID *int64
		err := tx.queryRow(ctx, `UPDATE outprint_jobs SET state = 'cancelled', phase = '', finished_at = $3, expires_at = $4
			WHERE id = $1 AND tenant = $2 AND state IN ('queued', 'running') RETURNING river_job_id`,
			id, tenant, now, now.Add(s.cfg.TTL)).Scan(&riverID)
		if errors.Is(err, errNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		cancelled = true
		if err := s.scheduleWebhook(ctx, tx, id, now); err != nil {
			return err
		}
		if riverID != nil {
			return tx.cancel(ctx, *riverID)
		}
		return nil
	})
	if err != nil {
		return Job{}, fmt.Errorf("cancel job %s: %w", id, err)
	}
	if cancelled {
		if r, ok := s.running.Load(id); ok {
			r.(*runningJob).cancel(errCancelled)
		}
		if s.cfg.Observer != nil {
			s.cfg.Observer.Finished(StateCancelled, "", 0)
		}
	}
	return s.Get(ctx, tenant, id)
}

// Default and largest page of List.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// List returns tenant's most recent jobs, newest first; only user's when
// user is not empty. limit ≤ 0 means DefaultListLimit; it is capped at
// MaxListLimit.
func (s *Service) List(ctx context.Context, tenant, user string, limit int) ([]Job, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	q := `SELECT ` + jobColumns + ` FROM outprint_jobs WHERE tenant = $1 ORDER BY created_at DESC, id DESC LIMIT $2`
	args := []any{tenant, limit}
	if user != "" {
		q = `SELECT ` + jobColumns + ` FROM outprint_jobs WHERE tenant = $1 AND user_id = $3 ORDER BY created_at DESC, id DESC LIMIT $2`
		args = append(args, user)
	}
	rs, err := s.db.pool().query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rs.Close()
	var out []Job
	for rs.Next() {
		j, err := scanJob(rs)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// Stats are the job gauges of /metrics.
type Stats struct {
	// ByState counts the job rows in each state (all five states present).
	ByState map[string]int
	// OldestQueued is the age of the oldest queued job, 0 when none waits.
	OldestQueued time.Duration
}

// Stats counts jobs by state and measures the oldest queued job's age. A
// metrics collector calls it on scrape.
func (s *Service) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByState: map[string]int{StateQueued: 0, StateRunning: 0, StateSucceeded: 0, StateFailed: 0, StateCancelled: 0}}
	rs, err := s.db.pool().query(ctx, `SELECT state, count(*) FROM outprint_jobs GROUP BY state`)
	if err != nil {
		return st, fmt.Errorf("job stats: %w", err)
	}
	for rs.Next() {
		var state string
		var n int
		if err := rs.Scan(&state, &n); err != nil {
			rs.Close()
			return st, fmt.Errorf("job stats: %w", err)
		}
		st.ByState[state] = n
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return st, fmt.Errorf("job stats: %w", err)
	}
	var oldest time.Time
	err = s.db.pool().queryRow(ctx, `SELECT created_at FROM outprint_jobs WHERE state = 'queued' ORDER BY created_at LIMIT 1`).Scan(&oldest)
	switch {
	case errors.Is(err, errNoRows):
	case err != nil:
		return st, fmt.Errorf("job stats: %w", err)
	default:
		st.OldestQueued = max(0, s.now().Sub(oldest))
	}
	return st, nil
}

// failpoint calls the crash test's hook, which may kill the process here.
func (s *Service) failpoint(name string) {
	if s.cfg.Failpoint != nil {
		s.cfg.Failpoint(name)
	}
}

// backoff is the retry policy of transient failures: exponential from base,
// capped at max, with ±50 % jitter so that jobs failing together (a storage
// outage) do not retry together.
type backoff struct{ base, max time.Duration }

func (b backoff) NextRetry(job *rivertype.JobRow) time.Time {
	d := b.base
	for i := 1; i < job.Attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	jittered := d/2 + time.Duration(rand.Int64N(int64(d)+1))
	return time.Now().UTC().Add(jittered)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
