// Command outprint turns Markdown into print-quality PDFs through XeLaTeX.
// It only wires things together: it parses flags, loads the configuration
// and maps results to exit codes; the processes are assembled by
// internal/service and the logic lives in the other internal/ packages.
//
//	outprint render FILE.md [-o OUT.pdf] [--metadata META.json] [--json]
//	outprint convert FILE [-o OUT.pdf] [--metadata META.json] [--json]
//	outprint fields FORM.pdf [--json]
//	outprint fill FORM.pdf VALUES.json [-o OUT.pdf] [--json]
//	outprint serve [--config FILE]
//	outprint gateway [--config FILE]
//	outprint worker [--config FILE]
//	outprint migrate [--config FILE]
//	outprint config check [FILE]
//	outprint version
//	outprint help [CMD]
//
// Exit codes: 0 success, 1 document or limit errors, 2 usage, 3 internal.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/outprint/outprint/internal/limits"
)

// Exit codes of the command line.
const (
	exitOK       = 0
	exitDocument = 1
	exitUsage    = 2
	exitInternal = 3
)

// exitCodeOf is the exit code of a render or form refused by a bound or a
// check: the document's (or the form's) to fix, whatever its kind; a kind
// the command does not know (none of a one-shot render's) is internal.
func exitCodeOf(le *limits.Error) int {
	switch le.Kind {
	case limits.KindDocument, limits.KindRequest, limits.KindTooLarge, limits.KindTimeout, limits.KindUnsupported:
		return exitDocument
	}
	return exitInternal
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  outprint render FILE.md [-o OUT.pdf] [--metadata META.json] [--json]
  outprint convert FILE [-o OUT.pdf] [--metadata META.json] [--json]
                                        convert an Office document (DOCX, XLSX, PPTX, …)
  outprint fields FORM.pdf [--json]     list the fields of a PDF form
  outprint fill FORM.pdf VALUES.json [-o OUT.pdf] [--json]
                                        fill a PDF form and flatten it
  outprint serve [--config FILE]        HTTP service (default 127.0.0.1:8080)
  outprint gateway [--config FILE]      public API; renders on workers (PostgreSQL)
  outprint worker [--config FILE]       renders for gateways and runs queued jobs
  outprint migrate [--config FILE]      create or update the job database
  outprint config check [FILE]          print the effective configuration
  outprint version                      print the version (also --version)
  outprint help [CMD]                   this text, or a command's (outprint CMD --help)
The configuration file is --config FILE or $OUTPRINT_CONFIG; OUTPRINT_*
variables override it (see README, "Running the service").
`

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// Messages go to the caller's stdout and stderr. If writing there
		// fails there is nowhere left to report it, and the exit code still
		// says how the command ended: every command drops those write
		// errors with `_, _ =` for this reason.
		_, _ = fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "render":
		return renderCmd(ctx, args[1:], stdout, stderr)
	case "convert":
		return convertCmd(ctx, args[1:], stdout, stderr)
	case "fields":
		return fieldsCmd(ctx, args[1:], stdout, stderr)
	case "fill":
		return fillCmd(ctx, args[1:], stdout, stderr)
	case roleServe, roleGateway, roleWorker:
		return roleCmd(ctx, args[0], args[1:], stdout, stderr, nil)
	case "migrate":
		return migrateCmd(ctx, args[1:], stdout, stderr)
	case "config":
		return configCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		// `outprint help CMD` is `outprint CMD --help`.
		if len(args) > 1 && args[0] == "help" && args[1] != "help" {
			return run(ctx, append(args[1:], "--help"), stdout, stderr)
		}
		_, _ = fmt.Fprint(stdout, usage)
		return exitOK
	}
	_, _ = fmt.Fprintf(stderr, "outprint: unknown command %q\n%s", args[0], usage)
	return exitUsage
}
