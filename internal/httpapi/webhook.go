package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
)

// Webhooks (issue 16): POST /v1/jobs may name a callbackUrl (a form part or
// a JSON field), or the API key has a default one; the job service POSTs
// the job's status document there once the job ends, signed (package
// webhook). Acceptance refuses, with 422 naming callbackUrl, what can be
// known to fail before anything is stored: a URL the policy refuses (http
// to a host not allowed, a literal internal address, localhost) and a
// tenant without a secret to sign with. Names that resolve to internal
// addresses are refused by the dial guard at every attempt.

// Callbacks is the webhook policy acceptance asks; *webhook.Policy
// implements it.
type Callbacks interface {
	// Check refuses a callback URL that can never be delivered to; its
	// error text is shown to the client.
	Check(rawURL string) error
	// Default returns the callback of the API key of (tenant, user), ""
	// when none.
	Default(tenant, user string) string
	// CanSign reports whether tenant has a webhook secret.
	CanSign(tenant string) bool
}

// maxCallbackPart bounds the callbackUrl part of a multipart job.
const maxCallbackPart = 4 << 10

// jobWebhookView is the "webhook" member of a job.
type jobWebhookView struct {
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// LastStatus is the HTTP status of the last attempt; null before one
	// and when it got no answer.
	LastStatus *int `json:"lastStatus"`
	// NextAttemptAt is null once the delivery is delivered or dead.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
}

// callbackProblem is a 422 naming the callbackUrl field.
func callbackProblem(message string) error {
	return limits.Invalid(limits.Problem{Field: "callbackUrl", Source: limits.SourceRequest, Code: limits.CodeInvalid, Message: message})
}

// jobCallback resolves the callback of a job: the request's callbackUrl
// when sent (raw not nil), else the API key's default. It returns nil when
// the job has none.
func (s *Server) jobCallback(r *http.Request, c caller, raw *string) (*jobs.Callback, error) {
	u := ""
	if raw != nil {
		u = strings.TrimSpace(*raw)
		if u == "" {
			return nil, callbackProblem("callbackUrl is empty; leave it out for no callback")
		}
	} else if s.cfg.Callbacks != nil {
		u = s.cfg.Callbacks.Default(c.tenant, c.user)
	}
	if u == "" {
		return nil, nil
	}
	cb := s.cfg.Callbacks
	if cb == nil {
		return nil, callbackProblem("this service does not send webhooks")
	}
	if err := cb.Check(u); err != nil {
		return nil, callbackProblem("callbackUrl: " + err.Error())
	}
	if !cb.CanSign(c.tenant) {
		return nil, callbackProblem("no webhook secret is configured for your API key's tenant (auth.apiKeys[].webhookSecrets), so a webhook could not be signed")
	}
	return &jobs.Callback{URL: u, BaseURL: s.baseURL(r)}, nil
}

// baseURL is what job links are made absolute with: PublicURL, or the
// scheme and Host the request came to. The Host is the client's own word,
// and only its own webhooks carry it.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// JobDocument is the body of a job's webhook: the job as GET
// /v1/jobs/{id} shows it, with links made absolute with baseURL, and
// without the webhook member (whose state the delivery itself changes).
func JobDocument(j jobs.Job, baseURL string) ([]byte, error) {
	j.Webhook = nil
	v := newJobView(j)
	base := strings.TrimRight(baseURL, "/")
	v.Links.Self = base + v.Links.Self
	v.Links.Result = base + v.Links.Result
	return json.Marshal(v)
}
