package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is an httptest server on 127.0.0.1 that records every request it
// sees, so a test can prove that a refused URL never reached it.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	hits []*http.Request
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.Clone(context.Background()))
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) Hits() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.hits...)
}

func (s *server) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// fakeNet gives host names addresses (Resolve) and carries connections to
// "public" test addresses to 127.0.0.1 (Dial), recording every dial. With it
// a test server can stand for a public host, and a test can prove that a
// forbidden address was never dialed.
type fakeNet struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	dials []string
}

func newFakeNet(names map[string]string) *fakeNet {
	n := &fakeNet{names: map[string][]netip.Addr{}}
	for name, ips := range names {
		for _, ip := range strings.Split(ips, ",") {
			n.names[name] = append(n.names[name], netip.MustParseAddr(ip))
		}
	}
	return n
}

func (n *fakeNet) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	ips, ok := n.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return ips, nil
}

func (n *fakeNet) dial(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	n.dials = append(n.dials, address)
	n.mu.Unlock()
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
}

func (n *fakeNet) Dials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.dials...)
}

func (n *fakeNet) config(cfg Config) Config {
	cfg.Resolve, cfg.Dial = n.resolve, n.dial
	return cfg
}

func ok(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) }
}

func TestForbidden(t *testing.T) {
	tests := []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"172.32.0.1", false},
		{"192.168.1.1", true},
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"100.128.0.1", false},
		{"169.254.169.254", true},
		{"169.254.1.1", true},
		{"0.0.0.0", true},
		{"224.0.0.1", true},
		{"255.255.255.255", true},
		{"8.8.8.8", false},
		{"203.0.113.10", false},
		{"::1", true},
		{"::", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:8.8.8.8", false},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fd00:ec2::254", true},
		{"ff02::1", true},
		{"64:ff9b::a00:1", true},    // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
		{"2002:7f00:1::1", true},    // 6to4 of 127.0.0.1
		{"2002:808:808::1", false},  // 6to4 of 8.8.8.8
		{"2001:4860:4860::8888", false},
		{"2606:4700::1111", false},
	}
	for _, tt := range tests {
		got, why := Forbidden(netip.MustParseAddr(tt.ip))
		if got != tt.want {
			t.Errorf("Forbidden(%s) = %v (%s), want %v", tt.ip, got, why, tt.want)
		}
	}
	if _, why := Forbidden(netip.MustParseAddr("169.254.169.254")); why != "cloud metadata" {
		t.Errorf("Forbidden(169.254.169.254) reason = %q, want %q", why, "cloud metadata")
	}
}

