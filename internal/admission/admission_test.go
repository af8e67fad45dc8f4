package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// checkInvariants verifies, under the controller's lock, every bound
// admission promises. Tests call it from a watcher goroutine while other
// goroutines hammer the controller.
func (c *Controller) checkInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running < 0 || c.running > c.cfg.Slots {
		return fmt.Errorf("running = %d, want 0..%d", c.running, c.cfg.Slots)
	}
	if q := c.queue.Len(); q > c.cfg.QueueDepth {
		return fmt.Errorf("queued = %d, want at most %d", q, c.cfg.QueueDepth)
	}
	if c.queue.Len() > 0 && c.running != c.cfg.Slots {
		return fmt.Errorf("%d waiting while only %d of %d slots are held", c.queue.Len(), c.running, c.cfg.Slots)
	}
	sum := 0
	for u, n := range c.users {
		if n < 1 || n > c.cfg.PerUser {
			return fmt.Errorf("user %q has %d tickets, want 1..%d", u, n, c.cfg.PerUser)
		}
		sum += n
	}
	if sum != c.tickets {
		return fmt.Errorf("per-user counts add up to %d, tickets = %d", sum, c.tickets)
	}
	if c.queue.Len() > c.tickets {
		return fmt.Errorf("queued = %d > tickets = %d", c.queue.Len(), c.tickets)
	}
	return nil
}

// waitFor polls cond until it holds; the deadline only guards against a
// hang and is far above any expected time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.EventuallyWithin(t, 20*time.Second, what, cond)
}

func mustEnter(t *testing.T, c *Controller, user string) *Ticket {
	t.Helper()
	tk, err := c.Enter(user)
	if err != nil {
		t.Fatalf("Enter(%q) = %v, want a ticket", user, err)
	}
	return tk
}

func mustHold(t *testing.T, c *Controller, user string) *Ticket {
	t.Helper()
	tk := mustEnter(t, c, user)
	if err := tk.Acquire(context.Background()); err != nil {
		t.Fatalf("Acquire(%q) = %v, want nil", user, err)
	}
	return tk
}

func refusalCode(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

func assertZero(t *testing.T, c *Controller) {
	t.Helper()
	s := c.Stats()
	if s.Running != 0 || s.Queued != 0 || s.Tickets != 0 || s.Users != 0 {
		t.Errorf("Stats() = %+v, want running, queued, tickets and users 0", s)
	}
	if err := c.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// The acceptance scenario of the issue: slots=1, queueDepth=1, perUser=1
// and four users at once give two renders and two immediate busy refusals.
func TestFourUsersAtOnce(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: time.Minute})
	release := make(chan struct{})
	type result struct {
		user string
		err  error
	}
	results := make(chan result, 4)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		user := fmt.Sprintf("user%d", i)
		wg.Go(func() {
			<-start
			tk, err := c.Enter(user)
			if err != nil {
				results <- result{user, err}
				return
			}
			var took time.Duration
			defer func() { tk.Done(took) }()
			err = tk.Acquire(context.Background())
			results <- result{user, err}
			if err == nil {
				<-release
				took = 2 * time.Second
			}
		})
	}
	close(start)

	// Before any slot is freed, one holds the slot, one waits, and two
	// are refused at once.
	var passed, busy int
	for range 3 {
		r := <-results
		if r.err == nil {
			passed++
			continue
		}
		var ref *Refusal
		if !errors.As(r.err, &ref) || ref.Code != limits.CodeBusy {
			t.Fatalf("%s: got %v, want nil or busy", r.user, r.err)
		}
		if ref.Waited != 0 {
			t.Errorf("%s: busy refusal waited %s, want an immediate refusal", r.user, ref.Waited)
		}
		if ref.RetryAfter < time.Second {
			t.Errorf("%s: RetryAfter = %s, want at least 1s", r.user, ref.RetryAfter)
		}
		busy++
	}
	if passed != 1 || busy != 2 {
		t.Fatalf("before release: passed, busy = %d, %d, want 1, 2", passed, busy)
	}
	if s := c.Stats(); s.Running != 1 || s.Queued != 1 {
		t.Errorf("before release Stats() = %+v, want running 1, queued 1", s)
	}
	close(release)
	if r := <-results; r.err != nil {
		t.Errorf("%s: queued Acquire = %v, want nil", r.user, r.err)
	} else {
		passed++
	}
	wg.Wait()
	if passed != 2 || busy != 2 {
		t.Errorf("passed, busy = %d, %d, want 2, 2", passed, busy)
	}
	if s := c.Stats(); s.RefusedQueueFull != 2 {
		t.Errorf("RefusedQueueFull = %d, want 2", s.RefusedQueueFull)
	}
	assertZero(t, c)
}

