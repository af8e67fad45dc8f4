// Package store keeps job artifacts — the inputs a job was accepted with and
// the PDF it produced — under deterministic keys such as
// "jobs/{id}/document.md" and "jobs/{id}/result.pdf".
//
// FS is the filesystem implementation used by the embedded default and by
// deployments that share a volume. Put is atomic and durable (temp file,
// fsync, rename, fsync of the folder): a reader never sees half a file, and
// once Put returns the object survives a crash or power loss. CreateAll
// writes new objects in place and makes a whole group of them durable with
// one shared sync; a job row committed after it returns always finds its
// input. The jobs package declares the small interface it needs, so an
// S3-compatible store can replace FS without touching it.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/outprint/outprint/internal/store/location"
)

// ErrNotFound is returned by Get when no object is stored under the key.
var ErrNotFound = errors.New("store: not found")

// ErrNoSpace wraps a write that found the filesystem full (ENOSPC) or the
// volume's quota reached (EDQUOT): callers tell it apart from other
// failures, since it is the operator's to fix and a retry later succeeds.
var ErrNoSpace = errors.New("store: no space left")

// noSpace marks err with ErrNoSpace when the disk is full.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// ErrInvalidKey is returned for a key or prefix that could leave the store's
// root or is not in the key syntax (see ValidKey).
var ErrInvalidKey = errors.New("store: invalid key")

// maxKeyBytes bounds a key. Keys are built by outprint, never taken from a
// client verbatim; the bound only guards against a mistake producing path
// names the filesystem refuses.
const maxKeyBytes = 1024

// tempPrefix marks files that Put writes before the rename. A crash can leave
// one behind; List skips them and Delete of the owning prefix removes them.
const tempPrefix = ".tmp-"

// FS stores objects as files below a root folder. It is safe for concurrent
// use; concurrent Puts of the same key are atomic, the last rename wins.
type FS struct {
	root string
	gs   *groupSync
}

// NewFS returns a store rooted at root, creating the folder when missing.
func NewFS(root string) (*FS, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("store root %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("store root %s: %w", abs, err)
	}
	return &FS{root: abs, gs: newGroupSync(abs)}, nil
}

// Root returns the folder the store writes to.
func (s *FS) Root() string { return s.root }

// ValidKey reports whether key is a relative, slash-separated path whose
// segments are neither empty, "." nor "..", without backslashes or NUL bytes.
// Such a key can never name a file outside the store's root.
func ValidKey(key string) bool {
	if key == "" || len(key) > maxKeyBytes || strings.HasPrefix(key, "/") {
		return false
	}
	if strings.ContainsAny(key, "\\\x00") {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, tempPrefix) {
			return false
		}
	}
	return true
}