func TestControlPublic(t *testing.T) {
	tests := []struct {
		addr    string
		wantErr bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:443", true},
		{"10.0.0.1:5432", true},
		{"169.254.169.254:80", true},
		{"8.8.8.8:443", false},
		{"[2001:4860:4860::8888]:443", false},
		{"not-an-address", true},
	}
	for _, tt := range tests {
		err := controlPublic("tcp", tt.addr, nil)
		if (err != nil) != tt.wantErr {
			t.Errorf("controlPublic(%s) = %v, want error %v", tt.addr, err, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("controlPublic(%s) = %v, want ErrForbiddenAddress", tt.addr, err)
		}
	}
}

func TestAllowedHosts(t *testing.T) {
	c := New(Config{
		AllowHosts: []string{"Images.Example.com", "cdn.example.org:8443", "*.static.example.net", "[2001:db8::1]"},
		Outline:    mustURL(t, "https://wiki.example.com"),
	})
	tests := []struct {
		url  string
		want bool
	}{
		{"https://images.example.com/a.png", true},
		{"https://IMAGES.example.com./a.png", true},
		{"http://images.example.com:8080/a.png", true},
		{"https://cdn.example.org:8443/a.png", true},
		{"https://cdn.example.org/a.png", false},
		{"https://a.static.example.net/x.png", true},
		{"https://static.example.net/x.png", false},
		{"https://evilstatic.example.net/x.png", false},
		{"https://[2001:db8::1]/x.png", true},
		// Outline's host is allowed for requests made for Outline only
		// (below); a URL a document names there is an ordinary image.
		{"https://wiki.example.com/api/attachments.redirect?id=1", false},
		{"https://example.com/a.png", false},
		{"https://images.example.com.evil.test/a.png", false},
		{"ftp://images.example.com/a.png", false},
		{"file:///etc/passwd", false},
		{"data:image/png;base64,AAAA", false},
		{"//images.example.com/a.png", false},
		{"/relative.png", false},
		{"https://user:pw@images.example.com/a.png", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		err = c.allowed(u, false)
		if (err == nil) != tt.want {
			t.Errorf("allowed(%s) = %v, want allowed %v", tt.url, err, tt.want)
		}
		if err != nil && !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("allowed(%s) = %v, want ErrHostNotAllowed", tt.url, err)
		}
	}
}

// TestAllowedOutline: Outline's host is allowed for a request made for
// Outline, on any path, and for nobody else.
func TestAllowedOutline(t *testing.T) {
	c := New(Config{Outline: mustURL(t, "https://wiki.example.com")})
	for _, tt := range []struct {
		url        string
		forOutline bool
		want       bool
	}{
		{"https://wiki.example.com/api/documents.info", true, true},
		{"https://wiki.example.com/api/attachments.redirect?id=1", true, true},
		{"https://wiki.example.com/api/attachments.redirect?id=1", false, false},
		{"https://wiki.example.com/secret.png", false, false},
		{"https://other.example.com/api/documents.info", true, false},
	} {
		err := c.allowed(mustURL(t, tt.url), tt.forOutline)
		if (err == nil) != tt.want {
			t.Errorf("allowed(%s, forOutline %v) = %v, want allowed %v", tt.url, tt.forOutline, err, tt.want)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestGetAllowedHost(t *testing.T) {
	img := newServer(t, ok("PNGDATA"))
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	c := New(n.config(Config{AllowHosts: []string{"images.test"}}))
	got, err := c.Get(context.Background(), "http://images.test:"+img.port()+"/a.png", nil)
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if string(got) != "PNGDATA" {
		t.Errorf("Get = %q, want %q", got, "PNGDATA")
	}
	if d := n.Dials(); len(d) != 1 || d[0] != "203.0.113.10:"+img.port() {
		t.Errorf("dials = %v, want the resolved address 203.0.113.10", d)
	}
}

// TestLoopbackRefused proves that a server on loopback that is not Outline
// is never reached, even when its host is on the allow list, with the real
// dialer (no hooks) as production runs it.
func TestLoopbackRefused(t *testing.T) {
	internal := newServer(t, ok("secret"))
	outline := newServer(t, ok("outline"))
	c := New(Config{
		AllowHosts: []string{"127.0.0.1", "localhost", "[::1]"},
		Outline:    mustURL(t, outline.URL),
	})
	for _, u := range []string{
		internal.URL + "/admin",
		"http://localhost:" + internal.port() + "/admin",
		"http://[::ffff:127.0.0.1]:" + internal.port() + "/admin",
	} {
		_, err := c.Get(context.Background(), u, nil)
		if !errors.Is(err, ErrForbiddenAddress) && !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("Get(%s) = %v, want ErrForbiddenAddress", u, err)
		}
	}
	if h := internal.Hits(); len(h) != 0 {
		t.Errorf("internal server saw %d requests, want none", len(h))
	}
	// Outline's own host:port on loopback is reachable for a request made
	// for Outline: the exception is exactly Outline's host and port, and
	// only for package outline's calls.
	resp, err := c.Do(context.Background(), Request{URL: outline.URL + "/x", Outline: true})
	if err != nil || string(resp.Body) != "outline" {
		t.Errorf("Do(outline, Outline) = %v; want %q", err, "outline")
	}
	// The same URL as an image a document names is refused, even on the
	// allow list, and even though a kept-alive connection to Outline now
	// exists (issue 10: Outline's host bypassed the guard).
	_, err = c.Get(context.Background(), outline.URL+"/secret", nil)
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("Get(outline /secret) = %v, want ErrForbiddenAddress", err)
	}
	for _, h := range outline.Hits() {
		if h.URL.Path == "/secret" {
			t.Errorf("Outline saw %s from a request not made for Outline", h.URL)
		}
	}
}

// TestMetadataNeverDialed proves with a recording dialer that internal
// addresses are refused before any connection is attempted, whether the URL
// names the address or a host name resolves to it.
func TestMetadataNeverDialed(t *testing.T) {
	n := newFakeNet(map[string]string{
		"metadata.test":  "169.254.169.254",
		"imds6.test":     "fd00:ec2::254",
		"intranet.test":  "10.0.0.5",
		"mixed.test":     "203.0.113.10,192.168.0.1",
		"mapped.test":    "::ffff:169.254.169.254",
		"cgnat.test":     "100.64.1.1",
		"localhost.test": "127.0.0.1",
	})
	c := New(n.config(Config{AllowHosts: []string{"169.254.169.254", "[fd00:ec2::254]", "*.test"}}))
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://metadata.test/latest/meta-data/",
		"http://imds6.test/",
		"http://intranet.test/",
		"http://mixed.test/",
		"http://mapped.test/",
		"http://cgnat.test/",
		"http://localhost.test/",
	} {
		_, err := c.Get(context.Background(), u, nil)
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("Get(%s) = %v, want ErrForbiddenAddress", u, err)
		}
	}
	if d := n.Dials(); len(d) != 0 {
		t.Errorf("dials = %v, want none", d)
	}
}

