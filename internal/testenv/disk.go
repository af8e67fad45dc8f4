package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes on a new temporary folder and
// returns the folder: a real filesystem that fills up, for the tests of
// what a full disk answers (ENOSPC from the kernel, not a fake error). It
// needs the right to mount (root); without it the test fails under CI and
// is skipped elsewhere. The filesystem is unmounted when the test ends.
func SmallDisk(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		Missing(t, fmt.Sprintf("mount a tmpfs on %s: %v (the full-disk tests run as root)", dir, err))
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file into dir until the filesystem is full, so that
// the next write there fails with ENOSPC.
func FillDisk(t testing.TB, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "filler-")
	if err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	// The writes ending in ENOSPC are the point: the filler stays until
	// FreeDisk whatever Close says, so its error tells nothing.
	defer func() { _ = f.Close() }()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v, want ENOSPC at the end", dir, err)
			}
			break
		}
	}
	// A partial last block may remain; write single bytes until none fit.
	for {
		if _, err := f.Write([]byte{0}); err != nil {
			return
		}
	}
}

// FreeDisk removes what FillDisk wrote into dir.
func FreeDisk(t testing.TB, dir string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "filler-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
}
