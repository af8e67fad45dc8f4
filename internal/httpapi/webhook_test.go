package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/webhook"
)

// The webhook tests run the real server, the real job service on SQLite
// and PostgreSQL and real XeLaTeX, and deliver to receivers on loopback
// that verify every request with the Standard Webhooks reference library
// (github.com/standard-webhooks/standard-webhooks/libraries/go). Backoff is
// shortened through jobs.WebhookConfig, as an operator's Go program could.

// Secrets of tenant acme: two active, as during a rotation; secretOther
// belongs to nobody.
const (
	secretA     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB     = "whsec_c2VjcmV0LW51bWJlci10d28tZm9yLXJvdGF0aW9uLXRlc3Q="
	secretOther = "whsec_b3RoZXItc2VjcmV0LXRoYXQtbm9ib2R5LXVzZXM="
)

// webhookConfig returns the delivery settings of a test env, none when w
// is nil.
func webhookConfig(w *jobs.WebhookConfig) jobs.WebhookConfig {
	if w == nil {
		return jobs.WebhookConfig{}
	}
	return *w
}

// testPolicy is the policy of the tests: alice and bob of acme sign with
// both secrets, oscar's tenant has none.
func testPolicy(t *testing.T, allowHosts ...string) *webhook.Policy {
	t.Helper()
	p, err := webhook.NewPolicy(webhook.PolicyConfig{AllowHosts: allowHosts, Keys: []webhook.Key{
		{User: "alice", Tenant: "acme", Secrets: []string{secretA, secretB}},
		{User: "bob", Tenant: "acme", Secrets: []string{secretA, secretB}},
		{User: "oscar", Tenant: "other"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dialLog records every address the webhook client dials.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *dialLog) dialed(port string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.addrs {
		if strings.HasSuffix(a, ":"+port) {
			return true
		}
	}
	return false
}

// delivery is one request a receiver got.
type delivery struct {
	id, timestamp string
	body          []byte
	// errA, errB and errOther are the reference library's verdicts with
	// each secret.
	errA, errB, errOther error
}

// receiver is a webhook endpoint on loopback. answer gives the status and
// headers of the n-th request (1-based).
type receiver struct {
	t      *testing.T
	ln     net.Listener
	srv    *http.Server
	answer func(n int) (int, http.Header)
	mu     sync.Mutex
	got    []delivery
	conns  atomic.Int64
}

// newReceiver listens on addr ("127.0.0.1:0" for any port).
func newReceiver(t *testing.T, addr string, answer func(n int) (int, http.Header)) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, ln: ln, answer: answer}
	verifier := func(secret string) *standardwebhooks.Webhook {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		return wh
	}
	whA, whB, whO := verifier(secretA), verifier(secretB), verifier(secretOther)
	rc.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			d := delivery{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"), body: body,
				errA: whA.Verify(body, r.Header), errB: whB.Verify(body, r.Header), errOther: whO.Verify(body, r.Header)}
			if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("webhook request %s with Content-Type %q, want POST application/json", r.Method, r.Header.Get("Content-Type"))
			}
			rc.mu.Lock()
			rc.got = append(rc.got, d)
			n := len(rc.got)
			rc.mu.Unlock()
			status, h := http.StatusOK, http.Header(nil)
			if rc.answer != nil {
				status, h = rc.answer(n)
			}
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				rc.conns.Add(1)
			}
		},
	}
	go func() { _ = rc.srv.Serve(ln) }() // ends at Close (ErrServerClosed)
	t.Cleanup(rc.close)
	return rc
}

func (rc *receiver) close() { _ = rc.srv.Close() }

func (rc *receiver) port() string {
	_, p, _ := net.SplitHostPort(rc.ln.Addr().String())
	return p
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// submitWithCallback submits a job of alice's with callbackUrl, as JSON
// or, with multipart, as a form part.
func (e *jobsEnv) submitWithCallback(markdown, callback string, multipart bool) answer {
	e.t.Helper()
	if !multipart {
		// The Host header is the client's: the webhook body's links must
		// not come from it (issue 24), checkDelivery wants the server's.
		return e.do(jsonBody(keyAlice, map[string]any{"markdown": markdown, "callbackUrl": callback}, map[string]string{"Host": "attacker.example"}))
	}
	r := multipartBody(keyAlice, markdown, nil)
	// Add the callbackUrl part before the closing boundary.
	ctype := r.ctype
	boundary := ctype[strings.Index(ctype, "boundary=")+len("boundary="):]
	end := []byte("--" + boundary + "--")
	i := strings.LastIndex(string(r.body), string(end))
	part := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"callbackUrl\"\r\n\r\n%s\r\n", boundary, callback)
	r.body = append(append(append([]byte{}, r.body[:i]...), part...), r.body[i:]...)
	return e.do(r)
}

