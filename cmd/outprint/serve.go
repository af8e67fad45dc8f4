package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/service"
)

// The process roles, as the command line names them.
const (
	roleServe   = string(service.RoleServe)
	roleGateway = string(service.RoleGateway)
	roleWorker  = string(service.RoleWorker)
)

// roleCmd is `outprint serve|gateway|worker [--config FILE]`: it loads the
// configuration and runs the process of the role (internal/service) until
// ctx ends (SIGINT, SIGTERM) and the shutdown is done, or returns at once
// with exit code 2 when the configuration is wrong. failpoint is nil in
// the command; crash tests re-run their test binary as a process of the
// role with a hook that kills it at a failpoint (main_test.go).
func roleCmd(ctx context.Context, role string, args []string, stdout, stderr io.Writer, failpoint func(string)) int {
	fs := newFlags(role, stderr)
	configFile := fs.String("config", "", "read the configuration from `FILE` (default $"+config.EnvConfig+", else embedded defaults)")
	if err := fs.Parse(args); err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	if fs.NArg() > 0 {
		// Terminal output: write errors are dropped (see run).
		_, _ = fmt.Fprintf(stderr, "outprint %s: unexpected argument %q\n%s", role, fs.Arg(0), usage)
		return exitUsage
	}
	env := os.Environ()
	path := config.Path(*configFile, env)
	cfg, err := config.Load(path, env)
	if err != nil {
		printConfigErrors(stderr, "outprint "+role, path, err)
		return exitUsage
	}
	if err := service.CheckRole(service.Role(role), cfg); err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint %s: %v\n", role, err)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("role", role)
	hurry := make(chan struct{})
	stopHurry := hurryOnSecondSignal(ctx, hurry)
	defer stopHurry()
	return serve(ctx, cfg, service.Options{Role: service.Role(role), Logger: log, Hurry: hurry, Failpoint: failpoint})
}

// serve runs the process opts describes on cfg until ctx ends and returns
// the exit code: 2 for a configuration it cannot run on, 3 for any other
// failure.
func serve(ctx context.Context, cfg *config.Config, opts service.Options) int {
	log := opts.Logger
	m, err := service.New(ctx, cfg, opts)
	if err != nil {
		var se *service.SettingError
		if errors.As(err, &se) {
			log.Error("cannot start", "err", se.Err, "setting", se.Setting)
			return exitUsage
		}
		log.Error("cannot start", "err", err)
		return exitInternal
	}
	code := exitOK
	if err := m.Run(ctx); err != nil {
		log.Error("stopped on an error", "err", err)
		code = exitInternal
	}
	if err := m.Close(); err != nil {
		log.Error("close", "err", err)
	}
	return code
}

// hurryOnSecondSignal closes hurry when a SIGINT or SIGTERM arrives after
// ctx ended (the first one ends ctx): the shutdown then skips the rest of
// its grace period. The returned stop ends the goroutine that watches.
func hurryOnSecondSignal(ctx context.Context, hurry chan<- struct{}) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { // ends on the second signal or at stop
		defer close(exited)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		select {
		case <-again:
			close(hurry)
		case <-done:
		}
	}()
	return func() { close(done); <-exited }
}

// printConfigErrors writes every configuration error on its own line,
// naming the file, so an operator fixes them in one pass.
func printConfigErrors(w io.Writer, cmd, path string, err error) {
	where := "the environment and embedded defaults"
	if path != "" {
		where = path + " and the environment"
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	_, _ = fmt.Fprintf(w, "%s: the configuration (%s) is not valid:\n", cmd, where)
	for _, l := range lines {
		_, _ = fmt.Fprintf(w, "  %s\n", l)
	}
}
