package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/outprint/outprint/internal/config"
)

// compose.yaml checked as a file, beside internal/imagetest, which builds
// the image and runs compose.yaml with docker compose: against the Compose
// specification's JSON schema (compose_schema_test.go), strictly against
// the part of the specification it uses (field names and value types as
// the specification defines them; an unknown or misspelt key fails), and
// every service's command, environment and limits against the README's
// table.

// composeFile is the subset of the Compose specification compose.yaml
// uses. Top-level "x-" keys are extensions (anchors) and skipped.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Configs  map[string]struct {
		File    string `yaml:"file"`
		Content string `yaml:"content"`
	} `yaml:"configs"`
	Volumes map[string]struct{} `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       string            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
	Restart string `yaml:"restart"`
	Configs []struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	} `yaml:"configs"`
	Ports     []string `yaml:"ports"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	ReadOnly        bool     `yaml:"read_only"`
	Tmpfs           []string `yaml:"tmpfs"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	Deploy          struct {
		Replicas  *int `yaml:"replicas"`
		Resources struct {
			Limits struct {
				Cpus   string `yaml:"cpus"`
				Memory string `yaml:"memory"`
				Pids   int    `yaml:"pids"`
			} `yaml:"limits"`
		} `yaml:"resources"`
	} `yaml:"deploy"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Merge keys and anchors resolved, extensions dropped, then decoded
	// strictly.
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for k := range top {
		if strings.HasPrefix(k, "x-") {
			delete(top, k)
		}
	}
	plain, err := yaml.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(plain))
	dec.KnownFields(true)
	var f composeFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("compose.yaml is not in the Compose specification's shape: %v", err)
	}
	return f
}

