package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/testenv"
)

const (
	hookKey    = "hook-key"
	hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// serveProcess is `outprint serve` as a process of its own.
type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	stderr *testenv.Buffer
	done   chan error
}

var listeningRE = regexp.MustCompile(`"msg":"listening",.*?"addr":"([^"]+)"`)

// startServeProcess starts the binary with the configuration file and
// extra environment, and waits until /readyz answers 200.
func startServeProcess(t *testing.T, configFile string, env ...string) *serveProcess {
	t.Helper()
	return startServeCmd(t, exec.Command(binary, "serve", "--config", configFile), env...)
}

// startFailingServe starts `serve` from this test binary (TestMain's
// failpoint mode) with a hook that kills it with SIGKILL at point.
func startFailingServe(t *testing.T, configFile, point string) *serveProcess {
	t.Helper()
	return startServeCmd(t, exec.Command(os.Args[0], "serve", "--config", configFile), failpointEnv+"="+point)
}

// startServeCmd starts cmd, a serve process, and waits until it is ready.
func startServeCmd(t *testing.T, cmd *exec.Cmd, env ...string) *serveProcess {
	t.Helper()
	p := &serveProcess{cmd: cmd, stderr: &testenv.Buffer{}, done: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), officeOff), env...)
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() { // ends when the process closes stderr, at its exit
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			_, _ = fmt.Fprintln(p.stderr, sc.Text())
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-p.done:
				// Stopped by this SIGTERM: its exit status says nothing here.
				_ = err
			case <-time.After(time.Minute):
				_ = p.cmd.Process.Kill()
			}
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.done:
		t.Fatalf("serve exited (%v) before listening:\n%s", err, p.stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve did not listen:\n%s", p.stderr.String())
	}
	waitReady(t, p.url, nil, p.stderr)
	return p
}

// TestWebhookSurvivesSIGKILL: a real `outprint serve` is killed with
// SIGKILL right after the transaction that made a job succeed (failpoint
// after-settle), before the delivery; the next process delivers the
// webhook, which the Standard Webhooks reference library verifies.
func TestWebhookSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex")
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			wh, err := standardwebhooks.NewWebhook(hookSecret)
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu  sync.Mutex
				got []string // webhook-ids of verified deliveries
				bad []error
			)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				if err := wh.Verify(body, r.Header); err != nil {
					bad = append(bad, err)
				} else {
					got = append(got, r.Header.Get("webhook-id"))
				}
			}))
			defer rcv.Close()
			seen := func() ([]string, []error) {
				mu.Lock()
				defer mu.Unlock()
				return append([]string(nil), got...), append([]error(nil), bad...)
			}

			data := filepath.Join(t.TempDir(), "data")
			dbURL := testDatabase(t, kind, data)
			if kind == "postgres" {
				if _, errOut, code := runWithEnv(t, []string{"OUTPRINT_DATABASE=" + dbURL}, "migrate"); code != exitOK {
					t.Fatalf("migrate = %d: %s", code, errOut)
				}
			}
			conf := filepath.Join(t.TempDir(), "outprint.yaml")
			yaml := fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\ndatabase: %s\npool: {min: 0}\nwebhooks: {allowHosts: [127.0.0.1]}\n"+
				"auth:\n  apiKeys:\n    - {user: alice, tenant: acme, sha256: %s, webhookSecrets: [%s]}\n", data, dbURL, config.KeyDigest(hookKey), hookSecret)
			if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}

			// The kill comes right after the success transaction commits;
			// on a loaded machine the delivery worker of the same process
			// can still win the race and deliver first, or claim the
			// delivery before the kill (then River's rescuer, minutes
			// later, retries it). Such a run did not test the crash, so it
			// is tried again with a new job.
			var jobID string
			for try := 1; ; try++ {
				jobID = settleAndKill(t, conf, rcv.URL)
				ids, _ := seen()
				state := webhookRiverState(t, dbURL)
				if len(ids) == 0 && (state == "available" || state == "scheduled") {
					break
				}
				if try == 3 {
					t.Fatalf("the delivery was claimed (%s) or made (%v) before the kill %d times: the scenario never killed between settling and delivering", state, ids, try)
				}
				t.Logf("try %d: the delivery was %s (deliveries %v) before the kill; again", try, state, ids)
				mu.Lock()
				got = nil
				mu.Unlock()
			}
			j := struct{ ID string }{jobID}
			if got := storedTenantJob(t, dbURL, data, j.ID, "acme"); got.State != jobs.StateSucceeded || got.Webhook == nil || got.Webhook.State != jobs.WebhookSending {
				t.Fatalf("job after the kill = %s, webhook %+v; want succeeded with its webhook due", got.State, got.Webhook)
			}

			next := startServeProcess(t, conf)
			testenv.Eventually(t, "the webhook delivered after the restart", func() bool {
				ids, errs := seen()
				if len(errs) > 0 {
					t.Fatalf("deliveries that do not verify: %v", errs)
				}
				return slices.Contains(ids, jobs.EventID(j.ID))
			})
			var st jobs.Job
			testenv.EventuallyWithin(t, 10*time.Second, "the delivery recorded", func() bool {
				st = storedTenantJob(t, dbURL, data, j.ID, "acme")
				return st.Webhook != nil && st.Webhook.State == jobs.WebhookDelivered
			})
			// The new process counted its delivery.
			resp, err := http.Get(next.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if !strings.Contains(string(metrics), `outprint_webhook_deliveries_total{outcome="delivered"} 1`) {
				t.Errorf("/metrics of the process that delivered lacks one delivered webhook:\n%s", grepLines(string(metrics), "webhook"))
			}
		})
	}
}

