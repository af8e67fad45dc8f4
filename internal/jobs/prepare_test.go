package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"maps"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// TestUploadDigest: the digest of an upload whose assets were hashed while
// spooled is the digest Submit derives from the same input
// (RequestDigest), and every part of what decides the PDF changes it.
func TestUploadDigest(t *testing.T) {
	t.Parallel()
	in := Input{Name: "memo.md", Markdown: []byte("# Memo\n![a](a.png)\n"), Metadata: []byte(`{"title":"M"}`),
		Assets: map[string][]byte{"a.png": []byte("png bytes"), "b.png": []byte("more")}}
	sums := map[string][sha256.Size]byte{}
	for name, b := range in.Assets {
		sums[name] = sha256.Sum256(b)
	}
	want := RequestDigest(in)
	if got := UploadDigest(in.Name, in.Markdown, in.Metadata, sums); got != want {
		t.Errorf("UploadDigest = %s, want RequestDigest's %s", got, want)
	}
	for name, change := range map[string]func(*Input){
		"name":       func(i *Input) { i.Name = "other.md" },
		"markdown":   func(i *Input) { i.Markdown = []byte("# Other\n") },
		"metadata":   func(i *Input) { i.Metadata = nil },
		"asset":      func(i *Input) { i.Assets = map[string][]byte{"a.png": []byte("png bytes"), "b.png": []byte("less")} },
		"asset name": func(i *Input) { i.Assets = map[string][]byte{"a.png": []byte("png bytes"), "c.png": []byte("more")} },
		"outline":    func(i *Input) { i.Outline = &OutlineSource{DocumentID: "d"} },
		"form":       func(i *Input) { i.Form = &FormInput{PDF: []byte("%PDF"), Values: []byte("{}")} },
	} {
		other := in
		other.Assets = maps.Clone(in.Assets)
		change(&other)
		if RequestDigest(other) == want {
			t.Errorf("RequestDigest with another %s = the original's", name)
		}
	}
	// Tenant, user and key are not the request.
	other := in
	other.Tenant, other.User, other.IdempotencyKey = "t", "u", "k"
	if RequestDigest(other) != want {
		t.Error("RequestDigest changed with tenant, user or key")
	}
}

// TestOfficeDigest: an office job's digest covers the document's bytes,
// its name and the overrides, and nothing else decides it; it is not a
// Markdown job's digest of the same name.
func TestOfficeDigest(t *testing.T) {
	t.Parallel()
	in := Input{Name: "report.pdf", Office: &OfficeInput{Doc: []byte("PK docx bytes"), Format: "docx", Options: []byte(`{"paper":"letter"}`)}}
	want := RequestDigest(in)
	if in.Kind() != KindOffice {
		t.Errorf("Kind() = %s, want %s", in.Kind(), KindOffice)
	}
	for name, change := range map[string]func(*Input){
		"name": func(i *Input) { i.Name = "other.pdf" },
		"document": func(i *Input) {
			i.Office = &OfficeInput{Doc: []byte("PK other"), Format: "docx", Options: i.Office.Options}
		},
		"options": func(i *Input) { i.Office = &OfficeInput{Doc: i.Office.Doc, Format: "docx"} },
		"kind":    func(i *Input) { i.Office = nil },
	} {
		other := in
		change(&other)
		if got := RequestDigest(other); got == want {
			t.Errorf("RequestDigest with another %s = the original's %s", name, got)
		}
	}
	other := in
	other.Tenant, other.User, other.IdempotencyKey = "t", "u", "k"
	if got := RequestDigest(other); got != want {
		t.Errorf("RequestDigest with tenant, user and key = %s, want %s", got, want)
	}
}

// TestPrepare: acceptance keeps the bytes of exactly the images the
// document references, keyed by the URL the Markdown uses, names the job
// after the document's title, and passes a document's problem on as it is.
func TestPrepare(t *testing.T) {
	t.Parallel()
	pl := render.New(render.Config{TempDir: t.TempDir()})
	prepare := func(ctx context.Context, req render.Request) (*render.Prepared, error) {
		checked, err := pl.Check(req)
		if err != nil {
			return nil, err
		}
		return pl.Fetch(ctx, checked)
	}
	pic := pngBytes(t)
	req := render.Request{Name: "upload.md", Markdown: []byte("# Quarterly report\n\n![chart](img/chart.png)\n"),
		Images: images.Assets{"img/chart.png": pic, "img/unused.png": pic}}
	in, err := Prepare(context.Background(), req, prepare, "digest-1")
	if err != nil {
		t.Fatalf("Prepare = %v", err)
	}
	if in.Name != "Quarterly report.md" || in.Digest != "digest-1" || string(in.Markdown) != string(req.Markdown) {
		t.Errorf("Prepare = name %q digest %q, want the title's name and the digest given", in.Name, in.Digest)
	}
	if len(in.Assets) != 1 || string(in.Assets["img/chart.png"]) != string(pic) {
		t.Errorf("Prepare kept assets %v, want only img/chart.png", slicesKeys(in.Assets))
	}

	req.Markdown = []byte("# Bad\n\n$\\frac{1$\n")
	var le *limits.Error
	if _, err := Prepare(context.Background(), req, prepare, ""); !errors.As(err, &le) || le.Code() != limits.CodeMath {
		t.Errorf("Prepare(bad math) = %v, want the math error", err)
	}
	req.Markdown = []byte("# Missing\n\n![x](nowhere.png)\n")
	if _, err := Prepare(context.Background(), req, prepare, ""); !errors.As(err, &le) || le.Kind != limits.KindDocument {
		t.Errorf("Prepare(missing image) = %v, want the document's image error", err)
	}
}

func slicesKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// pngBytes is a real 2×2 PNG.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDocument: a webhook's body is the job as GET /v1/jobs/{id} shows
// it, its links absolute and without the webhook member.
func TestDocument(t *testing.T) {
	t.Parallel()
	status := 500
	next := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	j := Job{ID: "0190abcd", State: StateFailed, ErrorCode: limits.CodeMath, ErrorMessage: "bad math", Phase: "",
		Webhook: &WebhookStatus{State: "retrying", Attempts: 2, LastStatus: &status, NextAttemptAt: &next}}
	if v := NewView(j); v.Webhook == nil || v.Webhook.Attempts != 2 || v.Error == nil || v.Links.Self != "/v1/jobs/0190abcd" {
		t.Errorf("NewView = %+v, want the webhook, the error and the relative link", v)
	}
	body, err := Document(j, "https://outprint.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	links, _ := got["links"].(map[string]any)
	if _, has := got["webhook"]; has || links["self"] != "https://outprint.example.com/v1/jobs/0190abcd" ||
		links["result"] != "https://outprint.example.com/v1/jobs/0190abcd/result" {
		t.Errorf("Document = %s, want absolute links and no webhook member", body)
	}
}