// One user twice: the first passes, the second is refused user_limit
// before it could fetch anything.
func TestOneUserTwice(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: time.Minute})
	first := mustHold(t, c, "alice")
	_, err := c.Enter("alice")
	if code := refusalCode(err); code != limits.CodeUserLimit {
		t.Fatalf("second Enter(alice) = %v, want user_limit", err)
	}
	// Another user is not affected by alice's count.
	bob := mustEnter(t, c, "bob")
	bob.Done(0)
	first.Done(time.Second)
	// Once done, alice may render again.
	mustHold(t, c, "alice").Done(0)
	if s := c.Stats(); s.RefusedUserLimit != 1 {
		t.Errorf("RefusedUserLimit = %d, want 1", s.RefusedUserLimit)
	}
	assertZero(t, c)
}

// The user count covers queued and running renders together.
func TestPerUserCountsQueuedAndRunning(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 4, PerUser: 2, MaxWait: time.Minute})
	a1 := mustHold(t, c, "alice")
	a2 := mustEnter(t, c, "alice")
	done := make(chan error, 1)
	go func() { done <- a2.Acquire(context.Background()) }()
	waitFor(t, "alice's second render queued", func() bool { return c.Stats().Queued == 1 })
	if _, err := c.Enter("alice"); refusalCode(err) != limits.CodeUserLimit {
		t.Errorf("third Enter(alice) = %v, want user_limit", err)
	}
	a1.Done(0)
	if err := <-done; err != nil {
		t.Errorf("queued Acquire = %v, want nil", err)
	}
	a2.Done(0)
	assertZero(t, c)
}

// Waiters are served strictly in order of arrival.
func TestFIFOOrder(t *testing.T) {
	const n = 8
	c := mustNew(t, Config{Slots: 1, QueueDepth: n, PerUser: 1, MaxWait: time.Minute})
	holder := mustHold(t, c, "holder")
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		tk := mustEnter(t, c, fmt.Sprintf("w%d", i))
		wg.Go(func() {
			defer tk.Done(0)
			if err := tk.Acquire(context.Background()); err != nil {
				t.Errorf("waiter %d: Acquire = %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		// Start the next waiter only once this one is in the queue, so
		// the order of arrival is known.
		waitFor(t, fmt.Sprintf("waiter %d queued", i), func() bool { return c.Stats().Queued == i+1 })
	}
	holder.Done(0)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("slots went to waiters in order %v, want 0..%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("%d waiters got a slot, want %d", len(order), n)
	}
	assertZero(t, c)
}

// A freed slot goes to the oldest waiter even when a newcomer asks at the
// very moment it is freed.
func TestNewcomerNeverOvertakes(t *testing.T) {
	for round := range 200 {
		c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: time.Minute})
		holder := mustHold(t, c, "holder")
		var seq atomic.Int32
		var aPos, bPos int32
		aDone := make(chan error, 1)
		a := mustEnter(t, c, "a")
		go func() {
			err := a.Acquire(context.Background())
			if err == nil {
				aPos = seq.Add(1)
			}
			aDone <- err
		}()
		waitFor(t, "a queued", func() bool { return c.Stats().Queued == 1 })

		b := mustEnter(t, c, "b")
		bDone := make(chan error, 1)
		go func() {
			err := b.Acquire(context.Background())
			if err == nil {
				bPos = seq.Add(1)
			}
			b.Done(0)
			bDone <- err
		}()
		holder.Done(0)
		if err := <-aDone; err != nil {
			t.Fatalf("round %d: oldest waiter: Acquire = %v, want nil", round, err)
		}
		// a holds the slot until the newcomer has queued behind it or
		// been refused (or, were the order broken, has come and gone
		// with the slot), so that b asks while the slot is taken.
		waitFor(t, "newcomer queued or answered", func() bool { return c.Stats().Queued == 1 || len(bDone) == 1 })
		a.Done(0)
		errB := <-bDone
		switch {
		case errB == nil && bPos < aPos:
			t.Fatalf("round %d: newcomer got the slot before the oldest waiter (b=%d, a=%d)", round, bPos, aPos)
		case errB != nil && refusalCode(errB) != limits.CodeBusy:
			t.Fatalf("round %d: newcomer: Acquire = %v, want nil or busy", round, errB)
		}
		assertZero(t, c)
	}
}

// A waiter whose maxWait runs out leaves the queue with a busy refusal.
func TestMaxWait(t *testing.T) {
	const maxWait = 50 * time.Millisecond
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: maxWait})
	holder := mustHold(t, c, "holder")
	w := mustEnter(t, c, "waiter")
	err := w.Acquire(context.Background())
	var r *Refusal
	if !errors.As(err, &r) || r.Code != limits.CodeBusy {
		t.Fatalf("Acquire past maxWait = %v, want busy refusal", err)
	}
	if r.Waited < maxWait || w.Waited() < maxWait {
		t.Errorf("refusal after %s (ticket says %s), want at least maxWait %s", r.Waited, w.Waited(), maxWait)
	}
	if s := c.Stats(); s.Queued != 0 || s.RefusedMaxWait != 1 || s.Running != 1 {
		t.Errorf("Stats() = %+v, want queued 0, running 1, RefusedMaxWait 1", s)
	}
	// The refused ticket still counts its user until Done.
	if _, err := c.Enter("waiter"); refusalCode(err) != limits.CodeUserLimit {
		t.Errorf("Enter(waiter) before Done = %v, want user_limit", err)
	}
	w.Done(0)
	holder.Done(0)
	assertZero(t, c)
}

