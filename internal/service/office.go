package service

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/programs"
	"github.com/outprint/outprint/internal/worker"
)

// Office documents (issue 28): a rendering process (serve, worker) keeps
// one warm LibreOffice process per render slot, since a conversion holds
// a slot of the same capacity as renders and forms. Without LibreOffice
// the process still starts and renders; an Office document is then
// refused 422 "Office conversion is not available on this server", as a
// diagram without its renderer is, and `outprint config check` and the
// startup log say so.

// openOffice opens the LibreOffice pool of a rendering process with slots
// processes, or leaves m.office nil when LibreOffice cannot run here.
// /readyz asks the pool each time; its processes end at Close, after the
// renders drained.
func (m *Main) openOffice(ctx context.Context, slots int) {
	if !officeEnabled(m.cfg) {
		m.officeState = "off"
		m.log.Info("Office conversion off: an Office document is refused (422)", "setting", "office.enabled")
		return
	}
	pool, err := office.NewPool(ctx, office.Config{Slots: slots, Dir: m.tmp, Logger: m.log})
	if err != nil {
		m.officeState = "not installed"
		m.log.Warn("Office conversion not installed: an Office document is refused (422); scripts/setup.sh serve installs LibreOffice", "err", err)
		return
	}
	m.office = pool
	m.officeState = "on"
	m.onClose(pool.Close)
	m.pools = append(m.pools, newReadyCache("LibreOffice pool", pool))
	m.mt.SetOfficeSource(func() metrics.OfficeStats { return officeStats(pool.Stats()) })
	m.log.Info("Office conversion", "processes", slots)
}

// officeEnabled is office.enabled: office.DefaultEnabled unless the
// operator set it.
func officeEnabled(cfg *config.Config) bool {
	if !cfg.Set("office.enabled") {
		return office.DefaultEnabled
	}
	return cfg.Office.Enabled
}

// officeStats is what a scrape reports of the pool: each process's
// memory by slot and its restarts by cause, every cause present (at 0
// until it happens) so that a rate over it exists from the start.
func officeStats(st office.Stats) metrics.OfficeStats {
	out := metrics.OfficeStats{Restarts: map[string]uint64{}}
	for _, p := range st.Processes {
		out.RSS = append(out.RSS, p.RSS)
	}
	for _, c := range office.Causes() {
		out.Restarts[c] = 0
	}
	for c, n := range st.Restarts {
		out.Restarts[c] = uint64(max(n, 0))
	}
	return out
}

// converter is the process's Office converter for the API and the job
// runtime: nil when there is none, never a nil *office.Pool.
func (m *Main) converter() worker.Converter {
	if m.office == nil {
		return nil
	}
	return m.office
}

// officeCheckTimeout bounds the check of LibreOffice's Python bridge.
const officeCheckTimeout = 10 * time.Second

// OfficeStatus says, for `outprint config check`, whether this machine
// converts Office documents: off, or LibreOffice (soffice) and the
// python3 that imports uno, which drives it. It starts no LibreOffice.
func OfficeStatus(ctx context.Context, cfg *config.Config) string {
	if !officeEnabled(cfg) {
		return "off (office.enabled: false): an Office document is refused (422)"
	}
	soffice, err := programs.Find(programs.Soffice)
	if err != nil {
		return fmt.Sprintf("not installed: %v; an Office document is refused (422)", err)
	}
	// Debian's python3 first, which python3-uno is built for (a python3
	// of pyenv or a virtualenv earlier on PATH cannot import it), as the
	// pool looks for it.
	err = errors.New("no python3 imports uno (install the Debian package python3-uno; scripts/setup.sh serve does)")
	for _, candidate := range []string{"/usr/bin/python3", programs.Python3} {
		python, ferr := programs.Find(candidate)
		if ferr != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, officeCheckTimeout)
		rerr := exec.CommandContext(cctx, python, "-I", "-c", "import uno").Run()
		cancel()
		if rerr == nil {
			err = nil
			break
		}
	}
	if err != nil {
		return fmt.Sprintf("not installed: %v; an Office document is refused (422)", err)
	}
	return "converted by LibreOffice (" + soffice + ")"
}
