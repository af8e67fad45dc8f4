package highlight

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/dlclark/regexp2/v2"
	"github.com/dlclark/regexp2/v2/syntax"
)

// This file runs chroma's regular-expression lexers faster than chroma
// does, with the same tokens.
//
// A chroma lexer is a state machine: at each position it tries the rules
// of the current state in order, each a regular expression anchored there
// (\G), and the first that matches makes the token. regexp2 does not use
// its first-character analysis for anchored expressions, so every rule
// that fails still costs a full start of its backtracking engine; in a
// state of dozens of rules that is most of the time chroma spends. fastLexer
// keeps, for each rule, the set of characters its matches can start with
// (regexp2's own analysis of the same expression, syntax.Code.FcPrefix;
// for ASCII a bit set per state) and its literal prefix, and tries a rule
// only where the text fits both. Most rules that are tried are simple
// enough for simpleRE, which matches them without regexp2's fixed cost.
// Everything else is chroma's own loop (LexerState.Iterator, matchRules,
// Coalesce), with chroma's emitters and mutators;
// TestFastLexerMatchesChroma compares the tokens with chroma's for every
// lexer chroma has, TestSimpleREMatchesRegexp2 simpleRE with regexp2.

// fastRule is a compiled rule with what a match must start with.
type fastRule struct {
	*chroma.CompiledRule
	first  *syntax.Prefix   // the characters a match can start with; nil: any, or none at all
	prefix *syntax.BmPrefix // the text every match starts with, or nil
	// plain marks the common rule that emits its whole match as one token
	// type (or nothing) and at most pushes or pops states: neither its
	// emitter nor its mutator looks at the groups, so they are not made.
	plain bool
	// simple matches a plain rule without regexp2, when it can.
	simple *simpleRE
}

// plainRule reports whether a rule is a fastRule.plain one.
func plainRule(r chroma.Rule) bool {
	if r.Type != nil {
		if _, ok := r.Type.(chroma.TokenType); !ok {
			return false
		}
	}
	if r.Mutator == nil {
		return true
	}
	m, ok := r.Mutator.(chroma.SerialisableMutator)
	return ok && (m.MutatorKind() == "push" || m.MutatorKind() == "pop")
}

// firstOK reports whether a match of the rule can start with c: c must
// be one of the rule's first characters (regexp2's findFirstChar for an
// expression that is not anchored).
func (r fastRule) firstOK(c rune) bool {
	if r.first == nil {
		return true
	}
	if r.first.CaseInsensitive {
		c = unicode.ToLower(c)
	}
	return r.first.PrefixSet.CharIn(c)
}

// prefixOK reports whether the text at pos starts with the rule's
// literal prefix (regexp2's own check for an anchored expression).
func (r fastRule) prefixOK(text []rune, pos int) bool {
	return r.prefix == nil || r.prefix.IsMatch(text, pos, 0, len(text))
}

// fastState is a state's rules, with, for each ASCII character, the set
// of rules whose matches can start with it (bit i of the words at
// ascii[c*words:] is rule i).
type fastState struct {
	rules []fastRule
	words int
	ascii []uint64
}

func newFastState(rules []fastRule) *fastState {
	st := &fastState{rules: rules, words: (len(rules) + 63) / 64}
	st.ascii = make([]uint64, 128*st.words)
	for c := range rune(128) {
		for i, r := range rules {
			if r.firstOK(c) {
				st.ascii[int(c)*st.words+i/64] |= 1 << (i % 64)
			}
		}
	}
	return st
}

// fastLexer is a chroma RegexLexer with its rules compiled for fastRule.
// It is read-only once built and safe for concurrent use.
type fastLexer struct {
	lexer    *chroma.RegexLexer
	compiled chroma.CompiledRules // the rules as chroma compiles them, for emitters that look
	states   map[string]*fastState
}

// fastLexers holds the fastLexer of each chroma lexer that has been used,
// built once (as chroma compiles its own rules once); nil marks a lexer
// whose rules could not be rebuilt, which is then run by chroma itself.
var fastLexers sync.Map // *chroma.RegexLexer -> *fastLexer

