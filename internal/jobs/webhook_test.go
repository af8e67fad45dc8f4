package jobs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedSender is a WebhookSender whose answers the test scripts: the
// delivery worker's schedule (retries, Retry-After, giving up, one
// delivery per host) is what these tests look at. Signing and sending are
// package webhook's, tested there and end to end in httpapi.
type scriptedSender struct {
	answer func(d WebhookDelivery) WebhookResult
	hold   time.Duration // how long each attempt takes

	mu       sync.Mutex
	calls    []WebhookDelivery
	at       []time.Time
	inFlight map[string]int
	maxHost  int
}

func (s *scriptedSender) Send(ctx context.Context, d WebhookDelivery) WebhookResult {
	host := callbackHost(d.URL)
	s.mu.Lock()
	s.calls = append(s.calls, d)
	s.at = append(s.at, time.Now())
	if s.inFlight == nil {
		s.inFlight = map[string]int{}
	}
	s.inFlight[host]++
	s.maxHost = max(s.maxHost, s.inFlight[host])
	s.mu.Unlock()
	if s.hold > 0 {
		time.Sleep(s.hold)
	}
	s.mu.Lock()
	s.inFlight[host]--
	s.mu.Unlock()
	return s.answer(d)
}

func (s *scriptedSender) snapshot() ([]WebhookDelivery, []time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]WebhookDelivery(nil), s.calls...), append([]time.Time(nil), s.at...), s.maxHost
}

func (h *harness) waitWebhook(tenant, id string, cond func(*WebhookStatus) bool) Job {
	h.t.Helper()
	return h.wait(tenant, id, time.Minute, func(j Job) bool { return j.Webhook != nil && cond(j.Webhook) })
}

// TestWebhookSchedule: Retry-After is honoured, 5xx answers are retried
// with one event id until MaxAge after the job ended, then the delivery is
// dead; a job without callback has no webhook.
func TestWebhookSchedule(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel() // each engine has its own database, service and receivers
			s := &scriptedSender{answer: func(d WebhookDelivery) WebhookResult {
				if d.Attempt == 1 {
					return WebhookResult{Status: 503, RetryAfter: 400 * time.Millisecond}
				}
				return WebhookResult{Status: 500}
			}}
			cfg := testConfig()
			// MaxAge leaves room for a first attempt that comes late on a
			// loaded machine: Retry-After must not already reach past it.
			cfg.Webhooks = WebhookConfig{Sender: s, RetryBase: 100 * time.Millisecond, RetryMax: 300 * time.Millisecond, MaxAge: 8 * time.Second}
			h := newHarness(t, kind, cannedPDFRenderer{}, cfg)
			h.start(h.svc)
			ctx := context.Background()

			plain, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte("# x\n")})
			if err != nil {
				t.Fatal(err)
			}
			job, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte("# y\n"),
				Callback: &Callback{URL: "https://hooks.example.com/a", BaseURL: "https://outprint.example.com"}})
			if err != nil {
				t.Fatal(err)
			}
			final := h.waitWebhook("t", job.ID, func(w *WebhookStatus) bool { return w.State == WebhookDead })
			if final.State != StateSucceeded || final.Webhook.LastStatus == nil || *final.Webhook.LastStatus != 500 || final.Webhook.NextAttemptAt != nil {
				t.Errorf("job %s webhook = %+v, want dead with last status 500", final.State, final.Webhook)
			}
			var lastError string
			if err := h.db.pool().queryRow(ctx, `SELECT last_error FROM outprint_webhooks WHERE job_id = $1`, job.ID).Scan(&lastError); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(lastError, "gave up") {
				t.Errorf("last_error = %q, want it to say it gave up", lastError)
			}
			calls, at, _ := s.snapshot()
			if len(calls) < 2 || final.Webhook.Attempts != len(calls) {
				t.Fatalf("attempts = %d (row says %d), want at least 2 and the row to agree", len(calls), final.Webhook.Attempts)
			}
			for i, c := range calls {
				if c.EventID != EventID(job.ID) || c.Attempt != i+1 || c.URL != "https://hooks.example.com/a" ||
					c.BaseURL != "https://outprint.example.com" || c.Job.State != StateSucceeded || c.Job.Webhook != nil {
					t.Errorf("attempt %d = %+v, want event %s, attempt %d, the succeeded job", i+1, c, EventID(job.ID), i+1)
				}
			}
			// Retry-After (400 ms) is a lower bound of the second attempt;
			// the backoff alone would be at most 150 ms.
			if gap := at[1].Sub(at[0]); gap < 400*time.Millisecond {
				t.Errorf("second attempt %s after the first, want Retry-After's 400ms at least", gap)
			}
			if got, err := h.svc.Get(ctx, "t", plain.ID); err != nil || got.Webhook != nil {
				t.Errorf("job without callback: webhook = %+v, %v; want none", got.Webhook, err)
			}
		})
	}
}