func TestHostNotAllowedNeverDialed(t *testing.T) {
	n := newFakeNet(map[string]string{"other.test": "203.0.113.11"})
	c := New(n.config(Config{AllowHosts: []string{"images.test"}}))
	for _, u := range []string{
		"http://other.test/a.png",
		"file:///etc/passwd",
		"gopher://images.test/",
		"data:image/png;base64,AAAA",
		"/api/attachments.redirect?id=x",
		"http://user:secret@images.test/a.png",
		"http://%zz/",
	} {
		_, err := c.Get(context.Background(), u, nil)
		if !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("Get(%s) = %v, want ErrHostNotAllowed", u, err)
		}
	}
	if d := n.Dials(); len(d) != 0 {
		t.Errorf("dials = %v, want none", d)
	}
}

// TestOutlineOnPrivateAddress: Outline may live on a private address next to
// outprint; its host:port is reachable whatever it resolves to, and only it.
func TestOutlineOnPrivateAddress(t *testing.T) {
	outline := newServer(t, ok("outline"))
	n := newFakeNet(map[string]string{"outline.internal": "10.0.0.7"})
	c := New(n.config(Config{Outline: mustURL(t, "http://outline.internal:"+outline.port())}))
	resp, err := c.Do(context.Background(), Request{URL: "http://outline.internal:" + outline.port() + "/api", Outline: true})
	if err != nil || string(resp.Body) != "outline" {
		t.Fatalf("Do(outline) = %v; want %q", err, "outline")
	}
	// Another port on the same name is not Outline.
	_, err = c.Do(context.Background(), Request{URL: "http://outline.internal:1/", Outline: true})
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("Get(other port) = %v, want ErrForbiddenAddress", err)
	}
	if d := n.Dials(); len(d) != 1 {
		t.Errorf("dials = %v, want exactly the one to Outline", d)
	}
}

func TestRedirectToInternalRefused(t *testing.T) {
	internal := newServer(t, ok("secret"))
	n := newFakeNet(map[string]string{
		"images.test":   "203.0.113.10",
		"intranet.test": "192.168.1.20",
		"metadata.test": "169.254.169.254",
	})
	targets := map[string]string{
		"/loopback": internal.URL + "/admin",
		"/private":  "http://intranet.test:" + internal.port() + "/admin",
		"/metadata": "http://metadata.test/latest/meta-data/",
		"/ip":       "http://169.254.169.254/latest/meta-data/",
	}
	public := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, targets[r.URL.Path], http.StatusFound)
	})
	c := New(n.config(Config{AllowHosts: []string{"images.test", "127.0.0.1", "intranet.test", "metadata.test", "169.254.169.254"}}))
	for _, policy := range []Redirects{FollowAllowed, FollowAny} {
		for path := range targets {
			_, err := c.Do(context.Background(), Request{URL: "http://images.test:" + public.port() + path, Redirects: policy})
			if !errors.Is(err, ErrForbiddenAddress) {
				t.Errorf("Do(%s, policy %d) = %v, want ErrForbiddenAddress", path, policy, err)
			}
		}
	}
	if h := internal.Hits(); len(h) != 0 {
		t.Errorf("internal server saw %d requests, want none", len(h))
	}
	for _, d := range n.Dials() {
		if !strings.HasPrefix(d, "203.0.113.10:") {
			t.Errorf("dialed %s, want only the public host", d)
		}
	}
}

