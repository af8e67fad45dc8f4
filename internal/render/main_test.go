package render

import (
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
	code := sharedPool.Close(m.Run())
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
