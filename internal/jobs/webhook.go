package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// Webhooks (issue 16): a job may name a callback URL; when it reaches a
// terminal state, its status document is POSTed there, signed.
//
// Durability comes from where the delivery starts: the transaction that
// settles the job (succeed, fail, Cancel, the sweep's lost jobs) also moves
// the job's outprint_webhooks row from pending to sending and inserts the
// River job that delivers it, so a crash between settling and delivering
// loses nothing, and a delivery never starts for a job that did not end.
// River retries a worker that died during an attempt (at-least-once); the
// event id, derived from the job id, is the same for every attempt, so a
// receiver drops duplicates by it.
//
// The worker owns the retry schedule rather than River's retry policy:
// each failed attempt records its outcome in outprint_webhooks and snoozes
// the River job until the next attempt (a snooze spends no River attempt),
// with exponential backoff and jitter, or as long as Retry-After asks,
// until MaxAge after the job settled; then the delivery is dead.

// Webhook delivery states, as GET /v1/jobs/{id} shows them.
const (
	// WebhookPending: the job has not ended yet.
	WebhookPending = "pending"
	// WebhookSending: the job ended; the first attempt is due.
	WebhookSending = "sending"
	// WebhookRetrying: an attempt failed; the next is at NextAttemptAt.
	WebhookRetrying = "retrying"
	// WebhookDelivered: the receiver answered 2xx.
	WebhookDelivered = "delivered"
	// WebhookDead: the receiver refused for good (a 4xx other than 408
	// and 429, a redirect), the URL was refused at dial time, or MaxAge
	// passed.
	WebhookDead = "dead"
)

// Outcomes of one delivery attempt, for metrics (WebhookObserver).
const (
	WebhookOutcomeDelivered = "delivered"
	WebhookOutcomeRetry     = "retry"
	WebhookOutcomeDead      = "dead"
)

// Callback is the webhook of a job as accepted.
type Callback struct {
	// URL receives the POST; the caller has checked it (scheme, host,
	// literal addresses); the dial guard checks it again at every attempt.
	URL string
	// BaseURL ("https://outprint.example.com") makes the links of the
	// status document absolute.
	BaseURL string
}

// WebhookStatus is the delivery of a job's callback.
type WebhookStatus struct {
	State    string
	Attempts int
	// LastStatus is the HTTP status of the last attempt; nil before one
	// and when the last attempt got no answer.
	LastStatus *int
	// NextAttemptAt is when the next attempt is due; nil once delivered
	// or dead.
	NextAttemptAt *time.Time
}

// WebhookDelivery is one attempt the worker asks a WebhookSender to make.
type WebhookDelivery struct {
	// EventID is the webhook-id: the same for every attempt of one job's
	// event.
	EventID string
	URL     string
	BaseURL string
	// Job is the job as it ended (Webhook nil).
	Job     Job
	Attempt int
}

// WebhookResult is what one attempt got.
type WebhookResult struct {
	// Status is the HTTP status of the answer; 0 when there was none.
	Status int
	// RetryAfter is the receiver's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// Err is why there was no answer (or why nothing was sent).
	Err error
	// Permanent marks an Err that no retry can cure: the URL was refused
	// by the guard, no signing secret, a body too large.
	Permanent bool
}

// WebhookSender makes one delivery attempt: it builds and signs the body
// and POSTs it. package webhook implements it.
type WebhookSender interface {
	Send(ctx context.Context, d WebhookDelivery) WebhookResult
}

// WebhookObserver counts delivery attempts by outcome
// (WebhookOutcomeDelivered, WebhookOutcomeRetry, WebhookOutcomeDead).
type WebhookObserver interface {
	WebhookAttempt(outcome string)
}

