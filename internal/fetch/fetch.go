// Package fetch is the only way outprint reaches out over HTTP on behalf of
// a document: images on allowed hosts, Outline's API and its attachments. A
// document is hostile input, and a URL in it must never make outprint talk
// to its own network (the cloud metadata endpoint, a database, an admin
// port), so every connection is checked when it is dialed:
//
//   - The address actually dialed must be a public unicast address (see
//     Forbidden). The host is resolved here and the checked address is the one
//     connected to, so DNS rebinding between a check and the dial is not
//     possible. Every redirect dials anew and is checked anew.
//   - The one exception is Outline's own host and port, which may well live
//     on a private network next to outprint: a request made for Outline
//     (Request.Outline: its API and attachments.redirect, with the redirects
//     that follow) may connect to whatever that name resolves to. Any other
//     request to Outline's host, such as an image URL a document names, is
//     an ordinary remote image: its host must be in Config.AllowHosts and
//     its address public. Such requests use a connection pool of their own,
//     so a connection dialed for Outline is never reused for them.
//   - The URL and every redirect target must be http or https and on an
//     allowed host (Config.AllowHosts, or Outline's host for a request made
//     for Outline), redirects are bounded, and the body is read through a
//     cap and never buffered beyond it.
//   - Credentials (Cookie, Authorization) never go to another host than the
//     one they were set for, even where Go's own rule would forward them to a
//     subdomain.
//
// Webhook callbacks use a Client of their own (Config.AnyHTTPS,
// TrustAllowHosts, no redirects): https to any public address, and http or
// private addresses only for webhooks.allowHosts.
//
// A Client is safe for concurrent use.
package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// Errors of a fetch. They come wrapped with the URL or address concerned;
// test them with errors.Is.
var (
	// ErrForbiddenAddress: the host resolved to a loopback, private,
	// link-local, metadata or otherwise internal address. Nothing was sent.
	ErrForbiddenAddress = errors.New("address not allowed")
	// ErrHostNotAllowed: the URL (or a redirect target) is not http(s) or its
	// host is not in the allowed hosts. Nothing was sent to it.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrTooManyRedirects: the redirect chain is longer than MaxRedirects.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrTooLarge: the body is larger than the cap; reading stopped there.
	ErrTooLarge = errors.New("response too large")
	// ErrTimeout: the whole exchange took longer than the timeout.
	ErrTimeout = errors.New("timed out")
)

// StatusError is a response outside 2xx answered to Get.
type StatusError struct {
	URL        string
	StatusCode int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: status %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
}

// Defaults of Config.
const (
	DefaultTimeout      = 15 * time.Second
	DefaultMaxRedirects = 3
	// DefaultMaxBytes is limits.MaxImageBytes: one image as fetched.
	DefaultMaxBytes = limits.MaxImageBytes
)

// Config sets up a Client. Every field is optional.
type Config struct {
	// AllowHosts are the hosts external images may come from
	// (images.allowHosts). An entry "example.com" matches that host on any
	// port, "example.com:8443" only that port, and "*.example.com" any
	// subdomain (not example.com itself). Matching ignores case and a
	// trailing dot. Outline's host is always allowed.
	AllowHosts []string
	// Outline is Outline's URL (outline.url). Its host is allowed, and a
	// connection to its host:port may reach a private or loopback address.
	Outline *url.URL
	// Timeout bounds one exchange from dial to the last body byte, redirects
	// included (default 15 s).
	Timeout time.Duration
	// MaxBytes caps a body (default limits.MaxImageBytes).
	MaxBytes int64
	// MaxRedirects bounds the redirects followed (default 3; negative means
	// none are followed).
	MaxRedirects int
	// Resolve looks up the addresses of a host name; default
	// net.DefaultResolver.LookupNetIP. Tests use it to give names addresses.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to "ip:port" once the address has passed the checks;
	// default a net.Dialer that checks the socket address once more. Tests
	// use it to prove that a refused address is never dialed.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)

	// AnyHTTPS lets an https URL on any host through, not only on the
	// allowed hosts; http still needs an allowed host. The dial guard
	// refuses internal addresses all the same. For webhook callbacks,
	// which go wherever a client asks.
	AnyHTTPS bool
	// TrustAllowHosts lets connections to the allowed hosts reach private
	// and loopback addresses, as Outline's host may
	// (webhooks.allowHosts).
	TrustAllowHosts bool
	// Setting names AllowHosts in messages (default "images.allowHosts").
	Setting string
}

