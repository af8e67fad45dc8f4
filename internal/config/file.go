package config

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// fileDecoder walks the YAML node tree of a configuration file against the
// settings table, collecting every error with its line. Walking nodes
// instead of decoding into structs is what lets it report duplicate keys
// (yaml.v3 does not for nodes), every unknown key rather than the first,
// and the line of each value.
type fileDecoder struct {
	path string
	c    *Config
	errs []lineError
}

type lineError struct {
	line int
	err  error
}

func (f *fileDecoder) errorf(n *yaml.Node, format string, args ...any) {
	f.errs = append(f.errs, lineError{n.Line, fmt.Errorf("%s:%d: %s", f.path, n.Line, fmt.Sprintf(format, args...))})
}

// sorted returns the errors in the order of their lines.
func (f *fileDecoder) sorted() []error {
	sort.SliceStable(f.errs, func(i, j int) bool { return f.errs[i].line < f.errs[j].line })
	out := make([]error, len(f.errs))
	for i, e := range f.errs {
		out[i] = e.err
	}
	return out
}

func (f *fileDecoder) origin(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d", f.path, n.Line)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names what a node is, for "(got …)" in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// fields checks a mapping node's keys: each a plain scalar, none twice,
// each one of known. It returns the accepted key/value pairs in order.
// label names the mapping in messages ("admission", "auth.apiKeys[0]").
func (f *fileDecoder) fields(n *yaml.Node, label string, known []string, suggestions func(name string) string) [][2]*yaml.Node {
	if n.Kind == yaml.AliasNode {
		f.errorf(n, "%s: YAML aliases are not supported in a configuration", orRoot(label))
		return nil
	}
	if n.Kind != yaml.MappingNode {
		f.errorf(n, "%s must be a mapping of keys (got %s)", orRoot(label), describe(n))
		return nil
	}
	var out [][2]*yaml.Node
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			f.errorf(k, "%s: keys must be plain names (got %s)", orRoot(label), describe(k))
			continue
		}
		full := join(label, k.Value)
		if line, dup := first[k.Value]; dup {
			f.errorf(k, "duplicate key %s (first at line %d)", full, line)
			continue
		}
		first[k.Value] = k.Line
		if !contains(known, k.Value) {
			msg := "unknown key " + full
			if guess := suggestions(k.Value); guess != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", guess)
			} else {
				msg += fmt.Sprintf(" (known keys here: %s)", strings.Join(known, ", "))
			}
			f.errorf(k, "%s", msg)
			continue
		}
		if v.Kind == yaml.AliasNode {
			f.errorf(v, "%s: YAML aliases are not supported in a configuration", full)
			continue
		}
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out
}

