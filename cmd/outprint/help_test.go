package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestHelp: `outprint help` lists every command; `outprint CMD --help`
// (and -h, and `outprint help CMD`) prints the usage line, one sentence
// and the flags spelled as the README spells them, and exits 0;
// `outprint version` and `--version` print the version.
func TestHelp(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	commands := [][]string{{"render"}, {"fields"}, {"fill"}, {"serve"}, {"gateway"}, {"worker"}, {"migrate"}, {"config", "check"}, {"version"}}
	stdout, stderr, code := runCLI(t, "help")
	if code != exitOK || stderr != "" {
		t.Errorf("outprint help = exit %d, stderr %q; want 0 and nothing on stderr", code, stderr)
	}
	for _, c := range commands {
		if !strings.Contains(stdout, "outprint "+strings.Join(c, " ")) {
			t.Errorf("outprint help lacks %q:\n%s", strings.Join(c, " "), stdout)
		}
	}
	flagRE := regexp.MustCompile(`(?m)^  (--?[a-z]+)\b`)
	for _, c := range commands {
		name := strings.Join(c, " ")
		for _, form := range [][]string{append(c[:len(c):len(c)], "--help"), append(c[:len(c):len(c)], "-h"), append([]string{"help"}, c...)} {
			stdout, stderr, code := runCLI(t, form...)
			if code != exitOK || stderr != "" {
				t.Errorf("outprint %s = exit %d, stderr %q; want 0", strings.Join(form, " "), code, stderr)
				continue
			}
			paras := strings.Split(strings.TrimSpace(stdout), "\n\n")
			if len(paras) < 2 || !strings.HasPrefix(paras[0], "usage: outprint "+name) ||
				strings.Count(paras[1], ". ") > 0 || !strings.HasSuffix(paras[1], ".") {
				t.Errorf("outprint %s =\n%s\nwant the usage line, then one sentence", strings.Join(form, " "), stdout)
			}
			for _, m := range flagRE.FindAllStringSubmatch(stdout, -1) {
				if !regexp.MustCompile(`[\s\[(]` + regexp.QuoteMeta(m[1]) + `[\s\]]`).Match(readme) {
					t.Errorf("outprint %s lists flag %s, which README.md does not spell so", name, m[1])
				}
			}
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, stderr, code := runCLI(t, args...)
		if code != exitOK || !strings.HasPrefix(stdout, "outprint ") || !strings.Contains(stdout, " go1.") || stderr != "" {
			t.Errorf("outprint %s = exit %d, %q %q; want 0 and outprint VERSION … GO", args[0], code, stdout, stderr)
		}
	}
	// A wrong flag is still a usage error, with the usage line.
	_, stderr, code = runCLI(t, "serve", "--nope")
	if code != exitUsage || !strings.Contains(stderr, "usage: outprint serve [--config FILE]") {
		t.Errorf("outprint serve --nope = exit %d, stderr %q; want %d with the usage line", code, stderr, exitUsage)
	}
}