// Client fetches URLs under the rules of the package comment.
type Client struct {
	allow        []string
	outline      string // canonical host:port of Outline, "" when none
	outlineHost  string // lower-case host name of Outline
	timeout      time.Duration
	maxBytes     int64
	maxRedirects int
	resolve      func(ctx context.Context, host string) ([]netip.Addr, error)
	dial         func(ctx context.Context, network, address string) (net.Conn, error)
	dialTrusted  func(ctx context.Context, network, address string) (net.Conn, error)
	http         *http.Client // requests on behalf of a document: never trusted
	httpOutline  *http.Client // requests for Outline (Request.Outline)
	anyHTTPS     bool
	trustAllow   bool
	setting      string
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	c := &Client{
		timeout:      cfg.Timeout,
		maxBytes:     cfg.MaxBytes,
		maxRedirects: cfg.MaxRedirects,
		resolve:      cfg.Resolve,
		dial:         cfg.Dial,
		dialTrusted:  cfg.Dial,
		anyHTTPS:     cfg.AnyHTTPS,
		trustAllow:   cfg.TrustAllowHosts,
		setting:      cfg.Setting,
	}
	if c.setting == "" {
		c.setting = "images.allowHosts"
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxBytes
	}
	if c.maxRedirects == 0 {
		c.maxRedirects = DefaultMaxRedirects
	} else if c.maxRedirects < 0 {
		c.maxRedirects = 0
	}
	if c.resolve == nil {
		c.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if c.dial == nil {
		public := &net.Dialer{Timeout: c.timeout, Control: controlPublic}
		trusted := &net.Dialer{Timeout: c.timeout}
		c.dial, c.dialTrusted = public.DialContext, trusted.DialContext
	}
	for _, h := range cfg.AllowHosts {
		if h = normHost(h); h != "" {
			c.allow = append(c.allow, h)
		}
	}
	if cfg.Outline != nil && cfg.Outline.Host != "" {
		c.outline = hostPort(cfg.Outline)
		c.outlineHost = normHost(cfg.Outline.Hostname())
	}
	newClient := func(trustOutline bool) *http.Client {
		return &http.Client{
			Transport: &http.Transport{
				// Never a proxy from the environment: the guard would then
				// check the proxy's address instead of the target's.
				Proxy: nil,
				// Timeouts come from the request context (Do), which covers
				// dial, TLS, headers and body together.
				DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
					return c.guardedDial(ctx, network, address, trustOutline)
				},
				ForceAttemptHTTP2:      true,
				MaxResponseHeaderBytes: 64 << 10,
				IdleConnTimeout:        30 * time.Second,
				MaxIdleConnsPerHost:    4,
			},
			// CheckRedirect is replaced per request (see Do): the policy
			// and the original host differ between requests.
		}
	}
	c.http, c.httpOutline = newClient(false), newClient(true)
	return c
}

// CloseIdleConnections closes the kept-alive connections, for shutdown.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	c.httpOutline.CloseIdleConnections()
}

// Redirects says which redirect targets a request may follow.
type Redirects int

const (
	// FollowAllowed follows redirects to allowed hosts only (the default).
	FollowAllowed Redirects = iota
	// FollowAny follows redirects to any http(s) host; the dial guard still
	// refuses internal addresses. For Outline's attachment redirects: Outline
	// names its own storage, so the storage host need not be allowed.
	FollowAny
	// FollowNone returns a redirect as the response. For API calls, which
	// never redirect when Outline is configured right.
	FollowNone
)

// Request is one exchange for Do.
type Request struct {
	Method    string      // default GET
	URL       string      // absolute http(s) URL
	Header    http.Header // sent as is; Cookie and Authorization only to URL's own host
	Body      []byte      // nil for none
	Redirects Redirects
	// MaxBytes overrides Config.MaxBytes for this request when positive.
	MaxBytes int64
	// Timeout overrides Config.Timeout for this request when positive.
	Timeout time.Duration
	// KeepTruncated returns a body over the cap cut to cap+1 bytes instead
	// of failing with ErrTooLarge, for callers that tell "too large" by
	// length (the Source contract of package images). At most cap+1 bytes
	// are read either way.
	KeepTruncated bool
	// Outline marks a request made for Outline (package outline: its API
	// and attachments.redirect): Outline's host is then allowed, and
	// Outline's host:port may be reached at a private address, for this
	// request and its redirects. Never set it for a URL a document names.
	Outline bool
}

