package service

import (
	"os"
	"testing"

	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/tex/textest"
)

// sharedFormats are the dumped formats of the services the tests start
// (Options.Formats), one for this test binary.
var sharedFormats textest.SharedFormats

// testFormats returns sharedFormats.
func testFormats(t testing.TB) *tex.Formats { t.Helper(); return sharedFormats.Get(t) }

func TestMain(m *testing.M) {
	os.Exit(sharedFormats.Close(m.Run()))
}
