package main

import (
	"context"
	"flag"
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
// effective values with where each came from, or every error (exit 2).
func configCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintf(stderr, "outprint config: want the subcommand check\n%s", usage)
		return exitUsage
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "configuration file (default $"+config.EnvConfig+")")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	switch fs.NArg() {
	case 0:
	case 1:
		if *configFile != "" && *configFile != fs.Arg(0) {
			fmt.Fprintf(stderr, "outprint config check: give the file once (%s or --config %s)\n", fs.Arg(0), *configFile)
			return exitUsage
		}
		*configFile = fs.Arg(0)
	default:
		fmt.Fprintf(stderr, "outprint config check: want at most one FILE\n%s", usage)
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
	if err := cfg.CheckListen(); err != nil {
		fmt.Fprintf(stderr, "outprint config check: %v\n", err)
		return exitUsage
	}
	if _, err := service.WebhookPolicy(cfg); err != nil {
		printConfigErrors(stderr, "outprint config check", path, err)
		return exitUsage
	}
	if path == "" {
		fmt.Fprintln(stdout, "# effective configuration: embedded defaults and the environment")
	} else {
		fmt.Fprintf(stdout, "# effective configuration: %s and the environment\n", path)
	}
	fmt.Fprint(stdout, cfg.Effective())
	if render.EmojiSet(render.DefaultEmojiDir) != "" {
		fmt.Fprintf(stdout, "# emoji: images from %s\n", render.DefaultEmojiDir)
	} else {
		fmt.Fprintf(stdout, "# emoji: no image set in %s; emoji print as Symbola outlines (scripts/emoji.sh installs it)\n", render.DefaultEmojiDir)
	}
	return exitOK
}