// WebhookConfig tunes delivery. The zero value with a Sender gives the
// defaults of issue 16.
type WebhookConfig struct {
	// Sender delivers; nil means this process delivers nothing (the
	// deliveries wait in the queue for a process that does).
	Sender WebhookSender
	// MaxWorkers is how many deliveries this process makes at once
	// (default 8).
	MaxWorkers int
	// PerHost bounds the deliveries in flight to one receiver host in this
	// process (default 1), so that a slow receiver holds one worker, not
	// all of them.
	PerHost int
	// PerTenant bounds the deliveries in flight of one tenant in this
	// process (default half of MaxWorkers, at least 1), so that a tenant
	// whose callbacks go to many slow hosts leaves workers to the others.
	PerTenant int
	// HostWait is the least a delivery that finds its host (or tenant)
	// busy is put back in the queue for, without an attempt and without
	// holding a worker (default 2 s); a host whose attempts take longer
	// gives its waiting deliveries turns as far apart as its attempts
	// take (hostLimiter).
	HostWait time.Duration
	// Timeout bounds one attempt as the Sender applies it (default 10 s);
	// River's deadline for the worker is derived from it.
	Timeout time.Duration
	// RetryBase and RetryMax shape the backoff: attempt n waits
	// RetryBase·2^(n-1), at most RetryMax, ±50 % jitter (defaults 5 s and
	// 1 h).
	RetryBase time.Duration
	RetryMax  time.Duration
	// MaxAge is how long after the job ended deliveries are tried
	// (default 24 h); an attempt that would come later makes the delivery
	// dead.
	MaxAge time.Duration
	// Observer counts attempts by outcome; nil counts nothing.
	Observer WebhookObserver
}

// WithDefaults returns c with every zero field at its default (the
// figures in the field comments).
func (c WebhookConfig) WithDefaults() WebhookConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HostWait, 2*time.Second)
	def(&c.Timeout, 10*time.Second)
	def(&c.RetryBase, 5*time.Second)
	def(&c.RetryMax, time.Hour)
	def(&c.MaxAge, 24*time.Hour)
	if c.MaxWorkers == 0 {
		c.MaxWorkers = 8
	}
	if c.PerHost == 0 {
		c.PerHost = 1
	}
	if c.PerTenant == 0 {
		c.PerTenant = max(c.MaxWorkers/2, 1)
	}
	return c
}

// validate refuses webhook settings (with their defaults filled in) the
// delivery cannot work with.
func (c WebhookConfig) validate() error {
	switch {
	case c.HostWait < 0, c.Timeout < 0, c.RetryBase < 0, c.RetryMax < 0, c.MaxAge < 0:
		return errors.New("jobs: webhook durations must be positive")
	case c.MaxWorkers < 0 || c.MaxWorkers > 1000:
		return fmt.Errorf("jobs: webhook MaxWorkers %d: want 1 to 1000", c.MaxWorkers)
	case c.PerHost < 0:
		return fmt.Errorf("jobs: webhook PerHost %d: want at least 1", c.PerHost)
	case c.PerTenant < 0:
		return fmt.Errorf("jobs: webhook PerTenant %d: want at least 1", c.PerTenant)
	}
	return nil
}

// queueWebhook is the queue of deliveries: apart from renders, so that a
// backlog of one never waits behind the other.
const queueWebhook = "outprint_webhook"

// webhookRiverAttempts bounds River's own retries of a delivery job, which
// happen only when the worker cannot read or write its row (the database
// is away); failed deliveries snooze instead and spend none.
const webhookRiverAttempts = 25

// maxCallbackURL bounds a callback URL.
const maxCallbackURL = 2048

// webhookFirstDelay is how long after a job settles its first delivery
// attempt is due.
const webhookFirstDelay = time.Second

// webhookArgs is the River payload of a delivery: the job id.
type webhookArgs struct {
	JobID string `json:"job_id"`
}

func (webhookArgs) Kind() string { return "outprint_webhook" }

// EventID is the webhook-id of a job's completion event. One job has one
// terminal event, so the job id names it; every attempt, and a duplicate
// after a crash, carries the same id.
func EventID(jobID string) string { return "msg_" + jobID }

func validateCallback(cb *Callback) error {
	if cb == nil {
		return nil
	}
	if cb.URL == "" || len(cb.URL) > maxCallbackURL || cb.BaseURL == "" {
		return errors.New("submit: callback without URL or base URL, or URL too long")
	}
	return nil
}

