package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/tex"
)

// interleavedArgs parses flags that may come before and after the
// positional arguments, and returns those (render, fields, fill).
func interleavedArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newFiller builds a Filler with a cold TeX runner and the configured
// bounds (OUTPRINT_TIMEOUT, OUTPRINT_MAX_PAGES, OUTPRINT_MAX_PDF_BYTES).
func newFiller() (*forms.Filler, error) {
	cfg, err := config.Load(config.Path("", os.Environ()), os.Environ())
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	runner, err := tex.NewRunner(tex.RunnerConfig{})
	if err != nil {
		return nil, err
	}
	lim := cfg.Render.Limits()
	return forms.New(forms.Config{Timeout: lim.Timeout, MaxPages: lim.MaxPages, MaxPDFBytes: lim.MaxPDFBytes}, runner)
}

// formsReport prints a failure and returns the exit code.
func formsReport(err error, name string, asJSON bool, stdout, stderr io.Writer) int {
	var le *limits.Error
	if !errors.As(err, &le) {
		// Terminal output: write errors are dropped (see run).
		_, _ = fmt.Fprintf(stderr, "outprint: internal error: %v\n", err)
		return exitInternal
	}
	if asJSON {
		_ = json.NewEncoder(stdout).Encode(map[string]any{"errors": le.Problems})
	} else {
		for _, p := range le.Problems {
			where := name
			if p.Line > 0 {
				where = fmt.Sprintf("%s:%d", name, p.Line)
			}
			_, _ = fmt.Fprintf(stderr, "%s: %s (%s)\n", where, p.Message, p.Code)
		}
	}
	return exitCodeOf(le)
}

// fieldsCmd is `outprint fields FORM.pdf [--json]`.
func fieldsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fields", stderr)
	asJSON := fs.Bool("json", false, "print the fields (or the errors) as JSON")
	files, err := interleavedArgs(fs, args)
	if err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if len(files) != 1 {
		_, _ = fmt.Fprint(stderr, "outprint fields: want exactly one PDF file\n"+usage)
		return exitUsage
	}
	pdf, err := readBounded(files[0], limits.MaxPDFBytes)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint fields: %v\n", err)
		return exitUsage
	}
	filler, err := newFiller()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint fields: %v\n", err)
		return exitUsage
	}
	fields, err := filler.Fields(ctx, pdf)
	if err != nil {
		return formsReport(err, files[0], *asJSON, stdout, stderr)
	}
	if *asJSON {
		if fields == nil {
			fields = []forms.Field{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"fields": fields})
		return exitOK
	}
	for _, f := range fields {
		val, _ := json.Marshal(f.Value)
		extra := ""
		if len(f.Options) > 0 {
			extra = " options " + strings.Join(f.Options, "|")
		}
		if f.MaxLen > 0 {
			extra += fmt.Sprintf(" maxLen %d", f.MaxLen)
		}
		_, _ = fmt.Fprintf(stdout, "%s\t%s\tpage %d\t%s%s\n", f.Name, f.Type, f.Page, val, extra)
	}
	return exitOK
}

// fillCmd is `outprint fill FORM.pdf VALUES.json [-o OUT.pdf] [--json]`.
// After an error no output file is left behind: the PDF is written to a
// temporary file next to OUT and renamed only when complete.
func fillCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fill", stderr)
	out := fs.String("o", "", "write the filled PDF to `OUT.pdf` (default: FORM-filled.pdf)")
	asJSON := fs.Bool("json", false, "print errors as the JSON error list")
	files, err := interleavedArgs(fs, args)
	if err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if len(files) != 2 {
		_, _ = fmt.Fprint(stderr, "outprint fill: want a PDF form and a values JSON file\n"+usage)
		return exitUsage
	}
	name := files[0]
	if *out == "" {
		*out = strings.TrimSuffix(name, filepath.Ext(name)) + "-filled.pdf"
	}
	pdf, err := readBounded(name, limits.MaxPDFBytes)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint fill: %v\n", err)
		return exitUsage
	}
	values, err := readBounded(files[1], forms.MaxValuesBytes)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint fill: %v\n", err)
		return exitUsage
	}
	filler, err := newFiller()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint fill: %v\n", err)
		return exitUsage
	}
	res, err := filler.Fill(ctx, pdf, values, nil)
	if err != nil {
		// Problems with values name the values file and its lines.
		where := name
		var le *limits.Error
		if errors.As(err, &le) && len(le.Problems) > 0 && le.Problems[0].Field != "pdf" {
			where = files[1]
		}
		return formsReport(err, where, *asJSON, stdout, stderr)
	}
	if err := writeFileAtomic(*out, res.PDF); err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint fill: %v\n", err)
		return exitInternal
	}
	_, _ = fmt.Fprintf(stderr, "%s: %d pages, %d fields, %d filled\n", *out, res.Pages, res.Fields, res.Filled)
	return exitOK
}

// writeFileAtomic writes data to out through a temporary file next to it,
// renamed only when complete: after an error no partial PDF is left.
func writeFileAtomic(out string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".outprint-*.pdf")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), out)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name()) // best effort: the write already failed
	}
	return werr
}
