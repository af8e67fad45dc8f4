// Package jobs runs durable render jobs (SPEC §5 "Jobs"): acceptance that
// survives a crash, tenant-scoped idempotency keys, bounded concurrency,
// observable state and progress, cancellation that reaches a running render,
// classified retries, and retention.
//
// The queue is River (github.com/riverqueue/river) on SQLite for the embedded
// default or on PostgreSQL, through one code path: the Service talks to a
// small backend that is the same generic code instantiated for River's
// riversqlite (database/sql) and riverpgxv5 (pgx) drivers, and its own SQL is
// written once for both engines.
//
// Where River does not cover the contract, the package keeps its own tables
// (migrations/): outprint_jobs is the public record of a job — state,
// phase, pages, attempts, error code, times — and outprint_idempotency holds
// idempotency keys with their request digest. River's job arguments carry
// only the job id; inputs and results live in the artifact store under
// deterministic keys (Keys), written before the job row commits.
//
// Life of a job:
//
//	Submit   store input (jobs/{id}/…) → one durable transaction,
//	         shared by concurrent Submits: idempotency rows, River jobs
//	         (InsertManyTx), outprint_jobs rows (queued) → commit
//	work     River claims → budget slot → row running (phase preparing) →
//	         Renderer with progress beats → result.pdf stored → one
//	         transaction: row succeeded + River job completed (JobCompleteTx)
//	Cancel   one transaction: row cancelled + River job cancelled; the
//	         running render's context is cancelled at once in this process,
//	         and within CancelPoll by the worker's watcher elsewhere
//	Sweep    periodic: delete artifacts after TTL, rows after RowRetention,
//	         fail jobs whose River job was lost, remove orphaned inputs
package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// Job states (SPEC §5).
const (
	StateQueued    = "queued"
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Progress phases (SPEC §5).
const (
	PhasePreparing = "preparing"
	PhaseRendering = "rendering"
	PhasePackaging = "packaging"
)

// Sources of a job's document.
const (
	SourceMarkdown = "markdown"
	SourceOutline  = "outline"
)

// Error codes this package sets on failed jobs in addition to those of
// limits.Error.
const (
	// CodeExhausted marks a job whose transient failures used up its
	// attempts, or whose worker was lost on its last attempt.
	CodeExhausted = "retries_exhausted"
	// CodeInputMissing marks a job whose stored input disappeared before it
	// ran (deleted by hand or by a retention misconfiguration).
	CodeInputMissing = "input_missing"
	// CodeLeaseExpired is the retry reason of a job whose running attempt
	// stopped beating and was taken back by the leader (lease.go).
	CodeLeaseExpired = "lease_expired"
)

// Sentinel errors. The HTTP layer maps them: ErrNotFound → 404,
// ErrIdempotencyMismatch → 409 idempotency_mismatch, ErrNotReady → 409,
// ErrExpired → 410.
var (
	ErrNotFound            = errors.New("job not found")
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	ErrNotReady            = errors.New("job result not ready")
	ErrExpired             = errors.New("job result expired")
)

// Job is the public view of one job.
type Job struct {
	ID     string
	Tenant string
	User   string
	// Name is the document's file name as submitted, if any.
	Name  string
	State string
	// Phase and Pages are the last progress beat; Phase is empty before
	// the first attempt starts and after the job ended.
	Phase    string
	Pages    int
	Attempts int
	// ErrorCode and ErrorMessage are set for failed jobs only. The message
	// is client-facing (from a limits.Error) or a generic text; internal
	// error text stays in logs.
	ErrorCode    string
	ErrorMessage string
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	// ExpiresAt is when the job's input and result are deleted: TTL after
	// creation while it waits or runs, TTL after it finished once it did.
	ExpiresAt time.Time
	// Source is SourceMarkdown or SourceOutline.
	Source string
	// OutlineDocumentID is set for Outline jobs; the HTTP layer re-checks
	// the downloading reader's right to this document before Result.
	OutlineDocumentID string
	// Webhook is the delivery of the job's callback (webhook.go), nil when
	// the job has none. Get and Cancel fill it; List does not.
	Webhook *WebhookStatus
}

// Terminal reports whether the job has ended (succeeded, failed or
// cancelled).
func (j Job) Terminal() bool { return terminal(j.State) }

func terminal(state string) bool {
	return state == StateSucceeded || state == StateFailed || state == StateCancelled
}

// Input is one job as accepted. Markdown, Metadata and Assets are what the
// render needs; for Outline jobs they were fetched at acceptance with the
// reader's cookie, which is never stored.
type Input struct {
	Tenant string
	User   string
	// Name is the document's file name (e.g. "memo.md"), optional.
	Name     string
	Markdown []byte
	// Metadata is the optional JSON Binding.
	Metadata []byte
	// Assets maps the path or URL the Markdown uses to the image bytes.
	Assets map[string][]byte
	// Outline is set for Outline documents.
	Outline *OutlineSource
	// Form is set for a form to fill and flatten (a forms job); Markdown,
	// Metadata and Assets are then empty.
	Form *FormInput
	// Office is set for an Office document to convert (an office job);
	// Markdown, Metadata and Assets are then empty.
	Office *OfficeInput
	// IdempotencyKey is the client's Idempotency-Key header, if any.
	IdempotencyKey string
	// Digest identifies the request for idempotency. When empty, Submit
	// computes it from the canonical request (RequestDigest).
	Digest string
	// Callback, when set, receives the job's status document once it
	// ends (webhook.go).
	Callback *Callback
}

// OutlineSource describes an Outline document fetched at acceptance. Its
// text goes in Input.Markdown and its images in Input.Assets, keyed by the
// URL the Markdown uses.
type OutlineSource struct {
	// DocumentID is the document's id, or "collection:<id>" for a whole
	// collection printed as one document (Parts documents joined).
	DocumentID string
	// Parts is how many documents a collection's Markdown joins (0 for one
	// document): it raises the Markdown bound, see render.Request.Parts.
	Parts int
	// URL is Outline's public URL; the document's relative links resolve
	// against it.
	URL       string
	Title     string
	Author    string
	UpdatedAt time.Time
	Language  string
}

// FormInput is a PDF form and the values to fill it with (JSON).
type FormInput struct {
	PDF    []byte
	Values []byte
}

// OfficeInput is an Office document to convert to PDF: its bytes as
// uploaded, the format acceptance recognised in them (a name of package
// office: "docx", "xlsx", …; the worker recognises it again) and the
// client's overrides, the JSON object {"paper","landscape"} or empty.
type OfficeInput struct {
	Doc     []byte
	Format  string
	Options []byte
}

// Kind is what a job's work is: which runtime renders it
// (worker.Jobs.Render switches on it).
type Kind string

// The kinds of work a job can be. A new kind is a constant here, a field
// of Input and RenderInput for its input, the keys it stores (keys.go) and
// a case of worker.Jobs.Render.
const (
	// KindMarkdown is a Markdown document, uploaded or from Outline.
	KindMarkdown Kind = "markdown"
	// KindForm is a PDF form to fill and flatten (Input.Form).
	KindForm Kind = "form"
	// KindOffice is an Office document to convert (Input.Office).
	KindOffice Kind = "office"
)

// Kind is the kind of the job's work.
func (in Input) Kind() Kind {
	if in.Form != nil {
		return KindForm
	}
	if in.Office != nil {
		return KindOffice
	}
	return KindMarkdown
}

// RenderInput is what the worker hands the Renderer: the stored input of
// one job.
type RenderInput struct {
	JobID   string
	Attempt int
	Tenant  string
	User    string
	Name    string
	// Markdown, Metadata and Assets are as submitted.
	Markdown []byte
	Metadata []byte
	Assets   map[string][]byte
	Outline  *OutlineSource
	// Form is set for forms jobs.
	Form *FormInput
	// Office is set for office jobs.
	Office *OfficeInput
}

// Kind is the kind of the job's work.
func (in RenderInput) Kind() Kind {
	if in.Form != nil {
		return KindForm
	}
	if in.Office != nil {
		return KindOffice
	}
	return KindMarkdown
}

// Renderer renders one job. The integrator adapts package render to it. A
// *limits.Error fails the job at once with its code; any other error is
// transient and retried. Render must return promptly once ctx is done and
// leave no process behind. progress reports the phase (PhasePreparing,
// PhaseRendering, PhasePackaging) and the pages shipped so far; it is cheap
// and may be called often.
type Renderer interface {
	Render(ctx context.Context, in RenderInput, progress func(phase string, pages int)) (pdf []byte, err error)
}

// Budget is the render budget shared with synchronous renders: a worker
// holds one unit while it renders. Acquire blocks until a unit is free or ctx
// ends; every successful Acquire is followed by exactly one Release.
type Budget interface {
	Acquire(ctx context.Context) error
	Release()
}

// Observer receives the job metrics events. Implementations must be cheap
// and safe for concurrent use. Gauges (jobs by state, oldest queued age)
// are pulled with Service.Stats.
type Observer interface {
	// Started is called when a job is claimed for its first attempt, with
	// the time it waited since acceptance.
	Started(queueDelay time.Duration)
	// Finished is called when an attempt ends the job: state is
	// StateSucceeded, StateFailed or StateCancelled, code the error code
	// of a failed job, and render the time the last attempt rendered.
	Finished(state, code string, render time.Duration)
	// Retried is called when an attempt failed transiently and the job
	// will be tried again.
	Retried(code string)
}

// Store is the artifact store the jobs package needs; store.FS implements
// it, and an S3-compatible store can.
type Store interface {
	// Put stores r under key atomically and durably.
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens the object under key, or returns an error wrapping
	// store.ErrNotFound when there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes the object key or everything below the folder key.
	Delete(ctx context.Context, prefix string) error
}

// creator is implemented by stores that can write new objects without
// the atomic-replace machinery of Put, all made durable together
// (store.FS.CreateAll). Inputs are written with it when available: they
// are published by the job row's commit, not by their own appearance, so
// Put's extra journal commit and per-object syncs buy nothing there.
type creator interface {
	CreateAll(ctx context.Context, objects map[string][]byte) error
}

// Lister is implemented by stores that can list the entries below a
// prefix. With it, the sweep removes inputs whose job row was never
// committed (a crash between storing the input and the commit).
type Lister interface {
	List(ctx context.Context, prefix string) ([]string, error)
}

// Config tunes a Service. The zero value gives the defaults of SPEC §5.
type Config struct {
	// TTL is how long inputs and results are kept (jobs.ttl, default 1 h).
	TTL time.Duration
	// RowRetention is how long job rows and idempotency keys are kept
	// (default 7 days).
	RowRetention time.Duration
	// MaxWorkers is how many jobs this process renders at once (default
	// 1). With a Budget, a worker also holds a budget unit while it renders.
	MaxWorkers int
	// Budget, when set, is acquired around every render.
	Budget Budget
	// JobTimeout bounds one attempt (default limits.DefaultRenderTimeout
	// plus one minute for image conversion and storage). A job that runs
	// out fails with code "timeout".
	JobTimeout time.Duration
	// BudgetWait bounds how long a claimed job waits for a Budget unit
	// before it is put back in the queue for later, without using an
	// attempt (default JobTimeout).
	BudgetWait time.Duration
	// RescueAfter is how long an attempt may go without finishing before
	// River's rescuer assumes its worker died and schedules a retry
	// (default BudgetWait + JobTimeout + 1 min; always longer than an
	// attempt can take, or a live attempt would be run twice).
	RescueAfter time.Duration
	// LeaseTimeout is how old a running job's beat may get before the
	// leader takes the job back and retries it (jobs.leaseTimeout,
	// default DefaultLeaseTimeout). It must exceed a few
	// ProgressIntervals, or a slow but live attempt loses its lease.
	LeaseTimeout time.Duration
	// LeaseCheck is how often the leader looks for expired leases
	// (default LeaseTimeout/5, at least one second).
	LeaseCheck time.Duration
	// MaxAttempts bounds the attempts of a job (default 5).
	MaxAttempts int
	// MaxQueuedPerTenant bounds the jobs one tenant may have queued or
	// running (default DefaultMaxQueuedPerTenant; CheckQuota).
	MaxQueuedPerTenant int
	// MaxStoredBytesPerTenant bounds the bytes of inputs and results one
	// tenant may have in the store (default DefaultMaxStoredBytesPerTenant;
	// CheckQuota).
	MaxStoredBytesPerTenant int64
	// RetryBase and RetryMax shape the backoff of transient failures:
	// attempt n waits RetryBase·2^(n-1), at most RetryMax, with ±50 %
	// jitter (defaults 2 s and 5 min).
	RetryBase time.Duration
	RetryMax  time.Duration
	// SweepInterval is how often retention runs (default 1 min).
	SweepInterval time.Duration
	// CancelPoll is how often a running job checks its row for a
	// cancellation made by another process (default 500 ms).
	CancelPoll time.Duration
	// ProgressInterval is the least time between two progress writes of
	// one job, phase changes aside (default 1 s).
	ProgressInterval time.Duration
	// FetchCooldown is the least time between two fetches of the queue
	// (River's FetchCooldown, default 100 ms).
	FetchCooldown time.Duration
	// FetchPollInterval is how often the queue is polled when no
	// notification arrives (default 1 s).
	FetchPollInterval time.Duration
	// Observer receives metrics events; nil means none.
	Observer Observer
	// Logger receives job and River logs (default slog.Default()).
	Logger *slog.Logger
	// Webhooks tunes the delivery of callbacks (webhook.go).
	Webhooks WebhookConfig
	// Clock gives the service's time: when jobs expire, how old a lease
	// or an orphan is, what the sweep deletes (default the real clock).
	// Tests advance one instead of sleeping to a TTL.
	Clock Clock
	// Failpoint, for crash tests only, is called with the name of each
	// failpoint the service passes (FailAfterInputStore, ...); a test's
	// hook kills the process with SIGKILL at the one it chose, so that the
	// next process finds what a crash there leaves. Nil in production: no
	// setting or environment variable arms it.
	Failpoint func(point string)
}

// WithDefaults returns c with every zero field at its default (the
// Default* constants and the figures in the field comments), the
// webhook settings included.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.TTL, DefaultTTL)
	def(&c.RowRetention, 7*24*time.Hour)
	def(&c.JobTimeout, limits.DefaultRenderTimeout+time.Minute)
	def(&c.BudgetWait, c.JobTimeout)
	def(&c.RescueAfter, c.attemptLimit()+time.Minute)
	def(&c.RetryBase, 2*time.Second)
	def(&c.RetryMax, 5*time.Minute)
	def(&c.SweepInterval, time.Minute)
	def(&c.CancelPoll, 500*time.Millisecond)
	def(&c.ProgressInterval, time.Second)
	def(&c.FetchCooldown, 100*time.Millisecond)
	def(&c.FetchPollInterval, time.Second)
	def(&c.LeaseTimeout, DefaultLeaseTimeout)
	def(&c.LeaseCheck, max(c.LeaseTimeout/5, time.Second))
	if c.MaxWorkers == 0 {
		c.MaxWorkers = 1
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.MaxQueuedPerTenant == 0 {
		c.MaxQueuedPerTenant = DefaultMaxQueuedPerTenant
	}
	if c.MaxStoredBytesPerTenant == 0 {
		c.MaxStoredBytesPerTenant = DefaultMaxStoredBytesPerTenant
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	c.Webhooks = c.Webhooks.WithDefaults()
	return c
}

// validate refuses a configuration (with its defaults filled in) the
// service cannot keep its promises with.
func (c Config) validate() error {
	switch {
	case c.TTL < 0, c.RowRetention < 0, c.JobTimeout < 0, c.BudgetWait < 0, c.RetryBase < 0, c.RetryMax < 0,
		c.SweepInterval < 0, c.CancelPoll < 0, c.ProgressInterval < 0:
		return errors.New("jobs: durations must be positive")
	case c.MaxWorkers < 0 || c.MaxWorkers > 10_000:
		return fmt.Errorf("jobs: MaxWorkers %d: want 1 to 10000", c.MaxWorkers)
	case c.MaxAttempts < 1:
		return fmt.Errorf("jobs: MaxAttempts %d: want at least 1", c.MaxAttempts)
	case c.MaxQueuedPerTenant < 1:
		return fmt.Errorf("jobs: MaxQueuedPerTenant %d: want at least 1", c.MaxQueuedPerTenant)
	case c.MaxStoredBytesPerTenant < 1:
		return fmt.Errorf("jobs: MaxStoredBytesPerTenant %d: want at least 1", c.MaxStoredBytesPerTenant)
	case c.RescueAfter <= c.attemptLimit():
		return fmt.Errorf("jobs: RescueAfter %s must exceed BudgetWait + JobTimeout + %s (%s)", c.RescueAfter, riverGrace, c.attemptLimit())
	case c.LeaseTimeout < 3*c.ProgressInterval || c.LeaseTimeout < 3*c.CancelPoll:
		return fmt.Errorf("jobs: LeaseTimeout %s must be at least three ProgressIntervals (%s) and CancelPolls (%s)", c.LeaseTimeout, c.ProgressInterval, c.CancelPoll)
	case c.LeaseCheck <= 0:
		return fmt.Errorf("jobs: LeaseCheck %s must be positive", c.LeaseCheck)
	case c.RowRetention < c.TTL:
		return fmt.Errorf("jobs: RowRetention %s is shorter than TTL %s", c.RowRetention, c.TTL)
	case c.FetchPollInterval < c.FetchCooldown:
		return fmt.Errorf("jobs: FetchPollInterval %s is shorter than FetchCooldown %s", c.FetchPollInterval, c.FetchCooldown)
	}
	return c.Webhooks.validate()
}

// Clock tells the time (Config.Clock).
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// DefaultTTL is Config.TTL's default: how long a finished job's result
// is kept.
const DefaultTTL = time.Hour

// DefaultLeaseTimeout is Config.LeaseTimeout's default: fifteen missed
// beats, so a job whose worker died is retried within about half a minute.
const DefaultLeaseTimeout = 15 * time.Second

// riverGrace is added to the attempt's own bounds for River's deadline, so
// that the worker's timeouts fire first and the job fails with code
// "timeout" (or waits again for the budget) instead of River cancelling it.
const riverGrace = 5 * time.Second

// attemptLimit is River's deadline for one attempt: the budget wait, the
// render and a grace period for storing the result.
func (c Config) attemptLimit() time.Duration { return c.BudgetWait + c.JobTimeout + riverGrace }

// Failpoints for crash tests: the names Config.Failpoint is called with.
const (
	FailAfterInputStore  = "after-input-store"
	FailAfterJobCreate   = "after-job-create"
	FailDuringRender     = "during-render"
	FailAfterOutputStore = "after-output-store"
	FailBeforeSuccess    = "before-success"
	// FailAfterSettle is right after the transaction that made a job
	// succeed (and scheduled its webhook) committed.
	FailAfterSettle = "after-settle"
)