// insertCallbacks records the callbacks of an accepted batch (state
// pending) in the acceptance transaction.
func insertCallbacks(ctx context.Context, tx txOps, live []*acceptReq) error {
	for _, r := range live {
		if r.callback == nil {
			continue
		}
		if _, err := tx.exec(ctx, `INSERT INTO outprint_webhooks (job_id, url, base_url, state, created_at)
			VALUES ($1, $2, $3, $4, $5)`, r.job.ID, r.callback.URL, r.callback.BaseURL, WebhookPending, r.job.CreatedAt); err != nil {
			return fmt.Errorf("insert callback: %w", err)
		}
	}
	return nil
}

// scheduleWebhook is called in every transaction that settles a job: when
// the job has a callback still pending, it becomes due and its delivery is
// inserted into River in the same transaction.
//
// The first attempt is due webhookFirstDelay after the settle: River's
// PostgreSQL driver wakes a fetch on every insert, so an immediate delivery
// could be claimed before the settling transaction's caller even returned;
// a second's delay keeps "settled, not yet claimed" a real state that a
// crash can hit (and that the crash test checks), at no cost a receiver
// would notice.
func (s *Service) scheduleWebhook(ctx context.Context, tx txOps, jobID string, now time.Time) error {
	due := now.Add(webhookFirstDelay)
	var rawURL string
	err := tx.queryRow(ctx, `UPDATE outprint_webhooks SET state = $2, settled_at = $3, next_attempt_at = $5
		WHERE job_id = $1 AND state = $4 RETURNING url`, jobID, WebhookSending, now, WebhookPending, due).Scan(&rawURL)
	if errors.Is(err, errNoRows) {
		return nil // no callback, or not pending any more
	}
	if err != nil {
		return fmt.Errorf("schedule webhook: %w", err)
	}
	priority := webhookPriority
	if !s.bursts.take(callbackHost(rawURL), time.Now()) {
		priority = webhookBacklogPriority
	}
	_, err = tx.insertMany(ctx, []river.InsertManyParams{{
		Args:       webhookArgs{JobID: jobID},
		InsertOpts: &river.InsertOpts{Queue: queueWebhook, MaxAttempts: webhookRiverAttempts, ScheduledAt: due, Priority: priority}}})
	return err
}

// River takes the available jobs of a queue by priority first (1 before
// 2), then by due time. A delivery is inserted at webhookPriority unless
// its host was sent more than hostBurstSize deliveries lately: then at
// webhookBacklogPriority, so that another tenant's delivery to another
// host is taken before the backlog, however long it is. Issue 24: a
// healthy delivery due after 10,000 to a receiver that never answers
// waited 25 s while each of them was fetched and turned away once.
const (
	webhookPriority        = 1
	webhookBacklogPriority = 2
)

// hostBurstSize and hostBurstRefill shape hostBursts' bucket: a host may
// be sent hostBurstSize deliveries at once, and one more each
// hostBurstRefill after that, at webhookPriority.
const (
	hostBurstSize   = 32
	hostBurstRefill = 250 * time.Millisecond
)

// hostBursts is a token bucket per receiver host of the deliveries this
// process scheduled (hostBurstSize, hostBurstRefill). It is per process
// and kept in memory: in a cluster each process demotes the bursts it
// schedules itself, and a restart forgets them, which costs only the
// ordering of one burst.
type hostBursts struct {
	mu      sync.Mutex
	buckets map[string]*hostBucket
}

type hostBucket struct {
	tokens float64
	at     time.Time
}

