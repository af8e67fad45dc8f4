package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/outprint/outprint/internal/testenv"
)

// deadHostSender answers every delivery to host "dead.example.com" never:
// the attempt lasts until the Sender's timeout (hold) and fails without an
// answer, as a receiver that accepts the connection and stays silent. Any
// other host answers 204 at once.
type deadHostSender struct {
	hold time.Duration

	mu           sync.Mutex
	deadAttempts int
	delivered    map[string]int // job id → dead attempts made before it was delivered
}

func (s *deadHostSender) Send(ctx context.Context, d WebhookDelivery) WebhookResult {
	if callbackHost(d.URL) != "dead.example.com" {
		s.mu.Lock()
		if s.delivered == nil {
			s.delivered = map[string]int{}
		}
		s.delivered[d.Job.ID] = s.deadAttempts
		s.mu.Unlock()
		return WebhookResult{Status: 204}
	}
	s.mu.Lock()
	s.deadAttempts++
	s.mu.Unlock()
	t := time.NewTimer(s.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return WebhookResult{Err: errors.New("timeout awaiting response headers")}
}

func (s *deadHostSender) deliveredAfter(id string) (deadAttempts int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.delivered[id]
	return n, ok
}

// seedDeliveries records n finished jobs of tenant whose callbacks go to
// url and are due again over the next spread (as the backoff of failed
// attempts leaves a receiver's backlog), in batches: the state a dead
// receiver's backlog is in after a while, without rendering n jobs.
func seedDeliveries(t *testing.T, h *harness, tenant, url string, n int, spread time.Duration) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	const batch = 500
	for start := 0; start < n; start += batch {
		err := h.svc.q.inTx(ctx, true, func(tx txOps) error {
			var params []river.InsertManyParams
			for i := start; i < min(start+batch, n); i++ {
				id := uuid.Must(uuid.NewV7()).String()
				at := h.svc.now()
				if _, err := tx.exec(ctx, `INSERT INTO outprint_jobs (id, tenant, user_id, name, state, max_attempts, source, digest, created_at, expires_at)
					VALUES ($1, $2, 'u', 'seed.md', $3, 3, $4, 'seed', $5, $6)`, id, tenant, StateSucceeded, SourceMarkdown, at, at.Add(time.Hour)); err != nil {
					return err
				}
				due := now.Add(spread * time.Duration(i) / time.Duration(n))
				if _, err := tx.exec(ctx, `INSERT INTO outprint_webhooks (job_id, url, base_url, state, attempts, created_at, settled_at, next_attempt_at)
					VALUES ($1, $2, 'https://outprint.example.com', $3, 1, $4, $4, $5)`, id, url, WebhookRetrying, at, due); err != nil {
					return err
				}
				params = append(params, river.InsertManyParams{Args: webhookArgs{JobID: id},
					InsertOpts: &river.InsertOpts{Queue: queueWebhook, MaxAttempts: webhookRiverAttempts, ScheduledAt: due}})
			}
			_, err := tx.insertMany(ctx, params)
			return err
		})
		if err != nil {
			t.Fatalf("seed deliveries: %v", err)
		}
	}
}