// A queued client that disconnects frees its place: the next request gets
// into the queue, and then the slot.
func TestCancelFreesPlace(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: time.Minute})
	holder := mustHold(t, c, "holder")

	ctx, cancel := context.WithCancel(context.Background())
	a := mustEnter(t, c, "a")
	aErr := make(chan error, 1)
	go func() { aErr <- a.Acquire(ctx) }()
	waitFor(t, "a queued", func() bool { return c.Stats().Queued == 1 })

	b := mustEnter(t, c, "b")
	if err := b.Acquire(context.Background()); refusalCode(err) != limits.CodeBusy {
		t.Fatalf("Acquire with a full queue = %v, want busy", err)
	}
	b.Done(0)

	cancel()
	if err := <-aErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: Acquire = %v, want context.Canceled", err)
	}
	a.Done(0)
	if s := c.Stats(); s.Queued != 0 || s.Tickets != 1 {
		t.Fatalf("after cancel Stats() = %+v, want queued 0, tickets 1", s)
	}

	next := mustEnter(t, c, "next")
	nextErr := make(chan error, 1)
	go func() { nextErr <- next.Acquire(context.Background()) }()
	waitFor(t, "next queued", func() bool { return c.Stats().Queued == 1 })
	holder.Done(0)
	if err := <-nextErr; err != nil {
		t.Fatalf("next waiter: Acquire = %v, want nil", err)
	}
	next.Done(0)
	assertZero(t, c)
}

// A context that is already cancelled takes nothing.
func TestAcquireCancelledContext(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tk := mustEnter(t, c, "a")
	if err := tk.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled) = %v, want context.Canceled", err)
	}
	if s := c.Stats(); s.Running != 0 {
		t.Errorf("running = %d after a cancelled Acquire, want 0", s.Running)
	}
	tk.Done(0)
	assertZero(t, c)
}

// queueDepth 0: nothing waits, a request finding every slot taken is
// refused at once.
func TestQueueDepthZero(t *testing.T) {
	c := mustNew(t, Config{Slots: 2, QueueDepth: 0, PerUser: 1, MaxWait: time.Hour})
	h1 := mustHold(t, c, "a")
	h2 := mustHold(t, c, "b")
	tk := mustEnter(t, c, "c")
	err := tk.Acquire(context.Background())
	var r *Refusal
	if !errors.As(err, &r) || r.Code != limits.CodeBusy || r.Waited != 0 {
		t.Fatalf("Acquire with slots full and queueDepth 0 = %v, want an immediate busy", err)
	}
	h1.Done(0)
	// A freed slot is free again; the refused ticket may try once more.
	if err := tk.Acquire(context.Background()); err != nil {
		t.Errorf("retry after a slot was freed: Acquire = %v, want nil", err)
	}
	tk.Done(0)
	h2.Done(0)
	assertZero(t, c)
}

