package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// prepareDataDir creates the data folder when missing and a scratch folder
// of this process inside it, for image conversion and TeX runs. The
// scratch folder is removed at exit.
func prepareDataDir(dir string) (tmp string, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create data folder: %w", err)
	}
	if err := checkWritable(dir); err != nil {
		return "", err
	}
	// Absolute, because TeX and the image converter run inside folders of
	// their own and get paths below this one.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data folder: %w", err)
	}
	scratch := filepath.Join(abs, "tmp")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return "", fmt.Errorf("create scratch folder: %w", err)
	}
	return os.MkdirTemp(scratch, "serve-")
}

// checkWritable proves that dir takes a new file: /readyz calls it, so a
// full disk or a folder made read-only shows there.
func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".ready-")
	if err != nil {
		return fmt.Errorf("data folder %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("ok"))
	cerr := f.Close()
	_ = os.Remove(name) // best effort: a leftover probe file harms nothing
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("data folder %s is not writable: %w", dir, err)
	}
	return nil
}