// The value rules of the Compose specification for the fields used.
var (
	composeServiceName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
	composeDuration    = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(us|ms|s|m|h))+$`)
	composeBytes       = regexp.MustCompile(`^[0-9]+[bkmg]?$`)
	composeRestart     = regexp.MustCompile(`^(no|always|unless-stopped|on-failure(:[0-9]+)?)$`)
)

func TestComposeSpec(t *testing.T) {
	f := readCompose(t)
	if f.Name == "" || len(f.Services) == 0 {
		t.Fatal("compose.yaml has no name or no services")
	}
	for name, s := range f.Services {
		if !composeServiceName.MatchString(name) {
			t.Errorf("service name %q does not match %s", name, composeServiceName)
		}
		if s.Image == "" && s.Build == "" {
			t.Errorf("%s: neither image nor build", name)
		}
		if s.Restart != "" && !composeRestart.MatchString(s.Restart) {
			t.Errorf("%s: restart %q is not a Compose restart policy", name, s.Restart)
		}
		for dep, d := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
			}
			if !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition) {
				t.Errorf("%s: depends_on %s condition %q is not a Compose condition", name, dep, d.Condition)
			}
			if d.Condition == "service_healthy" && f.Services[dep].Healthcheck == nil {
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		if h := s.Healthcheck; h != nil && (!composeDuration.MatchString(h.Interval) || !composeDuration.MatchString(h.Timeout) || len(h.Test) == 0) {
			t.Errorf("%s: healthcheck %+v", name, *h)
		}
		if s.StopGracePeriod != "" && !composeDuration.MatchString(s.StopGracePeriod) {
			t.Errorf("%s: stop_grace_period %q is not a duration", name, s.StopGracePeriod)
		}
		for _, c := range s.Configs {
			if _, ok := f.Configs[c.Source]; !ok {
				t.Errorf("%s uses unknown config %s", name, c.Source)
			}
		}
		for _, v := range s.Volumes {
			if src, _, ok := strings.Cut(v, ":"); !ok || !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, named := f.Volumes[src]; !named {
					t.Errorf("%s mounts unknown volume %s", name, src)
				}
			}
		}
		// Limits on every container (the design notes record what an
		// unbounded sidecar did).
		l := s.Deploy.Resources.Limits
		if cpus, err := strconv.ParseFloat(l.Cpus, 64); err != nil || cpus <= 0 {
			t.Errorf("%s: deploy.resources.limits.cpus %q, want a positive number", name, l.Cpus)
		}
		if !composeBytes.MatchString(l.Memory) {
			t.Errorf("%s: deploy.resources.limits.memory %q, want a byte size", name, l.Memory)
		}
		if l.Pids <= 0 {
			t.Errorf("%s: deploy.resources.limits.pids %d, want a bound", name, l.Pids)
		}
		// outprint's own variables must be settings it knows.
		for k := range s.Environment {
			if strings.HasPrefix(k, "OUTPRINT_") && !slices.Contains(config.EnvVars(), k) {
				t.Errorf("%s: environment %s is not an outprint setting", name, k)
			}
		}
	}
	w := f.Services["worker"]
	if w.Deploy.Replicas == nil || *w.Deploy.Replicas < 2 {
		t.Errorf("worker replicas = %v, want at least 2", w.Deploy.Replicas)
	}
	// SPEC §3's container limits for every container that renders, but
	// for the pids: it counts threads, and a worker with a warm browser
	// for diagrams needs more than SPEC's 128 (issue 27; 152 were seen).
	for _, name := range []string{"worker"} {
		l := f.Services[name].Deploy.Resources.Limits
		if l.Cpus != "1" || l.Memory != "1g" || l.Pids != 512 {
			t.Errorf("%s limits = %+v, want 1 CPU, 1g, 512 PIDs", name, l)
		}
	}
	for _, name := range []string{"migrate", "gateway", "worker"} {
		s := f.Services[name]
		if !s.ReadOnly {
			t.Errorf("%s: read_only = false, want a read-only root file system", name)
		}
		if name != "migrate" && (len(s.Tmpfs) != 1 || !strings.Contains(s.Tmpfs[0], "size=256m")) {
			t.Errorf("%s: tmpfs = %v, want the data folder as a 256m tmpfs", name, s.Tmpfs)
		}
	}
}

// readmeServices parses the README's table of Compose services.
func readmeServices(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "| service | command |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name, _, _ := strings.Cut(cells[0], " ")
		rows[name] = cells
	}
	if len(rows) == 0 {
		t.Fatal("README has no table of Compose services")
	}
	return rows
}

// TestComposeMatchesReadme: every service's command, limits and
// environment are what the README says.
func TestComposeMatchesReadme(t *testing.T) {
	f := readCompose(t)
	rows := readmeServices(t)
	var names []string
	for n := range f.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	var readmeNames []string
	for n := range rows {
		readmeNames = append(readmeNames, n)
	}
	sort.Strings(readmeNames)
	if !slices.Equal(names, readmeNames) {
		t.Fatalf("compose services %v, README lists %v", names, readmeNames)
	}
	for _, name := range names {
		s, row := f.Services[name], rows[name]
		cmd := strings.Trim(strings.Fields(row[1] + " ")[0], "`")
		switch {
		case cmd == "(image's)":
			if len(s.Command) != 0 {
				t.Errorf("%s: command %v, README says the image's", name, s.Command)
			}
		case len(s.Command) == 0 || s.Command[0] != cmd:
			t.Errorf("%s: command %v, README says %s", name, s.Command, row[1])
		}
		l := s.Deploy.Resources.Limits
		if got := []string{l.Cpus, l.Memory, strconv.Itoa(l.Pids)}; !slices.Equal(got, row[2:5]) {
			t.Errorf("%s: limits %v, README says %v", name, got, row[2:5])
		}
		scratch := "—"
		if len(s.Tmpfs) > 0 {
			scratch = regexp.MustCompile(`size=([0-9]+[kmg])`).FindStringSubmatch(s.Tmpfs[0])[1]
		}
		if scratch != row[5] {
			t.Errorf("%s: scratch %s, README says %s", name, scratch, row[5])
		}
		want := readmeEnv(rows, name)
		var got []string
		for k := range s.Environment {
			got = append(got, k)
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: environment %v, README says %v", name, got, want)
		}
	}
}

// readmeEnv is the environment column of a service, "the same" meaning the
// migrate row's and "the same as X" X's.
func readmeEnv(rows map[string][]string, name string) []string {
	var out []string
	for _, v := range strings.Split(rows[name][6], ",") {
		v = strings.TrimSpace(v)
		switch {
		case v == "—":
		case v == "the same":
			out = append(out, readmeEnv(rows, "migrate")...)
		case strings.HasPrefix(v, "the same as "):
			out = append(out, readmeEnv(rows, strings.TrimPrefix(v, "the same as "))...)
		default:
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