// take spends one of host's tokens at now and reports whether there was
// one.
func (b *hostBursts) take(host string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buckets == nil {
		b.buckets = map[string]*hostBucket{}
	}
	if len(b.buckets) >= 4096 {
		// A full bucket says nothing a new one would not: dropping them
		// bounds the map by the hosts sent bursts lately.
		for h, k := range b.buckets {
			if k.refilled(now) >= hostBurstSize {
				delete(b.buckets, h)
			}
		}
	}
	k := b.buckets[host]
	if k == nil {
		k = &hostBucket{tokens: hostBurstSize, at: now}
		b.buckets[host] = k
	}
	k.tokens, k.at = k.refilled(now), now
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

// refilled is the bucket's tokens at now.
func (k *hostBucket) refilled(now time.Time) float64 {
	return min(hostBurstSize, k.tokens+float64(now.Sub(k.at))/float64(hostBurstRefill))
}

// webhookStatus returns the delivery of a job's callback, nil when it has
// none.
func (s *Service) webhookStatus(ctx context.Context, jobID string) (*WebhookStatus, error) {
	var w WebhookStatus
	err := s.db.pool().queryRow(ctx, `SELECT state, attempts, last_status, next_attempt_at FROM outprint_webhooks WHERE job_id = $1`,
		jobID).Scan(&w.State, &w.Attempts, &w.LastStatus, &w.NextAttemptAt)
	if errors.Is(err, errNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("webhook of job %s: %w", jobID, err)
	}
	if w.NextAttemptAt != nil {
		t := w.NextAttemptAt.UTC()
		w.NextAttemptAt = &t
	}
	return &w, nil
}

// webhookWorker is River's worker for deliveries; the logic is in
// Service.deliver.
type webhookWorker struct {
	river.WorkerDefaults[webhookArgs]
	s *Service
}

func (w *webhookWorker) Work(ctx context.Context, rj *river.Job[webhookArgs]) error {
	return w.s.deliver(ctx, rj.Args.JobID)
}

// Timeout is River's deadline for one delivery: the attempt and room for
// the bookkeeping around it (a delivery never waits for its host's turn).
func (w *webhookWorker) Timeout(*river.Job[webhookArgs]) time.Duration {
	return w.s.cfg.Webhooks.Timeout + 30*time.Second
}

// deliver makes one attempt of a job's delivery and records it. Its error
// tells River what next: nil when the delivery ended (delivered or dead),
// a snooze until the next attempt, a plain error when the row could not be
// read or written (River retries it).
func (s *Service) deliver(ctx context.Context, jobID string) error {
	c := s.cfg.Webhooks
	log := s.cfg.Logger.With("job", jobID)
	var (
		rawURL, baseURL, state string
		attempts               int
		lastStatus             *int
		lastError              string
		settled                *time.Time
	)
	err := s.db.pool().queryRow(ctx, `SELECT url, base_url, state, attempts, last_status, last_error, settled_at FROM outprint_webhooks WHERE job_id = $1`,
		jobID).Scan(&rawURL, &baseURL, &state, &attempts, &lastStatus, &lastError, &settled)
	if errors.Is(err, errNoRows) {
		return nil // swept with its job
	}
	if err != nil {
		return fmt.Errorf("webhook of job %s: %w", jobID, err)
	}
	if state != WebhookSending && state != WebhookRetrying {
		return nil // delivered or dead already (a duplicate run)
	}
	job, err := s.load(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		return s.recordWebhook(ctx, jobID, WebhookDead, attempts, nil, "the job's row is gone", nil, log)
	}
	if err != nil {
		return err
	}
	if c.Sender == nil {
		// Not reached: the queue is worked only with a Sender.
		return river.JobSnooze(c.RetryBase)
	}

	now := s.now()
	if settled == nil {
		settled = &now
	}
	giveUp := settled.Add(c.MaxAge)
	if !now.Before(giveUp) {
		// The give-up timer runs whether or not the host's turn came
		// (issue 24: deliveries that never got their turn were never
		// given up).
		s.observeWebhook(WebhookOutcomeDead)
		msg := fmt.Sprintf("gave up %s after the job ended, after %d attempts", c.MaxAge, attempts)
		if lastError != "" {
			msg += ": " + lastError
		}
		log.Warn("jobs: webhook dead", "attempt", attempts, "err", msg)
		return s.recordWebhook(ctx, jobID, WebhookDead, attempts, lastStatus, truncate(msg, 1000), nil, log)
	}

	// Fairness (issue 24): a delivery never waits for its host's or its
	// tenant's turn on a worker. When the host has PerHost deliveries in
	// flight, or the tenant PerTenant, it goes back to the queue until
	// its next turn, and the worker takes the next delivery: one dead
	// receiver costs its own deliveries' time, never another tenant's.
	host := callbackHost(rawURL)
	releaseTenant, ok := s.tenants.tryAcquire(job.Tenant, c.PerTenant)
	if !ok {
		return river.JobSnooze(min(jitter(c.HostWait), giveUp.Sub(now)))
	}
	defer releaseTenant()
	release, wait, ok := s.hosts.tryAcquire(host, c.PerHost, c.HostWait, time.Now)
	if !ok {
		// The turn is kept for this delivery; the snooze ends at the
		// give-up time at the latest, so that the timer runs.
		return river.JobSnooze(max(min(wait, giveUp.Sub(now)), time.Millisecond))
	}

	attempt := attempts + 1
	began := time.Now()
	res := c.Sender.Send(ctx, WebhookDelivery{EventID: EventID(jobID), URL: rawURL, BaseURL: baseURL, Job: job, Attempt: attempt})
	release(time.Since(began))
	var status *int
	if res.Status != 0 {
		status = &res.Status
	}
	errText := ""
	if res.Err != nil {
		errText = truncate(res.Err.Error(), 1000)
	} else if res.Status != 0 {
		errText = fmt.Sprintf("status %d", res.Status)
	}

	switch webhookVerdict(res) {
	case WebhookDelivered:
		s.observeWebhook(WebhookOutcomeDelivered)
		log.Info("jobs: webhook delivered", "attempt", attempt, "status", res.Status)
		return s.recordWebhook(ctx, jobID, WebhookDelivered, attempt, status, "", nil, log)
	case WebhookDead:
		s.observeWebhook(WebhookOutcomeDead)
		log.Warn("jobs: webhook dead", "attempt", attempt, "status", res.Status, "err", errText)
		return s.recordWebhook(ctx, jobID, WebhookDead, attempt, status, errText, nil, log)
	}
	delay := webhookBackoff(c.RetryBase, c.RetryMax, attempt)
	if res.RetryAfter > 0 {
		delay = res.RetryAfter
	}
	now = s.now()
	next := now.Add(delay)
	if next.After(giveUp) {
		s.observeWebhook(WebhookOutcomeDead)
		msg := fmt.Sprintf("gave up %s after the job ended: %s", c.MaxAge, errText)
		log.Warn("jobs: webhook dead", "attempt", attempt, "err", msg)
		return s.recordWebhook(ctx, jobID, WebhookDead, attempt, status, msg, nil, log)
	}
	s.observeWebhook(WebhookOutcomeRetry)
	log.Info("jobs: webhook attempt failed, will retry", "attempt", attempt, "status", res.Status, "err", errText, "next", next)
	if err := s.recordWebhook(ctx, jobID, WebhookRetrying, attempt, status, errText, &next, log); err != nil {
		return err
	}
	return river.JobSnooze(delay)
}

// webhookVerdict sorts an attempt: delivered (2xx), retrying (no answer,
// 408, 429, 5xx) or dead (a permanent error, any other status: a 4xx is
// the receiver's "no", a 3xx a redirect that is never followed).
func webhookVerdict(res WebhookResult) string {
	switch {
	case res.Err != nil && res.Permanent:
		return WebhookDead
	case res.Err != nil:
		return WebhookRetrying
	case res.Status >= 200 && res.Status <= 299:
		return WebhookDelivered
	case res.Status == 408, res.Status == 429, res.Status >= 500:
		return WebhookRetrying
	}
	return WebhookDead
}

// recordWebhook writes the outcome of an attempt. Errors are returned so
// that River runs the delivery again: a delivered attempt whose record
// failed is delivered once more, which at-least-once allows.
func (s *Service) recordWebhook(ctx context.Context, jobID, state string, attempts int, status *int, errText string, next *time.Time, log interface {
	Warn(string, ...any)
}) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var finished *time.Time
	if state == WebhookDelivered || state == WebhookDead {
		now := s.now()
		finished = &now
	}
	_, err := s.db.pool().exec(wctx, `UPDATE outprint_webhooks SET state = $2, attempts = $3, last_status = $4, last_error = $5,
			next_attempt_at = $6, finished_at = $7
		WHERE job_id = $1`, jobID, state, attempts, status, errText, next, finished)
	if err != nil {
		log.Warn("jobs: record webhook attempt", "err", err)
		return fmt.Errorf("record webhook of job %s: %w", jobID, err)
	}
	return nil
}