func orRoot(label string) string {
	if label == "" {
		return "the configuration"
	}
	return label
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mapping applies the keys of the group prefix ("" = the root).
func (f *fileDecoder) mapping(n *yaml.Node, prefix string) {
	known := children(prefix)
	guess := func(name string) string {
		if g := suggest(name, known); g != "" {
			return join(prefix, g)
		}
		// A key put in the wrong group: "slots" at the root.
		for _, s := range settings {
			if last := s.key[strings.LastIndexByte(s.key, '.')+1:]; strings.EqualFold(last, name) {
				return s.key
			}
		}
		return ""
	}
	for _, kv := range f.fields(n, prefix, known, guess) {
		k, v := kv[0], kv[1]
		full := join(prefix, k.Value)
		if isNull(v) {
			continue // "key:" with no value keeps the default
		}
		if isGroup(full) {
			f.mapping(v, full)
			continue
		}
		s := findKey(full)
		switch {
		case s.file != nil:
			s.file(f, v, full)
		case s.list != nil:
			f.list(s, v, full)
		default:
			if v.Kind != yaml.ScalarNode {
				f.errorf(v, "%s %s (got %s)", full, s.want, describe(v))
				continue
			}
			if reason := s.scalar(f.c, v.Value); reason != "" {
				f.errorf(v, "%s %s (got %q)", full, reason, s.quote(v.Value))
				continue
			}
			f.c.origins[full] = f.origin(v)
		}
	}
}

// list applies a list setting written as a YAML sequence of scalars.
func (f *fileDecoder) list(s *setting, v *yaml.Node, key string) {
	if v.Kind != yaml.SequenceNode {
		f.errorf(v, "%s %s (got %s)", key, s.want, describe(v))
		return
	}
	items := make([]string, len(v.Content))
	for i, it := range v.Content {
		if it.Kind != yaml.ScalarNode || isNull(it) {
			f.errorf(it, "%s[%d] must be a single value (got %s)", key, i, describe(it))
			return
		}
		items[i] = it.Value
	}
	out, bad := checkList(s, items)
	for _, b := range bad {
		f.errorf(v.Content[b.i], "%s[%d] %s (got %q)", key, b.i, b.reason, b.raw)
	}
	if len(bad) == 0 {
		s.setList(f.c, out)
		f.c.origins[key] = f.origin(v)
	}
}

// decodeAPIKeys reads auth.apiKeys: a list of {user, tenant, sha256}.
func decodeAPIKeys(f *fileDecoder, n *yaml.Node, key string) {
	if n.Kind != yaml.SequenceNode {
		f.errorf(n, "%s must be a list of {user, tenant, sha256} (got %s)", key, describe(n))
		return
	}
	d := keyDecoder{f: f, key: key, firstDigest: map[string]int{}}
	var keys []APIKey
	nerr := len(f.errs)
	for i, item := range n.Content {
		if k, ok := d.decode(i, item); ok {
			keys = append(keys, k)
		}
	}
	if len(f.errs) == nerr {
		f.c.Auth.APIKeys = keys // nil for an empty list, as in the defaults
		f.c.origins[key] = f.origin(n)
	}
}

// The fields of an API key: required, then optional.
var (
	keyFields         = []string{"user", "tenant", "sha256"}
	keyOptionalFields = append([]string{"admin"}, keyWebhookFields...)
	keyKnownFields    = append(slices.Clone(keyFields), keyOptionalFields...)
)

// keyDecoder reads the items of auth.apiKeys.
type keyDecoder struct {
	f           *fileDecoder
	key         string
	firstDigest map[string]int // digest → the index of the key that has it
}

// decode reads item i; ok is false for an item that is no mapping.
func (d keyDecoder) decode(i int, item *yaml.Node) (APIKey, bool) {
	f := d.f
	label := fmt.Sprintf("%s[%d]", d.key, i)
	kvs := f.fields(item, label, keyKnownFields, func(name string) string {
		if g := suggest(name, keyKnownFields); g != "" {
			return label + "." + g
		}
		return ""
	})
	if item.Kind != yaml.MappingNode {
		return APIKey{}, false
	}
	got := map[string]*yaml.Node{}
	for _, kv := range kvs {
		got[kv[0].Value] = kv[1]
	}
	var k APIKey
	for _, name := range keyFields {
		v, ok := got[name]
		switch {
		case !ok || isNull(v):
			f.errorf(item, "%s.%s is missing", label, name)
		case v.Kind != yaml.ScalarNode:
			f.errorf(v, "%s.%s must be a single value (got %s)", label, name, describe(v))
		default:
			d.field(&k, i, label, name, v)
		}
	}
	if v, ok := got["admin"]; ok && !isNull(v) {
		switch b, valid := parseBool(v); {
		case v.Kind != yaml.ScalarNode || !valid:
			f.errorf(v, "%s.admin must be true or false (got %s)", label, describe(v))
		default:
			k.Admin = b
		}
	}
	f.keyWebhooks(got, label, &k)
	return k, true
}

// field reads one required field of key i into k.
func (d keyDecoder) field(k *APIKey, i int, label, name string, v *yaml.Node) {
	f := d.f
	if name == "sha256" {
		// The value is never echoed: an operator who pasted the key
		// itself must not find it in a log.
		digest := strings.ToLower(strings.TrimSpace(v.Value))
		if b, err := hex.DecodeString(digest); err != nil || len(b) != 32 {
			f.errorf(v, "%s.sha256 must be 64 hexadecimal digits, the SHA-256 of the key and not the key itself (got %d characters)", label, len(v.Value))
			return
		}
		if j, dup := d.firstDigest[digest]; dup {
			f.errorf(v, "%s.sha256 repeats %s[%d].sha256", label, d.key, j)
			return
		}
		d.firstDigest[digest] = i
		k.SHA256 = digest
		return
	}
	if !validName(v.Value) {
		f.errorf(v, "%s.%s must be 1 to 128 bytes without control characters (got %q)", label, name, v.Value)
		return
	}
	if name == "user" {
		k.User = v.Value
	} else {
		k.Tenant = v.Value
	}
}

// showAPIKeys renders the keys with digests shortened: enough to tell them
// apart, too little to matter if the output is shared.
func showAPIKeys(c *Config) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode}
	if len(c.Auth.APIKeys) == 0 {
		n.Style = yaml.FlowStyle
	}
	for _, k := range c.Auth.APIKeys {
		d := k.SHA256
		if len(d) > 8 {
			d = d[:8] + "…"
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
			strNode("user"), strNode(k.User),
			strNode("tenant"), strNode(k.Tenant),
			strNode("sha256"), strNode(d),
		}}
		n.Content = append(n.Content, m)
		if k.Admin {
			m.Content = append(m.Content, strNode("admin"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
		}
		showKeyWebhooks(m, k)
	}
	return n
}

