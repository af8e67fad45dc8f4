package tex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A formatStore keeps dumped formats in a folder that the processes of one
// machine share and that outlives them (PoolConfig.FormatStore). A process
// that starts finds the formats an earlier one dumped and skips the dump:
// some 2.4 CPU seconds per paper, and most of the wait for the first warm
// process. Without it every process, and every restart, dumps again.
//
// The store is a cache and never the only copy a process relies on:
//   - A format is published whole, written under a temporary name and
//     renamed, so a reader never sees half of one.
//   - A process takes a format by hard-linking it into its own format
//     folder (copying it where links fail). Another process may then
//     evict the stored name at any time; the taken copy stays.
//   - A stored format is named after the pool's format key and the
//     identity of the TeX installation (the engine's binary and its
//     LaTeX base format, which Debian's fmtutil dumps again whenever a
//     TeX package changes), so an upgraded TeX never loads an old dump.
//   - Failed dumps are not stored; each process finds them out again.
type formatStore struct {
	dir      string
	maxCount int
	maxBytes int64

	mu  sync.Mutex
	ids map[string]string // program → installation identity, "" if unknown
}

// staleTemp is how old a temporary file in the store must be before a
// publish removes it: one left by a process killed mid-publish.
const staleTemp = 10 * time.Minute

// openFormatStore makes the store in dir (created if missing), bounded
// like a pool's own formats by maxCount and maxBytes.
func openFormatStore(dir string, maxCount int, maxBytes int64) (*formatStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("format store %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".tmp-probe-*")
	if err != nil {
		return nil, fmt.Errorf("format store %s: not writable: %w", dir, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name()) // an empty probe file: removal is best effort
	maxCount, maxBytes = formatBounds(maxCount, maxBytes)
	return &formatStore{dir: dir, maxCount: maxCount, maxBytes: maxBytes, ids: map[string]string{}}, nil
}

// name returns the file name of the format of key for the TeX of sb, or
// "" when the installation's identity cannot be read (then the store is
// not used for it).
func (s *formatStore) name(ctx context.Context, sb *sandbox, key string) string {
	s.mu.Lock()
	id, ok := s.ids[sb.program]
	s.mu.Unlock()
	if !ok {
		id = installIdentity(ctx, sb)
		s.mu.Lock()
		s.ids[sb.program] = id
		s.mu.Unlock()
	}
	if id == "" {
		return ""
	}
	h := sha256.Sum256([]byte(key + "\n" + id))
	return hex.EncodeToString(h[:12]) + ".fmt"
}

// installIdentity names the TeX installation sb runs: the engine binary
// and the LaTeX base format that a dump starts from (&xelatex), each by
// path, size and modification time. "" when either cannot be found.
func installIdentity(ctx context.Context, sb *sandbox) string {
	prog, err := filepath.EvalSymlinks(sb.program)
	if err != nil {
		return ""
	}
	pfi, err := os.Stat(prog)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(sb.program), "kpsewhich"), "-engine=xetex", "xelatex.fmt")
	cmd.Env = sb.env(os.TempDir())
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	base := strings.TrimSpace(string(out))
	bfi, err := os.Stat(base)
	if err != nil || base == "" {
		return ""
	}
	return fmt.Sprintf("%s %d %d %s %d %d", prog, pfi.Size(), pfi.ModTime().UnixNano(),
		base, bfi.Size(), bfi.ModTime().UnixNano())
}

// take places the stored format name into the new folder dir as
// outprint.fmt and returns its path without ".fmt", as buildFormat does.
// ok is false when the store has no such format; dir then does not
// exist.
func (s *formatStore) take(name, dir string) (path string, ok bool) {
	src := filepath.Join(s.dir, name)
	if _, err := os.Stat(src); err != nil {
		return "", false
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", false
	}
	dst := filepath.Join(dir, "outprint.fmt")
	if err := linkOrCopy(src, dst); err != nil {
		_ = os.RemoveAll(dir) // our own, empty or partial, folder
		return "", false
	}
	// The modification time orders the store for eviction: most recently
	// taken last out. A format that was evicted meanwhile is ours anyway.
	now := time.Now()
	_ = os.Chtimes(src, now, now)
	return filepath.Join(dir, "outprint"), true
}

// publish stores the format at path (without ".fmt") as name, replacing
// one another process published meanwhile (the same dump), then evicts
// the least recently used formats beyond the bounds. A failure costs
// only the next process its dump: the store is a cache.
func (s *formatStore) publish(name, path string) {
	// Unique among the pools of this process and the processes of the
	// machine: two that publish at once each link a name of their own.
	tmp := filepath.Join(s.dir, fmt.Sprintf(".tmp-%d-%d-%s", os.Getpid(), time.Now().UnixNano(), name))
	if err := linkOrCopy(path+".fmt", tmp); err != nil {
		_ = os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		_ = os.Remove(tmp)
		return
	}
	s.evict()
}

// evict removes the least recently used stored formats while the store
// holds more than maxCount of them or more than maxBytes, and temporary
// files older than staleTemp.
func (s *formatStore) evict() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type stored struct {
		name string
		size int64
		mod  time.Time
	}
	var fmts []stored
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		switch {
		case strings.HasPrefix(e.Name(), ".tmp-"):
			if time.Since(fi.ModTime()) > staleTemp {
				_ = os.Remove(filepath.Join(s.dir, e.Name()))
			}
		case strings.HasSuffix(e.Name(), ".fmt"):
			fmts = append(fmts, stored{e.Name(), fi.Size(), fi.ModTime()})
		}
	}
	sort.Slice(fmts, func(i, j int) bool { return fmts[i].mod.After(fmts[j].mod) })
	var count int
	var bytes int64
	for _, f := range fmts {
		count++
		bytes += f.size
		if count > s.maxCount || bytes > s.maxBytes {
			_ = os.Remove(filepath.Join(s.dir, f.name))
		}
	}
}

// linkOrCopy makes dst the same file as src: a hard link, or a copy
// where the two folders are on different file systems (or the file
// system has no links). dst must not exist.
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil || !(errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP)) {
		return err
	}
	return copyFile(dst, src)
}
