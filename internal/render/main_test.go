package render

import (
	"context"
	"os"
	"testing"

	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/tex/textest"
)

// sharedFormats are the dumped formats of the tests' TeX pools
// (tex.PoolConfig.Formats), one for this test binary.
var sharedFormats textest.SharedFormats

// testFormats returns sharedFormats.
func testFormats(t testing.TB) *tex.Formats { t.Helper(); return sharedFormats.Get(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	if p := sharedPool.p; p != nil {
		if err := p.Close(context.Background()); err != nil {
			_, _ = os.Stderr.WriteString("shared pool: Close: " + err.Error() + "\n")
			if code == 0 {
				code = 1
			}
		}
	}
	if d := sharedDrawer.d; d != nil {
		if err := d.Close(); err != nil {
			_, _ = os.Stderr.WriteString("shared drawer: Close: " + err.Error() + "\n")
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(sharedFormats.Close(code))
}