// TestWebhookOneDeliveryPerHost: deliveries to one host go one at a time
// (PerHost 1) even with several workers; another host is not held up.
func TestWebhookOneDeliveryPerHost(t *testing.T) {
	s := &scriptedSender{hold: 150 * time.Millisecond, answer: func(WebhookDelivery) WebhookResult { return WebhookResult{Status: 204} }}
	cfg := testConfig()
	cfg.MaxWorkers = 4
	cfg.Webhooks = WebhookConfig{Sender: s, MaxWorkers: 4, HostWait: 50 * time.Millisecond, RetryBase: 20 * time.Millisecond}
	h := newHarness(t, "sqlite", cannedPDFRenderer{}, cfg)
	h.start(h.svc)
	ctx := context.Background()
	var ids []string
	for i := range 6 {
		url := "https://one.example.com/hook"
		if i%3 == 2 {
			url = "https://other.example.com/hook"
		}
		job, _, err := h.svc.Submit(ctx, Input{Tenant: "t", User: "u", Markdown: []byte("# z\n"), Callback: &Callback{URL: url, BaseURL: "http://x"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	for _, id := range ids {
		h.waitWebhook("t", id, func(w *WebhookStatus) bool { return w.State == WebhookDelivered })
	}
	calls, _, maxHost := s.snapshot()
	if len(calls) != 6 || maxHost != 1 {
		t.Errorf("%d attempts with at most %d in flight to one host, want 6 and 1", len(calls), maxHost)
	}
}

func TestWebhookVerdict(t *testing.T) {
	for _, tc := range []struct {
		res  WebhookResult
		want string
	}{
		{WebhookResult{Status: 200}, WebhookDelivered},
		{WebhookResult{Status: 204}, WebhookDelivered},
		{WebhookResult{Status: 500}, WebhookRetrying},
		{WebhookResult{Status: 503}, WebhookRetrying},
		{WebhookResult{Status: 429}, WebhookRetrying},
		{WebhookResult{Status: 408}, WebhookRetrying},
		{WebhookResult{Status: 410}, WebhookDead},
		{WebhookResult{Status: 404}, WebhookDead},
		{WebhookResult{Status: 400}, WebhookDead},
		{WebhookResult{Status: 307}, WebhookDead},
		{WebhookResult{Err: errors.New("connection refused")}, WebhookRetrying},
		{WebhookResult{Err: errors.New("address not allowed"), Permanent: true}, WebhookDead},
	} {
		if got := webhookVerdict(tc.res); got != tc.want {
			t.Errorf("webhookVerdict(%+v) = %s, want %s", tc.res, got, tc.want)
		}
	}
}

func TestWebhookBackoff(t *testing.T) {
	base, cap := 5*time.Second, time.Hour
	for attempt, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 5: 80 * time.Second, 12: time.Hour, 40: time.Hour} {
		for range 50 {
			if got := webhookBackoff(base, cap, attempt); got < want/2 || got > want*3/2 {
				t.Errorf("webhookBackoff(attempt %d) = %s, want %s ±50%%", attempt, got, want)
			}
		}
	}
}
