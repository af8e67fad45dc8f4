package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/config"
)

// What tests wait for, and with what. A test waits on an event the code
// under test signals (package testsignal) where the code has one; where
// it watches state it does not own (admission figures, a job row another
// process writes, a port) it polls with Eventually. It never sleeps a
// fixed time and hopes.

// WaitTimeout bounds every wait of a test: long enough for a machine
// whose cores are shared with other builds (CI, the race detector), short
// enough that a broken test fails instead of hanging the run. It only
// stops broken tests; nothing is asserted about time.
const WaitTimeout = 2 * time.Minute

// pollEvery is how often Eventually looks.
const pollEvery = 10 * time.Millisecond

// Eventually polls cond until it holds, and fails the test naming what
// when it has not within WaitTimeout.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	EventuallyWithin(tb, WaitTimeout, what, cond)
}

// EventuallyWithin is Eventually with a bound of its own, for waits whose
// bound is part of what the test proves ("the slot is free within 10 s
// of the client leaving").
func EventuallyWithin(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			tb.Fatalf("after %s: %s", within, what)
		case <-tick.C:
			if cond() {
				return
			}
		}
	}
}

// Buffer is a bytes.Buffer safe for concurrent writes, for the logs of a
// server under test.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WriteFile writes text to name in a temporary folder of the test and
// returns its path.
func WriteFile(tb testing.TB, name, text string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// LoadConfig loads a configuration file with the given YAML ("" for none)
// and OUTPRINT_* variables env, as serve does.
func LoadConfig(tb testing.TB, yaml string, env ...string) *config.Config {
	tb.Helper()
	path := ""
	if yaml != "" {
		path = WriteFile(tb, "outprint.yaml", yaml)
	}
	cfg, err := config.Load(path, env)
	if err != nil {
		tb.Fatalf("config.Load(%q, %v): %v", yaml, env, err)
	}
	return cfg
}

// Clock is a clock a test moves by hand (jobs.Config.Clock): retention
// and expiry are tested by advancing it, not by sleeping to a TTL. It
// starts at the real time. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	off time.Duration
}

// Now is the real time plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}