// Close releases queued waiters with ErrClosed, refuses new work, lets the
// running render finish and reports when everything was given back.
func TestClose(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 3, PerUser: 1, MaxWait: time.Hour})
	holder := mustHold(t, c, "holder")
	errs := make(chan error, 2)
	var waiters []*Ticket
	for i := range 2 {
		w := mustEnter(t, c, fmt.Sprintf("w%d", i))
		waiters = append(waiters, w)
		go func() { errs <- w.Acquire(context.Background()) }()
	}
	waitFor(t, "two queued", func() bool { return c.Stats().Queued == 2 })
	entered := mustEnter(t, c, "entered")

	c.Close()
	c.Close() // idempotent
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("queued waiter after Close: Acquire = %v, want ErrClosed", err)
		}
	}
	if _, err := c.Enter("late"); !errors.Is(err, ErrClosed) {
		t.Errorf("Enter after Close = %v, want ErrClosed", err)
	}
	if err := entered.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	select {
	case <-c.Drained():
		t.Fatal("Drained closed while a render still holds its slot")
	default:
	}
	if s := c.Stats(); s.Running != 1 || s.Queued != 0 {
		t.Errorf("after Close Stats() = %+v, want running 1 (still rendering), queued 0", s)
	}
	for _, w := range waiters {
		w.Done(0)
	}
	entered.Done(0)
	holder.Done(time.Second)
	select {
	case <-c.Drained():
	case <-time.After(20 * time.Second):
		t.Fatal("Drained not closed after every ticket was done")
	}
	assertZero(t, c)
}

func TestDrainedWithNothingRunning(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1})
	c.Close()
	select {
	case <-c.Drained():
	default:
		t.Error("Drained not closed after Close with no tickets")
	}
}

// Done is idempotent, accepts a nil ticket, and when called from another
// goroutine while Acquire waits it takes the waiter out of the queue.
func TestDone(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 2, PerUser: 1, MaxWait: time.Hour})
	var nilTicket *Ticket
	nilTicket.Done(time.Second) // must not panic

	h := mustHold(t, c, "h")
	h.Done(time.Second)
	h.Done(time.Second)
	if s := c.Stats(); s.Running != 0 || s.Tickets != 0 {
		t.Fatalf("after double Done Stats() = %+v, want nothing held", s)
	}
	if err := h.Acquire(context.Background()); !errors.Is(err, ErrTicketUsed) {
		t.Errorf("Acquire after Done = %v, want ErrTicketUsed", err)
	}

	h2 := mustHold(t, c, "h2")
	if err := h2.Acquire(context.Background()); !errors.Is(err, ErrTicketUsed) {
		t.Errorf("second Acquire while holding = %v, want ErrTicketUsed", err)
	}
	w := mustEnter(t, c, "w")
	wErr := make(chan error, 1)
	go func() { wErr <- w.Acquire(context.Background()) }()
	waitFor(t, "w queued", func() bool { return c.Stats().Queued == 1 })
	w.Done(0)
	if err := <-wErr; !errors.Is(err, ErrTicketUsed) {
		t.Errorf("Acquire whose ticket was done meanwhile = %v, want ErrTicketUsed", err)
	}
	h2.Done(0)
	assertZero(t, c)
}

func TestEnterNoUser(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 1, PerUser: 1})
	if _, err := c.Enter(""); !errors.Is(err, ErrNoUser) {
		t.Errorf(`Enter("") = %v, want ErrNoUser`, err)
	}
}

// mustNew is New for a configuration the test knows to be valid.
func mustNew(t testing.TB, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return c
}

func TestNewRefusesInvalidConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Slots: -1, QueueDepth: 1, PerUser: 1},
		{Slots: 1, QueueDepth: -1, PerUser: 1},
		{Slots: 1, QueueDepth: 1, PerUser: -2},
	} {
		if c, err := New(cfg); err == nil || c != nil {
			t.Errorf("New(%+v) = %v, %v, want an error", cfg, c, err)
		}
	}
	got := mustNew(t, Config{}).Config()
	if want := (Config{Slots: DefaultSlots, PerUser: DefaultPerUser, RenderLimit: limits.DefaultRenderTimeout}); got != want {
		t.Errorf("mustNew(t, Config{}).Config() = %+v, want %+v", got, want)
	}
}

