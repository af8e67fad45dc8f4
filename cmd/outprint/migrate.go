package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
)

// migrateTimeout bounds `outprint migrate`: a database that does not
// answer ends the command with an error instead of a hang.
const migrateTimeout = 5 * time.Minute

// migrateCmd is `outprint migrate [--config FILE]`: it brings the job
// database named by the configuration (database, OUTPRINT_DATABASE) up to
// date, SQLite or PostgreSQL. serve migrates SQLite by itself at start;
// PostgreSQL, shared by every replica, is migrated by this command, once
// per deployment. Running it again changes nothing.
func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "configuration file (default $"+config.EnvConfig+", else embedded defaults)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "outprint migrate: unexpected argument %q\n%s", fs.Arg(0), usage)
		return exitUsage
	}
	env := os.Environ()
	path := config.Path(*configFile, env)
	cfg, err := config.Load(path, env)
	if err != nil {
		printConfigErrors(stderr, "outprint migrate", path, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	db, err := jobs.Open(ctx, cfg.Database)
	if err != nil {
		fmt.Fprintf(stderr, "outprint migrate: %v\n", err)
		return exitInternal
	}
	defer db.Close()
	if err := jobs.Migrate(ctx, db); err != nil {
		fmt.Fprintf(stderr, "outprint migrate: %s: %v\n", db, err)
		return exitInternal
	}
	fmt.Fprintf(stdout, "outprint migrate: %s is up to date\n", db)
	bucket, err := ensureBucket(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "outprint migrate: store: %v\n", err)
		return exitInternal
	}
	if bucket != "" {
		fmt.Fprintf(stdout, "outprint migrate: store %s is ready\n", bucket)
	}
	return exitOK
}
