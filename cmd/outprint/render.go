package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/service"
	"github.com/outprint/outprint/internal/tex"
)

// renderCmd is `outprint render`: one local render through the same
// pipeline and limits as the service, with a cold TeX process.
func renderCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("render", stderr)
	out := fs.String("o", "", "write the PDF to `OUT.pdf` (default: FILE with .pdf)")
	meta := fs.String("metadata", "", "read the metadata from `META.json` (wins over front matter)")
	asJSON := fs.Bool("json", false, "print errors as the JSON error list")
	// Flags may follow the file name (interleavedArgs).
	files, err := interleavedArgs(fs, args)
	if err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if len(files) != 1 {
		// Terminal output: write errors are dropped (see run).
		_, _ = fmt.Fprint(stderr, "outprint render: want exactly one Markdown file\n"+usage)
		return exitUsage
	}
	name := files[0]
	if *out == "" {
		*out = strings.TrimSuffix(name, filepath.Ext(name)) + ".pdf"
	}

	report := func(err error) int {
		var le *limits.Error
		if !errors.As(err, &le) {
			_, _ = fmt.Fprintf(stderr, "outprint: internal error: %v\n", err)
			return exitInternal
		}
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(map[string]any{"errors": le.Problems})
		} else {
			printProblems(stderr, name, le.Problems)
		}
		return exitCodeOf(le)
	}

	md, err := readBounded(name, limits.MaxMarkdownBytes)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint render: %v\n", err)
		return exitUsage
	}
	if len(md) > limits.MaxMarkdownBytes {
		// Only the first byte past the bound was read: say the file's size.
		if fi, err := os.Stat(name); err == nil {
			return report(limits.TooLarge(fi.Size()))
		}
	}
	var metadata []byte
	if *meta != "" {
		if metadata, err = os.ReadFile(*meta); err != nil {
			_, _ = fmt.Fprintf(stderr, "outprint render: %v\n", err)
			return exitUsage
		}
	}

	// The command line honours the same configuration as the service
	// (OUTPRINT_TIMEOUT, OUTPRINT_MAX_PAGES, OUTPRINT_MAX_PDF_BYTES, or a
	// file named by OUTPRINT_CONFIG), validated the same way.
	cfg, err := config.Load(config.Path("", os.Environ()), os.Environ())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint render: configuration: %v\n", err)
		return exitUsage
	}
	runner, err := tex.NewRunner(tex.RunnerConfig{})
	if err != nil {
		return report(err)
	}
	rc := render.Config{Engine: runner, Limits: cfg.Render.Limits()}
	// Diagrams as the service draws them (diagrams.enabled); the browser,
	// started only for a Mermaid diagram, ends with the command.
	if drawer, err := service.Drawer(cfg); err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint render: %v\n", err)
		return exitUsage
	} else if drawer != nil {
		// The PDF is written (or the error reported) by then: stopping
		// the browser has nothing left to affect.
		defer func() { _ = drawer.Close() }()
		rc.Diagrams = drawer
	}
	p := render.New(rc)
	req := render.Request{
		Name: filepath.Base(name), Markdown: md, Metadata: metadata,
		Images: images.Chain(images.Dir(filepath.Dir(name)), nil),
	}
	res, err := p.Do(ctx, req, progressPrinter(stderr))
	if err != nil {
		return report(err)
	}
	printProblems(stderr, name, res.Warnings)
	if err := os.WriteFile(*out, res.PDF, 0o644); err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint render: %v\n", err)
		return exitInternal
	}
	_, _ = fmt.Fprintf(stderr, "%s: %d pages, %d TeX runs, %.2fs\n", *out, res.Pages, res.Runs, res.Duration.Seconds())
	return exitOK
}

// readBounded reads at most max+1 bytes, so that a too large file is
// reported by the pipeline's size check without reading it all.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	// Read only: its Close cannot lose data.
	defer func() { _ = f.Close() }()
	return io.ReadAll(io.LimitReader(f, max+1))
}

// printProblems writes problems in the compiler style "file:line: message".
func printProblems(w io.Writer, name string, problems []limits.Problem) {
	for _, p := range problems {
		where := name
		if p.Line > 0 {
			where = fmt.Sprintf("%s:%d", name, p.Line)
		}
		label := p.Message
		if p.Source == limits.SourceDocument && p.Code != "" && p.Code != limits.CodeInvalid {
			label = fmt.Sprintf("%s (%s)", p.Message, p.Code)
		}
		_, _ = fmt.Fprintf(w, "%s: %s\n", where, label)
	}
}

// progressPrinter shows pages as TeX ships them, only when stderr is a
// terminal: logs and pipes get the summary line alone.
func progressPrinter(stderr io.Writer) func(render.Progress) {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return func(p render.Progress) {
		if p.Phase == render.PhaseRendering && p.Pages > 0 {
			_, _ = fmt.Fprintf(stderr, "\rrendering: page %d", p.Pages)
		}
		if p.Phase == render.PhasePackaging {
			_, _ = fmt.Fprint(stderr, "\r\033[K")
		}
	}
}