// waitWebhook polls the job until its webhook is in state.
func (e *jobsEnv) waitWebhook(id, state string) jobs.View {
	e.t.Helper()
	return e.wait(keyAlice, id, "webhook "+state, func(v jobs.View) bool { return v.Webhook != nil && v.Webhook.State == state })
}

// checkDelivery checks one delivery against the job as GET shows it: the
// reference library verifies it with either active secret (and not with
// a stranger's), the id is the job's event id, and the body is the job's
// document with absolute links and without the webhook member.
func (e *jobsEnv) checkDelivery(d delivery, v jobs.View) {
	e.t.Helper()
	if d.errA != nil || d.errB != nil {
		e.t.Errorf("standardwebhooks Verify = %v (secret A), %v (secret B); want both to pass", d.errA, d.errB)
	}
	if d.errOther == nil {
		e.t.Errorf("standardwebhooks Verify with a secret outprint does not have passed")
	}
	if want := "msg_" + v.ID; d.id != want {
		e.t.Errorf("webhook-id = %q, want %q", d.id, want)
	}
	var got map[string]any
	if err := json.Unmarshal(d.body, &got); err != nil {
		e.t.Fatalf("webhook body is not JSON: %v\n%s", err, d.body)
	}
	a := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID, key: keyAlice})
	var want map[string]any
	if err := json.Unmarshal(a.body, &want); err != nil {
		e.t.Fatal(err)
	}
	delete(want, "webhook")
	want["links"] = map[string]any{"self": e.url + "/v1/jobs/" + v.ID, "result": e.url + "/v1/jobs/" + v.ID + "/result"}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		e.t.Errorf("webhook body =\n%s\nwant the job's document with absolute links\n%s", gb, wb)
	}
}

