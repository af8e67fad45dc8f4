package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// Help of the subcommands: `outprint CMD --help` (and -h, and `outprint
// help CMD`) prints the usage line, one sentence on what it does and the
// flags spelled as the README spells them (-o, --json, --config), and
// exits 0; a wrong flag prints the error and the usage line and exits 2.

// helpOf is the usage line (after "outprint ") and the sentence of each
// subcommand.
func helpOf(name string) (line, what string) {
	switch name {
	case "render":
		return "render FILE.md [-o OUT.pdf] [--metadata META.json] [--json]",
			"Renders one Markdown file to a PDF with the service's pipeline and limits, on a cold TeX process."
	case "convert":
		return "convert FILE [-o OUT.pdf] [--metadata META.json] [--json]",
			"Converts one Office document (DOCX, DOC, ODT, RTF, XLSX, XLS, ODS, CSV, PPTX, PPT, ODP) to a PDF with LibreOffice, within the service's limits."
	case "fields":
		return "fields FORM.pdf [--json]",
			"Lists the fillable fields of a PDF form: name, type, page, current value and options."
	case "fill":
		return "fill FORM.pdf VALUES.json [-o OUT.pdf] [--json]",
			"Fills a PDF form with the values of a JSON object keyed by field name and flattens it."
	case roleServe:
		return "serve [--config FILE]",
			"Runs the HTTP service: the API, jobs and the page for people, rendering in this process (default 127.0.0.1:8080)."
	case roleGateway:
		return "gateway [--config FILE]",
			"Runs the public API of a cluster: it checks requests and inserts jobs, and its workers render (PostgreSQL)."
	case roleWorker:
		return "worker [--config FILE]",
			"Runs a cluster worker: it renders what gateways send and the queued jobs, from one capacity."
	case "migrate":
		return "migrate [--config FILE]",
			"Creates or updates the job database (SQLite or PostgreSQL) and the S3 store's bucket; running it again changes nothing."
	case "config check":
		return "config check [FILE] [--config FILE]",
			"Prints the effective configuration with where each value came from, or every error in it (exit 2)."
	case "version":
		return "version", "Prints the version of outprint: its module version, commit and Go version."
	}
	return "", ""
}

// newFlags returns the flag set of subcommand name; errors go to stderr.
// Its Usage prints nothing: parseDone answers help and errors.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parseDone answers a flag set's parse error: the help on stdout and exit
// 0 for -h or --help, else the usage line on stderr (after the error the
// flag package printed) and exit 2.
func parseDone(fs *flag.FlagSet, err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(stdout, fs)
		return exitOK
	}
	line, _ := helpOf(fs.Name())
	// Terminal output: write errors are dropped (see run).
	_, _ = fmt.Fprintf(stderr, "usage: outprint %s\n(outprint %s --help for more)\n", line, fs.Name())
	return exitUsage
}

// writeHelp prints the help of fs's subcommand: usage line, sentence,
// flags.
func writeHelp(w io.Writer, fs *flag.FlagSet) {
	line, what := helpOf(fs.Name())
	_, _ = fmt.Fprintf(w, "usage: outprint %s\n\n%s\n", line, what)
	type row struct{ flag, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		if arg != "" {
			name += " " + arg
		}
		width = max(width, len(name))
		rows = append(rows, row{name, usage})
	})
	if len(rows) == 0 {
		return
	}
	_, _ = fmt.Fprintln(w, "\nflags:")
	for _, r := range rows {
		_, _ = fmt.Fprintf(w, "  %-*s  %s\n", width, r.flag, r.usage)
	}
}

// versionCmd is `outprint version` (and --version): the module version,
// the commit and its time as the Go toolchain stamped them into the
// binary, and the Go version.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
	if err := fs.Parse(args); err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if fs.NArg() > 0 {
		return parseDone(fs, errors.New("unexpected argument"), stdout, stderr)
	}
	_, _ = fmt.Fprintln(stdout, version())
	return exitOK
}

// version is "outprint VERSION [COMMIT[-modified] TIME] GO".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "outprint (unknown build)"
	}
	v := []string{"outprint", bi.Main.Version}
	if v[1] == "" {
		v[1] = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-modified"
			}
		}
	}
	if rev != "" {
		v = append(v, rev[:min(12, len(rev))]+dirty)
	}
	if at != "" {
		v = append(v, at)
	}
	return strings.Join(append(v, bi.GoVersion), " ")
}