// TestWebhookDeadHostDoesNotStarve: 10,000 deliveries of one tenant to a
// receiver that never answers do not hold back another tenant's delivery
// to a healthy host (issue 24: it arrived after 48 minutes instead of
// about a second, since every worker waited for the dead host's turn).
// The healthy delivery must arrive before the dead host has had more than
// a few attempts — each of which lasts the full attempt timeout.
func TestWebhookDeadHostDoesNotStarve(t *testing.T) {
	s := &deadHostSender{hold: 2 * time.Second}
	// 10,000 deliveries due over 30 minutes come due faster (5.5 a second)
	// than 8 workers that each wait HostWait (2 s) for the host's turn can
	// turn away. The race detector slows the whole service some tenfold,
	// so under it the backlog keeps that shape at a fifth of the size:
	// 2,000 over 10 minutes (3.3 a second) against 4 workers (2 a second).
	n, spread, workers := 10_000, 30*time.Minute, 8
	if raceEnabled {
		n, spread, workers = 2_000, 10*time.Minute, 4
	}
	cfg := testConfig()
	cfg.Webhooks = WebhookConfig{Sender: s, MaxWorkers: workers, Timeout: 2 * time.Second, RetryBase: 5 * time.Second, MaxAge: time.Hour}
	h := newHarness(t, "sqlite", cannedPDFRenderer{}, cfg)
	// Started first, so that the deliveries that come due while the
	// backlog is written are worked as they would be.
	h.start(h.svc)
	seedDeliveries(t, h, "noisy", "https://dead.example.com/hook", n, spread)
	ctx := context.Background()
	// The backlog's state of issue 24: deliveries coming due all the time
	// (5.5 a second), one attempt at a time in flight. Once the workers
	// keep up with them (none left waiting for a worker), another tenant's
	// delivery is made. Before issue 24 they never kept up: each due
	// delivery held a worker for HostWait.
	testenv.EventuallyWithin(t, 5*time.Minute, "the dead host's due deliveries worked off", func() bool {
		var n int
		err := h.db.pool().queryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND state = 'available'`, queueWebhook).Scan(&n)
		return err == nil && n < cfg.Webhooks.MaxWorkers
	})
	job, _, err := h.svc.Submit(ctx, Input{Tenant: "quiet", User: "u", Markdown: []byte("# q\n"),
		Callback: &Callback{URL: "https://healthy.example.com/hook", BaseURL: "https://outprint.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	before := s.deadAttempts
	s.mu.Unlock()
	submitted := time.Now()
	h.waitTerminal("quiet", job.ID)
	settled := time.Since(submitted)
	h.waitWebhook("quiet", job.ID, func(w *WebhookStatus) bool { return w.State == WebhookDelivered })
	t.Logf("the other tenant's job settled %s after it was submitted, its delivery made %s after that", settled.Round(time.Millisecond), (time.Since(submitted) - settled).Round(time.Millisecond))
	after, _ := s.deliveredAfter(job.ID)
	if after-before > 3 {
		t.Errorf("the healthy delivery arrived after %d more attempts to the dead host (%s each), want at most 3", after-before, s.hold)
	}
}

// TestWebhookGiveUpWithoutTurn: deliveries to a receiver that never
// answers are given up MaxAge after their job ended even when their host's
// turn never came (issue 24: they were never given up).
func TestWebhookGiveUpWithoutTurn(t *testing.T) {
	s := &deadHostSender{hold: 2 * time.Second}
	cfg := testConfig()
	cfg.Webhooks = WebhookConfig{Sender: s, MaxWorkers: 4, Timeout: 2 * time.Second, RetryBase: 5 * time.Second, MaxAge: 3 * time.Second}
	h := newHarness(t, "sqlite", cannedPDFRenderer{}, cfg)
	h.start(h.svc)
	ctx := context.Background()
	var ids []string
	for i := range 8 {
		job, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte(fmt.Sprintf("# %d\n", i)),
			Callback: &Callback{URL: "https://dead.example.com/hook", BaseURL: "https://outprint.example.com"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	untried := 0
	for _, id := range ids {
		j := h.waitWebhook("t", id, func(w *WebhookStatus) bool { return w.State == WebhookDead })
		if j.Webhook.Attempts == 0 {
			untried++
		}
		var lastError string
		if err := h.db.pool().queryRow(ctx, `SELECT last_error FROM outprint_webhooks WHERE job_id = $1`, id).Scan(&lastError); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(lastError, "gave up") {
			t.Errorf("job %s: last_error = %q, want it to say it gave up", id, lastError)
		}
	}
	if untried == 0 {
		t.Errorf("every delivery had an attempt before it was given up; want the ones whose turn never came given up too")
	}
}

// TestWebhookBurstGoesLast: a burst of first deliveries to one host, all
// due at once, does not hold back another tenant's delivery that comes due
// after it (issue 24: 25 s behind 10,000 deliveries to a receiver that
// never answers, each fetched and turned away once before it). The
// healthy delivery must be made while much of the burst has not even been
// fetched yet.
func TestWebhookBurstGoesLast(t *testing.T) {
	s := &deadHostSender{hold: 2 * time.Second}
	n, workers := 10_000, 8
	if raceEnabled {
		n, workers = 2_000, 4
	}
	cfg := testConfig()
	cfg.Webhooks = WebhookConfig{Sender: s, MaxWorkers: workers, Timeout: 2 * time.Second, RetryBase: 5 * time.Second, MaxAge: time.Hour}
	h := newHarness(t, "sqlite", cannedPDFRenderer{}, cfg)
	h.start(h.svc)
	ctx := context.Background()
	const batch = 500
	for start := 0; start < n; start += batch {
		err := h.svc.q.inTx(ctx, true, func(tx txOps) error {
			for range min(batch, n-start) {
				id := uuid.Must(uuid.NewV7()).String()
				at := h.svc.now()
				if _, err := tx.exec(ctx, `INSERT INTO outprint_jobs (id, tenant, user_id, name, state, max_attempts, source, digest, created_at, expires_at)
					VALUES ($1, 'noisy', 'u', 'burst.md', $2, 3, $3, 'burst', $4, $5)`, id, StateCancelled, SourceMarkdown, at, at.Add(time.Hour)); err != nil {
					return err
				}
				if _, err := tx.exec(ctx, `INSERT INTO outprint_webhooks (job_id, url, base_url, state, created_at)
					VALUES ($1, 'https://dead.example.com/hook', 'https://outprint.example.com', $2, $3)`, id, WebhookPending, at); err != nil {
					return err
				}
				// As the cancel of a queued job settles it.
				if err := h.svc.scheduleWebhook(ctx, tx, id, at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("burst of deliveries: %v", err)
		}
	}
	job, _, err := h.svc.Submit(ctx, Input{Tenant: "quiet", User: "u", Markdown: []byte("# q\n"),
		Callback: &Callback{URL: "https://healthy.example.com/hook", BaseURL: "https://outprint.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	h.waitTerminal("quiet", job.ID)
	h.waitWebhook("quiet", job.ID, func(w *WebhookStatus) bool { return w.State == WebhookDelivered })
	// River gives a snoozed job its attempt back and counts the snooze in
	// its metadata: never fetched is attempt 0 and no snooze.
	var unfetched int
	if err := h.db.pool().queryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND attempt = 0 AND json_extract(metadata, '$.snoozes') IS NULL`, queueWebhook).Scan(&unfetched); err != nil {
		t.Fatal(err)
	}
	// Had it waited for the burst, none would be left: the healthy
	// delivery is due after every one of them, so at one priority it
	// comes last. How many are left depends on how fast the machine
	// fetches beside the healthy job's render (a -race run of make test
	// left 45 %), so the bound is a tenth: far from the none a wait
	// leaves, and clear of how loaded a machine may be.
	t.Logf("the healthy delivery was made with %d of the burst's %d deliveries not fetched yet", unfetched, n)
	if unfetched < n/10 {
		t.Errorf("the healthy delivery was made with %d of the burst's %d deliveries not fetched yet, want at least a tenth: it waited for the burst", unfetched, n)
	}
}

func TestHostBurstsTake(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var b hostBursts
	for i := range hostBurstSize {
		if !b.take("a.example.com", t0) {
			t.Fatalf("take(a, t0) #%d = false, want true: a bucket starts full", i+1)
		}
	}
	tests := []struct {
		host string
		at   time.Duration
		want bool
	}{
		{"a.example.com", 0, false}, // the burst is spent
		{"b.example.com", 0, true},  // another host has its own
		{"a.example.com", hostBurstRefill / 2, false},
		{"a.example.com", hostBurstRefill, true},  // one token back
		{"a.example.com", hostBurstRefill, false}, // and spent
		{"a.example.com", time.Hour, true},        // full again
	}
	for _, tt := range tests {
		if got := b.take(tt.host, t0.Add(tt.at)); got != tt.want {
			t.Errorf("take(%s, t0+%s) = %t, want %t", tt.host, tt.at, got, tt.want)
		}
	}
}
