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
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/worker"
)

// convertCmd is `outprint convert FILE [-o OUT.pdf] [--metadata
// META.json] [--json]`: one Office document to PDF with the service's
// recognition, bounds and limits, on one LibreOffice process started for
// it. After an error no output file is left behind.
func convertCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("convert", stderr)
	out := fs.String("o", "", "write the PDF to `OUT.pdf` (default: FILE with .pdf)")
	meta := fs.String("metadata", "", `read the overrides from `+"`META.json`"+` ({"paper":"a4"|"letter","landscape":true|false})`)
	asJSON := fs.Bool("json", false, "print errors as the JSON error list")
	files, err := interleavedArgs(fs, args)
	if err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if len(files) != 1 {
		_, _ = fmt.Fprint(stderr, "outprint convert: want exactly one Office document\n"+usage)
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
			_ = json.NewEncoder(stdout).Encode(map[string]any{"errors": le.Problems}) // stdout closed: nothing to tell
		} else {
			printProblems(stderr, name, le.Problems)
		}
		return exitCodeOf(le)
	}
	doc, err := readBounded(name, limits.MaxOfficeBytes)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint convert: %v\n", err)
		return exitUsage
	}
	var metadata []byte
	if *meta != "" {
		if metadata, err = os.ReadFile(*meta); err != nil {
			_, _ = fmt.Fprintf(stderr, "outprint convert: %v\n", err)
			return exitUsage
		}
	}
	// The service's limits (OUTPRINT_TIMEOUT, OUTPRINT_MAX_PAGES,
	// OUTPRINT_MAX_PDF_BYTES or a file named by OUTPRINT_CONFIG).
	cfg, err := config.Load(config.Path("", os.Environ()), os.Environ())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint convert: configuration: %v\n", err)
		return exitUsage
	}
	f, err := office.Detect(doc, filepath.Base(name))
	if err != nil {
		return report(err)
	}
	opts, err := worker.OfficeOptions(metadata)
	if err != nil {
		return report(err)
	}
	start := time.Now()
	pool, err := office.NewPool(ctx, office.Config{Slots: 1})
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint convert: %v\n", err)
		return report(worker.ErrOfficeUnavailable)
	}
	res, err := worker.Convert(ctx, pool, doc, f, opts, cfg.Render.Limits())
	if cerr := pool.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("stop LibreOffice: %w", cerr)
	}
	if err != nil {
		return report(err)
	}
	if err := writeFileAtomic(*out, res.PDF); err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint convert: %v\n", err)
		return exitInternal
	}
	_, _ = fmt.Fprintf(stderr, "%s: %d pages from %s, %.2fs\n", *out, res.Pages, strings.ToUpper(f.Name), time.Since(start).Seconds())
	return exitOK
}
