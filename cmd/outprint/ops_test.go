package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/testenv"
)

// The operations artifacts (deploy/, docs/operations.md) are tested against
// the real thing: promtool checks and unit-tests the alert rules, and a real
// `outprint serve` process, driven through ordinary and hostile requests,
// is scraped; promtool lints the scrape, every metric name the dashboard
// and the rules use must be in it, and no label may carry a tenant's value,
// a document's text or a client's path.

const (
	deployDir      = "../../deploy"
	alertsFile     = deployDir + "/prometheus/alerts.yaml"
	alertTestsFile = deployDir + "/prometheus/alerts_test.yaml"
	dashboardFile  = deployDir + "/grafana/outprint.json"
	operationsDoc  = "../../docs/operations.md"
)

// gatewayMetricPrefix starts the names of the metrics only a gateway
// has; TestClusterForms checks those the dashboard and the rules name
// against a gateway's scrape.
const gatewayMetricPrefix = "outprint_gateway_"

// runTool runs a program and returns its combined output and exit code.
func runTool(t *testing.T, dir string, stdin []byte, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", name, args, err)
	}
	return string(out), 0
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// headingAnchors returns the GitHub anchors of the Markdown headings of
// path: lower case, spaces to dashes, punctuation other than - and _
// dropped.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		anchors[a] = true
	}
	return anchors
}

