package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// composeSchema compiles the Compose specification's JSON schema, vendored
// in testdata/compose-spec (see its README).
func composeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("../../testdata/compose-spec/compose-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("compose-spec.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("compose_spec.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("compose_spec.json")
	if err != nil {
		t.Fatalf("compile the Compose schema: %v", err)
	}
	return s
}

// composeInstance reads a Compose file as Compose does — YAML, anchors and
// merge keys resolved — into the JSON value the schema validates.
func composeInstance(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	// A JSON round trip turns YAML's values into JSON's (numbers become
	// float64, maps string-keyed), which is what the validator expects.
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("compose.yaml as JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestComposeSchema validates compose.yaml against the Compose
// specification's JSON schema, and shows that the check bites: the same
// file with a misspelt key, or a value of the wrong type, is refused.
func TestComposeSchema(t *testing.T) {
	schema := composeSchema(t)
	data, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(composeInstance(t, data)); err != nil {
		t.Fatalf("compose.yaml does not follow the Compose specification:\n%v", err)
	}
	for _, c := range []struct{ name, old, new string }{
		{"misspelt service key", "    stop_grace_period: 40s", "    stop_grace_periode: 40s"},
		{"misspelt limit", "limits: {cpus: \"1\", memory: 1g, pids: 512}", "limits: {cpu: \"1\", memory: 1g, pids: 512}"},
		{"retries not a number", "retries: 30", "retries: [30]"},
		{"misspelt top-level key", "\nvolumes:\n", "\nvolume:\n"},
	} {
		if !strings.Contains(string(data), c.old) {
			t.Errorf("%s: compose.yaml no longer holds %q; pick another mutation", c.name, c.old)
			continue
		}
		bad := strings.Replace(string(data), c.old, c.new, 1)
		if err := schema.Validate(composeInstance(t, []byte(bad))); err == nil {
			t.Errorf("%s (%q → %q): the schema accepts it, want a validation error", c.name, c.old, c.new)
		}
	}
}
