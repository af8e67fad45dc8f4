package highlight

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// chromaTokens is what highlighting got from chroma itself: its coalesced
// tokens, or an error when its lexer panicked.
func chromaTokens(l chroma.Lexer, text string) (tokens []chroma.Token, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	it, err := chroma.Coalesce(l).Tokenise(nil, text)
	if err != nil {
		return nil, err
	}
	for tok := it(); tok != chroma.EOF; tok = it() {
		tokens = append(tokens, tok)
	}
	return tokens, nil
}

// chromaSamples returns the sample sources of chroma's own lexer tests
// (lexers/testdata/<lexer>.actual in chroma's module), each cut to at most
// limit bytes at a line end, by lexer name.
func chromaSamples(t *testing.T, limit int) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/alecthomas/chroma/v2").Output()
	if err != nil {
		t.Fatalf("go list chroma: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "lexers", "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "*.actual"))
	if err != nil || len(files) < 100 {
		t.Fatalf("chroma's lexer samples in %s: %d files (%v), want over 100", dir, len(files), err)
	}
	samples := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if len(s) > limit {
			s = s[:limit]
			if i := strings.LastIndexByte(s, '\n'); i > 0 {
				s = s[:i+1]
			}
		}
		samples[strings.TrimSuffix(filepath.Base(f), ".actual")] = s
	}
	return samples
}

// TestFastLexerMatchesChroma: fastLexer's tokens are chroma's, for the
// samples of chroma's own lexer tests (each lexer with its sample, cut to a
// few kilobytes) and for this package's code samples run through every
// regular-expression lexer chroma has (so that every lexer also meets
// text it does not expect).
func TestFastLexerMatchesChroma(t *testing.T) {
	t.Parallel() // CPU only: it runs beside the tests that wait for XeLaTeX
	compare := func(l chroma.Lexer, name, text string) {
		t.Helper()
		f := getFastLexer(l)
		if f == nil {
			return
		}
		text = cleanCode(text)
		got, gerr := f.tokens(text, time.Now().Add(time.Second))
		if errors.Is(gerr, errTooSlow) {
			// Some lexers loop for ever on some text (JSONata on the
			// mixed sample: a rule that matches nothing and changes no
			// state); chroma would too, without end.
			t.Logf("lexer %s on %s: %v", l.Config().Name, name, gerr)
			return
		}
		want, werr := chromaTokens(l, text)
		if (werr != nil) != (gerr != nil) {
			t.Errorf("lexer %s on %s: fastLexer error %v, chroma's %v", l.Config().Name, name, gerr, werr)
			return
		}
		if slices.Equal(got, want) {
			return
		}
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		var g, w chroma.Token
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		t.Errorf("lexer %s on %s: fastLexer token %d = %v, chroma's %v (%d and %d tokens)", l.Config().Name, name, i, g, w, len(got), len(want))
	}
	// Under the race detector (which has nothing to find here: the
	// lexers run on one goroutine, and compiling them is most of the
	// time) a quarter of the lexers are checked, on shorter samples.
	limit, stride := 2048, 1
	if raceEnabled {
		limit, stride = 400, 4
	}
	samples := chromaSamples(t, limit)
	names := slices.Sorted(maps.Keys(samples))
	fast := 0
	var checked []chroma.Lexer
	for i, name := range names {
		base, _, _ := strings.Cut(name, ".")
		if l := lexers.Get(base); l != nil && i%stride == 0 {
			compare(l, name, samples[name])
			if getFastLexer(l) != nil {
				fast++
			}
			checked = append(checked, l)
		}
	}
	if fast < 100/stride {
		t.Errorf("only %d of chroma's samples have a regular-expression lexer, want over %d", fast, 100/stride)
	}
	if !raceEnabled {
		checked = lexers.GlobalLexerRegistry.Lexers
	}
	var mixed strings.Builder
	files, _ := filepath.Glob(filepath.Join("testdata", "highlight", "*.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mixed.Write(b)
	}
	mixed.WriteString("<a href=\"x\">{{ y }}</a> SELECT * FROM t; -- é 日本\n\t\"unterminated\n'q' /* c */ #x\n")
	for _, l := range checked {
		compare(l, "the mixed sample", mixed.String())
	}
}

// TestSimpleREMatchesRegexp2 compares simpleRE with regexp2 rule by rule:
// for every rule simpleRE takes on, of every lexer with a sample in
// chroma's tests, at every position of that sample and of this package's
// code samples, both must find the same match (or none). simpleRE may
// give up, never differ.
func TestSimpleREMatchesRegexp2(t *testing.T) {
	t.Parallel()
	// Every other lexer (every eighth under the race detector) keeps the
	// test's time in bounds; the rules of the others are mostly alike.
	limit, stride := 1024, 2
	if raceEnabled {
		limit, stride = 200, 8
	}
	samples := chromaSamples(t, limit)
	var mixed strings.Builder
	files, _ := filepath.Glob(filepath.Join("testdata", "highlight", "*.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mixed.Write(b)
	}
	rules, simple, compared, gaveUps := 0, 0, 0, 0
	seen := map[*chroma.CompiledRule]bool{}
	for i, name := range slices.Sorted(maps.Keys(samples)) {
		base, _, _ := strings.Cut(name, ".")
		l := lexers.Get(base)
		if l == nil || i%stride != 0 {
			continue
		}
		f := getFastLexer(l)
		if f == nil {
			continue
		}
		text := []rune(cleanCode(samples[name]) + "\n" + mixed.String())
		run := newSimpleRun(text)
		for _, state := range slices.Sorted(maps.Keys(f.states)) {
			for _, rule := range f.states[state].rules {
				if seen[rule.CompiledRule] {
					continue
				}
				seen[rule.CompiledRule] = true
				rules++
				if rule.simple == nil {
					continue
				}
				simple++
				for pos := range text {
					got := rule.simple.match(run, pos)
					if got == gaveUp {
						gaveUps++
						continue
					}
					want := -1
					m, err := rule.Regexp.FindRunesMatchStartingAt(text, pos)
					if err != nil {
						continue // timed out
					}
					if m != nil && m.RuneIndex == pos {
						want = pos + m.RuneLength
					}
					compared++
					if got != want {
						t.Errorf("lexer %s, state %s, rule %q at %d (%q): simpleRE ends at %d, regexp2 at %d",
							l.Config().Name, state, rule.Pattern, pos, string(text[pos:min(len(text), pos+20)]), got, want)
						break
					}
				}
			}
		}
	}
	if simple < rules/3 {
		t.Errorf("simpleRE takes %d of %d plain rules, want a third at least", simple, rules)
	}
	t.Logf("%d rules, %d simple; %d matches compared, %d given up", rules, simple, compared, gaveUps)
}
