package service

import (
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/diagram"
)

// diagramsEnabled is diagrams.enabled: diagram.DefaultEnabled unless the
// operator set it.
func diagramsEnabled(cfg *config.Config) bool {
	if !cfg.Set("diagrams.enabled") {
		return diagram.DefaultEnabled
	}
	return cfg.Diagrams.Enabled
}

// diagramConfig is the drawer's configuration for a process of slots
// render slots: one browser per slot unless diagrams.browsers says, since
// a render holds its slot while its diagrams are drawn.
func diagramConfig(cfg *config.Config, slots int) diagram.Config {
	browsers := cfg.Diagrams.Browsers
	if browsers == 0 {
		browsers = max(slots, 1)
	}
	return diagram.Config{Browsers: browsers}
}

// openDiagrams makes the drawer of a rendering process (serve, worker),
// nil when diagrams are off. It starts nothing: the first Mermaid diagram
// starts a browser. Its browsers end at Close, after the renders drained.
func (m *Main) openDiagrams(slots int) error {
	if !diagramsEnabled(m.cfg) {
		m.log.Info("diagrams off: mermaid and dot fences print as code", "setting", "diagrams.enabled")
		return nil
	}
	dc := diagramConfig(m.cfg, slots)
	dc.TempDir = m.tmp
	dc.Observer = m.mt
	d, err := diagram.New(dc)
	if err != nil {
		return &SettingError{Err: err}
	}
	m.drawer = d
	m.onClose(d.Close)
	m.mt.KnownDiagrams(diagram.Engines, diagram.Outcomes, diagram.RetireCauses)
	// /readyz asks the pool too: a server whose browsers cannot start
	// cannot print the documents with diagrams it accepts.
	m.pools = append(m.pools, newReadyCache("diagram pool", d))
	if a := d.Available(); a.Mermaid && a.Graphviz {
		m.log.Info("diagrams", "draws", a.String())
	} else {
		m.log.Warn("diagrams: a diagram this server cannot draw is refused (422); scripts/setup.sh serve installs what is missing", "draws", a.String())
	}
	return nil
}

// DiagramsStatus says, for `outprint config check`, whether this machine
// can draw diagrams: off, or which languages and what is missing. It
// starts no process.
func DiagramsStatus(cfg *config.Config) string {
	if !diagramsEnabled(cfg) {
		return "off (diagrams.enabled: false): mermaid and dot fences print as code"
	}
	d, err := diagram.New(diagramConfig(cfg, 1))
	if err != nil {
		return err.Error()
	}
	defer func() { _ = d.Close() }() // a drawer that drew nothing has nothing to lose
	a := d.Available()
	if a.Mermaid && a.Graphviz {
		return "drawn: " + a.String()
	}
	return "drawn: " + a.String() + " (scripts/setup.sh serve installs it)"
}

// Drawer is the drawer `outprint render` uses: one browser, nil when
// diagrams are off. The caller closes it.
func Drawer(cfg *config.Config) (*diagram.Drawer, error) {
	if !diagramsEnabled(cfg) {
		return nil, nil
	}
	return diagram.New(diagramConfig(cfg, 1))
}
