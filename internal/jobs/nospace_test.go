package jobs

import (
	"context"
	"errors"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
)

// TestSubmitDiskFull: a job whose input finds the store's disk full (a
// real tmpfs filled to the last byte) is refused with the KindNoSpace
// error (507 no_space with Retry-After at the HTTP edge), not an internal
// error whose reason is only in the log; no job is left behind, and once
// space is freed the same input is accepted.
func TestSubmitDiskFull(t *testing.T) {
	disk := testenv.SmallDisk(t, 1<<20)
	st, err := store.NewFS(disk + "/data")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "sqlite", cannedPDFRenderer{}, testConfig())
	h.store = st
	svc := h.service(cannedPDFRenderer{}, testConfig())
	ctx := context.Background()
	testenv.FillDisk(t, disk)

	in := Input{Tenant: "t", User: "u", Name: "a.md", Markdown: []byte("# full\n\nsome text that needs a block\n")}
	_, _, err = svc.Submit(ctx, in)
	var le *limits.Error
	if !errors.As(err, &le) || le.Kind != limits.KindNoSpace || le.Code() != limits.CodeNoSpace {
		t.Fatalf("Submit on a full disk = %v, want a *limits.Error of kind %s", err, limits.KindNoSpace)
	}
	if !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("Submit on a full disk = %v, want it to wrap store.ErrNoSpace", err)
	}
	if list, err := svc.List(ctx, "t", "u", 0); err != nil || len(list) != 0 {
		t.Errorf("List after the refusal = %d jobs, %v; want none", len(list), err)
	}

	// Space freed: the same input is accepted.
	testenv.FreeDisk(t, disk)
	if _, created, err := svc.Submit(ctx, in); err != nil || !created {
		t.Errorf("Submit after space was freed = %v, %v; want a new job", created, err)
	}
}
