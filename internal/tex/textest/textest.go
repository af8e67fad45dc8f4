// Package textest shares one tex.Formats among the tests of a test
// binary, for the packages whose tests start TeX pools or services: the
// usual preamble's package part is then dumped once per test binary
// instead of once per pool (some 2.4 CPU seconds each). Only tests import
// it; package tex's own tests keep a copy of it, which they cannot import.
package textest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/tex"
)

// SharedFormats is made on first use (Get) and removed by Close, which
// the test binary's TestMain calls after m.Run.
type SharedFormats struct {
	once sync.Once
	f    *tex.Formats
	err  error
}

// Get returns the shared formats, making them on first use.
func (s *SharedFormats) Get(t testing.TB) *tex.Formats {
	t.Helper()
	s.once.Do(func() { s.f, s.err = tex.NewFormats("", 0, 0) })
	if s.err != nil {
		t.Fatalf("tex.NewFormats: %v", s.err)
	}
	return s.f
}

// Close removes the formats, if any were made, and returns the test
// binary's exit code: code, or 1 when removing them failed.
func (s *SharedFormats) Close(code int) int {
	if s.f == nil {
		return code
	}
	if err := s.f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "shared formats: %v\n", err)
		if code == 0 {
			return 1
		}
	}
	return code
}
