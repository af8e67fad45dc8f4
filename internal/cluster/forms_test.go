package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/worker"
)

// TestRemoteForms: a gateway's Remote reads, checks and fills a form on a
// worker with the answers the worker's own filler gives — the same
// fields (maxLen included), the same error list for bad values, a flat
// PDF with the filled counts — and the worker's form routes take only the
// cluster secret and answer busy, so the gateway answers busy, while its
// one slot is taken.
func TestRemoteForms(t *testing.T) {
	testenv.Require(t, "xelatex", "qpdf", "prlimit")
	t.Parallel()
	runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	filler, err := forms.New(forms.Config{TempDir: t.TempDir()}, runner)
	if err != nil {
		t.Fatal(err)
	}
	pl := render.New(render.Config{Engine: runner, TempDir: t.TempDir()})
	adm, err := admission.New(admission.Config{Slots: 1, PerUser: 1, QueueDepth: 0, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	capacity, err := worker.New(worker.Config{Pipeline: pl, Renderer: pl, Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	wk, err := NewWorker(WorkerConfig{Capacity: capacity, Secret: testSecret, Forms: filler, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(wk.Handler())
	t.Cleanup(hs.Close)
	rr, err := NewRemote(RemoteConfig{Workers: []string{hs.URL}, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	form, err := os.ReadFile("../../examples/onboarding-form.pdf")
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile("../../examples/onboarding-values.json")
	if err != nil {
		t.Fatal(err)
	}

	want, err := filler.Fields(ctx, form)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rr.Fields(ctx, form)
	if err != nil || len(got) == 0 || len(got) != len(want) {
		t.Fatalf("Remote.Fields = %d fields, %v; want the worker's %d", len(got), err, len(want))
	}
	maxLen := false
	for i := range want {
		// Through JSON, as a client reads them: the listing's fields.
		w, _ := want[i].MarshalJSON()
		g, _ := got[i].MarshalJSON()
		if !bytes.Equal(w, g) {
			t.Errorf("Remote.Fields()[%d] = %s, want %s", i, g, w)
		}
		maxLen = maxLen || got[i].MaxLen > 0
	}
	if !maxLen {
		t.Errorf("no field read back with its maxLen; the example form has one")
	}

	bad := []byte(`{"no such field": "x", "agree": "yes"}`)
	wantErr := filler.Check(ctx, form, bad)
	gotErr := rr.Check(ctx, form, bad)
	var wle, gle *limits.Error
	if !errors.As(wantErr, &wle) || !errors.As(gotErr, &gle) || gle.Kind != wle.Kind || !reflect.DeepEqual(gle.Problems, wle.Problems) {
		t.Errorf("Remote.Check(bad values) = %v, want the worker's %v", gotErr, wantErr)
	}
	if err := rr.Check(ctx, form, values); err != nil {
		t.Errorf("Remote.Check(the example's values) = %v, want nil", err)
	}

	local, err := filler.Fill(ctx, form, values, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rr.Fill(ctx, form, values, nil)
	if err != nil {
		t.Fatalf("Remote.Fill = %v", err)
	}
	if !bytes.HasPrefix(res.PDF, []byte("%PDF-")) || res.Pages != local.Pages || res.Fields != local.Fields || res.Filled != local.Filled || res.Filled == 0 {
		t.Errorf("Remote.Fill = %d bytes %.5q, pages %d, fields %d, filled %d; want a PDF with the worker's figures %d, %d, %d",
			len(res.PDF), res.PDF, res.Pages, res.Fields, res.Filled, local.Pages, local.Fields, local.Filled)
	}

	// The secret, on the form routes too.
	for _, path := range []string{FormFieldsPath, FormCheckPath, FormFillPath} {
		resp, err := http.Post(hs.URL+path, "application/json", bytes.NewReader([]byte(`{"pdf":""}`)))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without the secret = %d, want 401", path, resp.StatusCode)
		}
	}

	// The worker's one slot taken: its busy answer is the gateway's.
	held, err := adm.Enter("someone")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = rr.Fill(ctx, form, values, nil)
	held.Done(0)
	var ref *admission.Refusal
	if !errors.As(err, &ref) || ref.Code != limits.CodeBusy {
		t.Errorf("Remote.Fill on a full worker = %v, want a busy refusal", err)
	}
}