// TestAlertRules: promtool accepts the rules and their unit tests pass;
// every alert is tested both firing and quiet, and its runbook is a
// section of docs/operations.md.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "promtool")
	if out, code := runTool(t, ".", nil, "promtool", "check", "rules", alertsFile); code != 0 {
		t.Fatalf("promtool check rules = exit %d:\n%s", code, out)
	}
	if out, code := runTool(t, filepath.Dir(alertTestsFile), nil, "promtool", "test", "rules", filepath.Base(alertTestsFile)); code != 0 {
		t.Fatalf("promtool test rules = exit %d:\n%s", code, out)
	}

	var rules ruleFile
	readYAML(t, alertsFile, &rules)
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertTestsFile, &tests)
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(alertsFile)}) {
		t.Errorf("alerts_test.yaml rule_files = %v, want [%s]", tests.RuleFiles, filepath.Base(alertsFile))
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
	}
	anchors := headingAnchors(t, operationsDoc)
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if fires[r.Alert] == 0 || quiet[r.Alert] == 0 {
				t.Errorf("alert %s: %d tests where it fires, %d where it stays quiet; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if sev := r.Labels["severity"]; sev != "page" && sev != "ticket" {
				t.Errorf("alert %s severity = %q, want page or ticket", r.Alert, sev)
			}
			rb := r.Annotations["runbook"]
			doc, anchor, ok := strings.Cut(rb, "#")
			if !ok || doc != "docs/operations.md" || !anchors[anchor] {
				t.Errorf("alert %s runbook = %q, want docs/operations.md#<a heading of it>", r.Alert, rb)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or a description", r.Alert)
			}
		}
	}
	if alerts < 5 {
		t.Errorf("%s has %d alerts, want at least 5", alertsFile, alerts)
	}
	for name := range fires {
		if !anchors[strings.ToLower(name)] {
			t.Errorf("alerts_test.yaml tests %s, which has no section in docs/operations.md", name)
		}
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int                      `json:"id"`
		Type       string                   `json:"type"`
		Title      string                   `json:"title"`
		Datasource json.RawMessage          `json:"datasource"`
		GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
		Targets    []struct {
			Expr       string          `json:"expr"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) (dashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, b
}

// onVariable reports whether a panel's or query's datasource is the
// dashboard's datasource variable.
func onVariable(raw json.RawMessage) bool {
	var ds struct{ Type, UID string }
	return json.Unmarshal(raw, &ds) == nil && ds.Type == "prometheus" && ds.UID == "${datasource}"
}

// TestDashboardShape: the dashboard imports with nothing to choose but the
// Prometheus data source: every panel and query goes through the
// datasource variable, no data source UID is written in, panels do not
// overlap, and the queue delay and render duration panels are separate.
func TestDashboardShape(t *testing.T) {
	d, raw := readDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion = %d, want a current schema (36 or later: datasource references by uid)", d.SchemaVersion)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = true
		}
	}
	if !dsVar {
		t.Fatalf("no datasource variable of type prometheus in %s", dashboardFile)
	}
	// Every uid is the variable, but for Grafana's own annotation source.
	for _, m := range regexp.MustCompile(`"uid":\s*"([^"]*)"`).FindAllStringSubmatch(string(raw), -1) {
		if m[1] != "${datasource}" && m[1] != "-- Grafana --" {
			t.Errorf("hard-coded uid %q in %s", m[1], dashboardFile)
		}
	}
	if bytes.Contains(raw, []byte(`"__inputs"`)) {
		t.Errorf("%s has __inputs: importing it would ask for more than the data source", dashboardFile)
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeats", p.ID)
		}
		ids[p.ID] = true
		titles[p.Title] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %q gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" || p.Type == "text" {
			continue
		}
		if !onVariable(p.Datasource) {
			t.Errorf("panel %q datasource = %s, want the datasource variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !onVariable(tg.Datasource) || tg.Expr == "" {
				t.Errorf("panel %q query %q datasource = %s, want an expression on the datasource variable", p.Title, tg.Expr, tg.Datasource)
			}
		}
	}
	for _, want := range []string{"Queue delay (accepted → render starts)", "Render duration (slot held)", "Oldest queued job", "/healthz latency"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// expressions returns every PromQL expression of the dashboard and the
// rules, with Grafana's variables replaced by values PromQL accepts, and
// the metric names the dashboard's variable queries name.
func expressions(t *testing.T) (exprs map[string]string, varMetrics []string) {
	t.Helper()
	exprs = map[string]string{}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", `"$instance"`, `".*"`)
	d, _ := readDashboard(t)
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			if tg.Expr != "" {
				exprs[fmt.Sprintf("panel %q query %d", p.Title, i)] = grafana.Replace(tg.Expr)
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("dashboard variable %s query %q: want label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		varMetrics = append(varMetrics, m[1])
	}
	var rules ruleFile
	readYAML(t, alertsFile, &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	return exprs, varMetrics
}

// TestDashboardQueries: Prometheus itself (promtool, the Prometheus of the
// distribution) accepts every query of the dashboard, given to it as
// recording rules with Grafana's variables filled in.
func TestDashboardQueries(t *testing.T) {
	testenv.Require(t, "promtool")
	exprs, _ := expressions(t)
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		if strings.HasPrefix(k, "panel ") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, k := range keys {
		q, _ := json.Marshal(exprs[k])
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runTool(t, ".", nil, "promtool", "check", "rules", path)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(keys))) {
		t.Errorf("promtool check rules of the dashboard's %d queries = exit %d:\n%s", len(keys), code, out)
	}
}

// metricNames parses expr and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" {
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel {
						name = m.Value
					}
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (le) (rate(a_bucket{x="1"}[5m]))`, []string{"a_bucket"}},
		{`b / ignoring (code) group_left sum(rate(c_total[5m])) > 0.5 and on (job) d >= 10`, []string{"b", "c_total", "d"}},
		{`{__name__="e"} == 0`, []string{"e"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %v, %v, want %v", tc.expr, got, err, tc.want)
		}
	}
	if _, err := metricNames(`rate(x[5m]`); err == nil {
		t.Errorf("metricNames of a broken expression = nil error, want a parse error")
	}
}

// liveService is one `outprint serve` process started from the test
// binary's build of the command.
type liveService struct {
	t    *testing.T
	url  string
	cmd  *exec.Cmd
	logs *testenv.Buffer
	done chan struct{}
}

// startProcess runs `outprint serve --config path` on a free loopback port
// and waits until /readyz answers 200.
func startProcess(t *testing.T, configPath string) *liveService {
	t.Helper()
	testenv.Require(t, "xelatex")
	cmd := exec.Command(binary, "serve", "--config", configPath)
	cmd.Env = append(os.Environ(), "OUTPRINT_LISTEN=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &liveService{t: t, cmd: cmd, logs: &testenv.Buffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() { // ends when the process closes stderr (it exits)
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			// testenv.Buffer is in memory: Write cannot fail.
			_, _ = s.logs.Write([]byte(line + "\n"))
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
				addr <- l.Addr
			}
		}
	}()
	t.Cleanup(func() {
		// The process may have exited already, and its exit status after a
		// signal is not what the test checks: both errors are dropped.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-s.done
			t.Errorf("outprint serve did not stop on SIGTERM")
		}
		_ = cmd.Wait()
	})
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.done:
		t.Fatalf("outprint serve exited before listening:\n%s", s.logs.String())
	case <-time.After(time.Minute):
		t.Fatalf("outprint serve did not listen:\n%s", s.logs.String())
	}
	waitReady(t, s.url, s.done, s.logs)
	return s
}

// call sends one request and returns the status and body.
func (s *liveService) call(method, path, key string, header map[string]string, body []byte) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatalf("request %s %q: %v", method, path, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *liveService) scrape() []byte {
	s.t.Helper()
	code, b := s.call(http.MethodGet, "/metrics", "", nil, nil)
	if code != http.StatusOK {
		s.t.Fatalf("GET /metrics = %d", code)
	}
	return b
}

func parseScrape(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return fams
}

// seriesOf lists the series of the outprint_ families as name{labels}.
func seriesOf(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name, f := range fams {
		if !strings.HasPrefix(name, "outprint_") {
			continue
		}
		for _, m := range f.Metric {
			var ls []string
			for _, lp := range m.Label {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(ls)
			out = append(out, name+"{"+strings.Join(ls, ",")+"}")
		}
	}
	sort.Strings(out)
	return out
}

// counterValue returns the value of the series of a counter family whose
// labels include want, or -1.
func counterValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		match := 0
		for _, lp := range m.Label {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(want) {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// hasSeries reports whether family name has a series with label=value.
func hasSeries(fams map[string]*dto.MetricFamily, name, label, value string) bool {
	if f := fams[name]; f != nil {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == label && lp.GetValue() == value {
					return true
				}
			}
		}
	}
	return false
}

// TestMetricsOfRealProcess runs `outprint serve` as a process, renders,
// runs a job that succeeds and one that fails, sends hostile requests, and
// checks its scrape: promtool lints it clean, every metric the dashboard
// and the alert rules name is in it, label values come from bounded sets
// and never carry a tenant's, user's or document's value or a client's
// path, and a second round of hostile requests with new values adds no
// series.
func TestMetricsOfRealProcess(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "promtool")
	const (
		userKey  = "ops-test-user-key"
		adminKey = "ops-test-admin-key"
		tenant   = "tenant-TN7788"
		user     = "user-UN5566"
		docText  = "Document-text-DT4410"
	)
	dir := t.TempDir()
	path := filepath.Join(dir, "outprint.yaml")
	yml := fmt.Sprintf(`dataDir: %s
render: {maxPages: 1}
auth:
  apiKeys:
    - {user: %s, tenant: %s, sha256: %s}
    - {user: ops, tenant: ops, sha256: %s, admin: true}
`, filepath.Join(dir, "data"), user, tenant, config.KeyDigest(userKey), config.KeyDigest(adminKey))
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startProcess(t, path)

	// Before anything happened, the labelled series the dashboard and
	// the alerts read are there at 0 for their known labels, so no panel
	// says "No data" and no rate starts late.
	fams0 := parseScrape(t, s.scrape())
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"outprint_job_failures_total", map[string]string{"code": "internal"}},
		{"outprint_job_failures_total", map[string]string{"code": "retries_exhausted"}},
		{"outprint_job_failures_total", map[string]string{"code": "too_many_pages"}},
		{"outprint_job_finished_total", map[string]string{"state": "failed"}},
		{"outprint_admission_refusals_total", map[string]string{"code": "busy"}},
		{"outprint_webhook_deliveries_total", map[string]string{"outcome": "dead"}},
		{"outprint_diagram_diagrams_total", map[string]string{"engine": "mermaid", "outcome": "drawn"}},
		{"outprint_diagram_diagrams_total", map[string]string{"engine": "graphviz", "outcome": "invalid"}},
		{"outprint_diagram_browser_restarts_total", map[string]string{"cause": "failed_start"}},
	} {
		if got := counterValue(fams0, c.name, c.labels); got != 0 {
			t.Errorf("first scrape: %s%v = %v, want 0 (-1: absent)", c.name, c.labels, got)
		}
	}
	for _, route := range []string{"/healthz", "/v1/render", "/render/{documentId}"} {
		if !hasSeries(fams0, "outprint_http_request_duration_seconds", "route", route) {
			t.Errorf("first scrape: no outprint_http_request_duration_seconds{route=%q}, want it at 0", route)
		}
	}
	for _, result := range []string{"ok", "tex", "timeout", "internal"} {
		if !hasSeries(fams0, "outprint_render_duration_seconds", "result", result) {
			t.Errorf("first scrape: no outprint_render_duration_seconds{result=%q}, want it at 0", result)
		}
	}

	jsonDoc := func(md string) []byte {
		b, _ := json.Marshal(map[string]any{"markdown": md, "metadata": map[string]any{"title": "Title " + docText}})
		return b
	}
	ctJSON := map[string]string{"Content-Type": "application/json"}

	// What every operator sees: a render, a job that succeeds, one that
	// fails on TeX's page limit, and a refused user_limit would need
	// concurrency; the refusal series exist from the start.
	if code, b := s.call(http.MethodPost, "/v1/render", userKey, ctJSON, jsonDoc("# Memo\n\n"+docText+"\n")); code != http.StatusOK {
		t.Fatalf("render = %d %s", code, b)
	}
	for _, md := range []string{"# Job\n\n" + docText + "\n", "# Long\n\n" + strings.Repeat(docText+" and more words to fill the page. ", 400)} {
		code, b := s.call(http.MethodPost, "/v1/jobs", userKey, ctJSON, jsonDoc(md))
		var v struct{ ID string }
		if code != http.StatusAccepted || json.Unmarshal(b, &v) != nil {
			t.Fatalf("submit = %d %s", code, b)
		}
	}
	var fams map[string]*dto.MetricFamily
	testenv.Eventually(t, "the two jobs to finish", func() bool {
		fams = parseScrape(t, s.scrape())
		return counterValue(fams, "outprint_job_finished_total", map[string]string{"state": "succeeded"}) == 1 &&
			counterValue(fams, "outprint_job_finished_total", map[string]string{"state": "failed"}) == 1
	})
	if got := counterValue(fams, "outprint_job_failures_total", map[string]string{"code": "too_many_pages"}); got != 1 {
		t.Errorf("outprint_job_failures_total{code=too_many_pages} = %v, want 1; the failure series and log:\n%s\n%s", got,
			grepLines(string(s.scrape()), "outprint_job_failures_total"), s.logs.String())
	}
	if got := counterValue(fams, "outprint_job_accepted_total", nil); got != 2 {
		t.Errorf("outprint_job_accepted_total = %v, want 2", got)
	}

	// The log of a server that did only this is quiet: /readyz polled
	// while TeX warmed up (and then LibreOffice started) logged each
	// reason for its refusal once, not once a poll, and River's own
	// bookkeeping (its producers' job counts every 5 seconds) stays out.
	logs := s.logs.String()
	refused503 := 0
	reasons := map[string]bool{}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"msg":"request refused"`) && strings.Contains(l, `"status":503`) {
			refused503++
			var v struct{ Err string }
			_ = json.Unmarshal([]byte(l), &v) // a line that is no JSON has the reason ""
			reasons[v.Err] = true
		}
	}
	if refused503 > len(reasons) || strings.Contains(logs, `"path":"/readyz"`) {
		t.Errorf("the log has %d refusals 503 (polls of /readyz) for %d reasons, want each reason once:\n%s", refused503, len(reasons), grepLines(logs, "refused"))
	}
	if strings.Contains(logs, `"msg":"producer:`) || strings.Contains(logs, "River client started") {
		t.Errorf("River's bookkeeping is in the log:\n%s", grepLines(logs, "producer"))
	}

	// Hostile requests: paths, headers, keys and bodies a client chose.
	// Each round uses new values; none may become a label.
	var hostileMu sync.Mutex
	var hostile []string
	round := func(r int) {
		for i := range 25 {
			tag := fmt.Sprintf("HX%d%02d", r, i)
			hostileMu.Lock()
			hostile = append(hostile, tag)
			hostileMu.Unlock()
			evil := url.PathEscape(`<script>"` + tag + `"</script>{code="x"}`)
			calls := []struct {
				method, path, key string
				header            map[string]string
				body              []byte
			}{
				{http.MethodGet, "/nope-" + tag + "/%00%ff", "", nil, nil},
				{http.MethodGet, "/v1/jobs/" + evil, userKey, nil, nil},
				{http.MethodGet, "/v1/jobs/" + tag + "/result", userKey, nil, nil},
				{http.MethodGet, "/v1/render/" + tag, "", nil, nil},
				{"PROPFIND", "/healthz?" + tag, "", nil, nil},
				{http.MethodGet, "/metrics?x=" + tag, "", map[string]string{"User-Agent": tag, "X-Forwarded-For": tag}, nil},
				{http.MethodGet, "/admin/river/" + tag, "", nil, nil},
				{http.MethodGet, "/admin/river/api/jobs?state=" + tag, userKey, nil, nil},
				{http.MethodGet, "/render/" + tag, "", nil, nil},
				{http.MethodPost, "/v1/render", "key-" + tag, ctJSON, jsonDoc(tag)},
				{http.MethodPost, "/v1/jobs", userKey, map[string]string{"Content-Type": "application/json", "Idempotency-Key": tag + " ✓"}, jsonDoc(tag)},
				{http.MethodPost, "/v1/jobs", userKey, ctJSON, jsonDoc("# " + tag + "\n\n$\\input{" + tag + "}$\n")},
				{http.MethodPost, "/v1/render", userKey, map[string]string{"Content-Type": "text/" + tag}, []byte(tag)},
				{http.MethodDelete, "/v1/jobs/" + tag, userKey, nil, nil},
			}
			for _, c := range calls {
				code, _ := s.call(c.method, c.path, c.key, c.header, c.body)
				if code < 400 && !strings.HasPrefix(c.path, "/metrics") {
					t.Errorf("hostile %s %s = %d, want a refusal", c.method, c.path, code)
				}
			}
		}
	}
	round(1)
	first := s.scrape()
	round(2)
	second := s.scrape()

	// promtool lints the scrape of the real process.
	if out, code := runTool(t, ".", second, "promtool", "check", "metrics"); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics = exit %d:\n%s", code, out)
	}

	// New values in the same shapes add no series.
	s1, s2 := seriesOf(parseScrape(t, first)), seriesOf(parseScrape(t, second))
	var added []string
	for _, x := range s2 {
		if !slices.Contains(s1, x) {
			added = append(added, x)
		}
	}
	if len(added) > 0 {
		t.Errorf("the second round of hostile requests added series (unbounded labels): %v", added)
	}

	// Every label value of an outprint_ series is from a bounded set.
	fams = parseScrape(t, second)
	routes := map[string]bool{}
	bounded := map[string]*regexp.Regexp{
		"code":   regexp.MustCompile(`^([a-z_]+|[1-5][0-9][0-9]|0)$`),
		"route":  regexp.MustCompile(`^(other|/[a-z0-9/._-]*(\{[a-zA-Z]+\}[a-z0-9/._-]*)*)$`),
		"result": regexp.MustCompile(`^[a-z_]+$`),
		"state":  regexp.MustCompile(`^(queued|running|succeeded|failed|cancelled)$`),
		// Webhook deliveries (issue 16); diagrams (issue 27).
		"outcome": regexp.MustCompile(`^(delivered|retry|dead|drawn|cached|invalid|too_large|error)$`),
		"le":      regexp.MustCompile(`^([0-9.e+-]+|\+Inf)$`),
		// Diagrams (issue 27): the engine and why a browser ended; Office
		// conversions (issue 28): the formats of package office, why a
		// LibreOffice process was replaced, one process per render slot.
		"engine": regexp.MustCompile(`^(mermaid|graphviz)$`),
		"cause":  regexp.MustCompile(`^(worn|stopped|crashed|idle|failed_start|conversions|memory|timeout|cancel|crash)$`),
		"format": regexp.MustCompile(`^(docx|docm|doc|odt|rtf|xlsx|xlsm|xls|ods|csv|pptx|ppt|odp)$`),
		"slot":   regexp.MustCompile(`^[0-9]{1,3}$`),
	}
	secrets := append([]string{tenant, user, docText, userKey, adminKey, "TN7788", "UN5566", "DT4410"}, hostile...)
	for name, f := range fams {
		if !strings.HasPrefix(name, "outprint_") {
			continue
		}
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				re, ok := bounded[lp.GetName()]
				if !ok {
					t.Errorf("%s has label %s, which is not one of the bounded labels", name, lp.GetName())
					continue
				}
				if !re.MatchString(lp.GetValue()) {
					t.Errorf("%s{%s=%q}: value outside its bounded set", name, lp.GetName(), lp.GetValue())
				}
				for _, sec := range secrets {
					if strings.Contains(lp.GetValue(), sec) {
						t.Errorf("%s{%s=%q} carries a client's or tenant's value %q", name, lp.GetName(), lp.GetValue(), sec)
					}
				}
				if lp.GetName() == "route" {
					routes[lp.GetValue()] = true
				}
			}
		}
	}
	if !routes["other"] || !routes["/v1/jobs/{id}"] || !routes["/healthz"] || len(routes) > 16 {
		t.Errorf("route label values = %v, want the registered patterns and other", routes)
	}

	// Every metric the dashboard and the rules name is exposed.
	exposed := func(name string) bool {
		if name == "up" { // made by Prometheus for every target
			return true
		}
		if strings.HasPrefix(name, gatewayMetricPrefix) {
			return true // a gateway's: TestClusterForms scrapes one
		}
		if fams[name] != nil {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if f := fams[base]; f != nil && (f.GetType() == dto.MetricType_HISTOGRAM || (f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket")) {
					return true
				}
			}
		}
		return false
	}
	exprs, varMetrics := expressions(t)
	if len(exprs) < 20 {
		t.Errorf("found %d expressions in the dashboard and rules, want the whole set", len(exprs))
	}
	for where, expr := range exprs {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", where, expr, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !exposed(n) {
				t.Errorf("%s names %s, which the scrape of outprint serve does not have", where, n)
			}
		}
	}
	for _, n := range varMetrics {
		if !exposed(n) {
			t.Errorf("a dashboard variable reads %s, which the scrape does not have", n)
		}
	}
}