func TestRedirectHostPolicy(t *testing.T) {
	other := newServer(t, ok("elsewhere"))
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10", "storage.test": "203.0.113.20"})
	public := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://storage.test:"+other.port()+"/obj", http.StatusFound)
	})
	c := New(n.config(Config{AllowHosts: []string{"images.test"}}))
	u := "http://images.test:" + public.port() + "/a"

	// Allowed hosts only: the storage host is not on the list.
	_, err := c.Get(context.Background(), u, nil)
	if !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("Get = %v, want ErrHostNotAllowed", err)
	}
	if h := other.Hits(); len(h) != 0 {
		t.Errorf("storage saw %d requests under FollowAllowed, want none", len(h))
	}
	// FollowAny follows it.
	resp, err := c.Do(context.Background(), Request{URL: u, Redirects: FollowAny})
	if err != nil || string(resp.Body) != "elsewhere" {
		t.Errorf("Do(FollowAny) = %v; want the storage body", err)
	}
	// FollowNone hands back the redirect.
	resp, err = c.Do(context.Background(), Request{URL: u, Redirects: FollowNone})
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Errorf("Do(FollowNone) = %v, %v; want status 302", resp, err)
	}
	// A redirect to a non-http scheme is refused under every policy.
	ftp := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	_, err = c.Do(context.Background(), Request{URL: "http://images.test:" + ftp.port() + "/", Redirects: FollowAny})
	if !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("Do(redirect to file:) = %v, want ErrHostNotAllowed", err)
	}
}

func TestTooManyRedirects(t *testing.T) {
	var s *server
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var i int
		_, _ = fmt.Sscanf(r.URL.Path, "/r/%d", &i)
		http.Redirect(w, r, fmt.Sprintf("/r/%d", i+1), http.StatusFound)
	})
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	for _, max := range []int{1, 3} {
		before := len(s.Hits())
		c := New(n.config(Config{AllowHosts: []string{"images.test"}, MaxRedirects: max}))
		_, err := c.Get(context.Background(), "http://images.test:"+s.port()+"/r/0", nil)
		if !errors.Is(err, ErrTooManyRedirects) {
			t.Errorf("MaxRedirects %d: Get = %v, want ErrTooManyRedirects", max, err)
		}
		if got := len(s.Hits()) - before; got != max+1 {
			t.Errorf("MaxRedirects %d: server saw %d requests, want %d", max, got, max+1)
		}
	}
	// Exactly max redirects are fine.
	c := New(n.config(Config{AllowHosts: []string{"images.test"}, MaxRedirects: 3}))
	end := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var i int
		_, _ = fmt.Sscanf(r.URL.Path, "/r/%d", &i)
		if i == 3 {
			_, _ = io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", i+1), http.StatusFound)
	})
	got, err := c.Get(context.Background(), "http://images.test:"+end.port()+"/r/0", nil)
	if err != nil || string(got) != "done" {
		t.Errorf("3 redirects with MaxRedirects 3: Get = %q, %v; want done", got, err)
	}
}

// countingConn counts the bytes the client read from the network.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestBodyCapStopsReading(t *testing.T) {
	const max = 64 << 10
	const huge = 64 << 20
	var written atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/announced" {
			w.Header().Set("Content-Length", fmt.Sprint(huge))
		}
		chunk := make([]byte, 32<<10)
		for written.Load() < huge {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	var read atomic.Int64
	cfg := n.config(Config{AllowHosts: []string{"images.test"}, MaxBytes: max})
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := n.dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &read}, nil
	}
	c := New(cfg)
	for _, path := range []string{"/streamed", "/announced"} {
		read.Store(0)
		got, err := c.Get(context.Background(), "http://images.test:"+s.port()+path, nil)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("Get(%s) = %d bytes, %v; want ErrTooLarge", path, len(got), err)
		}
		// The client read the cap plus what the transport buffers at once,
		// nowhere near the 64 MiB on offer.
		if r := read.Load(); r > max+256<<10 {
			t.Errorf("Get(%s) read %d bytes from the network, want at most about %d", path, r, max)
		}
	}
	// A body of exactly the cap is fine.
	exact := newServer(t, ok(strings.Repeat("x", max)))
	got, err := c.Get(context.Background(), "http://images.test:"+exact.port()+"/", nil)
	if err != nil || len(got) != max {
		t.Errorf("Get(exactly max) = %d bytes, %v; want %d bytes", len(got), err, max)
	}
}

