package tex

import (
	"os"
	"sync"
	"testing"
)

// sharedFormats are the formats of the pools of newTestPool: each package
// part of a preamble is dumped once for this test binary instead of once
// per pool (some 2.4 CPU seconds each). Made on first use, removed by
// TestMain. Tests of the formats themselves give their pools formats of
// their own (PoolConfig.Formats nil).
var sharedFormats struct {
	once sync.Once
	f    *Formats
	err  error
}

// testFormats returns sharedFormats.
func testFormats(t testing.TB) *Formats {
	t.Helper()
	sharedFormats.once.Do(func() {
		sharedFormats.f, sharedFormats.err = NewFormats("", 0, 0)
	})
	if sharedFormats.err != nil {
		t.Fatalf("NewFormats: %v", sharedFormats.err)
	}
	return sharedFormats.f
}

func TestMain(m *testing.M) {
	code := m.Run()
	if f := sharedFormats.f; f != nil {
		if err := f.Close(); err != nil {
			_, _ = os.Stderr.WriteString("shared formats: " + err.Error() + "\n")
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}
