package fetch

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
)

var _ images.Source = (*Images)(nil)

func TestImagesOpen(t *testing.T) {
	big := strings.Repeat("x", limits.MaxImageBytes+4096)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok.png":
			_, _ = w.Write([]byte("PNG"))
		case "/big.png":
			_, _ = w.Write([]byte(big))
		case "/gone.png":
			w.WriteHeader(http.StatusGone)
		case "/error.png":
			w.WriteHeader(http.StatusInternalServerError)
		case "/slow.png":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/loop.png":
			http.Redirect(w, r, "/loop.png", http.StatusFound)
		case "/internal.png":
			http.Redirect(w, r, "http://127.0.0.1:1/x", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10", "intranet.test": "10.0.0.1"})
	src := New(n.config(Config{AllowHosts: []string{"images.test", "intranet.test", "127.0.0.1"}})).Images()
	impatient := New(n.config(Config{AllowHosts: []string{"images.test"}, Timeout: 200 * time.Millisecond})).Images()
	base := "http://images.test:" + s.port()
	tests := []struct {
		url     string
		want    error // nil: success
		wantLen int
	}{
		{base + "/ok.png", nil, 3},
		{base + "/big.png", nil, limits.MaxImageBytes + 1},
		{base + "/missing.png", images.ErrNotFound, 0},
		{base + "/gone.png", images.ErrNotFound, 0},
		{base + "/error.png", images.ErrUnavailable, 0},
		{base + "/loop.png", images.ErrUnavailable, 0},
		{base + "/internal.png", images.ErrNotAllowed, 0},
		{"http://intranet.test/x.png", images.ErrNotAllowed, 0},
		{"http://elsewhere.test/x.png", images.ErrNotAllowed, 0},
		{"file:///etc/passwd", images.ErrNotAllowed, 0},
	}
	for _, tt := range tests {
		got, err := src.Open(context.Background(), tt.url)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("Open(%s) = %v, want success", tt.url, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("Open(%s) = %v, want %v", tt.url, err, tt.want)
		case len(got) != tt.wantLen:
			t.Errorf("Open(%s) = %d bytes, want %d", tt.url, len(got), tt.wantLen)
		}
	}
	if _, err := impatient.Open(context.Background(), base+"/slow.png"); !errors.Is(err, images.ErrUnavailable) {
		t.Errorf("Open(slow) = %v, want %v", err, images.ErrUnavailable)
	}
	// The caller's own cancellation is not an image problem.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := src.Open(ctx, base+"/ok.png")
	for _, sentinel := range []error{images.ErrNotFound, images.ErrNotAllowed, images.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			t.Errorf("Open(cancelled) = %v, want no image sentinel", err)
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Open(cancelled) = %v, want context.Canceled", err)
	}
}
