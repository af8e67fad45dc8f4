package outlinetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// The fake answers with what a real Outline 1.9.1 server answered, as
// recorded in ../shared/outline-recordings/ (one JSON file per call: the
// status, the headers that matter and the body). It loads a recording when
// it answers and replaces the recorded ids, names and texts with those of
// its own users and documents; every other field, its type and its place
// stay as recorded. The recordings are read from ../shared at test time and
// never copied into the project.

// recording is one recorded call.
type recording struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// RecordingsDir returns the folder of the recordings (../shared/
// outline-recordings next to the module root), or "" when it is absent.
// The module root is found from the working directory, which is the
// package's folder under go test: source paths are no guide, since
// `make test` builds with -trimpath.
func RecordingsDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	dir = filepath.Join(dir, "..", "shared", "outline-recordings")
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		return ""
	}
	return dir
}

// recordings holds the loaded recordings of one fake, by name.
type recordings struct {
	dir string
	mu  sync.Mutex
	m   map[string]*recording
}

// openRecordings finds the recordings for t: a fake without them cannot
// answer as Outline does, so the test fails under CI and skips elsewhere.
func openRecordings(t testing.TB) *recordings {
	t.Helper()
	dir := RecordingsDir()
	if dir == "" {
		testenv.Missing(t, "../shared/outline-recordings (what a real Outline answers) is not there")
	}
	return &recordings{dir: dir, m: map[string]*recording{}}
}

// load returns the recording name (without .json); it panics on a missing
// or broken file, which is a fault of the fake, not of the code under test.
func (rs *recordings) load(name string) *recording {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.m[name]; r != nil {
		return r
	}
	b, err := os.ReadFile(filepath.Join(rs.dir, name+".json"))
	if err != nil {
		panic(fmt.Sprintf("outlinetest: recording %s: %v", name, err))
	}
	r := &recording{}
	if err := json.Unmarshal(b, r); err != nil {
		panic(fmt.Sprintf("outlinetest: recording %s: %v", name, err))
	}
	rs.m[name] = r
	return r
}

// body returns a fresh copy of the recording's body, decoded, to change.
func (rs *recordings) body(name string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(rs.load(name).Body, &m); err != nil {
		panic(fmt.Sprintf("outlinetest: recording %s: body: %v", name, err))
	}
	return m
}

// Text returns the text of a recorded document (documents.info-NAME.json's
// data.text), e.g. Text(t, "gallery") is what Outline's serializer made of
// gallery-input.md.
func Text(t testing.TB, name string) string {
	t.Helper()
	rs := openRecordings(t)
	data, _ := rs.body("documents.info-" + name)["data"].(map[string]any)
	s, ok := data["text"].(string)
	if !ok {
		t.Fatalf("recording documents.info-%s has no data.text", name)
	}
	return s
}

// object returns m[key] as an object, creating it when absent.
func object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}
