package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/outprint/outprint/internal/limits"
)

// urlKind is what a URL of the Markdown points to.
type urlKind int

const (
	urlLocal  urlKind = iota // a relative path: document folder or uploaded assets
	urlRemote                // an absolute http or https URL
	urlOther                 // another scheme, a protocol-relative "//host" URL
)

// classify tells local, remote and other URLs apart and returns the scheme
// (lower case, "" when there is none).
func classify(raw string) (urlKind, string) {
	if strings.HasPrefix(raw, "//") || strings.HasPrefix(raw, `\\`) {
		return urlOther, ""
	}
	if i := strings.IndexByte(raw, ':'); i > 0 && isScheme(raw[:i]) {
		scheme := strings.ToLower(raw[:i])
		if scheme == "http" || scheme == "https" {
			return urlRemote, scheme
		}
		return urlOther, scheme
	}
	return urlLocal, ""
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-", ".").
func isScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// localPath turns a relative URL of the Markdown into a clean slash path
// relative to the document's folder: percent escapes decoded ("my%20pic.png"
// names "my pic.png"), "./" and "a/../" removed. It refuses with
// ErrNotAllowed what cannot name a file inside the folder: a scheme, an
// absolute path, a path that climbs out with "..", a NUL byte.
func localPath(raw string) (string, error) {
	if kind, _ := classify(raw); kind != urlLocal {
		return "", fmt.Errorf("%w: %q is not a relative path", ErrNotAllowed, raw)
	}
	p := raw
	if u, err := url.PathUnescape(raw); err == nil {
		p = u
	}
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: empty path", ErrNotFound)
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%w: %q is an absolute path", ErrNotAllowed, raw)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q leaves the document's folder", ErrNotAllowed, raw)
	}
	if clean == "." {
		return "", fmt.Errorf("%w: %q names the folder itself", ErrNotFound, raw)
	}
	return clean, nil
}

// DirSource reads images from a folder, the document's own. Relative paths
// are resolved inside the folder and never outside it: the path is checked
// lexically first, then opened through os.Root, which refuses ".." and
// symbolic links that lead out of the folder (even ones planted after the
// check).
type DirSource struct {
	root string
}

// Dir returns a Source reading relative paths inside root. It refuses
// absolute paths, "..", URLs with a scheme and symbolic links that leave
// root with ErrNotAllowed; chain it with a remote source for http(s) images.
func Dir(root string) *DirSource { return &DirSource{root: root} }

// Open reads the file the relative URL names, at most
// limits.MaxImageBytes+1 bytes of it. Only regular files are read; a FIFO
// or a device planted in the folder is refused before it could block or
// stream forever.
func (d *DirSource) Open(ctx context.Context, raw string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name, err := localPath(raw)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(d.root)
	if err != nil {
		return nil, fmt.Errorf("open image folder: %w", err)
	}
	defer func() { _ = root.Close() }()
	// O_NONBLOCK keeps a FIFO from blocking the open; regular files ignore
	// it.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(raw, err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat image %q: %w", raw, err)
	}
	if !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, fmt.Errorf("%w: %q is a folder", ErrNotFound, raw)
		}
		return nil, fmt.Errorf("%w: %q is not a regular file", ErrNotAllowed, raw)
	}
	data, err := io.ReadAll(io.LimitReader(f, limits.MaxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read image %q: %w", raw, err)
	}
	return data, nil
}

// openError sorts an error of os.Root.Open: a missing file is ErrNotFound,
// an escape (os.Root's "path escapes from parent", which it does not export)
// or a permission error is ErrNotAllowed, and a failure of the machine (out
// of descriptors, I/O) stays internal.
func openError(raw string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %q: %v", ErrNotFound, raw, err)
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE),
		errors.Is(err, syscall.EIO), errors.Is(err, syscall.ENOMEM):
		return fmt.Errorf("open image %q: %w", raw, err)
	}
	return fmt.Errorf("%w: %q: %v", ErrNotAllowed, raw, err)
}

// Assets are uploaded images keyed by the path the Markdown uses
// ("img/a.png" for a part named img/a.png). Keys and URLs are compared
// after the same normalisation as Dir's, so "./img/a.png" finds "img/a.png".
type Assets map[string][]byte

// Open returns the asset the URL names, or ErrNotFound. A key equal to the
// URL always matches: assets are bytes the client (or a gateway, see
// Set.Assets) handed over, so even a key like "https://host/a.png" reads
// nothing but those bytes. Otherwise a URL with a scheme or a path leaving
// the upload is ErrNotAllowed, and a relative one is looked up normalised.
// An asset larger than limits.MaxImageBytes is returned cut to
// MaxImageBytes+1 bytes, as the Source contract asks.
func (a Assets) Open(ctx context.Context, raw string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := lookup(a, raw)
	if err != nil {
		return nil, err
	}
	return capBytes(data), nil
}

// lookup finds the asset raw names in m, under the rules of Assets.Open.
func lookup[T any](m map[string]T, raw string) (T, error) {
	var zero T
	if v, ok := m[raw]; ok {
		return v, nil
	}
	name, err := localPath(raw)
	if err != nil {
		return zero, err
	}
	v, ok := m[name]
	if !ok {
		// Keys come from part file names that may be written "./img/a.png";
		// there are few, so a scan beats a second, normalised map.
		for k, kv := range m {
			if kn, err := localPath(k); err == nil && kn == name {
				v, ok = kv, true
				break
			}
		}
	}
	if !ok {
		return zero, fmt.Errorf("%w: no uploaded asset %q", ErrNotFound, raw)
	}
	return v, nil
}

// capBytes cuts data to the MaxImageBytes+1 bytes a Source returns at most.
func capBytes(data []byte) []byte {
	if len(data) > limits.MaxImageBytes+1 {
		return data[:limits.MaxImageBytes+1]
	}
	return data
}

// chain routes a URL to the source for its kind.
type chain struct {
	local, remote Source
}

// Chain returns a Source that sends relative URLs to local and absolute
// http(s) URLs to remote. With a nil remote, remote URLs are refused with
// ErrNotAllowed; any other scheme (file:, data:, ftp:, "//host") always is.
// remote is expected to be the SSRF-safe fetcher (package fetch) wrapped to
// map its errors onto ErrNotFound, ErrNotAllowed and ErrUnavailable.
func Chain(local Source, remote Source) Source {
	return chain{local: local, remote: remote}
}

// Open dispatches raw by its kind.
func (c chain) Open(ctx context.Context, raw string) ([]byte, error) {
	switch kind, scheme := classify(raw); kind {
	case urlRemote:
		if c.remote == nil {
			return nil, fmt.Errorf("%w: remote images are not enabled", ErrNotAllowed)
		}
		return c.remote.Open(ctx, raw)
	case urlOther:
		return nil, fmt.Errorf("%w: scheme %q", ErrNotAllowed, scheme)
	}
	if c.local == nil {
		return nil, fmt.Errorf("%w: no local images", ErrNotFound)
	}
	return c.local.Open(ctx, raw)
}