// TestWebhookDelivery: on both databases, job completions are pushed to
// receivers that verify them with the reference library, through
// failures: three 500s then 200 (four attempts, one event id), a receiver
// that is down while the job finishes and comes back, a 410 that stops
// the retries of a failed job, a cancelled job; a callback whose name
// resolves to loopback, and one that redirects to loopback, are never
// dialed.
func TestWebhookDelivery(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel() // each engine has its own database, service and receivers
			dials := &dialLog{}
			fc := fetch.New(fetch.Config{
				AllowHosts: []string{"127.0.0.1"}, AnyHTTPS: true, TrustAllowHosts: true, Setting: "webhooks.allowHosts",
				MaxRedirects: -1, Timeout: 5 * time.Second, MaxBytes: webhook.MaxResponse,
				// callback.test resolves to loopback, as a hostile DNS
				// name would.
				Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
					if host == "callback.test" {
						return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
					}
					return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
				},
				Dial: dials.dial,
			})
			policy := testPolicy(t, "127.0.0.1")
			sender, err := webhook.NewSender(webhook.SenderConfig{Client: fc, Secrets: policy, Document: jobs.Document})
			if err != nil {
				t.Fatal(err)
			}
			outcomes := &outcomeCount{n: map[string]int{}}
			var hold atomic.Bool
			hooks := &hookRenderer{before: func(ctx context.Context) error {
				if hold.Load() {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}}
			e := newJobsEnv(t, jobsOptions{kind: kind, maxPages: 2, hooks: hooks, callbacks: policy, webhooks: &jobs.WebhookConfig{
				Sender: sender, RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAge: time.Hour,
				Timeout: 5 * time.Second, Observer: outcomes,
			}})

			// 500, 500, 500, then 200: four attempts of one event.
			flaky := newReceiver(t, "127.0.0.1:0", func(n int) (int, http.Header) {
				if n <= 3 {
					return http.StatusInternalServerError, nil
				}
				return http.StatusOK, nil
			})
			j := e.submitWithCallback(doc("Flaky receiver"), "http://127.0.0.1:"+flaky.port()+"/hook", false).view(t, http.StatusAccepted)
			if j.Webhook == nil || j.Webhook.State != jobs.WebhookPending || j.Webhook.Attempts != 0 {
				t.Errorf("accepted job webhook = %+v, want pending with no attempt", j.Webhook)
			}
			v := e.waitWebhook(j.ID, jobs.WebhookDelivered)
			if v.State != jobs.StateSucceeded || v.Webhook.Attempts != 4 || v.Webhook.LastStatus == nil || *v.Webhook.LastStatus != 200 || v.Webhook.NextAttemptAt != nil {
				t.Errorf("delivered job = %s, webhook %+v; want succeeded, 4 attempts, last status 200, no next attempt", v.State, v.Webhook)
			}
			got := flaky.deliveries()
			if len(got) != 4 {
				t.Fatalf("receiver got %d requests, want 4", len(got))
			}
			for i, d := range got {
				e.checkDelivery(d, v)
				if d.id != got[0].id {
					t.Errorf("attempt %d webhook-id = %q, want %q as on the first", i+1, d.id, got[0].id)
				}
			}

			// Down while the job finishes, then up: delivered.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			downAddr := ln.Addr().String()
			_ = ln.Close()
			j = e.submitWithCallback(doc("Receiver down"), "http://"+downAddr+"/hook", true).view(t, http.StatusAccepted)
			v = e.wait(keyAlice, j.ID, "a failed attempt", func(v jobs.View) bool {
				return v.Webhook != nil && v.Webhook.State == jobs.WebhookRetrying && v.Webhook.Attempts >= 2
			})
			if v.Webhook.LastStatus != nil || v.Webhook.NextAttemptAt == nil {
				t.Errorf("webhook to a receiver that is down = %+v, want no last status and a next attempt", v.Webhook)
			}
			back := newReceiver(t, downAddr, nil)
			v = e.waitWebhook(j.ID, jobs.WebhookDelivered)
			if d := back.deliveries(); len(d) != 1 {
				t.Errorf("receiver that came back got %d requests, want 1", len(d))
			} else {
				e.checkDelivery(d[0], v)
			}

			// A failed job (over the page limit) to a receiver answering
			// 410: one attempt, dead.
			gone := newReceiver(t, "127.0.0.1:0", func(int) (int, http.Header) { return http.StatusGone, nil })
			j = e.submitWithCallback(longDoc("Too long", 4), "http://127.0.0.1:"+gone.port()+"/hook", false).view(t, http.StatusAccepted)
			v = e.waitWebhook(j.ID, jobs.WebhookDead)
			if v.State != jobs.StateFailed || v.Error == nil || v.Error.Code != limits.CodeTooManyPages {
				t.Errorf("job = %s %+v, want failed with too_many_pages", v.State, v.Error)
			}
			if v.Webhook.Attempts != 1 || v.Webhook.LastStatus == nil || *v.Webhook.LastStatus != 410 || v.Webhook.NextAttemptAt != nil {
				t.Errorf("webhook answered 410 = %+v, want dead after 1 attempt with last status 410", v.Webhook)
			}
			if d := gone.deliveries(); len(d) != 1 {
				t.Errorf("receiver answering 410 got %d requests, want 1", len(d))
			} else {
				e.checkDelivery(d[0], v)
			}

			// Cancelled by DELETE while it renders: delivered with state
			// cancelled.
			plain := newReceiver(t, "127.0.0.1:0", nil)
			hold.Store(true)
			j = e.submitWithCallback(doc("Cancelled"), "http://127.0.0.1:"+plain.port()+"/hook", false).view(t, http.StatusAccepted)
			e.waitState(keyAlice, j.ID, jobs.StateRunning)
			e.do(request{method: http.MethodDelete, path: "/v1/jobs/" + j.ID, key: keyAlice}).view(t, http.StatusOK)
			v = e.waitWebhook(j.ID, jobs.WebhookDelivered)
			hold.Store(false)
			if d := plain.deliveries(); len(d) != 1 || v.State != jobs.StateCancelled {
				t.Errorf("cancelled job %s: receiver got %d requests, want 1", v.State, len(d))
			} else {
				e.checkDelivery(d[0], v)
			}

			// A name that resolves to loopback (not allowed): refused at
			// dial time, never dialed, dead at once.
			trap := newReceiver(t, "127.0.0.1:0", nil)
			j = e.submitWithCallback(doc("Rebinding"), "https://callback.test:"+trap.port()+"/hook", false).view(t, http.StatusAccepted)
			v = e.waitWebhook(j.ID, jobs.WebhookDead)
			if v.Webhook.Attempts != 1 || v.Webhook.LastStatus != nil {
				t.Errorf("webhook to a name resolving to loopback = %+v, want dead after 1 attempt without status", v.Webhook)
			}

			// A redirect to loopback is not followed: dead with the 307.
			redirector := newReceiver(t, "127.0.0.1:0", func(int) (int, http.Header) {
				return http.StatusTemporaryRedirect, http.Header{"Location": {"http://localhost:" + trap.port() + "/hook"}}
			})
			j = e.submitWithCallback(doc("Redirected"), "http://127.0.0.1:"+redirector.port()+"/hook", false).view(t, http.StatusAccepted)
			v = e.waitWebhook(j.ID, jobs.WebhookDead)
			if v.Webhook.Attempts != 1 || v.Webhook.LastStatus == nil || *v.Webhook.LastStatus != 307 {
				t.Errorf("webhook answered by a redirect = %+v, want dead after 1 attempt with last status 307", v.Webhook)
			}
			if n := trap.conns.Load(); n != 0 || dials.dialed(trap.port()) {
				t.Errorf("the loopback trap got %d connections (dialed: %v), want none", n, dials.dialed(trap.port()))
			}

			if got, want := outcomes.get(), map[string]int{"delivered": 3, "retry": 3 + 2, "dead": 3}; got["delivered"] != want["delivered"] ||
				got["dead"] != want["dead"] || got["retry"] < want["retry"] {
				t.Errorf("delivery outcomes = %v, want 3 delivered, 3 dead and at least 5 retries", got)
			}
		})
	}
}