func (s *Service) observeWebhook(outcome string) {
	if o := s.cfg.Webhooks.Observer; o != nil {
		o.WebhookAttempt(outcome)
	}
}

// webhookBackoff is the wait after failed attempt n: base·2^(n-1), capped,
// ±50 % jitter so that deliveries failing together (a receiver outage) do
// not retry together.
func webhookBackoff(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return jitter(min(d, max))
}

// jitter returns a duration in [d/2, 3d/2].
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

// callbackHost is the receiver host deliveries are limited by: the host
// name, whatever the port, since ports of one host share its capacity.
func callbackHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
}

// hostLimiter bounds the deliveries in flight per receiver host in this
// process, without making anybody wait: a delivery that finds its host's
// places taken is told how long to stay away (tryAcquire). The host's
// turns are handed out one after another, as far apart as its attempts
// take (the last attempt's duration, at least HostWait, divided among its
// places): a receiver that never answers gets one attempt per timeout,
// and its backlog waits in the queue for turns spread over the future
// instead of coming back every HostWait to find the host busy again —
// which, with 10,000 deliveries to one dead host, kept every worker busy
// turning them away while another tenant's delivery waited 48 minutes.
type hostLimiter struct {
	mu    sync.Mutex
	slots map[string]*hostSlot
}

