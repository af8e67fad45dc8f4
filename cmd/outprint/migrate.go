package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/service"
)

// migrateCmd is `outprint migrate [--config FILE]`: it brings the job
// database named by the configuration (database, OUTPRINT_DATABASE) up to
// date, SQLite or PostgreSQL, and creates the S3 store's bucket
// (service.Migrate). Running it again changes nothing.
func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("migrate", stderr)
	configFile := fs.String("config", "", "read the configuration from `FILE` (default $"+config.EnvConfig+", else embedded defaults)")
	if err := fs.Parse(args); err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if fs.NArg() > 0 {
		// Terminal output: write errors are dropped (see run).
		_, _ = fmt.Fprintf(stderr, "outprint migrate: unexpected argument %q\n%s", fs.Arg(0), usage)
		return exitUsage
	}
	env := os.Environ()
	path := config.Path(*configFile, env)
	cfg, err := config.Load(path, env)
	if err != nil {
		printConfigErrors(stderr, "outprint migrate", path, err)
		return exitUsage
	}
	done, err := service.Migrate(ctx, cfg)
	if done.Database != "" {
		_, _ = fmt.Fprintf(stdout, "outprint migrate: %s is up to date\n", done.Database)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint migrate: %v\n", err)
		return exitInternal
	}
	if done.Store != "" {
		_, _ = fmt.Fprintf(stdout, "outprint migrate: store %s is ready\n", done.Store)
	}
	return exitOK
}
