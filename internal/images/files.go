package images

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/outprint/outprint/internal/limits"
)

// Files are uploaded images kept on disk, keyed like Assets by the path the
// Markdown uses, each value the file holding the bytes. A multipart upload
// is spooled to files as it arrives, so that its bytes are never all in
// memory at once: only the images the document references are read, when
// they are loaded.
type Files map[string]string

// Open reads the file of the asset the URL names, under the rules of
// Assets.Open; at most limits.MaxImageBytes+1 bytes are read.
func (f Files) Open(ctx context.Context, raw string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := lookup(f, raw)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open uploaded asset %q: %w", raw, err)
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(io.LimitReader(fh, limits.MaxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read uploaded asset %q: %w", raw, err)
	}
	return data, nil
}
