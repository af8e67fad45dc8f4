package httpapi

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// spool keeps the asset parts of one multipart request on disk while they
// arrive (issue 10: eight parallel 55 MiB uploads were held in memory,
// 626 MB). Only the images the document references are read back, when
// the images stage loads them. The folder is made on the first asset and
// removed by remove, which the handler defers.
type spool struct {
	parent string
	dir    string
	files  images.Files
	sums   map[string][sha256.Size]byte // of the bytes kept, for the job digest
}

func (s *Server) newSpool() *spool {
	return &spool{parent: s.cfg.TempDir, files: images.Files{}, sums: map[string][sha256.Size]byte{}}
}

// add writes one asset part to a file: at most limits.MaxImageBytes+1
// bytes, so that the images stage names an image over the limit as too
// large; the rest of the part is read and dropped (the body's own bound
// still applies to it).
func (sp *spool) add(name string, part io.Reader) error {
	if sp.dir == "" {
		dir, err := os.MkdirTemp(sp.parent, "outprint-upload-")
		if err != nil {
			return fmt.Errorf("upload folder: %w", err)
		}
		sp.dir = dir
	}
	f, err := os.CreateTemp(sp.dir, "asset-")
	if err != nil {
		return fmt.Errorf("upload file: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), io.LimitReader(part, limits.MaxImageBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, err = io.Copy(io.Discard, part)
	}
	if err != nil {
		return err
	}
	sp.files[name] = f.Name()
	sp.sums[name] = [sha256.Size]byte(h.Sum(nil))
	return nil
}

// remove deletes the spooled files; it may be called more than once.
func (sp *spool) remove() {
	if sp.dir != "" {
		// Best effort: a folder left behind costs only disk, and the
		// answer does not depend on it.
		_ = os.RemoveAll(sp.dir)
		sp.dir = ""
	}
}

// digest identifies an uploaded request for its Idempotency-Key
// (jobs.UploadDigest), from the sums taken while spooling, so that the
// assets need not be read again.
func (sp *spool) digest(req render.Request) string {
	return jobs.UploadDigest(req.Name, req.Markdown, req.Metadata, sp.sums)
}
