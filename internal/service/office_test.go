package service

import (
	"context"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/testenv"
)

// TestOfficeStatus: `outprint config check` says LibreOffice converts
// Office documents where soffice and python3-uno are installed, and that
// they are not installed, naming the package, where soffice is missing.
func TestOfficeStatus(t *testing.T) {
	testenv.Require(t, "soffice", "python3")
	if got := OfficeStatus(context.Background()); !strings.HasPrefix(got, "converted by LibreOffice (/") {
		t.Errorf("OfficeStatus() = %q, want converted by LibreOffice (its path)", got)
	}
	t.Setenv("PATH", t.TempDir())
	if got := OfficeStatus(context.Background()); !strings.HasPrefix(got, "not installed") || !strings.Contains(got, "libreoffice-writer") {
		t.Errorf("OfficeStatus() without soffice = %q, want not installed, naming the package", got)
	}
}

// TestOfficeStats: a scrape reports each process's memory by slot and
// every restart cause, those that never happened at 0.
func TestOfficeStats(t *testing.T) {
	t.Parallel()
	got := officeStats(office.Stats{
		Processes: []office.ProcessStats{{Slot: 0, RSS: 100}, {Slot: 1, RSS: 200}},
		Restarts:  map[string]int64{office.CauseTimeout: 2},
	})
	if len(got.RSS) != 2 || got.RSS[0] != 100 || got.RSS[1] != 200 {
		t.Errorf("officeStats(…).RSS = %v, want [100 200]", got.RSS)
	}
	for _, c := range office.Causes() {
		want := uint64(0)
		if c == office.CauseTimeout {
			want = 2
		}
		if n, ok := got.Restarts[c]; !ok || n != want {
			t.Errorf("officeStats(…).Restarts[%s] = %d, %v, want %d, true", c, n, ok, want)
		}
	}
}
