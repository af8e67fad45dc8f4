package worker

import (
	"context"
	"errors"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
)

// TestDefaultPreviewSlots: one preview slot per two processors, never none.
func TestDefaultPreviewSlots(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ procs, want int }{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {16, 8}} {
		if got := DefaultPreviewSlots(tt.procs); got != tt.want {
			t.Errorf("DefaultPreviewSlots(%d) = %d, want %d", tt.procs, got, tt.want)
		}
	}
}

// TestPreviewPool: previews have a pool of their own with the rules of
// admission (issue 24: they took the render slot, and a bystander's render
// waited behind one). With the one render slot, one preview slot and a
// queue of one: alice's preview draws, bob's waits in the preview queue,
// carol's is busy and alice's second is user_limit — and all the while
// dave's render takes the render slot at once and finishes; previews were
// never in it.
func TestPreviewPool(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{PreviewSlots: 1})
	ctx := context.Background()
	release := make(chan struct{})
	drawing := make(chan string, 2)
	done := make(chan error, 2)
	preview := func(user string) {
		done <- tb.cap.Preview(ctx, user, func(context.Context) error {
			drawing <- user
			<-release
			return nil
		})
	}
	go preview("alice") // ends when release is closed
	if got := <-drawing; got != "alice" {
		t.Fatalf("first drawing by %s, want alice", got)
	}
	go preview("bob") // waits in the queue, then draws
	testenv.Eventually(t, "bob's preview to queue", func() bool { return tb.cap.Previews().Stats().Queued == 1 })
	noDraw := func(context.Context) error { t.Error("a refused preview drew"); return nil }
	if err := tb.cap.Preview(ctx, "carol", noDraw); !isRefusal(err, limits.CodeBusy) {
		t.Errorf("a preview with the pool and its queue full = %v, want busy", err)
	}
	if err := tb.cap.Preview(ctx, "alice", noDraw); !isRefusal(err, limits.CodeUserLimit) {
		t.Errorf("alice's second preview = %v, want user_limit", err)
	}

	// A render meanwhile: the render slot is free, whatever the previews do.
	if st := tb.adm.Stats(); st.Running != 0 || st.Queued != 0 || st.Tickets != 0 {
		t.Errorf("render admission while previews draw and wait = %+v, want untouched", st)
	}
	tk, err := tb.cap.Enter("dave")
	if err != nil {
		t.Fatal(err)
	}
	checked, err := tk.Check(ctx, render.Request{Name: "m.md", Markdown: []byte("# Dave\n")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tk.Render(ctx, checked)
	if err != nil || string(res.PDF) != "%PDF Dave" {
		t.Fatalf("dave's render while the previews hold their pool = %v, %v, want the PDF", res, err)
	}
	if st := tb.cap.Previews().Stats(); st.Running != 1 || st.Queued != 1 {
		t.Errorf("preview pool after dave's render = %+v, want alice's drawing and bob's waiting still", st)
	}
	tk.Done()

	close(release)
	if got := <-drawing; got != "bob" {
		t.Errorf("second drawing by %s, want bob", got)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Preview = %v, want nil", err)
		}
	}
	if st := tb.cap.Previews().Stats(); st.Running != 0 || st.Tickets != 0 {
		t.Errorf("preview pool at the end = %+v, want idle", st)
	}
	// Preview refusals are not render refusals (the render alert reads
	// the Observer's).
	if len(tb.obs.refused) != 0 || len(tb.obs.renders) != 1 {
		t.Errorf("observed refusals %v, renders %v, want none and dave's", tb.obs.refused, tb.obs.renders)
	}
}

// TestPreviewClientGone: a preview whose client leaves while it waits
// leaves the queue, draws nothing and gives its user back.
func TestPreviewClientGone(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{PreviewSlots: 1})
	release := make(chan struct{})
	held := make(chan struct{})
	go func() { // ends when release is closed
		_ = tb.cap.Preview(context.Background(), "alice", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { // ends when ctx is cancelled
		errc <- tb.cap.Preview(ctx, "bob", func(context.Context) error { t.Error("bob's preview drew after he left"); return nil })
	}()
	testenv.Eventually(t, "bob's preview to queue", func() bool { return tb.cap.Previews().Stats().Queued == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Preview of a client that left = %v, want context.Canceled", err)
	}
	close(release)
	testenv.Eventually(t, "the preview pool to be idle", func() bool { return tb.cap.Previews().Stats().Tickets == 0 })
}
