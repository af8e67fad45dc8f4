package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
)

// users are four API keys, each its own user.
var users = map[string]string{
	"key-ann": "ann/acme", "key-bob": "bob/acme", "key-cy": "cy/beta", "key-dee": "dee/beta",
}

// TestFourUsersAtOnce: with slots=1, queueDepth=1, perUser=1, four users
// at once give two 200s and two immediate 429 busy with Retry-After, and
// /healthz, /readyz and /metrics answer while the slot is busy and the
// queue is full.
func TestFourUsersAtOnce(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1},
		keys:      users, wrap: g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	var answers []<-chan answer
	for key := range users {
		answers = append(answers, async(func() answer { return e.postJSON(ctx, key, doc("Memo of "+key), nil) }))
	}

	// The gate holds the render that took the slot, so the refusals can
	// only have come while the slot was busy and the queue full: they
	// waited for no render.
	e.waitFor("one running, one queued, two refused", func(st admission.Stats) bool {
		return st.Running == 1 && st.Queued == 1 && st.RefusedQueueFull == 2
	})
	pending, refused := answers, 0
	testenv.EventuallyWithin(t, time.Minute, "two refusals answered", func() bool {
		var next []<-chan answer
		for _, ch := range pending {
			select {
			case a := <-ch:
				ps := a.wantError(t, http.StatusTooManyRequests, limits.CodeBusy)
				if ps[0].Source != limits.SourceService || ps[0].Message != admission.BusyMessage {
					t.Errorf("refusal = %+v, want source service and %q", ps[0], admission.BusyMessage)
				}
				a.retryAfter(t)
				refused++
			default:
				next = append(next, ch)
			}
		}
		pending = next
		return refused >= 2
	})
	if len(pending) != 2 {
		t.Fatalf("%d requests still pending, want 2", len(pending))
	}

	// Liveness never waits behind render work: the gate is closed, so an
	// answer here proves it.
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if a := e.get(hctx, "/healthz"); a.err != nil || a.status != http.StatusOK || !strings.Contains(string(a.body), `"ok"`) {
		t.Errorf("/healthz while busy = %d %s %v, want 200 ok", a.status, a.body, a.err)
	}
	if a := e.get(hctx, "/readyz"); a.err != nil || a.status != http.StatusOK || !strings.Contains(string(a.body), `"running":1`) {
		t.Errorf("/readyz while busy = %d %s %v, want 200 with running 1", a.status, a.body, a.err)
	}
	m := e.get(hctx, "/metrics")
	for _, want := range []string{
		"outprint_admission_running 1", "outprint_admission_queued 1",
		`outprint_admission_refusals_total{code="busy"} 2`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("/metrics while busy lacks %q", want)
		}
	}

	g.open()
	for _, ch := range pending {
		pdf := (<-ch).wantPDF(t)
		if got := pdfInfo(t, pdf, "Pages"); got != "1" {
			t.Errorf("pdfinfo Pages = %q, want 1", got)
		}
	}
	e.wantIdle()
	m = e.get(ctx, "/metrics")
	for _, want := range []string{
		"outprint_admission_queue_wait_seconds_count 4",
		`outprint_render_duration_seconds_count{result="ok"} 2`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("/metrics after the renders lacks %q", want)
		}
	}
}

// TestSameUserTwice: one user twice at once gives 200 and 429 user_limit;
// the second is refused before anything is fetched or queued.
func TestSameUserTwice(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 2, QueueDepth: 1, PerUser: 1},
		keys:      users, wrap: g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	first := async(func() answer { return e.postJSON(ctx, "key-ann", doc("First"), nil) })
	<-g.entered
	// A free slot remains: only the per-user bound can refuse.
	a := e.postJSON(ctx, "key-ann", doc("Second"), nil)
	ps := a.wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
	if ps[0].Source != limits.SourceService {
		t.Errorf("source = %q, want service", ps[0].Source)
	}
	a.retryAfter(t)
	g.open()
	(<-first).wantPDF(t)
	e.wantIdle()
	if st := e.adm.Stats(); st.RefusedUserLimit != 1 {
		t.Errorf("RefusedUserLimit = %d, want 1", st.RefusedUserLimit)
	}
}

