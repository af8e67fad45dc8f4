// Package textest shares one tex.Formats, and one warm tex.Pool, among the
// tests of a test binary, for the packages whose tests typeset or start
// services: the usual preamble's package part is then dumped once per test
// binary instead of once per pool (some 2.4 CPU seconds each), and a
// render is a fork of a warm process instead of a cold XeLaTeX run. Only
// tests import it; package tex's own tests keep a copy of SharedFormats,
// which they cannot import.
package textest

import (
	"context"
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
	return exitCode(code, "shared formats", s.f.Close())
}

// exitCode is the test binary's exit code after closing a shared fixture
// failed with err (nil: it did not): code, or 1 when code was 0. The
// failure is written to stderr, where go test shows it.
func exitCode(code int, what string, err error) int {
	if err == nil {
		return code
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	if code == 0 {
		return 1
	}
	return code
}

// SharedPool is one warm tex.Pool for the tests of a test binary that
// only need documents typeset, the engine the service renders with. A
// render there is a fork of the zygote of its preamble instead of a cold
// XeLaTeX run (some 0.06 CPU seconds instead of about one); a zygote starts
// once per preamble (paper and scripts), so the saving is in the renders
// that share one. Min -1: no process is kept warm for a preamble that the
// next test may never use. The tests that watch TeX's processes or time a
// cold run keep an engine of their own.
type SharedPool struct {
	once sync.Once
	p    *tex.Pool
	err  error
}

// SharedPoolMax is the shared pool's process bound: two tests at a time
// (go test's -parallel on two cores), each rendering a document or two at
// once, are not kept waiting for a process.
const SharedPoolMax = 4

// Get returns the shared pool, made on first use with the formats f.
func (s *SharedPool) Get(t testing.TB, f *tex.Formats) *tex.Pool {
	t.Helper()
	s.once.Do(func() { s.p, s.err = tex.NewPool(tex.PoolConfig{Min: -1, Max: SharedPoolMax, Formats: f}) })
	if s.err != nil {
		t.Fatalf("tex.NewPool: %v", s.err)
	}
	return s.p
}

// Close closes the pool, if one was made, and returns the test binary's
// exit code: code, or 1 when closing it failed. Call it before
// SharedFormats.Close, as the pool loads those formats.
func (s *SharedPool) Close(code int) int {
	if s.p == nil {
		return code
	}
	return exitCode(code, "shared pool", s.p.Close(context.Background()))
}
