package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
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
	u, msg := callbackURL(raw)
	if msg == "" && !fetch.HostAllowed(p.allow, u) {
		msg = outsideProblem(u)
	}
	if msg != "" {
		return fmt.Errorf("%w: %s", ErrRefused, msg)
	}
	return nil
}

// callbackURL parses raw and checks the rules every callback URL
// follows, whatever its host: it returns the URL or the message of the
// rule it breaks.
func callbackURL(raw string) (*url.URL, string) {
	if len(raw) > MaxURL {
		return nil, fmt.Sprintf("longer than %d bytes", MaxURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, "must be an absolute https URL such as https://example.com/hooks/outprint"
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Sprintf("must use https, not %q", u.Scheme)
	case u.User != nil:
		return nil, "must not carry user information; authenticate the webhook by its signature"
	case u.Fragment != "":
		return nil, "must not have a fragment"
	}
	return u, ""
}

// outsideProblem checks the callback URL u to a host not in allowHosts:
// https only, and no host that is plainly internal (a literal internal
// address in any form, a localhost name). It returns the message of the
// rule u breaks, or "".
func outsideProblem(u *url.URL) string {
	if u.Scheme == "http" {
		return "must use https (http only for hosts in webhooks.allowHosts)"
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		if bad, why := fetch.Forbidden(ip); bad {
			return fmt.Sprintf("%s is a %s address, which outprint does not connect to", host, why)
		}
		return ""
	}
	if endsInNumber(host) {
		return numericHostProblem(host, u.Hostname())
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Sprintf("%s names this machine (loopback), which outprint does not connect to", host)
	}
	if !validHostname(host) {
		return fmt.Sprintf("%q is not a valid host name", u.Hostname())
	}
	return ""
}

// numericHostProblem is the message for a host whose last label is a
// number. It is not a name: an IPv4 address in a form other than dotted
// decimal (0x7f000001, 2130706433, 127.1, 0177.0.0.1), which getaddrinfo
// and browsers read as an address and DNS never answers. Refused at once
// rather than retried for a day.
func numericHostProblem(host, hostname string) string {
	ip, ok := legacyIPv4(host)
	if !ok {
		return fmt.Sprintf("%q is not a valid host name (it ends in a number but is no IPv4 address)", hostname)
	}
	if bad, why := fetch.Forbidden(ip); bad {
		return fmt.Sprintf("%s is %s, a %s address, which outprint does not connect to", host, ip, why)
	}
	return fmt.Sprintf("%s is the address %s in a form that clients read differently; write it as %s", host, ip, ip)
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

// endsInNumber reports whether host's last label is a number (decimal, or
// hexadecimal with 0x), which makes the host an IPv4 address to URL
// parsers (WHATWG URL, "ends in a number") and to getaddrinfo, not a name.
func endsInNumber(host string) bool {
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if last == "" && len(labels) > 1 {
		last = labels[len(labels)-2]
	}
	if last == "" {
		return false
	}
	if isDigits(last) {
		return true
	}
	h, ok := strings.CutPrefix(last, "0x")
	if !ok {
		h, ok = strings.CutPrefix(last, "0X")
	}
	return ok && strings.Trim(h, "0123456789abcdefABCDEF") == ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// legacyIPv4 reads host as inet_aton(3) and the WHATWG URL parser do: one
// to four parts, each decimal, octal (a leading 0) or hexadecimal (0x),
// the last filling the bytes the others leave.
func legacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			p, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		if p == "" && base == 16 {
			p = "0"
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(nums) - 1
	for _, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	if nums[last] >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := nums[last]
	for i, n := range nums[:last] {
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
