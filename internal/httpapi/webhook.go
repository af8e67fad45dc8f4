package httpapi

import (
	"net"
	"net/http"
	"strings"

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

// baseURL is what job links are made absolute with: PublicURL, or else
// the address of the listener the request came in on (issue 24: it was
// the request's Host header, the client's own word, which put a link of
// the client's choosing into a signed webhook body).
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return scheme + "://" + a.String()
	}
	return scheme + "://localhost"
}