// Response is the answer to Do. Body holds at most the cap.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	URL        *url.URL // the URL that answered, after redirects
}

// Get fetches rawURL with GET and returns the body of a 2xx answer; any
// other status is a *StatusError. Redirects must stay on allowed hosts. A
// body over the cap ends in ErrTooLarge after reading at most cap+1 bytes.
func (c *Client) Get(ctx context.Context, rawURL string, header http.Header) ([]byte, error) {
	resp, err := c.Do(ctx, Request{URL: rawURL, Header: header})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &StatusError{URL: redact(resp.URL), StatusCode: resp.StatusCode}
	}
	return resp.Body, nil
}

// Do performs one exchange under the package's rules and returns the answer
// whatever its status. Errors are ErrHostNotAllowed, ErrForbiddenAddress,
// ErrTooManyRedirects, ErrTooLarge, ErrTimeout (all wrapped) or a wrapped
// network error.
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse URL: %v", ErrHostNotAllowed, err)
	}
	if err := c.allowed(u, r.Outline); err != nil {
		return nil, err
	}
	timeout, maxBytes := c.timeout, c.maxBytes
	if r.Timeout > 0 {
		timeout = r.Timeout
	}
	if r.MaxBytes > 0 {
		maxBytes = r.MaxBytes
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %s", ErrTimeout, timeout))
	defer cancel()
	req, err := newRequest(ctx, u, r)
	if err != nil {
		return nil, err
	}
	what := req.Method + " " + redact(u) // for errors

	// A shallow copy of the shared client carries this request's redirect
	// policy; the Transport (and its connection pool) stays shared.
	hc := *c.http
	if r.Outline {
		hc = *c.httpOutline
	}
	hc.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		return c.checkRedirect(r.Redirects, r.Outline, next, via)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.explain(ctx, fmt.Errorf("%s: %w", what, err))
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := c.readBody(ctx, resp, maxBytes, r.KeepTruncated)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: data, URL: resp.Request.URL}, nil
}

// newRequest is the HTTP request of r to u (GET by default), with a
// User-Agent when r sets none.
func newRequest(ctx context.Context, u *url.URL, r Request) (*http.Request, error) {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, redact(u), err)
	}
	for k, v := range r.Header {
		req.Header[k] = append([]string(nil), v...)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "outprint")
	}
	return req, nil
}

// readBody reads the body of resp, at most maxBytes of it: a larger body
// is ErrTooLarge, or cut to maxBytes+1 bytes when keepTruncated is set.
func (c *Client) readBody(ctx context.Context, resp *http.Response, maxBytes int64, keepTruncated bool) ([]byte, error) {
	if resp.ContentLength > maxBytes && !keepTruncated {
		return nil, fmt.Errorf("%w: %d bytes announced, at most %d", ErrTooLarge, resp.ContentLength, maxBytes)
	}
	// Read at most one byte more than allowed: enough to know the body is
	// too large, never more.
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, c.explain(ctx, fmt.Errorf("read body: %w", err))
	}
	if int64(len(data)) > maxBytes && !keepTruncated {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	return data, nil
}

// explain adds ErrTimeout to an error caused by our own deadline, so that a
// caller can tell "too slow" from "unreachable" without inspecting net
// errors.
func (c *Client) explain(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrTimeout) && !errors.Is(err, ErrTimeout) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// checkRedirect applies the redirect policy of one request. It runs before
// Go sends the redirected request, so changes to next.Header take effect.
func (c *Client) checkRedirect(p Redirects, forOutline bool, next *http.Request, via []*http.Request) error {
	if p == FollowNone {
		return http.ErrUseLastResponse
	}
	if len(via) > c.maxRedirects {
		return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, c.maxRedirects)
	}
	if p == FollowAny {
		if err := httpScheme(next.URL); err != nil {
			return err
		}
	} else if err := c.allowed(next.URL, forOutline); err != nil {
		return err
	}
	// Credentials belong to the host they were set for. Go drops them when
	// the domain changes but keeps them for subdomains and other ports; we
	// drop them on any change of host or port, and on a downgrade to http.
	first := via[0].URL
	if hostPort(next.URL) != hostPort(first) || (first.Scheme == "https" && next.URL.Scheme != "https") {
		next.Header.Del("Cookie")
		next.Header.Del("Authorization")
	}
	// The Referer would tell storage which Outline URL redirected.
	next.Header.Del("Referer")
	return nil
}