func (s *FS) path(key string) (string, error) {
	if !ValidKey(key) {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put stores everything r yields under key, replacing any earlier object.
// The object becomes visible only complete: Put writes a temporary file,
// syncs it, renames it into place and syncs the folder, so once Put returns
// the object survives a crash, and before that no reader sees it.
//
// Folders Put creates are synced after the file, not one by one before it:
// on a journaling filesystem the file's sync commits the folders' creation
// too, so the later folder syncs find nothing left to write: a Put into a
// new folder costs two journal commits (the file's and the rename's). A Put
// that finds its folder already there relies on whatever created it having
// returned.
func (s *FS) Put(ctx context.Context, key string, r io.Reader) (err error) {
	defer func() { err = noSpace(err) }()
	p, err := s.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	created, err := s.mkdirs(dir)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = copyCtx(ctx, f, r); err != nil {
		return fmt.Errorf("put %s: write: %w", key, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("put %s: sync: %w", key, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("put %s: close: %w", key, err)
	}
	if err = ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err = os.Rename(tmp, p); err != nil {
		return fmt.Errorf("put %s: rename: %w", key, err)
	}
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("put %s: sync folder: %w", key, err)
	}
	// Each created folder's entry lives in its parent; deepest first.
	for i := len(created) - 1; i >= 0; i-- {
		if err = syncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("put %s: sync folder: %w", key, err)
		}
	}
	return nil
}

// CreateAll stores new objects (keys that must not exist yet) durably but
// without Put's temporary files and renames: each object is written in
// place with O_EXCL, and then one syncfs(2) shared with concurrent
// CreateAll calls (see groupSync) commits them all together with the
// folders they needed. Per object that saves Put's second journal commit
// and the per-file and per-folder syncs, whose kernel work at hundreds of
// jobs a second outweighs the disk's: a job's Markdown, metadata and images
// cost one shared sync. The price is visibility: until CreateAll returns,
// and after a crash while it ran, a key may hold part of its data. Use it
// only for objects that something else publishes after it returns — job
// inputs, which nobody reads before the job row that names them commits.
// A key that exists already is an error wrapping fs.ErrExist; when
// CreateAll fails, the objects it wrote are removed.
func (s *FS) CreateAll(ctx context.Context, objects map[string][]byte) (err error) {
	defer func() { err = noSpace(err) }()
	keys := slices.Sorted(maps.Keys(objects))
	var written []string
	for _, key := range keys {
		if err = s.write(ctx, key, objects[key]); err != nil {
			err = fmt.Errorf("create %s: %w", key, err)
			break
		}
		written = append(written, key)
	}
	if err == nil {
		if err = s.gs.sync(); err != nil {
			err = fmt.Errorf("create %s: %w", strings.Join(keys, ", "), err)
		}
	}
	if err != nil {
		for _, key := range written {
			if p, perr := s.path(key); perr == nil {
				_ = os.Remove(p)
			}
		}
	}
	return err
}

// write writes data to a new file for key, without syncing it. The data
// is in memory already, so ctx is checked once, before the file is made.
func (s *FS) write(ctx context.Context, key string, data []byte) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.mkdirs(filepath.Dir(p)); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		err = fmt.Errorf("write: %w", err)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(p)
	}
	return err
}

// mkdirs creates dir and its missing parents below the root and returns
// the folders it created, outermost first. It works upwards from dir, so
// that the common case — the job's folder missing, "jobs" present — does
// not lock the store root for an mkdir that would only find "jobs" there.
func (s *FS) mkdirs(dir string) ([]string, error) {
	if dir == s.root || len(dir) < len(s.root) {
		return nil, nil
	}
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil, nil // the result's folder, written after the input
	}
	err := os.Mkdir(dir, 0o750)
	switch {
	case err == nil:
		return []string{dir}, nil
	case errors.Is(err, fs.ErrExist):
		return nil, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	created, err := s.mkdirs(filepath.Dir(dir))
	if err != nil {
		return created, err
	}
	err = os.Mkdir(dir, 0o750)
	switch {
	case err == nil:
		return append(created, dir), nil
	case errors.Is(err, fs.ErrExist):
		return created, nil
	default:
		return created, err
	}
}

// Get opens the object stored under key. It returns an error wrapping
// ErrNotFound when there is none. The caller closes the reader.
func (s *FS) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		_ = f.Close()
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return f, nil
}

// Delete removes every object whose key is prefix or starts with prefix
// followed by "/" (a prefix names a whole key or a whole folder, e.g.
// "jobs/{id}"). Deleting what does not exist is not an error.
func (s *FS) Delete(ctx context.Context, prefix string) error {
	prefix = strings.TrimSuffix(prefix, "/")
	p, err := s.path(prefix)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", prefix, err)
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("delete %s: %w", prefix, err)
	}
	return nil
}

// List returns the names of the entries directly below prefix (objects and
// folders alike), sorted, without half-written temporary files. A prefix
// that does not exist lists nothing. The jobs package uses it to find input
// folders whose job row was never committed (a crash between storing the
// input and committing the row).
func (s *FS) List(ctx context.Context, prefix string) ([]string, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	p, err := s.path(prefix)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	entries, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyCtx copies r to w and stops between chunks when ctx ends, so a Put
// fed by a client that went away does not run to completion.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) error {
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Location is a parsed `store` setting (package location).
type Location = location.Location

// ParseLocation parses a `store` setting (location.Parse).
func ParseLocation(v string) (Location, error) { return location.Parse(v) }
