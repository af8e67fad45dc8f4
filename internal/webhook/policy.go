package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/outprint/outprint/internal/fetch"
)

// ErrRefused wraps every reason Policy.Check refuses a callback URL.
var ErrRefused = errors.New("callback URL refused")

// MaxURL bounds a callback URL.
const MaxURL = 2048

// MaxSecrets is how many secrets may be active for one tenant: the old and
// the new one while a secret rotates.
const MaxSecrets = 2

// Key is what one API key says about webhooks.
type Key struct {
	User, Tenant string
	// CallbackURL is the key's default callback (auth.apiKeys[].callbackUrl).
	CallbackURL string
	// Secrets are the key's webhook secrets, "whsec_…"
	// (auth.apiKeys[].webhookSecrets).
	Secrets []string
}

// PolicyConfig sets up a Policy.
type PolicyConfig struct {
	// AllowHosts is webhooks.allowHosts: hosts that may also be reached
	// over http and at private or loopback addresses.
	AllowHosts []string
	// Keys are the API keys with their webhook settings.
	Keys []Key
}

// Policy says which callbacks a job may name, the key defaults, and each
// tenant's signing keys. It is read-only after NewPolicy and safe for
// concurrent use.
type Policy struct {
	allow    []string
	defaults map[[2]string]string // (tenant, user) → URL
	secrets  map[string][][]byte  // tenant → keys
}

// NewPolicy checks cfg and returns its Policy. Errors name the setting:
// a malformed secret, more than MaxSecrets, keys of one tenant with
// different secrets (a secret belongs to the tenant), a default callback
// that Check refuses or whose tenant has no secret.
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	p := &Policy{allow: cfg.AllowHosts, defaults: map[[2]string]string{}, secrets: map[string][][]byte{}}
	var errs []error
	raw := map[string][]string{}
	for i, k := range cfg.Keys {
		label := fmt.Sprintf("auth.apiKeys[%d]", i)
		if len(k.Secrets) > MaxSecrets {
			errs = append(errs, fmt.Errorf("%s.webhookSecrets has %d secrets; at most %d are active at once", label, len(k.Secrets), MaxSecrets))
			continue
		}
		var keys [][]byte
		for j, s := range k.Secrets {
			key, err := ParseSecret(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.webhookSecrets[%d]: %w", label, j, err))
				continue
			}
			keys = append(keys, key)
		}
		if len(k.Secrets) > 0 {
			if prev, ok := raw[k.Tenant]; ok && strings.Join(prev, " ") != strings.Join(k.Secrets, " ") {
				errs = append(errs, fmt.Errorf("%s.webhookSecrets differ from another key of tenant %q: webhook secrets belong to the tenant, so every key of it that lists them lists the same", label, k.Tenant))
				continue
			}
			raw[k.Tenant] = k.Secrets
			p.secrets[k.Tenant] = keys
		}
	}
	for i, k := range cfg.Keys {
		if k.CallbackURL == "" {
			continue
		}
		label := fmt.Sprintf("auth.apiKeys[%d].callbackUrl", i)
		if err := p.Check(k.CallbackURL); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
			continue
		}
		if len(raw[k.Tenant]) == 0 {
			errs = append(errs, fmt.Errorf("%s is set but tenant %q has no webhookSecrets to sign with", label, k.Tenant))
			continue
		}
		who := [2]string{k.Tenant, k.User}
		if _, dup := p.defaults[who]; !dup {
			p.defaults[who] = k.CallbackURL
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Check refuses, at acceptance, a callback URL that can never be
// delivered to: not an absolute http(s) URL, user information or a
// fragment, http to a host not in allowHosts, or — for hosts not in
// allowHosts — a literal internal address or a localhost name. A name
// that resolves to an internal address is refused when dialed. Errors
// wrap ErrRefused and read well after "callbackUrl: ".
func (p *Policy) Check(raw string) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
	}
	if len(raw) > MaxURL {
		return refuse("longer than %d bytes", MaxURL)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return refuse("must be an absolute https URL such as https://example.com/hooks/outprint")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return refuse("must use https, not %q", u.Scheme)
	}
	if u.User != nil {
		return refuse("must not carry user information; authenticate the webhook by its signature")
	}
	if u.Fragment != "" {
		return refuse("must not have a fragment")
	}
	if fetch.HostAllowed(p.allow, u) {
		return nil
	}
	if u.Scheme == "http" {
		return refuse("must use https (http only for hosts in webhooks.allowHosts)")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		if bad, why := fetch.Forbidden(ip); bad {
			return refuse("%s is a %s address, which outprint does not connect to", host, why)
		}
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return refuse("%s names this machine (loopback), which outprint does not connect to", host)
	}
	if !validHostname(host) {
		return refuse("%q is not a valid host name", u.Hostname())
	}
	return nil
}

// Default returns the default callback of tenant's user, "" when none.
func (p *Policy) Default(tenant, user string) string { return p.defaults[[2]string{tenant, user}] }

// CanSign reports whether tenant has a secret to sign with.
func (p *Policy) CanSign(tenant string) bool { return len(p.secrets[tenant]) > 0 }

// Secrets returns tenant's signing keys.
func (p *Policy) Secrets(tenant string) [][]byte { return p.secrets[tenant] }

// validHostname accepts letters, digits and hyphens in dot-separated
// labels of 1 to 63 bytes.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
