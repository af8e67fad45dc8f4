package webhook

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_c2VjcmV0LW51bWJlci10d28tZm9yLXJvdGF0aW9uLXRlc3Q="
)

// Sign's header verifies with the reference library for each secret it
// was made with, and not for another.
func TestSignVerifiesWithReferenceLibrary(t *testing.T) {
	k1, err := ParseSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParseSecret(otherSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"x","state":"succeeded"}`)
	ts := time.Now().Unix()
	h := http.Header{}
	h.Set(HeaderID, "msg_1")
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign([][]byte{k1, k2}, "msg_1", ts, body))
	if n := len(strings.Fields(h.Get(HeaderSignature))); n != 2 {
		t.Errorf("Sign with two keys = %q, want two signatures", h.Get(HeaderSignature))
	}
	for _, s := range []string{testSecret, otherSecret} {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("reference Verify with %s… = %v, want ok", s[:10], err)
		}
		if err := wh.Verify(append(body, ' '), h); err == nil {
			t.Errorf("reference Verify of a changed body passed")
		}
		want, _ := wh.Sign("msg_1", time.Unix(ts, 0), body)
		if !strings.Contains(h.Get(HeaderSignature), want) {
			t.Errorf("Sign = %q, want it to contain the reference %q", h.Get(HeaderSignature), want)
		}
	}
	only1 := http.Header{}
	for k, v := range h {
		only1[k] = v
	}
	only1.Set(HeaderSignature, Sign([][]byte{k1}, "msg_1", ts, body))
	wh2, _ := standardwebhooks.NewWebhook(otherSecret)
	if err := wh2.Verify(body, only1); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("reference Verify with a secret not signed with = %v, want no matching signature", err)
	}
}

func TestParseSecret(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{testSecret, true},
		{otherSecret, true},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},    // no prefix
		{"whsec_not base64!", false},                   // not base64
		{"whsec_c2hvcnQ=", false},                      // 5 bytes
		{"whsec_" + strings.Repeat("QUFB", 30), false}, // 90 bytes
	} {
		_, err := ParseSecret(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseSecret(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{AllowHosts: []string{"127.0.0.1", "hooks.internal:8080", "*.corp.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		want string // "" = accepted, else in the error
	}{
		{"https://hooks.example.com/a?b=c", ""},
		{"https://93.184.216.34/hook", ""},
		{"http://127.0.0.1:9999/hook", ""},      // allowed host: http and loopback
		{"http://hooks.internal:8080/hook", ""}, // allowed host and port
		{"http://a.corp.example/hook", ""},      // allowed subdomain
		{"http://hooks.internal:8081/hook", "https"},
		{"http://hooks.example.com/hook", "https"},
		{"https://10.0.0.1/hook", "private"},
		{"https://169.254.169.254/latest", "cloud metadata"},
		{"https://[::1]:8443/hook", "loopback"},
		{"https://[fd00::1]/hook", "unique-local"},
		{"https://127.0.0.2/hook", "loopback"},
		{"https://[::ffff:127.0.0.1]/hook", "loopback"},
		{"https://localhost/hook", "loopback"},
		{"https://api.localhost./hook", "loopback"},
		{"https://user:pw@hooks.example.com/", "user information"},
		{"https://hooks.example.com/#frag", "fragment"},
		{"ftp://hooks.example.com/", "https"},
		{"hooks.example.com/hook", "absolute"},
		{"https:///nohost", "absolute"},
		{"https://bad_host!.example/", "valid host name"},
		{"https://hooks.example.com/" + strings.Repeat("a", MaxURL), "longer than"},
		// IPv4 addresses in the forms getaddrinfo and browsers read
		// besides dotted decimal: never a name DNS answers.
		{"https://0x7f000001/hook", "127.0.0.1, a loopback"},
		{"https://2130706433/hook", "127.0.0.1, a loopback"},
		{"https://127.1/hook", "127.0.0.1, a loopback"},
		{"https://0177.0.0.1/hook", "127.0.0.1, a loopback"},
		{"https://0x7f.1/hook", "127.0.0.1, a loopback"},
		{"https://0xa9fea9fe/latest", "169.254.169.254, a cloud metadata"},
		{"https://10.1/hook", "10.0.0.1, a private"},
		{"https://134744072/hook", "write it as 8.8.8.8"},
		{"https://8.8.8.010/hook", "write it as 8.8.8.8"},
		{"https://hooks.example.123/hook", "valid host name"},
		{"https://1.2.3.4.5/hook", "valid host name"},
		{"https://0x1g/hook", ""}, // not a number: a name
		{"https://4294967296/hook", "valid host name"},
		{"https://127.0.0.3./hook", "loopback"},
		{"https://hooks.0x7f.example.com/hook", ""}, // a number inside a name
		{"https://123.example.com/hook", ""},
	} {
		err := p.Check(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%q) = %v, want accepted", tc.url, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Check(%q) = %v, want refused about %q", tc.url, err, tc.want)
		}
	}
}

func TestNewPolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		keys []Key
		want string
	}{
		{[]Key{{User: "a", Tenant: "t", Secrets: []string{testSecret, otherSecret, testSecret}}}, "at most 2"},
		{[]Key{{User: "a", Tenant: "t", Secrets: []string{"whsec_c2hvcnQ="}}}, "auth.apiKeys[0].webhookSecrets[0]"},
		{[]Key{{User: "a", Tenant: "t", Secrets: []string{testSecret}}, {User: "b", Tenant: "t", Secrets: []string{otherSecret}}}, "differ from another key of tenant"},
		{[]Key{{User: "a", Tenant: "t", CallbackURL: "https://hooks.example.com/"}}, "has no webhookSecrets"},
		{[]Key{{User: "a", Tenant: "t", CallbackURL: "https://10.1.2.3/", Secrets: []string{testSecret}}}, "auth.apiKeys[0].callbackUrl"},
	} {
		_, err := NewPolicy(PolicyConfig{Keys: tc.keys})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPolicy(%+v) = %v, want an error about %q", tc.keys, err, tc.want)
		}
	}
	p, err := NewPolicy(PolicyConfig{Keys: []Key{
		{User: "a", Tenant: "t", CallbackURL: "https://hooks.example.com/a", Secrets: []string{testSecret}},
		{User: "b", Tenant: "t", Secrets: []string{testSecret}},
		{User: "c", Tenant: "u"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Default("t", "a"); got != "https://hooks.example.com/a" {
		t.Errorf("Default(t, a) = %q", got)
	}
	if got := p.Default("t", "b"); got != "" {
		t.Errorf("Default(t, b) = %q, want none", got)
	}
	if !p.CanSign("t") || p.CanSign("u") || len(p.Secrets("t")) != 1 {
		t.Errorf("CanSign(t) = %v, CanSign(u) = %v, Secrets(t) = %d; want true, false, 1", p.CanSign("t"), p.CanSign("u"), len(p.Secrets("t")))
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"120", 2 * time.Minute},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"99999999999", 7 * 24 * time.Hour},
	} {
		if got := retryAfter(tc.in, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