// settleAndKill starts serve with the after-settle failpoint, submits a job
// with a callback to receiver and waits for the process to die of SIGKILL
// right after the job succeeded. It returns the job id.
func settleAndKill(t *testing.T, conf, receiver string) string {
	t.Helper()
	p := startFailingServe(t, conf, jobs.FailAfterSettle)
	b, _ := json.Marshal(map[string]string{"markdown": "# Settled, then killed\n\nThe next process delivers.\n", "callbackUrl": receiver + "/hook"})
	req, _ := http.NewRequest(http.MethodPost, p.url+"/v1/jobs", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+hookKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var j struct{ ID string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &j) != nil || j.ID == "" {
		t.Fatalf("POST /v1/jobs = %d %s, want 202", resp.StatusCode, body)
	}
	var werr error
	select {
	case werr = <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve was not killed at the failpoint:\n%s", p.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("serve ended with %v, want SIGKILL at %s:\n%s", werr, jobs.FailAfterSettle, p.stderr.String())
	}
	return j.ID
}

// TestConfigCheckWebhooks: a default callback the policy refuses, and one
// of a tenant without secrets, stop `config check` naming the setting.
func TestConfigCheckWebhooks(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "outprint.yaml")
	yaml := fmt.Sprintf("auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: %s, callbackUrl: 'https://10.0.0.1/hook', webhookSecrets: [%s]}\n"+
		"    - {user: b, tenant: u, sha256: %s, callbackUrl: 'https://hooks.example.com/'}\n", config.KeyDigest("k1"), hookSecret, config.KeyDigest("k2"))
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "config", "check", conf)
	if code != exitUsage || !strings.Contains(errOut, "auth.apiKeys[0].callbackUrl") || !strings.Contains(errOut, "private") ||
		!strings.Contains(errOut, "auth.apiKeys[1].callbackUrl is set but tenant \"u\" has no webhookSecrets") {
		t.Errorf("config check = exit %d, stderr:\n%s\nwant exit %d naming both callbackUrl settings", code, errOut, exitUsage)
	}
}

// webhookRiverState is the River state of the newest delivery job:
// "available" when no worker claimed it.
func webhookRiverState(t *testing.T, dbURL string) string {
	t.Helper()
	const q = `SELECT state FROM river_job WHERE kind = 'outprint_webhook' ORDER BY id DESC LIMIT 1`
	var state string
	if path, ok := strings.CutPrefix(dbURL, "sqlite://"); ok {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		if err := db.QueryRow(q).Scan(&state); err != nil {
			t.Fatalf("delivery job: %v", err)
		}
		return state
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if err := conn.QueryRow(ctx, q).Scan(&state); err != nil {
		t.Fatalf("delivery job: %v", err)
	}
	return state
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