// getFastLexer returns the fastLexer of l, or nil when l is not a plain
// regular-expression lexer.
func getFastLexer(l chroma.Lexer) *fastLexer {
	rl, ok := l.(*chroma.RegexLexer)
	if !ok {
		return nil
	}
	if f, ok := fastLexers.Load(rl); ok {
		return f.(*fastLexer)
	}
	f, err := newFastLexer(rl)
	if err != nil {
		f = nil
	}
	actual, _ := fastLexers.LoadOrStore(rl, f)
	return actual.(*fastLexer)
}

// newFastLexer compiles the rules of rl the way chroma's RegexLexer does
// (fetchRules, maybeCompile): the same expressions with the same flags,
// then the compile-time mutators (include, combined).
func newFastLexer(rl *chroma.RegexLexer) (*fastLexer, error) {
	raw, err := rl.Rules()
	if err != nil {
		return nil, err
	}
	cfg := rl.Config()
	rc, err := compileRules(raw, ruleFlags(cfg), cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := applyMutators(rc.compiled, cfg.Name); err != nil {
		return nil, err
	}
	f := &fastLexer{lexer: rl, compiled: rc.compiled, states: map[string]*fastState{}}
	if err := f.buildStates(rc); err != nil {
		return nil, err
	}
	return f, nil
}

// ruleFlags returns the inline flags chroma's RegexLexer puts before
// every rule of a lexer with configuration cfg.
func ruleFlags(cfg *chroma.Config) string {
	flags := ""
	if !cfg.NotMultiline {
		flags += "m"
	}
	if cfg.CaseInsensitive {
		flags += "i"
	}
	if cfg.DotAll {
		flags += "s"
	}
	return flags
}

// compiledRules are a lexer's rules compiled by regexp2 as chroma does,
// with what the fast lexer keeps beside each: regexp2's program (for the
// characters a match can start with) and its parse tree (for simpleRE).
type compiledRules struct {
	compiled chroma.CompiledRules
	first    map[*chroma.CompiledRule]*syntax.Code
	trees    map[*chroma.CompiledRule]*syntax.RegexTree
}

// compileRules compiles every rule of raw with flags, anchored at the
// position as chroma's \G is.
func compileRules(raw chroma.Rules, flags, name string) (compiledRules, error) {
	rc := compiledRules{
		compiled: chroma.CompiledRules{},
		first:    map[*chroma.CompiledRule]*syntax.Code{},
		trees:    map[*chroma.CompiledRule]*syntax.RegexTree{},
	}
	for state, rules := range raw {
		rc.compiled[state] = nil
		for _, rule := range rules {
			pattern := "(?:" + rule.Pattern + ")"
			if flags != "" {
				pattern = "(?" + flags + ")" + pattern
			}
			pattern = `\G` + pattern
			re, err := regexp2.Compile(pattern)
			if err != nil {
				return rc, fmt.Errorf("compile rule %s of %s: %w", state, name, err)
			}
			re.MatchTimeout = 250 * time.Millisecond // chroma's
			cr := &chroma.CompiledRule{Rule: rule, Regexp: re}
			rc.compiled[state] = append(rc.compiled[state], cr)
			tree, err := syntax.Parse(pattern, syntax.ParseOptions{})
			if err != nil {
				return rc, err
			}
			code, err := syntax.Write(tree)
			if err != nil {
				return rc, err
			}
			code.PrepareCharSetASCIIBitmaps()
			rc.first[cr] = code
			rc.trees[cr] = tree
		}
	}
	return rc, nil
}

// applyMutators is chroma's maybeCompile: apply one compile-time
// mutator, then start over, until none is left. (Each mutator replaces
// its rule, so the loop ends.)
func applyMutators(compiled chroma.CompiledRules, name string) error {
	for {
		state, i, m := nextMutator(compiled)
		if m == nil {
			return nil
		}
		if err := m.MutateLexer(compiled, state, i); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}

// nextMutator returns the first rule with a compile-time mutator left,
// by its state and index, or a nil mutator when none is.
func nextMutator(compiled chroma.CompiledRules) (string, int, chroma.LexerMutator) {
	for state := range compiled {
		for i, rule := range compiled[state] {
			if m, ok := rule.Mutator.(chroma.LexerMutator); ok {
				return state, i, m
			}
		}
	}
	return "", 0, nil
}

// buildStates makes f's states from the final rules. Compile-time
// mutators may have changed a rule's mutator (combined becomes push):
// plain is decided on the final rules.
func (f *fastLexer) buildStates(rc compiledRules) error {
	simple := map[*chroma.CompiledRule]*simpleRE{}
	for state, rules := range rc.compiled {
		fr := make([]fastRule, len(rules))
		for i, r := range rules {
			code, ok := rc.first[r]
			if !ok {
				return errors.New("rule without its first characters")
			}
			fr[i] = fastRule{CompiledRule: r, first: code.FcPrefix, prefix: code.BmPrefix}
			fr[i].plain = plainRule(r.Rule)
			if !fr[i].plain {
				continue
			}
			re, ok := simple[r]
			if !ok {
				re = newSimpleRE(rc.trees[r])
				simple[r] = re
			}
			fr[i].simple = re
		}
		f.states[state] = newFastState(fr)
	}
	return nil
}

// errTooSlow reports that lexing ran past its deadline.
var errTooSlow = errors.New("highlighting took too long")

// coalescer joins adjacent tokens of one type, as chroma.Coalesce does,
// and drops ignored and empty ones.
type coalescer struct {
	tokens []chroma.Token
	prev   chroma.Token // the pending token
}

func (c *coalescer) emit(t chroma.Token) {
	if t.Type == chroma.Ignore || t.Value == "" {
		return
	}
	if c.prev.Type == t.Type && c.prev.Value != "" && len(c.prev.Value) < 8192 {
		c.prev.Value += t.Value
		return
	}
	if c.prev.Value != "" {
		c.tokens = append(c.tokens, c.prev)
	}
	c.prev = t
}

func (c *coalescer) drain(it chroma.Iterator) {
	for t := it(); t != chroma.EOF; t = it() {
		c.emit(t)
	}
}

// done returns the tokens with the pending one.
func (c *coalescer) done() []chroma.Token {
	if c.prev.Value != "" {
		c.tokens = append(c.tokens, c.prev)
	}
	return c.tokens
}

// tokens lexes text from the state "root" and returns its tokens
// coalesced, as chroma.Coalesce(lexer).Tokenise(nil, text) would give
// them, or an error when a rule fails or deadline passes.
func (f *fastLexer) tokens(text string, deadline time.Time) (tokens []chroma.Token, err error) {
	defer func() {
		// chroma's iterator panics on a failing mutator; so does ours.
		if p := recover(); p != nil {
			err = fmt.Errorf("lexer %s: %v", f.lexer.Config().Name, p)
		}
	}()
	const initial = "root" // chroma's default TokeniseOptions
	text = ensureLF(text)
	end := utf8.RuneCountInString(text)
	if f.lexer.Config().EnsureNL && !strings.HasSuffix(text, "\n") {
		text += "\n" // the added newline is not lexed, as in chroma
	}
	l := &chroma.LexerState{
		Lexer:          f.lexer,
		Registry:       lexers.GlobalLexerRegistry,
		Text:           []rune(text),
		Stack:          []string{initial},
		Rules:          f.compiled,
		MutatorContext: map[any]any{},
	}
	run := newSimpleRun(l.Text)
	var out coalescer
	for n := 0; l.Pos < end && len(l.Stack) > 0; n++ {
		// Checked on every few steps, not tokens: a rule may match the
		// empty string and change no state, and chroma's iterator then
		// loops for ever without a token (JSONata does on some text).
		if n%16 == 15 && time.Now().After(deadline) {
			return nil, errTooSlow
		}
		l.State = l.Stack[len(l.Stack)-1]
		st, ok := f.states[l.State]
		if !ok {
			return nil, fmt.Errorf("unknown state %q", l.State)
		}
		index, m, matchEnd := f.match(run, l.Pos, st)
		if matchEnd < 0 {
			if l.Text[l.Pos] == '\n' && l.State != initial {
				l.Stack = []string{initial}
				continue
			}
			l.Pos++
			out.emit(chroma.Token{Type: chroma.Error, Value: string(l.Text[l.Pos-1 : l.Pos])})
			continue
		}
		l.Rule = index
		if err := applyRule(l, st.rules[index], m, matchEnd, &out); err != nil {
			return nil, err
		}
	}
	if l.Pos != len(l.Text) && len(l.Stack) == 0 {
		out.emit(chroma.Token{Type: chroma.Error, Value: string(l.Text[l.Pos:])})
	}
	return out.done(), nil
}

// applyRule moves l past the match of rule at l.Pos (regexp2's m, or nil
// with its end when simpleRE made it), runs the rule's mutator and emits
// its tokens. A plain rule emits its whole match as one token; any other
// gets the groups, as chroma's iterator gives them.
func applyRule(l *chroma.LexerState, rule fastRule, m *regexp2.Match, matchEnd int, out *coalescer) error {
	var value string
	if !rule.plain {
		gs := m.Groups()
		l.Groups = make([]string, len(gs))
		l.NamedGroups = make(map[string]string, len(gs))
		for k, g := range gs {
			v := g.String()
			l.NamedGroups[g.Name] = v
			l.Groups[k] = v
		}
		value = l.Groups[0]
	} else if m != nil {
		value = m.String()
	} else {
		value = string(l.Text[l.Pos:matchEnd])
	}
	l.Pos += utf8.RuneCountInString(value)
	if rule.Mutator != nil {
		if err := rule.Mutator.Mutate(l); err != nil {
			return err
		}
	}
	switch {
	case rule.Type == nil:
	case rule.plain:
		out.emit(chroma.Token{Type: rule.Type.(chroma.TokenType), Value: value})
	default:
		out.drain(rule.Type.Emit(l.Groups, l))
	}
	return nil
}

// match is chroma's matchRules, trying only the rules that can start at
// pos: it returns the index of the first rule that matches at pos, the
// end of its match, and regexp2's match unless simpleRE made it; end is
// -1 when no rule matches.
func (f *fastLexer) match(run *simpleRun, pos int, st *fastState) (int, *regexp2.Match, int) {
	text := run.text
	c := text[pos]
	if c < 128 {
		words := st.ascii[int(c)*st.words : int(c+1)*st.words]
		for w, word := range words {
			for word != 0 {
				i := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				if m, end := f.try(run, pos, st.rules[i]); end != -1 {
					return i, m, end
				}
			}
		}
		return 0, nil, -1
	}
	for i, rule := range st.rules {
		if !rule.firstOK(c) {
			continue
		}
		if m, end := f.try(run, pos, rule); end != -1 {
			return i, m, end
		}
	}
	return 0, nil, -1
}

// try matches one rule at pos: it returns the end of the match and
// regexp2's match (nil when simpleRE made it), or -1.
func (f *fastLexer) try(run *simpleRun, pos int, rule fastRule) (*regexp2.Match, int) {
	text := run.text
	if !rule.prefixOK(text, pos) {
		return nil, -1
	}
	if rule.simple != nil {
		switch end := rule.simple.match(run, pos); {
		case end >= 0:
			return nil, end
		case end == -1:
			return nil, -1
		}
		// simpleRE gave up: regexp2 decides.
	}
	m, err := rule.Regexp.FindRunesMatchStartingAt(text, pos)
	if err != nil {
		// A match that timed out (250 ms) counts as no match, as in
		// chroma.
		return nil, -1
	}
	if m == nil || m.RuneIndex != pos {
		return nil, -1
	}
	return m, pos + m.RuneLength
}

// ensureLF is chroma's: CR LF and lone CR become LF.
func ensureLF(text string) string {
	if strings.IndexByte(text, '\r') < 0 {
		return text
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	return strings.ReplaceAll(text, "\r", "\n")
}
