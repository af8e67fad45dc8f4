package programs

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// servePackages reads scripts/packages-serve.txt and
// scripts/packages-office.txt as the Dockerfile does: words, comments
// after "#" dropped.
func servePackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	for _, name := range []string{"packages-serve.txt", "packages-office.txt"} {
		raw, err := os.ReadFile("../../scripts/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			line, _, _ = strings.Cut(line, "#")
			pkgs = append(pkgs, strings.Fields(line)...)
		}
	}
	return pkgs
}

// TestServingPackagesInstalled: the image and `make run` install the
// package of every program outprint runs.
func TestServingPackagesInstalled(t *testing.T) {
	pkgs := servePackages(t)
	if len(pkgs) == 0 {
		t.Fatal("scripts/packages-serve.txt lists no package")
	}
	seen := map[string]bool{}
	for _, p := range Serving() {
		if seen[p.Name] {
			t.Errorf("%s is listed twice", p.Name)
		}
		seen[p.Name] = true
		if !slices.Contains(pkgs, p.Package) {
			t.Errorf("%s comes from %s, which scripts/packages-serve.txt does not list", p.Name, p.Package)
		}
	}
	// What only tests and benchmarks use stays out of the image.
	for _, p := range []string{"pdftk-java", "pandoc", "prometheus", "gcc", "default-jre-headless", "nodejs", "npm"} {
		if slices.Contains(pkgs, p) {
			t.Errorf("scripts/packages-serve.txt lists %s, which serving never runs", p)
		}
	}
}

// TestFind: an installed program is found as an absolute path; a missing
// one of the list names its package.
func TestFind(t *testing.T) {
	testenv.Require(t, "qpdf")
	p, err := Find(QPDF)
	if err != nil || !strings.HasPrefix(p, "/") {
		t.Errorf("Find(%q) = %q, %v, want an absolute path", QPDF, p, err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = Find(QPDF)
	if err == nil || !strings.Contains(err.Error(), "install the Debian package qpdf") {
		t.Errorf("Find(%q) with an empty PATH = %v, want an error naming the package qpdf", QPDF, err)
	}
	if _, err := Find("no-such-program-outprint"); err == nil {
		t.Error("Find(no-such-program-outprint) = nil error")
	}
}