type hostSlot struct {
	inFlight int
	// cost is how long the host's last attempt took; next the start of
	// the latest turn handed out to a delivery turned away.
	cost time.Duration
	next time.Time
}

// tryAcquire takes one of host's per places if one is free; release must
// then be called with how long the attempt took. Otherwise ok is false
// and wait is how long the delivery should stay away: until the next
// turn not handed out yet.
func (l *hostLimiter) tryAcquire(host string, per int, minWait time.Duration, now func() time.Time) (release func(took time.Duration), wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == nil {
		l.slots = map[string]*hostSlot{}
	}
	h := l.slots[host]
	if h == nil {
		h = &hostSlot{}
		l.slots[host] = h
	}
	t := now()
	if h.inFlight < per {
		h.inFlight++
		return func(took time.Duration) {
			l.mu.Lock()
			defer l.mu.Unlock()
			h.inFlight--
			h.cost = took
			if h.inFlight == 0 && !h.next.After(now()) {
				delete(l.slots, host) // nothing waits for a turn
			}
		}, 0, true
	}
	step := max(h.cost, minWait) / time.Duration(per)
	h.next = maxTime(h.next, t).Add(step)
	return nil, jitterUp(h.next.Sub(t), step), false
}

// tenantLimiter bounds the deliveries in flight per tenant in this process,
// without waiting.
type tenantLimiter struct {
	mu       sync.Mutex
	inFlight map[string]int
}

// tryAcquire takes one of tenant's per places, or reports false.
func (l *tenantLimiter) tryAcquire(tenant string, per int) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight == nil {
		l.inFlight = map[string]int{}
	}
	if l.inFlight[tenant] >= per {
		return nil, false
	}
	l.inFlight[tenant]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inFlight[tenant]--; l.inFlight[tenant] <= 0 {
			delete(l.inFlight, tenant)
		}
	}, true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// jitterUp adds up to a quarter of step to d, so that deliveries given
// neighbouring turns do not all come back at the very same instant.
func jitterUp(d, step time.Duration) time.Duration {
	if step <= 0 {
		return d
	}
	return d + time.Duration(rand.Int64N(int64(step/4)+1))
}