func strNode(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// Effective returns the configuration as YAML in the file's layout, every
// key with its value, for `outprint config check`. A value that did not
// come from the default carries a comment naming its origin (file and line,
// or variable); API key digests are shortened and a database password is
// masked.
func (c *Config) Effective() string {
	root := &yaml.Node{Kind: yaml.MappingNode}
	nodes := map[string]*yaml.Node{"": root}
	var group func(key string) *yaml.Node
	group = func(key string) *yaml.Node {
		if n, ok := nodes[key]; ok {
			return n
		}
		p := group(parent(key))
		n := &yaml.Node{Kind: yaml.MappingNode}
		p.Content = append(p.Content, strNode(key[strings.LastIndexByte(key, '.')+1:]), n)
		nodes[key] = n
		return n
	}
	for _, s := range settings {
		var v *yaml.Node
		if s.showNode != nil {
			v = s.showNode(c)
		} else {
			v = strNode(s.quote(s.show(c)))
			if s.scalar != nil && isNumber(v.Value) {
				v.Tag = "!!int"
			}
		}
		var notes []string
		if o, ok := c.origins[s.key]; ok {
			notes = append(notes, "from "+o)
		}
		if s.note != nil {
			if note := s.note(c); note != "" {
				notes = append(notes, note)
			}
		}
		k := strNode(s.key[strings.LastIndexByte(s.key, '.')+1:])
		if len(notes) > 0 {
			// yaml.v3 writes a comment after a block list on its key,
			// after a flow list or a scalar on the value.
			if v.Kind == yaml.SequenceNode && v.Style != yaml.FlowStyle {
				k.LineComment = strings.Join(notes, "; ")
			} else {
				v.LineComment = strings.Join(notes, "; ")
			}
		}
		p := group(parent(s.key))
		p.Content = append(p.Content, k, v)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		// Encoding a tree of plain scalars cannot fail; if it ever
		// does, say so rather than print half a configuration.
		return "# cannot encode the configuration: " + err.Error() + "\n"
	}
	if err := enc.Close(); err != nil {
		return "# cannot encode the configuration: " + err.Error() + "\n"
	}
	return buf.String()
}

func isNumber(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