func TestCredentialsStayOnTheirHost(t *testing.T) {
	other := newServer(t, ok("other"))
	var origin *server
	origin = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/final":
			_, _ = io.WriteString(w, "final")
		case "/subdomain":
			http.Redirect(w, r, "http://files.wiki.test:"+other.port()+"/obj", http.StatusFound)
		case "/cross":
			http.Redirect(w, r, "http://storage.test:"+other.port()+"/obj", http.StatusFound)
		case "/port":
			http.Redirect(w, r, "http://wiki.test:"+other.port()+"/obj", http.StatusFound)
		}
	})
	n := newFakeNet(map[string]string{
		"wiki.test":       "203.0.113.1",
		"files.wiki.test": "203.0.113.2",
		"storage.test":    "203.0.113.3",
	})
	c := New(n.config(Config{AllowHosts: []string{"wiki.test", "*.wiki.test", "storage.test"}}))
	header := http.Header{"Cookie": {"accessToken=SECRET"}, "Authorization": {"Bearer SECRET"}}
	base := "http://wiki.test:" + origin.port()

	// Same host and port: the credentials stay (else the test below could
	// not fail).
	if _, err := c.Get(context.Background(), base+"/same", header); err != nil {
		t.Fatal(err)
	}
	h := origin.Hits()
	if last := h[len(h)-1]; last.URL.Path != "/final" || last.Header.Get("Cookie") != "accessToken=SECRET" {
		t.Errorf("same-host redirect: Cookie = %q at %s, want it kept", last.Header.Get("Cookie"), last.URL.Path)
	}
	// Other host, a subdomain (which Go alone would trust), another port.
	for _, path := range []string{"/cross", "/subdomain", "/port"} {
		if _, err := c.Do(context.Background(), Request{URL: base + path, Header: header, Redirects: FollowAny}); err != nil {
			t.Fatalf("Get(%s) = %v", path, err)
		}
	}
	hits := other.Hits()
	if len(hits) != 3 {
		t.Fatalf("other host saw %d requests, want 3", len(hits))
	}
	for _, r := range hits {
		for _, k := range []string{"Cookie", "Authorization", "Referer"} {
			if v := r.Header.Get(k); v != "" {
				t.Errorf("redirect to %s carried %s: %q, want none", r.Host, k, v)
			}
		}
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-body" {
			_, _ = w.Write([]byte("first bytes"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	c := New(n.config(Config{AllowHosts: []string{"images.test"}, Timeout: 200 * time.Millisecond}))
	for _, path := range []string{"/slow-headers", "/slow-body"} {
		_, err := c.Get(context.Background(), "http://images.test:"+s.port()+path, nil)
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("Get(%s) = %v, want ErrTimeout", path, err)
		}
	}
	// The caller's own cancellation is not our timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Get(ctx, "http://images.test:"+s.port()+"/slow-headers", nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Errorf("Get(cancelled) = %v, want context.Canceled", err)
	}
}

func TestStatusError(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	c := New(n.config(Config{AllowHosts: []string{"images.test"}}))
	_, err := c.Get(context.Background(), "http://images.test:"+s.port()+"/missing.png?sig=SECRET", nil)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Fatalf("Get = %v, want *StatusError 404", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error %q shows the query, want it redacted", err)
	}
}

func TestUnreachable(t *testing.T) {
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	c := New(n.config(Config{AllowHosts: []string{"images.test", "nxdomain.test"}}))
	// Port 1 on 127.0.0.1: nothing listens.
	_, err := c.Get(context.Background(), "http://images.test:1/", nil)
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("Get(closed port) = %v, want a wrapped *net.OpError", err)
	}
	_, err = c.Get(context.Background(), "http://nxdomain.test/", nil)
	var dns *net.DNSError
	if !errors.As(err, &dns) {
		t.Errorf("Get(unknown name) = %v, want a wrapped *net.DNSError", err)
	}
}

func TestConcurrentGets(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	n := newFakeNet(map[string]string{"images.test": "203.0.113.10"})
	c := New(n.config(Config{AllowHosts: []string{"images.test"}}))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			path := fmt.Sprintf("/%d", i)
			got, err := c.Get(context.Background(), "http://images.test:"+s.port()+path, nil)
			if err == nil && string(got) != path {
				err = fmt.Errorf("Get(%s) = %q", path, got)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
