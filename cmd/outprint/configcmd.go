package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/service"
)

// configCmd is `outprint config check [FILE]`: it loads the configuration
// exactly as serve does (FILE, else --config, else $OUTPRINT_CONFIG, else
// embedded defaults only; then the OUTPRINT_* environment) and prints the
// effective values (the packages' defaults for what it leaves out,
// service.Effective) with where each came from, or every error (exit 2).
func configCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fs := newFlags("config check", stderr)
		fs.String("config", "", "read the configuration from `FILE` (default $"+config.EnvConfig+")")
		writeHelp(stdout, fs)
		return exitOK
	}
	if len(args) == 0 || args[0] != "check" {
		// Terminal output: write errors are dropped (see run).
		_, _ = fmt.Fprintf(stderr, "outprint config: want the subcommand check\n%s", usage)
		return exitUsage
	}
	fs := newFlags("config check", stderr)
	configFile := fs.String("config", "", "read the configuration from `FILE` (default $"+config.EnvConfig+")")
	if err := fs.Parse(args[1:]); err != nil {
		return parseDone(fs, err, stdout, stderr)
	}
	switch fs.NArg() {
	case 0:
	case 1:
		if *configFile != "" && *configFile != fs.Arg(0) {
			_, _ = fmt.Fprintf(stderr, "outprint config check: give the file once (%s or --config %s)\n", fs.Arg(0), *configFile)
			return exitUsage
		}
		*configFile = fs.Arg(0)
	default:
		_, _ = fmt.Fprintf(stderr, "outprint config check: want at most one FILE\n%s", usage)
		return exitUsage
	}
	env := os.Environ()
	path := config.Path(*configFile, env)
	cfg, err := config.Load(path, env)
	if err != nil {
		printConfigErrors(stderr, "outprint config check", path, err)
		return exitUsage
	}
	// serve refuses to start anonymous on a public address; a check that
	// passed such a configuration would mislead.
	if err := service.CheckRole(service.RoleServe, cfg); err != nil {
		_, _ = fmt.Fprintf(stderr, "outprint config check: %v\n", err)
		return exitUsage
	}
	if _, err := service.WebhookPolicy(cfg); err != nil {
		printConfigErrors(stderr, "outprint config check", path, err)
		return exitUsage
	}
	if path == "" {
		_, _ = fmt.Fprintln(stdout, "# effective configuration: embedded defaults and the environment")
	} else {
		_, _ = fmt.Fprintf(stdout, "# effective configuration: %s and the environment\n", path)
	}
	// The values the packages fill in for what the configuration leaves
	// out, with where each given one came from.
	_, _ = fmt.Fprint(stdout, service.Effective(cfg).Effective())
	if render.EmojiSet(render.DefaultEmojiDir) != "" {
		_, _ = fmt.Fprintf(stdout, "# emoji: images from %s\n", render.DefaultEmojiDir)
	} else {
		_, _ = fmt.Fprintf(stdout, "# emoji: no image set in %s; emoji print as Symbola outlines (scripts/emoji.sh installs it)\n", render.DefaultEmojiDir)
	}
	_, _ = fmt.Fprintf(stdout, "# diagrams: %s\n", service.DiagramsStatus(cfg))
	_, _ = fmt.Fprintf(stdout, "# office: %s\n", service.OfficeStatus(ctx, cfg))
	return exitOK
}
