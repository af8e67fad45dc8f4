package images

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// TestDir resolves paths inside a root and refuses everything that leaves
// it, including a symbolic link planted inside that points outside.
func TestDir(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.png")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	files := map[string]string{
		"a.png":          "a",
		"img/b.png":      "b",
		"img/my pic.png": "c",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"escape.png":     secret,                                            // absolute, outside
		"img/up.png":     "../../" + filepath.Base(outside) + "/secret.png", // relative, outside
		"img/inside.png": "../a.png",                                        // relative, inside
		"etc":            "/etc",                                            // a folder outside
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.png"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		url  string
		want string // content, or "" when err is expected
		err  error
	}{
		{"a.png", "a", nil},
		{"./a.png", "a", nil},
		{"img/../a.png", "a", nil},
		{"img/b.png", "b", nil},
		{"img/my%20pic.png", "c", nil},
		{"img/inside.png", "a", nil},
		{"missing.png", "", ErrNotFound},
		{"img", "", ErrNotFound},
		{"", "", ErrNotFound},
		{"../a.png", "", ErrNotAllowed},
		{"../../../../etc/passwd", "", ErrNotAllowed},
		{"img/../../a.png", "", ErrNotAllowed},
		{"%2e%2e/%2e%2e/etc/passwd", "", ErrNotAllowed},
		{"/etc/passwd", "", ErrNotAllowed},
		{secret, "", ErrNotAllowed},
		{"escape.png", "", ErrNotAllowed},
		{"img/up.png", "", ErrNotAllowed},
		{"etc/passwd", "", ErrNotAllowed},
		{"fifo.png", "", ErrNotAllowed},
		{"file:///etc/passwd", "", ErrNotAllowed},
		{"http://127.0.0.1/a.png", "", ErrNotAllowed},
		{"//127.0.0.1/a.png", "", ErrNotAllowed},
		{"a.png\x00.jpg", "", ErrNotFound},
	}
	d := Dir(root)
	for _, tt := range tests {
		got, err := d.Open(context.Background(), tt.url)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Dir.Open(%q) = %q, %v, want %v", tt.url, got, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("Dir.Open(%q) = %q, %v, want %q", tt.url, got, err, tt.want)
		}
	}
}

// TestDirBounded: Dir reads at most MaxImageBytes+1 bytes.
func TestDirBounded(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big.png"), make([]byte, limits.MaxImageBytes+100), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Dir(root).Open(context.Background(), "big.png")
	if err != nil || len(got) != limits.MaxImageBytes+1 {
		t.Errorf("Dir.Open(big.png) = %d bytes, %v, want %d", len(got), err, limits.MaxImageBytes+1)
	}
}

// TestAssets normalises keys and URLs alike.
func TestAssets(t *testing.T) {
	a := Assets{
		"img/a.png":   []byte("a"),
		"./img/b.png": []byte("b"),
		"big.png":     make([]byte, limits.MaxImageBytes+10),
		// A remote image a gateway fetched and handed on (Set.Assets).
		"https://example.com/fetched.png": []byte("fetched"),
	}
	tests := []struct {
		url  string
		want string
		n    int // expected length when want is ""
		err  error
	}{
		{url: "img/a.png", want: "a"},
		{url: "./img/a.png", want: "a"},
		{url: "img/./a.png", want: "a"},
		{url: "img/b.png", want: "b"},
		{url: "./img/b.png", want: "b"},
		{url: "big.png", n: limits.MaxImageBytes + 1},
		{url: "img/c.png", err: ErrNotFound},
		{url: "../img/a.png", err: ErrNotAllowed},
		{url: "/img/a.png", err: ErrNotAllowed},
		{url: "https://example.com/img/a.png", err: ErrNotAllowed},
		{url: "https://example.com/fetched.png", want: "fetched"},
	}
	for _, tt := range tests {
		got, err := a.Open(context.Background(), tt.url)
		switch {
		case tt.err != nil:
			if !errors.Is(err, tt.err) {
				t.Errorf("Assets.Open(%q) = %v, want %v", tt.url, err, tt.err)
			}
		case tt.want != "":
			if err != nil || string(got) != tt.want {
				t.Errorf("Assets.Open(%q) = %q, %v, want %q", tt.url, got, err, tt.want)
			}
		default:
			if err != nil || len(got) != tt.n {
				t.Errorf("Assets.Open(%q) = %d bytes, %v, want %d", tt.url, len(got), err, tt.n)
			}
		}
	}
}

// TestChain routes relative URLs to local and http(s) to remote, and
// refuses every other scheme whatever the sources are.
func TestChain(t *testing.T) {
	local := Assets{"a.png": []byte("local")}
	var remoteURLs []string
	remote := sourceFunc(func(_ context.Context, url string) ([]byte, error) {
		remoteURLs = append(remoteURLs, url)
		return []byte("remote"), nil
	})
	tests := []struct {
		url        string
		withRemote bool
		want       string
		err        error
	}{
		{"a.png", true, "local", nil},
		{"a.png", false, "local", nil},
		{"https://img.example.com/a.png", true, "remote", nil},
		{"HTTP://img.example.com/a.png", true, "remote", nil},
		{"https://img.example.com/a.png", false, "", ErrNotAllowed},
		{"http://169.254.169.254/latest/meta-data/", false, "", ErrNotAllowed},
		{"file:///etc/passwd", true, "", ErrNotAllowed},
		{"data:image/png;base64,iVBORw0KGgo=", true, "", ErrNotAllowed},
		{"ftp://example.com/a.png", true, "", ErrNotAllowed},
		{"//example.com/a.png", true, "", ErrNotAllowed},
		{"/api/attachments.redirect?id=1", true, "", ErrNotAllowed},
	}
	for _, tt := range tests {
		var r Source
		if tt.withRemote {
			r = remote
		}
		got, err := Chain(local, r).Open(context.Background(), tt.url)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Chain(remote %v).Open(%q) = %q, %v, want %v", tt.withRemote, tt.url, got, err, tt.err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, []byte(tt.want)) {
			t.Errorf("Chain(remote %v).Open(%q) = %q, %v, want %q", tt.withRemote, tt.url, got, err, tt.want)
		}
	}
	want := []string{"https://img.example.com/a.png", "HTTP://img.example.com/a.png"}
	if len(remoteURLs) != len(want) || remoteURLs[0] != want[0] || remoteURLs[1] != want[1] {
		t.Errorf("remote asked for %q, want %q", remoteURLs, want)
	}
}

// TestSetAssets: what a gateway loaded, remote images included, loads again
// on a worker from Set.Assets alone and converts.
func TestSetAssets(t *testing.T) {
	tiny := mustRead(t, "testdata/good/tiny.png")
	remote := sourceFunc(func(_ context.Context, url string) ([]byte, error) {
		if url == "https://img.example.com/a.png" {
			return tiny, nil
		}
		return nil, ErrNotFound
	})
	refs := []Ref{{"tiny.jpg", 1}, {"https://img.example.com/a.png", 2}}
	set, err := Load(context.Background(), refs, Chain(Dir("testdata/good"), remote))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(context.Background(), refs, set.Assets())
	if err != nil {
		t.Fatalf("Load(Set.Assets()) = %v, want no error", err)
	}
	got, err := again.Convert(context.Background(), t.TempDir(), nil)
	if err != nil || len(got) != 2 || got["https://img.example.com/a.png"].Width != 40 {
		t.Errorf("Convert = %v, %v, want both images, the remote one 40 px wide", got, err)
	}
}
