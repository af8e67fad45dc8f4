package service

import (
	"os"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/tex"
)

// sharedFormats are the dumped formats of the services the tests start
// (Options.Formats): the usual preamble's package part is dumped once for
// this test binary instead of once per service (some 2.4 CPU seconds
// each). Made on first use, removed by TestMain.
var sharedFormats struct {
	once sync.Once
	f    *tex.Formats
	err  error
}

// testFormats returns sharedFormats.
func testFormats(t testing.TB) *tex.Formats {
	t.Helper()
	sharedFormats.once.Do(func() {
		sharedFormats.f, sharedFormats.err = tex.NewFormats("", 0, 0)
	})
	if sharedFormats.err != nil {
		t.Fatalf("tex.NewFormats: %v", sharedFormats.err)
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