// outcomeCount is a jobs.WebhookObserver.
type outcomeCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomeCount) WebhookAttempt(outcome string) {
	o.mu.Lock()
	o.n[outcome]++
	o.mu.Unlock()
}

func (o *outcomeCount) get() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.n {
		out[k] = v
	}
	return out
}

// TestWebhookRefusedAtAcceptance: with no host allowed, callbacks to
// loopback, private, link-local and metadata addresses, to localhost and
// over http are refused with 422 naming callbackUrl, as is a callback of a
// tenant without a secret; no job is made and nothing is dialed.
func TestWebhookRefusedAtAcceptance(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			e := newJobsEnv(t, jobsOptions{kind: kind, callbacks: testPolicy(t)})
			v4 := newReceiver(t, "127.0.0.1:0", nil)
			var v6port string
			if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
				_ = ln.Close()
				v6 := newReceiver(t, ln.Addr().String(), nil)
				v6port = v6.port()
				defer func() {
					if n := v6.conns.Load(); n != 0 {
						t.Errorf("[::1] receiver got %d connections, want none", n)
					}
				}()
			} else {
				v6port = "9"
			}
			for _, tc := range []struct {
				url, key string
				want     string // in the message
			}{
				{"https://127.0.0.1:" + v4.port() + "/hook", keyAlice, "loopback"},
				{"https://10.0.0.1/hook", keyAlice, "private"},
				{"https://169.254.169.254/latest/meta-data", keyAlice, "cloud metadata"},
				{"https://[::1]:" + v6port + "/hook", keyAlice, "loopback"},
				{"https://localhost:" + v4.port() + "/hook", keyAlice, "loopback"},
				{"http://hooks.example.com/hook", keyAlice, "https"},
				{"ftp://hooks.example.com/hook", keyAlice, "https"},
				{"https://user:pw@hooks.example.com/hook", keyAlice, "user information"},
				{"/relative/hook", keyAlice, "absolute"},
				{"https://hooks.example.com/hook", keyOscar, "no webhook secret"},
			} {
				for _, multipart := range []bool{false, true} {
					var a answer
					if tc.key == keyAlice {
						a = e.submitWithCallback(doc("Refused"), tc.url, multipart)
					} else {
						a = e.do(jsonBody(tc.key, map[string]any{"markdown": doc("Refused"), "callbackUrl": tc.url}, nil))
					}
					ps := a.wantError(t, http.StatusUnprocessableEntity, limits.CodeInvalid)
					if len(ps) != 1 || ps[0].Field != "callbackUrl" || !strings.Contains(ps[0].Message, tc.want) {
						t.Errorf("callbackUrl %s (multipart %v) = %+v, want one problem on callbackUrl about %q", tc.url, multipart, ps, tc.want)
					}
				}
			}
			if ids := e.listIDs(keyAlice); len(ids) != 0 {
				t.Errorf("jobs made from refused callbacks: %v", ids)
			}
			if n := v4.conns.Load(); n != 0 {
				t.Errorf("127.0.0.1 receiver got %d connections, want none", n)
			}
			// /v1/render knows no callbackUrl part.
			r := multipartBody(keyAlice, doc("Sync"), nil)
			r.path = "/v1/render"
			ctype := r.ctype
			boundary := ctype[strings.Index(ctype, "boundary=")+len("boundary="):]
			r.body = []byte(strings.Replace(string(r.body), "--"+boundary+"--",
				fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"callbackUrl\"\r\n\r\nhttps://x.example/\r\n--%s--", boundary, boundary), 1))
			e.do(r).wantError(t, http.StatusBadRequest, limits.CodeInvalid)
		})
	}
}
