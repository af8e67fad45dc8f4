// Package programs lists the programs `outprint serve`, `gateway` and
// `worker` run, each with the Debian package that installs it: the one list
// the container image, `make run` and the tests take as the truth. The
// packages themselves are in scripts/packages-serve.txt and
// scripts/packages-office.txt (LibreOffice, a layer of its own), which the
// Dockerfile's runtime stage installs and scripts/setup.sh installs for
// `make run`; this package's test checks that every program's package is
// there, and the image test (internal/imagetest) runs `which` for every
// program inside the built image.
//
// A package that runs one of these looks it up with Find when it is
// constructed, so a missing program stops the server at start with the
// package to install, instead of failing every request that needs it.
// Add a program here when outprint starts running a new one.
package programs

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// The programs, by the name each is looked up in PATH.
const (
	// XeLaTeX typesets every document and form overlay (internal/tex).
	XeLaTeX = "xelatex"
	// XDVIPDFMx turns XeTeX's output into PDF; XeLaTeX starts it, and the
	// pool's zygotes run it directly (internal/tex).
	XDVIPDFMx = "xdvipdfmx"
	// RSVGConvert converts SVG images and emoji to PDF (internal/images).
	RSVGConvert = "rsvg-convert"
	// QPDF reads and flattens PDF forms (internal/forms).
	QPDF = "qpdf"
	// PDFToPPM draws page previews (internal/raster).
	PDFToPPM = "pdftoppm"
	// PRLimit sets the rlimits of qpdf (internal/forms) and of Chromium
	// and dot (internal/diagram) before they run.
	PRLimit = "prlimit"
	// Chromium draws Mermaid diagrams (internal/diagram runs the binary
	// behind Debian's chromium wrapper, /usr/lib/chromium/chromium).
	Chromium = "chromium"
	// Dot draws Graphviz diagrams (internal/diagram).
	Dot = "dot"
	// Soffice is LibreOffice, which converts Office documents
	// (internal/office).
	Soffice = "soffice"
	// Python3 runs the UNO bridge that drives LibreOffice
	// (internal/office; python3-uno makes `import uno` work).
	Python3 = "python3"
)

// Program is one program outprint runs.
type Program struct {
	// Name is the program's name in PATH.
	Name string
	// Package is the Debian package in scripts/packages-serve.txt (or
	// scripts/packages-office.txt) that installs it (itself or as a
	// dependency).
	Package string
	// User is the outprint package that runs it.
	User string
}

// Serving returns every program `outprint serve`, `gateway` and `worker`
// run.
func Serving() []Program {
	return []Program{
		{Name: XeLaTeX, Package: "texlive-xetex", User: "tex"},
		{Name: XDVIPDFMx, Package: "texlive-xetex", User: "tex"},
		{Name: RSVGConvert, Package: "librsvg2-bin", User: "images"},
		{Name: QPDF, Package: "qpdf", User: "forms"},
		{Name: PDFToPPM, Package: "poppler-utils", User: "raster"},
		{Name: PRLimit, Package: "util-linux", User: "forms"},
		{Name: Chromium, Package: "chromium", User: "diagram"},
		{Name: Dot, Package: "graphviz", User: "diagram"},
		{Name: Soffice, Package: "libreoffice-writer", User: "office"},
		{Name: Python3, Package: "python3-uno", User: "office"},
	}
}

// Find returns the absolute path of the named program, or an error that
// names the Debian package to install.
func Find(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		for _, prog := range Serving() {
			if prog.Name == name {
				return "", fmt.Errorf("%w (install the Debian package %s; scripts/setup.sh serve does)", err, prog.Package)
			}
		}
		return "", err
	}
	return p, nil
}