// allowed checks a URL's scheme and host against the allowed hosts;
// Outline's host is one of them only for a request made for Outline.
func (c *Client) allowed(u *url.URL, forOutline bool) error {
	if err := httpScheme(u); err != nil {
		return err
	}
	host := normHost(u.Hostname())
	if forOutline && c.outline != "" && host == c.outlineHost {
		return nil
	}
	if matchAllow(c.allow, host, normHost(hostPort(u))) || (c.anyHTTPS && u.Scheme == "https") {
		return nil
	}
	if c.anyHTTPS {
		return fmt.Errorf("%w: http only to hosts in %s, and %s is not; use https", ErrHostNotAllowed, c.setting, u.Host)
	}
	return fmt.Errorf("%w: %s is not in %s", ErrHostNotAllowed, u.Host, c.setting)
}

// HostAllowed reports whether u's host matches one of the patterns of an
// allowHosts setting ("example.com" on any port, "example.com:8443",
// "*.example.com", IP addresses), as a Client matches them.
func HostAllowed(patterns []string, u *url.URL) bool {
	allow := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if p = normHost(p); p != "" {
			allow = append(allow, p)
		}
	}
	return matchAllow(allow, normHost(u.Hostname()), normHost(hostPort(u)))
}

// matchAllow matches a normalized host and host:port against normalized
// patterns.
func matchAllow(allow []string, host, hp string) bool {
	for _, a := range allow {
		if strings.HasPrefix(a, "*.") {
			if strings.HasSuffix(host, a[1:]) {
				return true
			}
		} else if _, _, err := net.SplitHostPort(a); err == nil {
			if hp == a {
				return true
			}
		} else if host == strings.Trim(a, "[]") {
			return true
		}
	}
	return false
}

func httpScheme(u *url.URL) error {
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: only http and https URLs with a host can be fetched, not %q", ErrHostNotAllowed, redact(u))
	}
	if u.User != nil {
		return fmt.Errorf("%w: URLs with user information are not fetched", ErrHostNotAllowed)
	}
	return nil
}

// guardedDial is the Transports' only way to connect. address is the
// request's host:port (never a proxy's: the Transport has none).
// trustOutline is set on the Transport of requests made for Outline only.
func (c *Client) guardedDial(ctx context.Context, network, address string, trustOutline bool) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	trusted := trustOutline && c.outline != "" && normHost(address) == c.outline
	if c.trustAllow && !trusted {
		trusted = matchAllow(c.allow, normHost(host), normHost(address))
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = c.resolve(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	if !trusted {
		// One internal address is enough to refuse the name: a host that
		// resolves both inside and outside is not one we want to guess about.
		for _, ip := range ips {
			if bad, why := Forbidden(ip); bad {
				return nil, fmt.Errorf("%w: %s resolves to %s (%s)", ErrForbiddenAddress, host, ip, why)
			}
		}
	}
	var errs []error
	for _, ip := range ips {
		target := net.JoinHostPort(ip.Unmap().String(), port)
		dial := c.dial
		if trusted {
			dial = c.dialTrusted
		}
		conn, err := dial(ctx, network, target)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// controlPublic checks the socket address itself right before connect, as
// a second line behind guardedDial's check: whatever the dialer resolved or
// was given, a connection to an internal address does not leave the machine.
// Connections made for Outline to Outline's host:port go through a dialer
// without this check.
func controlPublic(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q", ErrForbiddenAddress, address)
	}
	if bad, why := Forbidden(ap.Addr()); bad {
		return fmt.Errorf("%w: %s (%s)", ErrForbiddenAddress, ap.Addr(), why)
	}
	return nil
}

// hostPort is u's host:port with the scheme's default port filled in, the
// form the Transport hands to DialContext.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		if u.Scheme == "https" {
			port = "443"
		} else {
			port = "80"
		}
	}
	return normHost(net.JoinHostPort(u.Hostname(), port))
}

func normHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if host, port, err := net.SplitHostPort(h); err == nil {
		return net.JoinHostPort(strings.TrimSuffix(host, "."), port)
	}
	return strings.TrimSuffix(h, ".")
}

// redact drops the query of a URL for messages and logs: signed storage URLs
// carry their signature there.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	if v.RawQuery != "" {
		v.RawQuery = "…"
	}
	v.User = nil
	v.Fragment = ""
	return v.String()
}