// TestQueuedClientDisconnects: a queued client that disconnects leaves
// the queue, and its place goes to the next request.
func TestQueuedClientDisconnects(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1},
		keys:      users, wrap: g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	running := async(func() answer { return e.postJSON(ctx, "key-ann", doc("Running"), nil) })
	<-g.entered

	leaving, leave := context.WithCancel(ctx)
	left := async(func() answer { return e.postJSON(leaving, "key-bob", doc("Leaving"), nil) })
	e.waitFor("bob queued", func(st admission.Stats) bool { return st.Queued == 1 })
	leave()
	if a := <-left; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("the leaving client's request = %d %v, want its own cancellation", a.status, a.err)
	}
	e.waitFor("bob gone from the queue and uncounted", func(st admission.Stats) bool {
		return st.Queued == 0 && st.Tickets == 1
	})

	// With queueDepth 1 the next request is refused unless the place was
	// freed.
	next := async(func() answer { return e.postJSON(ctx, "key-cy", doc("Next"), nil) })
	e.waitFor("cy queued", func(st admission.Stats) bool { return st.Queued == 1 })
	g.open()
	(<-running).wantPDF(t)
	if got := pdfText(t, (<-next).wantPDF(t)); !strings.Contains(got, "Next") {
		t.Errorf("the next request's PDF lacks its title:\n%s", got)
	}
	e.wantIdle()
	if st := e.adm.Stats(); st.RefusedQueueFull+st.RefusedMaxWait != 0 {
		t.Errorf("refusals = %+v, want none", st)
	}
}

// TestMaxWait: a waiter whose maxWait runs out gets 429 busy.
func TestMaxWait(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: 200 * time.Millisecond},
		keys:      users, wrap: g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	running := async(func() answer { return e.postJSON(ctx, "key-ann", doc("Running"), nil) })
	<-g.entered
	a := e.postJSON(ctx, "key-bob", doc("Waiting"), nil)
	a.wantError(t, http.StatusTooManyRequests, limits.CodeBusy)
	a.retryAfter(t)
	if st := e.adm.Stats(); st.RefusedMaxWait != 1 || st.Tickets != 1 {
		t.Errorf("after the wait ran out admission is %+v, want RefusedMaxWait 1 and only the running ticket", st)
	}
	g.open()
	(<-running).wantPDF(t)
	e.wantIdle()
}

// TestQueueDepthZero: with queueDepth 0 nothing waits: a request that
// finds the slot taken is refused at once.
func TestQueueDepthZero(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 0, PerUser: 1},
		keys:      users, wrap: g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	running := async(func() answer { return e.postJSON(ctx, "key-ann", doc("Running"), nil) })
	<-g.entered
	a := e.postJSON(ctx, "key-bob", doc("Refused"), nil)
	a.wantError(t, http.StatusTooManyRequests, limits.CodeBusy)
	if st := e.adm.Stats(); st.RefusedQueueFull != 1 {
		t.Errorf("RefusedQueueFull = %d, want 1", st.RefusedQueueFull)
	}
	g.open()
	(<-running).wantPDF(t)
	e.wantIdle()
}

// panicOnce runs the real render and then panics, the first time only: a
// fault in the render stage after TeX has run.
type panicOnce struct {
	next  Renderer
	fired atomic.Bool
}

func (p *panicOnce) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	res, err := p.next.Render(ctx, pr, progress)
	if p.fired.CompareAndSwap(false, true) {
		panic(fmt.Sprintf("injected fault after a render (err %v)", err))
	}
	return res, err
}

// TestPanicGivesBack: a render that panics answers 500 with the error
// list, gives its slot and user count back, and the same user renders
// next.
func TestPanicGivesBack(t *testing.T) {
	t.Parallel()
	p := &panicOnce{}
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1},
		keys:      users,
		wrap:      func(next Renderer) Renderer { p.next = next; return p },
	})
	ctx := context.Background()
	a := e.postJSON(ctx, "key-ann", doc("Panics"), nil)
	ps := a.wantError(t, http.StatusInternalServerError, limits.CodeInternal)
	if strings.Contains(ps[0].Message, "injected") {
		t.Errorf("the panic's text reached the client: %q", ps[0].Message)
	}
	if !strings.Contains(e.logs.String(), "injected fault") {
		t.Errorf("the panic is not in the logs")
	}
	e.wantIdle()
	e.postJSON(ctx, "key-ann", doc("After the panic"), nil).wantPDF(t)
	e.wantIdle()
	if m := e.get(ctx, "/metrics"); !strings.Contains(string(m.body), `outprint_render_duration_seconds_count{result="internal"} 1`) {
		t.Errorf("/metrics does not count the panicked render as internal")
	}
}

// TestTimeoutGivesBack: a render over the time limit answers 504 timeout
// and gives its slot and user count back.
func TestTimeoutGivesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1},
		limits:    limits.Render{Timeout: 300 * time.Millisecond},
		keys:      users,
	})
	var b strings.Builder
	b.WriteString("# Long\n\n")
	// Some 50 pages: a warm process typesets 400 paragraphs within the
	// limit.
	for i := range 2400 {
		fmt.Fprintf(&b, "Paragraph %d of a document that takes longer than the lowered time limit.\n\n", i)
	}
	a := e.postJSON(context.Background(), "key-ann", b.String(), nil)
	ps := a.wantError(t, http.StatusGatewayTimeout, limits.CodeTimeout)
	if ps[0].Source != limits.SourceDocument {
		t.Errorf("source = %q, want document", ps[0].Source)
	}
	e.wantIdle()
}
