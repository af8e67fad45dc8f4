package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical form, or "error: <fragment>"
	}{
		{"file:///var/lib/outprint", "file:///var/lib/outprint"},
		{"file:///var/lib/outprint/", "file:///var/lib/outprint"},
		{"s3://outprint/jobs-a?endpoint=http://127.0.0.1:8333&region=us-east-1",
			"s3://outprint/jobs-a?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=us-east-1"},
		{"s3://outprint?region=eu-west-3", "s3://outprint?region=eu-west-3"},
		{"s3://outprint/a/b/?region=x&endpoint=https://s3.example.com/", "s3://outprint/a/b?endpoint=https%3A%2F%2Fs3.example.com&region=x"},
		{"file://relative/path", "error: absolute folder and nothing else"},
		{"file:relative", "error: absolute folder"},
		{"/var/lib/outprint", "error: must be file:///FOLDER or s3://"},
		{"s3://outprint/x", "error: needs region"},
		{"s3://Outprint?region=x", "error: not a valid bucket name"},
		{"s3://ab?region=x", "error: not a valid bucket name"},
		{"s3://key:secret@outprint?region=x", "error: must not carry credentials"},
		{"s3://outprint/../x?region=x", "error: not a valid key prefix"},
		{"s3://outprint?region=x&endpoint=ftp://h", "error: http or https base URL"},
		{"s3://outprint?region=x&endpoint=http://h/path", "error: http or https base URL"},
		{"s3://outprint?region=x&region=y", "error: given 2 times"},
		{"s3://outprint?region=x&bucket=y", "error: unknown parameter"},
		{"http://outprint", "error: must be file:///FOLDER or s3://"},
	}
	for _, tt := range tests {
		loc, err := ParseLocation(tt.in)
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			got = loc.String()
		}
		if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(got, want) {
				t.Errorf("ParseLocation(%q) = %q, want an error containing %q", tt.in, got, want)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("ParseLocation(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// newTestS3 starts a SeaweedFS server and returns a store on a fresh bucket.
func newTestS3(t *testing.T, retryFor time.Duration) (*S3, *testenv.S3Server) {
	t.Helper()
	srv := testenv.StartS3(t, "../..")
	loc, err := ParseLocation("s3://outprint-test/deploy-a?region=us-east-1&endpoint=" + srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewS3(S3Config{Location: loc, AccessKeyID: testenv.S3AccessKey, SecretAccessKey: testenv.S3SecretKey, RetryFor: retryFor})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureBucket(context.Background()); err != nil {
		t.Fatalf("EnsureBucket of an existing bucket = %v, want nil", err)
	}
	return s, srv
}

// failCounter is an http.RoundTripper that counts the requests that got
// no answer.
type failCounter struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (f *failCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		f.n.Add(1)
	}
	return resp, err
}

// contractStore is what both stores offer the jobs package.
type contractStore interface {
	Put(ctx context.Context, key string, r io.Reader) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Delete(ctx context.Context, prefix string) error
	List(ctx context.Context, prefix string) ([]string, error)
	CreateAll(ctx context.Context, objects map[string][]byte) error
}

// testContract runs the same checks against any store, so that the S3
// store behaves as the filesystem store the jobs package was written for.
func testContract(t *testing.T, s contractStore) {
	ctx := context.Background()
	get := func(key string) (string, error) {
		rc, err := s.Get(ctx, key)
		if err != nil {
			return "", err
		}
		defer func() { _ = rc.Close() }()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	big := make([]byte, 3<<20) // several of weed's 1 MiB-ish chunks
	_, _ = rand.Read(big)
	for key, body := range map[string]string{
		"jobs/a/document.md": "# first", "jobs/a/result.pdf": "%PDF", "jobs/b/result.pdf": "other", "jobs/ab/x": "not below a",
	} {
		if err := s.Put(ctx, key, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "jobs/a/document.md", strings.NewReader("# second")); err != nil {
		t.Fatal(err)
	}
	if got, err := get("jobs/a/document.md"); err != nil || got != "# second" {
		t.Errorf("Get(document.md) = %q, %v, want %q", got, err, "# second")
	}
	if err := s.Put(ctx, "jobs/big/result.pdf", bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if got, err := get("jobs/big/result.pdf"); err != nil || got != string(big) {
		t.Errorf("Get(big) = %d bytes, %v, want the %d bytes put", len(got), err, len(big))
	}
	if err := s.CreateAll(ctx, map[string][]byte{
		"jobs/c/document.md": []byte("# c"), "jobs/c/metadata.json": []byte("{}"), "jobs/c/assets/a.png": []byte("png"),
	}); err != nil {
		t.Fatal(err)
	}
	names, err := s.List(ctx, "jobs")
	if got, want := fmt.Sprint(names), "[a ab b big c]"; err != nil || got != want {
		t.Errorf("List(jobs) = %s, %v, want %s", got, err, want)
	}
	names, err = s.List(ctx, "jobs/c")
	if got, want := fmt.Sprint(names), "[assets document.md metadata.json]"; err != nil || got != want {
		t.Errorf("List(jobs/c) = %s, %v, want %s", got, err, want)
	}
	if names, err := s.List(ctx, "nothing"); err != nil || len(names) != 0 {
		t.Errorf("List(nothing) = %v, %v, want nothing", names, err)
	}
	if err := s.Delete(ctx, "jobs/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "jobs/c"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"jobs/a/result.pdf", "jobs/a/document.md", "jobs/c/assets/a.png", "jobs/none"} {
		if _, err := get(key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) after Delete = %v, want ErrNotFound", key, err)
		}
	}
	if got, err := get("jobs/ab/x"); err != nil || got != "not below a" {
		t.Errorf("Get(jobs/ab/x) after Delete(jobs/a) = %q, %v; Delete must remove whole segments only", got, err)
	}
	if err := s.Delete(ctx, "jobs/never"); err != nil {
		t.Errorf("Delete of nothing = %v, want nil", err)
	}
	for _, bad := range []string{"../x", "/abs", "jobs//x"} {
		if err := s.Put(ctx, bad, strings.NewReader("x")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	// A body that fails while being read never becomes an object.
	err = s.Put(ctx, "jobs/half/result.pdf", io.MultiReader(strings.NewReader("%PDF-1.7 half"), errReader{}))
	if err == nil {
		t.Error("Put of a failing reader = nil, want an error")
	}
	if _, err := get("jobs/half/result.pdf"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after a failed Put = %v, want ErrNotFound", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("client went away") }

func TestContractFS(t *testing.T) {
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testContract(t, s)
}

func TestContractS3(t *testing.T) {
	s, _ := newTestS3(t, 0)
	testContract(t, s)
}

// TestS3Prefix checks that two deployments sharing a bucket under different
// prefixes never see each other's objects.
func TestS3Prefix(t *testing.T) {
	a, srv := newTestS3(t, 0)
	loc := a.cfg.Location
	loc.Prefix = "deploy-b"
	b, err := NewS3(S3Config{Location: loc, AccessKeyID: testenv.S3AccessKey, SecretAccessKey: testenv.S3SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Put(ctx, "jobs/x/result.pdf", strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "jobs/x/result.pdf"); !errors.Is(err, ErrNotFound) {
		t.Errorf("b.Get of a's key = %v, want ErrNotFound", err)
	}
	if names, err := b.List(ctx, "jobs"); err != nil || len(names) != 0 {
		t.Errorf("b.List(jobs) = %v, %v, want nothing", names, err)
	}

	// Wrong credentials are permanent: refused at once, not retried for
	// RetryFor.
	bad, err := NewS3(S3Config{Location: a.cfg.Location, AccessKeyID: testenv.S3AccessKey, SecretAccessKey: "wrong", RetryFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := bad.Put(ctx, "jobs/y/result.pdf", strings.NewReader("y")); err == nil || ctx.Err() != nil {
		t.Errorf("Put with a wrong secret = %v (context %v), want a refusal before the context ends", err, ctx.Err())
	}
	if _, err := NewS3(S3Config{Location: a.cfg.Location}); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("NewS3 without credentials = %v, want an error naming AWS_ACCESS_KEY_ID", err)
	}
	_ = srv
}

// TestS3Outage stops the S3 server for a few seconds while writes and
// reads are under way: each retries with backoff until the server is back
// and then completes, and every object written reads back whole.
func TestS3Outage(t *testing.T) {
	s, srv := newTestS3(t, time.Minute)
	// The same store through a transport that counts the requests that
	// got no answer, so that the test knows the writes are retrying.
	failed := &failCounter{next: http.DefaultTransport}
	s, err := NewS3(S3Config{Location: s.cfg.Location, AccessKeyID: testenv.S3AccessKey, SecretAccessKey: testenv.S3SecretKey,
		RetryFor: time.Minute, HTTPClient: &http.Client{Transport: failed}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "jobs/before/result.pdf", strings.NewReader("before")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range 3 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[i] = s.Put(ctx, fmt.Sprintf("jobs/during-%d/result.pdf", i), strings.NewReader(fmt.Sprintf("during %d", i)))
		}()
		go func() {
			defer wg.Done()
			errs[3+i] = s.CreateAll(ctx, map[string][]byte{
				fmt.Sprintf("jobs/in-%d/document.md", i): []byte("# in"), fmt.Sprintf("jobs/in-%d/metadata.json", i): []byte("{}"),
			})
		}()
	}
	// The writes are retrying against a closed port now; the server
	// comes back once they have failed four times each on average, their
	// backoff grown past its base.
	testenv.Eventually(t, "the writes retry against the stopped server", func() bool { return failed.n.Load() >= int64(4*len(errs)) })
	srv.Start()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d across the outage = %v, want nil", i, err)
		}
	}
	for i := range 3 {
		for key, want := range map[string]string{
			fmt.Sprintf("jobs/during-%d/result.pdf", i): fmt.Sprintf("during %d", i),
			fmt.Sprintf("jobs/in-%d/document.md", i):    "# in",
			"jobs/before/result.pdf":                    "before",
		} {
			rc, err := s.Get(ctx, key)
			if err != nil {
				t.Errorf("Get(%s) = %v", key, err)
				continue
			}
			b, _ := io.ReadAll(rc)
			_ = rc.Close()
			if string(b) != want {
				t.Errorf("Get(%s) = %q, want %q", key, b, want)
			}
		}
	}

	// With the server gone for longer than RetryFor, an operation gives up
	// with an error instead of hanging.
	short, err := NewS3(S3Config{Location: s.cfg.Location, AccessKeyID: testenv.S3AccessKey, SecretAccessKey: testenv.S3SecretKey, RetryFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := short.Put(ctx, "jobs/after/result.pdf", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("Put with the server down past RetryFor = %v, want a gave-up error", err)
	}
}
