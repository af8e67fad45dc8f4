package httpapi

import (
	"os"
	"testing"

	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/tex/textest"
)

// sharedFormats and sharedPool are the dumped formats and the warm TeX
// pool of the servers these tests start (textest): most tests only need
// documents typeset, and typeset them as the service does, on a pool.
// The tests that watch TeX's own processes start a cold runner of their
// own (jobsOptions.coldTeX).
var (
	sharedFormats textest.SharedFormats
	sharedPool    textest.SharedPool
)

// testEngine returns sharedPool.
func testEngine(t testing.TB) *tex.Pool { t.Helper(); return sharedPool.Get(t, sharedFormats.Get(t)) }

func TestMain(m *testing.M) {
	os.Exit(sharedFormats.Close(sharedPool.Close(m.Run())))
}