func TestRetryAfterRounding(t *testing.T) {
	for _, tc := range []struct {
		estimate, limit, want time.Duration
	}{
		{0, time.Minute, time.Second},
		{200 * time.Millisecond, time.Minute, time.Second},
		{time.Second, time.Minute, time.Second},
		{1001 * time.Millisecond, time.Minute, 2 * time.Second},
		{7 * time.Second, time.Minute, 7 * time.Second},
		{90 * time.Second, time.Minute, time.Minute},
		{90 * time.Second, 1500 * time.Millisecond, 2 * time.Second},
		{90 * time.Second, 100 * time.Millisecond, time.Second},
	} {
		if got := retryAfter(tc.estimate, tc.limit); got != tc.want {
			t.Errorf("retryAfter(%s, %s) = %s, want %s", tc.estimate, tc.limit, got, tc.want)
		}
	}
}

// Retry-After follows the moving average of render durations, capped at
// the render limit, and the refusals carry it.
func TestRetryAfterMovingAverage(t *testing.T) {
	c := mustNew(t, Config{Slots: 1, QueueDepth: 0, PerUser: 1, RenderLimit: 30 * time.Second})
	if got := c.RetryAfter(); got != InitialEstimate {
		t.Errorf("RetryAfter() before any render = %s, want %s", got, InitialEstimate)
	}
	render := func(d time.Duration) {
		mustHold(t, c, "u").Done(d)
	}
	render(10 * time.Second) // the first sample replaces the initial estimate
	if got := c.RetryAfter(); got != 10*time.Second {
		t.Errorf("RetryAfter() after one 10 s render = %s, want 10s", got)
	}
	render(0) // no render ran: nothing recorded
	if got := c.RetryAfter(); got != 10*time.Second {
		t.Errorf("RetryAfter() after Done(0) = %s, want 10s", got)
	}
	render(20 * time.Second) // 0.3*20 + 0.7*10 = 13
	if got := c.RetryAfter(); got != 13*time.Second {
		t.Errorf("RetryAfter() after 10 s and 20 s = %s, want 13s", got)
	}
	for range 30 {
		render(5 * time.Minute)
	}
	if got := c.RetryAfter(); got != 30*time.Second {
		t.Errorf("RetryAfter() after long renders = %s, want the 30 s cap", got)
	}
	for range 60 {
		render(100 * time.Millisecond)
	}
	if got := c.RetryAfter(); got != time.Second {
		t.Errorf("RetryAfter() after fast renders = %s, want 1s", got)
	}

	h := mustHold(t, c, "h")
	tk := mustEnter(t, c, "x")
	var r *Refusal
	if err := tk.Acquire(context.Background()); !errors.As(err, &r) {
		t.Fatalf("Acquire = %v, want a refusal", err)
	}
	if r.RetryAfter != time.Second || r.RetryAfterSeconds() != 1 {
		t.Errorf("refusal RetryAfter = %s (%d s), want 1s", r.RetryAfter, r.RetryAfterSeconds())
	}
	tk.Done(0)
	h.Done(0)
}

// The refusal body is exactly the one of SPEC §4.
func TestRefusalLimitsError(t *testing.T) {
	for _, tc := range []struct {
		code, body string
	}{
		{limits.CodeBusy, `{"errors":[{"field":"","source":"service","code":"busy","message":"busy, retry later: the renderer is at capacity","line":null}]}`},
		{limits.CodeUserLimit, `{"errors":[{"field":"","source":"service","code":"user_limit","message":"too many renders, retry later: you already have as many renders queued or running as one user may have","line":null}]}`},
	} {
		r := &Refusal{Code: tc.code, RetryAfter: 3 * time.Second}
		le := r.LimitsError()
		if le.Kind != limits.KindBusy {
			t.Errorf("LimitsError(%s).Kind = %q, want %q", tc.code, le.Kind, limits.KindBusy)
		}
		if le.Code() != tc.code {
			t.Errorf("LimitsError(%s).Code() = %q, want %q", tc.code, le.Code(), tc.code)
		}
		b, err := json.Marshal(struct {
			Errors []limits.Problem `json:"errors"`
		}{le.Problems})
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.body {
			t.Errorf("LimitsError(%s) body = %s, want %s", tc.code, b, tc.body)
		}
		if r.RetryAfterSeconds() != 3 {
			t.Errorf("RetryAfterSeconds() = %d, want 3", r.RetryAfterSeconds())
		}
		if r.Error() == "" {
			t.Error("Refusal.Error() is empty")
		}
	}
}

// Goroutines hammer Enter, Acquire and Done with random cancels, timeouts
// and panics recovered by the caller; a watcher checks every bound while
// they run, and at the end every count is back to zero.
func TestHammer(t *testing.T) {
	cfg := Config{Slots: 3, QueueDepth: 4, PerUser: 2, MaxWait: 5 * time.Millisecond}
	c := mustNew(t, cfg)
	const (
		workers    = 24
		iterations = 150
		users      = 8
	)
	var (
		running  atomic.Int32
		perUser  [users]atomic.Int32
		outcomes sync.Map // outcome name -> *atomic.Int64
		stop     = make(chan struct{})
		watchErr = make(chan error, 1)
	)
	count := func(name string) {
		v, _ := outcomes.LoadOrStore(name, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	go func() { // the invariants' watcher: ends at stop or at a broken one
		defer close(watchErr)
		tick := time.NewTicker(50 * time.Microsecond)
		defer tick.Stop()
		for {
			if err := c.checkInvariants(); err != nil {
				watchErr <- err
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	// render is one request as the gateway makes it: a deferred Done on
	// every path, and a panic that the caller recovers from.
	render := func(rng *rand.Rand, u int) (err error) {
		tk, err := c.Enter(fmt.Sprintf("u%d", u))
		if err != nil {
			return err
		}
		if n := perUser[u].Add(1); n > int32(cfg.PerUser) {
			t.Errorf("user u%d has %d tickets, want at most %d", u, n, cfg.PerUser)
		}
		var took time.Duration
		defer func() {
			perUser[u].Add(-1)
			tk.Done(took)
		}()
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("recovered: %v", p)
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if rng.IntN(4) == 0 {
			delay := time.Duration(rng.IntN(3000)) * time.Microsecond
			time.AfterFunc(delay, cancel)
		}
		if err := tk.Acquire(ctx); err != nil {
			return err
		}
		if n := running.Add(1); n > int32(cfg.Slots) {
			t.Errorf("%d renders hold a slot, want at most %d", n, cfg.Slots)
		}
		defer running.Add(-1)
		start := time.Now()
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		if rng.IntN(10) == 0 {
			panic("render blew up")
		}
		took = time.Since(start)
		return nil
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range iterations {
				err := render(rng, rng.IntN(users))
				var r *Refusal
				switch {
				case err == nil:
					count("ok")
				case errors.As(err, &r):
					count(r.Code)
				case errors.Is(err, context.Canceled):
					count("cancelled")
				default:
					count("panic")
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-watchErr; err != nil {
		t.Fatalf("invariant broken under load: %v", err)
	}
	total := int64(0)
	for _, name := range []string{"ok", limits.CodeBusy, limits.CodeUserLimit, "cancelled", "panic"} {
		v, ok := outcomes.Load(name)
		if !ok {
			t.Errorf("no request ended %q; the hammer does not exercise that path", name)
			continue
		}
		n := v.(*atomic.Int64).Load()
		t.Logf("%s: %d", name, n)
		total += n
	}
	if total != workers*iterations {
		t.Errorf("outcomes add up to %d, want %d", total, workers*iterations)
	}
	assertZero(t, c)
	if running.Load() != 0 {
		t.Errorf("running = %d at the end, want 0", running.Load())
	}
}

// BenchmarkAdmit measures one uncontended admission: Enter, Acquire, Done.
func BenchmarkAdmit(b *testing.B) {
	c := mustNew(b, Config{Slots: 1, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute})
	ctx := context.Background()
	for b.Loop() {
		tk, err := c.Enter("u")
		if err != nil {
			b.Fatal(err)
		}
		if err := tk.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		tk.Done(time.Second)
	}
}

// BenchmarkRefusal measures the busy refusal of a saturated controller,
// from many goroutines at once: the cost a refused client pays before its
// 429.
func BenchmarkRefusal(b *testing.B) {
	c := mustNew(b, Config{Slots: 1, QueueDepth: 0, PerUser: 1 << 30, MaxWait: time.Minute})
	holder, _ := c.Enter("holder")
	if err := holder.Acquire(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer holder.Done(0)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			tk, err := c.Enter("u")
			if err != nil {
				b.Fatal(err)
			}
			if err := tk.Acquire(ctx); refusalCode(err) != limits.CodeBusy {
				b.Fatalf("Acquire = %v, want busy", err)
			}
			tk.Done(0)
		}
	})
}
