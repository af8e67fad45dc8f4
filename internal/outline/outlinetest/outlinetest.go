// Package outlinetest is a fake Outline for tests: an httptest server that
// answers auth.info, documents.info, attachments.redirect,
// collections.info and collections.documents with the shapes, status codes
// and error bodies a real Outline 1.9.1 server answered — it loads the
// recordings of ../shared/outline-recordings/ and puts its own ids, names
// and texts into them (recordings.go) — plus the servers around it that a
// real deployment has:
//
//   - Outline itself on 127.0.0.1 (URL);
//   - object storage (host "storage.test"), which attachments redirect to
//     with a signed URL; it must never receive the reader's cookie;
//   - an external image host (host "images.test") for pasted images.
//
// Every request any of them sees is recorded (Hits), so a test can assert
// what was and was not sent, and what was never reached at all.
//
// The storage and image hosts stand for public hosts: FetchConfig returns a
// fetch.Config whose resolver gives their names public test addresses and
// whose dialer carries those to the httptest servers. Names for internal
// addresses (PrivateHost, MetadataHost, LoopbackHost) resolve too, so that
// tests can put images there and prove they are never dialed (Dials).
//
// Typical use:
//
//	s := outlinetest.New(t)
//	jane := s.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok-jane"})
//	doc := s.AddDocument(outlinetest.Document{Title: "Welcome", Text: "Hello"})
//	img := s.AddAttachment(outlinetest.Attachment{Body: png})  // "/api/attachments.redirect?id=…"
//	f := fetch.New(s.FetchConfig())
//	c := outline.NewClient(s.URL(), f)
package outlinetest

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/fetch"
)

// Host names of the fake network (see FetchConfig).
const (
	StorageHost  = "storage.test"  // object storage, a "public" host
	ImagesHost   = "images.test"   // an external image host, a "public" host
	PrivateHost  = "intranet.test" // resolves to 10.20.30.40
	MetadataHost = "metadata.test" // resolves to 169.254.169.254
	LoopbackHost = "loopback.test" // resolves to 127.0.0.1
)

// Public test addresses of the fake hosts (TEST-NET-3, not internal, so the
// dial guard lets them through to FetchConfig's dialer).
var (
	storageAddr = netip.MustParseAddr("203.0.113.20")
	imagesAddr  = netip.MustParseAddr("203.0.113.30")
)

// TeamID and TeamName are the default team of users and documents.
const (
	TeamID   = "0b9e6c4e-1f0a-4c1e-9d1e-3a2b1c0d9e8f"
	TeamName = "Acme"
)

// User is a reader. Token is the value of their accessToken cookie.
type User struct {
	// Expired makes the token answer 401 "Expired token", as a session
	// past its expiry does. A token the fake does not know answers 401
	// "Unable to decode token" (Outline cannot decode it as its JWT).
	Expired     bool
	ID          string // default: a random UUID
	Name        string
	Email       string
	Role        string // default "member"
	TeamID      string // default TeamID
	Token       string // required
	Suspended   bool   // every call answers 403 user_suspended
	RateLimited bool   // every call answers 429 rate_limit_exceeded
}

// Access is what one user may do with one document.
type Access struct {
	Read     bool
	Download bool
}

// Person is a document's author or editor.
type Person struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Document is a document of the fake.
type Document struct {
	ID        string // default: a random UUID
	URLID     string // default: 10 random alphanumerics
	Title     string
	Text      string // Markdown in Outline's dialect
	Icon      string
	Language  string // default "en"
	TeamID    string // default TeamID
	CreatedBy Person
	UpdatedBy Person // default CreatedBy
	CreatedAt time.Time
	UpdatedAt time.Time // default CreatedAt
	// Access lists what each user (by ID) may do. Nil: every member of the
	// document's team reads and downloads (of a private collection: every
	// member of the collection). Non-nil: only the users listed, with the
	// rights listed. Users of another team never have access.
	Access map[string]Access
	// CollectionID is the collection the document is in (AddCollection);
	// "" puts it in a workspace-wide collection of its own. ParentID is
	// the document it sits below in the collection's tree.
	CollectionID, ParentID string
	// DeletedAt, when set, puts the document in Outline's trash; Outline
	// still answers it to whoever may restore it.
	DeletedAt time.Time
}

// Collection is a collection of the fake. A private one answers every
// ability of its documents as the list of membership ids that grant it
// (documents.info-private-*.json), a workspace-wide one as booleans.
type Collection struct {
	ID      string // default: a random UUID
	URLID   string // default: 10 random alphanumerics
	Name    string
	TeamID  string // default TeamID
	Private bool
	// Members are the user ids with access to a private collection.
	Members []string
}

// Attachment is an uploaded file.
type Attachment struct {
	ID          string // default: a random UUID
	TeamID      string // default TeamID; other teams get 403
	ContentType string // default "image/png"
	Body        []byte
	// Public attachments (avatars) are served to anyone, like Outline's.
	Public bool
	// Local makes Outline serve the file itself (FILE_STORAGE=local): the
	// redirect goes to /api/files.get on Outline instead of storage.
	Local bool
	// Delay holds storage's answer back (until the request is cancelled).
	Delay time.Duration
	// Hold, when set, holds storage's answer back until it is closed (or
	// the request is cancelled): a test decides when the image arrives.
	Hold <-chan struct{}
	// StorageStatus, when set, is storage's answer (e.g. 500, or 403 for an
	// expired signature) instead of the file.
	StorageStatus int
}

// Hit is one request seen by one of the fake's servers.
type Hit struct {
	Server string // "outline", "storage" or "images"
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   string
}

// Server is the fake Outline and its neighbours. Its methods are safe for
// concurrent use.
type Server struct {
	// Outline, Storage and Images are the three httptest servers.
	Outline, Storage, Images *httptest.Server

	secret []byte

	rec *recordings

	mu          sync.Mutex
	users       map[string]*User // by token
	docs        []*Document
	collections []*Collection
	memberships map[string]string // by collection id + user id: the membership id
	payment     bool
	attachments map[string]*Attachment
	external    map[string]http.HandlerFunc
	hits        []Hit
	dials       []string
	failure     int
	delay       time.Duration
}

// New starts the fake; t's cleanup stops it.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		rec:         openRecordings(t),
		memberships: map[string]string{},
		secret:      []byte(randomHex(16)),
		users:       map[string]*User{},
		attachments: map[string]*Attachment{},
		external:    map[string]http.HandlerFunc{},
	}
	s.Outline = httptest.NewServer(s.record("outline", http.HandlerFunc(s.serveOutline)))
	s.Storage = httptest.NewServer(s.record("storage", http.HandlerFunc(s.serveStorage)))
	s.Images = httptest.NewServer(s.record("images", http.HandlerFunc(s.serveImages)))
	t.Cleanup(func() {
		// Closing the client connections first cancels handlers that are
		// still holding an answer back (Delay), so Close does not wait.
		for _, ts := range []*httptest.Server{s.Outline, s.Storage, s.Images} {
			ts.CloseClientConnections()
			ts.Close()
		}
	})
	return s
}

// URL is Outline's base URL (outline.url), e.g. http://127.0.0.1:41234.
func (s *Server) URL() *url.URL {
	u, _ := url.Parse(s.Outline.URL)
	return u
}

// FetchConfig returns a fetch.Config for a client of this fake: Outline is
// the fake's URL, the allowed hosts are ImagesHost plus allowHosts, and the
// resolver and dialer make StorageHost and ImagesHost reach the fake's
// servers. PrivateHost, MetadataHost and LoopbackHost resolve to internal
// addresses; the dialer records every address it is asked for (Dials) and
// refuses any it does not know, so an address the guard failed to stop
// shows up there instead of reaching the network.
func (s *Server) FetchConfig(allowHosts ...string) fetch.Config {
	return fetch.Config{
		AllowHosts: append([]string{ImagesHost}, allowHosts...),
		Outline:    s.URL(),
		Resolve:    s.resolve,
		Dial:       s.dial,
	}
}

func (s *Server) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	ip, ok := map[string]string{
		StorageHost:  storageAddr.String(),
		ImagesHost:   imagesAddr.String(),
		PrivateHost:  "10.20.30.40",
		MetadataHost: "169.254.169.254",
		LoopbackHost: "127.0.0.1",
		"localhost":  "127.0.0.1",
	}[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(ip)}, nil
}

func (s *Server) dial(ctx context.Context, network, address string) (net.Conn, error) {
	s.mu.Lock()
	s.dials = append(s.dials, address)
	s.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, err
	}
	var target string
	switch {
	case ap.Addr() == storageAddr && ap.Port() == serverPort(s.Storage):
		target = s.Storage.Listener.Addr().String()
	case ap.Addr() == imagesAddr && ap.Port() == serverPort(s.Images):
		target = s.Images.Listener.Addr().String()
	case address == s.Outline.Listener.Addr().String():
		target = address
	default:
		return nil, fmt.Errorf("outlinetest: refusing to dial %s: not one of the fake's servers", address)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, target)
}

// Dials returns every address FetchConfig's dialer was asked to connect
// to, in order.
func (s *Server) Dials() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.dials...)
}

// Hits returns every request the fake's servers saw, in order.
func (s *Server) Hits() []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hit(nil), s.hits...)
}

// ResetHits forgets the hits and dials recorded so far.
func (s *Server) ResetHits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits, s.dials = nil, nil
}

// SetFailure makes every Outline API call answer status with an HTML page,
// as a failing Outline or the proxy in front of it does; 0 restores normal
// answers.
func (s *Server) SetFailure(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = status
}

// SetPaymentRequired makes every Outline API call answer 402
// payment_required, as Outline's cloud does for a workspace whose plan has
// lapsed; false restores normal answers.
func (s *Server) SetPaymentRequired(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payment = on
}

// SetDelay holds every Outline API answer back by d (or until the request
// is cancelled).
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// AddUser adds a reader and returns it with its defaults filled in.
func (s *Server) AddUser(u User) User {
	if u.Token == "" {
		panic("outlinetest: a user needs a Token")
	}
	if u.ID == "" {
		u.ID = newUUID()
	}
	if u.Role == "" {
		u.Role = "member"
	}
	if u.TeamID == "" {
		u.TeamID = TeamID
	}
	if u.Email == "" {
		u.Email = strings.ToLower(strings.ReplaceAll(u.Name, " ", ".")) + "@example.com"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.Token] = &u
	return u
}

// AddDocument adds a document and returns it with its defaults filled in.
func (s *Server) AddDocument(d Document) Document {
	if d.ID == "" {
		d.ID = newUUID()
	}
	if d.URLID == "" {
		d.URLID = randomAlnum(10)
	}
	if d.Language == "" {
		d.Language = "en"
	}
	if d.TeamID == "" {
		d.TeamID = TeamID
	}
	if d.UpdatedBy == (Person{}) {
		d.UpdatedBy = d.CreatedBy
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	}
	if d.UpdatedAt.IsZero() {
		d.UpdatedAt = d.CreatedAt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs = append(s.docs, &d)
	return d
}

// AddCollection adds a collection and returns it with its defaults filled
// in.
func (s *Server) AddCollection(c Collection) Collection {
	if c.ID == "" {
		c.ID = newUUID()
	}
	if c.URLID == "" {
		c.URLID = randomAlnum(10)
	}
	if c.TeamID == "" {
		c.TeamID = TeamID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collections = append(s.collections, &c)
	return c
}

// AddAttachment adds an attachment and returns the URL Outline's Markdown
// uses for it: /api/attachments.redirect?id=<uuid>.
func (s *Server) AddAttachment(a Attachment) string {
	if a.ID == "" {
		a.ID = newUUID()
	}
	if a.TeamID == "" {
		a.TeamID = TeamID
	}
	if a.ContentType == "" {
		a.ContentType = "image/png"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attachments[a.ID] = &a
	return "/api/attachments.redirect?id=" + a.ID
}

// AddImage serves body at path on the external image host and returns its
// absolute URL (http://images.test:<port><path>).
func (s *Server) AddImage(path, contentType string, body []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.external[path] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body) // see writeJSON
	}
	return s.ImagesURL(path)
}

// AddRedirect makes path on the external image host redirect to target
// and returns its absolute URL.
func (s *Server) AddRedirect(path, target string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.external[path] = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	}
	return s.ImagesURL(path)
}

// ImagesURL is the absolute URL of path on the external image host.
func (s *Server) ImagesURL(path string) string {
	return fmt.Sprintf("http://%s:%d%s", ImagesHost, serverPort(s.Images), path)
}

// record wraps a handler so that every request is recorded first.
func (s *Server) record(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		s.mu.Lock()
		s.hits = append(s.hits, Hit{
			Server: name, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
			Header: r.Header.Clone(), Body: string(body),
		})
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// apiError is Outline's error answer. With an Accept that prefers HTML,
// Outline answers an HTML page instead.
func apiError(w http.ResponseWriter, r *http.Request, status int, code, message string, data any) {
	body := map[string]any{"ok": false, "error": code, "status": status, "message": message}
	if data != nil {
		body["data"] = data
	}
	writeError(w, r, status, body)
}

// recordedError answers the status and error body of a recording exactly.
func (s *Server) recordedError(w http.ResponseWriter, r *http.Request, name string) {
	writeError(w, r, s.rec.load(name).Status, s.rec.body(name))
}

func writeError(w http.ResponseWriter, r *http.Request, status int, body map[string]any) {
	if wantsHTML(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, "<!DOCTYPE html><html><body><h1>%d</h1><p>%v</p></body></html>", status, body["message"])
		return
	}
	writeJSON(w, status, body)
}

func wantsHTML(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "text/html") && !strings.Contains(a, "application/json")
}

// writeJSON answers v as JSON. Here and in every other answer of the fake,
// a write that fails means the client left: the client under test is the
// one to notice, and the fake has no one to tell, so the error is dropped.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// token finds the request's token the way Outline does, first match wins:
// Authorization: Bearer, a token body field, a token query parameter, the
// accessToken cookie. A client that forwarded any of the first three would
// be answered as whoever that token belongs to, which is why outprint sends
// only the cookie.
func token(r *http.Request, body map[string]any) string {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimPrefix(a, "Bearer ")
	}
	if t, ok := body["token"].(string); ok && t != "" {
		return t
	}
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	if c, err := r.Cookie("accessToken"); err == nil {
		return c.Value
	}
	return ""
}

// authenticate finds the user of the request, or answers the error Outline
// would and returns nil. With optional, a request without a token passes
// with a nil user and ok true. The refusals are the recorded ones: no
// token, an expired one, one Outline cannot decode, a suspended user.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, body map[string]any, optional bool) (u *User, ok bool) {
	tok := token(r, body)
	if tok == "" && optional {
		return nil, true
	}
	s.mu.Lock()
	u = s.users[tok]
	s.mu.Unlock()
	switch {
	case tok == "":
		s.recordedError(w, r, "auth.info-none")
		return nil, false
	case u == nil || strings.HasPrefix(tok, "ol_api_") && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "):
		s.recordedError(w, r, "auth.info-garbage")
		return nil, false
	case u.Expired:
		s.recordedError(w, r, "auth.info-expired")
		return nil, false
	case u.Suspended:
		s.recordedError(w, r, "auth.info-suspended")
		return nil, false
	case u.RateLimited:
		// Not in the recordings (the limiter needs 1,000 calls a minute);
		// the shape seen on the same server.
		w.Header().Set("Retry-After", "42")
		apiError(w, r, 429, "rate_limit_exceeded", "Rate limit exceeded for this operation", nil)
		return nil, false
	}
	return u, true
}

var (
	uuidRE      = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	slugURLIDRE = regexp.MustCompile(`^(?:[0-9a-zA-Z_~-]*-)?([a-zA-Z0-9]{10,15})$`)
)

func (s *Server) serveOutline(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	failure, delay, payment := s.failure, s.delay, s.payment
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if failure != 0 {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(failure)
		_, _ = fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>", failure, http.StatusText(failure))
		return
	}
	if payment && r.URL.Path != "/api/files.get" {
		// Not in the recordings (a self-hosted server has no plan): the
		// shape of every other Outline error, with the cloud's code.
		apiError(w, r, http.StatusPaymentRequired, "payment_required", "Payment required", nil)
		return
	}
	// Outline's body parser reads JSON only when it is declared as JSON.
	body := map[string]any{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		// A body that is not a JSON object reads as no fields at all,
		// as a missing parameter.
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
	}
	switch r.URL.Path {
	case "/api/auth.info":
		s.authInfo(w, r, body)
	case "/api/documents.info":
		s.documentsInfo(w, r, body)
	case "/api/collections.info":
		s.collectionsInfo(w, r, body)
	case "/api/collections.documents":
		s.collectionsDocuments(w, r, body)
	case "/api/attachments.redirect", "/api/emojis.redirect":
		// A custom emoji's image is an attachment of the fake, its id the
		// emoji's.
		s.attachmentsRedirect(w, r, body)
	case "/api/files.get":
		s.filesGet(w, r)
	default:
		s.recordedError(w, r, "documents.info-unknown")
	}
}

func postOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		apiError(w, r, 405, "method_not_allowed", "Method Not Allowed", nil)
		return false
	}
	return true
}

// authInfo answers auth.info-admin.json (for an admin) or
// auth.info-member.json with the user and team put in.
func (s *Server) authInfo(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !postOnly(w, r) {
		return
	}
	u, okay := s.authenticate(w, r, body, false)
	if !okay {
		return
	}
	name := "auth.info-member"
	if u.Role == "admin" {
		name = "auth.info-admin"
	}
	ans := s.rec.body(name)
	data := object(ans, "data")
	user := object(data, "user")
	user["id"], user["name"], user["email"], user["role"] = u.ID, u.Name, u.Email, u.Role
	team := object(data, "team")
	team["id"], team["name"], team["url"] = u.TeamID, TeamName, s.Outline.URL
	if at, ok := data["availableTeams"].([]any); ok && len(at) > 0 {
		if t0, ok := at[0].(map[string]any); ok {
			t0["id"], t0["url"] = u.TeamID, s.Outline.URL
		}
	}
	if ps, ok := ans["policies"].([]any); ok && len(ps) == 2 {
		ps[0].(map[string]any)["id"] = u.TeamID
		ps[1].(map[string]any)["id"] = u.ID
	}
	writeJSON(w, http.StatusOK, ans)
}

// collection returns the collection of id, nil for none. s.mu is held.
func (s *Server) collection(id string) *Collection {
	for _, c := range s.collections {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// membership returns the (stable) id of u's membership of c. s.mu is held.
func (s *Server) membership(c *Collection, u *User) string {
	k := c.ID + "/" + u.ID
	if m, ok := s.memberships[k]; ok {
		return m
	}
	m := newUUID()
	s.memberships[k] = m
	return m
}

// access is what u may do with d, and the membership id that grants it in
// a private collection ("" in a workspace-wide one).
func (s *Server) access(u *User, d *Document) (Access, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.TeamID != d.TeamID {
		return Access{}, ""
	}
	c := s.collection(d.CollectionID)
	private := c != nil && c.Private
	a := Access{Read: true, Download: true}
	if private {
		a = Access{}
		for _, id := range c.Members {
			if id == u.ID {
				a = Access{Read: true, Download: true}
			}
		}
	}
	if d.Access != nil {
		a = d.Access[u.ID]
	}
	if private && a.Read {
		return a, s.membership(c, u)
	}
	return a, ""
}

func (s *Server) documentsInfo(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !postOnly(w, r) {
		return
	}
	u, okay := s.authenticate(w, r, body, false)
	if !okay {
		return
	}
	d, ok := s.findDocument(w, r, body)
	if !ok {
		return
	}
	access, member := s.access(u, d)
	if !access.Read {
		s.recordedError(w, r, "documents.info-private-noaccess")
		return
	}
	// A private collection answers abilities as membership lists, a
	// workspace-wide one as booleans: start from the matching recording.
	name := "documents.info-open-viewer"
	switch {
	case member != "" && u.Role == "admin":
		name = "documents.info-private-admin"
	case member != "":
		name = "documents.info-private-member"
	}
	ans := s.rec.body(name)
	fillDocument(object(ans, "data"), d, r)
	grantAbilities(ans["policies"].([]any)[0].(map[string]any), d.ID, access, member)
	writeJSON(w, http.StatusOK, ans)
}

// findDocument finds the document of documents.info's id (a UUID, a urlId
// or a slug-urlId), answering as Outline does when there is none.
func (s *Server) findDocument(w http.ResponseWriter, r *http.Request, body map[string]any) (*Document, bool) {
	id, _ := body["id"].(string)
	if id == "" {
		apiError(w, r, 400, "validation_error", "id: one of id or shareId is required", nil)
		return nil, false
	}
	var urlID string
	if !uuidRE.MatchString(id) {
		m := slugURLIDRE.FindStringSubmatch(id)
		if m == nil {
			s.recordedError(w, r, "documents.info-malformed")
			return nil, false
		}
		urlID = m[1]
	}
	s.mu.Lock()
	var d *Document
	for _, doc := range s.docs {
		if strings.EqualFold(doc.ID, id) || (urlID != "" && doc.URLID == urlID) {
			d = doc
		}
	}
	s.mu.Unlock()
	if d == nil {
		s.recordedError(w, r, "documents.info-unknown")
		return nil, false
	}
	return d, true
}

// fillDocument writes d into the recorded answer's data.
func fillDocument(data map[string]any, d *Document, r *http.Request) {
	collectionID := d.CollectionID
	if collectionID == "" {
		collectionID = "1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	}
	var parent, deleted, icon any
	if d.ParentID != "" {
		parent = d.ParentID
	}
	if !d.DeletedAt.IsZero() {
		deleted = stamp(d.DeletedAt)
	}
	if d.Icon != "" {
		icon = d.Icon
	}
	for k, v := range map[string]any{
		"id": d.ID, "url": "/doc/" + slug(d.Title) + "-" + d.URLID, "urlId": d.URLID,
		"title": d.Title, "icon": icon, "language": d.Language,
		"createdAt": stamp(d.CreatedAt), "updatedAt": stamp(d.UpdatedAt), "publishedAt": stamp(d.CreatedAt),
		"deletedAt": deleted, "collectionId": collectionID, "parentDocumentId": parent,
		"collaboratorIds": []string{d.CreatedBy.ID},
	} {
		data[k] = v
	}
	for k, p := range map[string]Person{"createdBy": d.CreatedBy, "updatedBy": d.UpdatedBy} {
		o := object(data, k)
		o["id"], o["name"] = p.ID, p.Name
	}
	// With x-api-version 3 or more Outline answers ProseMirror JSON
	// instead of Markdown.
	if v, err := strconv.Atoi(r.Header.Get("x-api-version")); err == nil && v >= 3 {
		delete(data, "text")
		data["content"] = map[string]any{"type": "doc", "content": []any{}}
	} else {
		data["text"] = d.Text
	}
}

// grantAbilities writes the reader's read and download rights into the
// recorded policy p: membership lists in a private collection (member set),
// booleans in a workspace-wide one.
func grantAbilities(p map[string]any, id string, access Access, member string) {
	p["id"] = id
	abilities := object(p, "abilities")
	for k, v := range abilities {
		if _, isList := v.([]any); isList {
			abilities[k] = []any{member}
		}
	}
	grant := func(on bool) any {
		switch {
		case member == "":
			return on
		case on:
			return []any{member}
		}
		return false
	}
	abilities["read"], abilities["download"] = grant(access.Read), grant(access.Download)
}

// collectionsInfo answers collections.info-open.json with the collection
// put in.
func (s *Server) collectionsInfo(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !postOnly(w, r) {
		return
	}
	u, okay := s.authenticate(w, r, body, false)
	if !okay {
		return
	}
	c, okay := s.readableCollection(w, r, u, body)
	if !okay {
		return
	}
	ans := s.rec.body("collections.info-open")
	data := object(ans, "data")
	data["id"], data["urlId"], data["name"] = c.ID, c.URLID, c.Name
	data["url"] = "/collection/" + slug(c.Name) + "-" + c.URLID
	if c.Private {
		data["permission"] = nil
	}
	ans["policies"].([]any)[0].(map[string]any)["id"] = c.ID
	writeJSON(w, http.StatusOK, ans)
}

// readableCollection finds the collection the request's id names and u may
// read, or answers Outline's error.
func (s *Server) readableCollection(w http.ResponseWriter, r *http.Request, u *User, body map[string]any) (*Collection, bool) {
	id, _ := body["id"].(string)
	urlID := ""
	if m := slugURLIDRE.FindStringSubmatch(id); m != nil {
		urlID = m[1]
	} else if !uuidRE.MatchString(id) {
		s.recordedError(w, r, "documents.info-malformed")
		return nil, false
	}
	s.mu.Lock()
	var c *Collection
	for _, x := range s.collections {
		if strings.EqualFold(x.ID, id) || x.URLID == urlID {
			c = x
		}
	}
	s.mu.Unlock()
	if c == nil {
		s.recordedError(w, r, "documents.info-unknown")
		return nil, false
	}
	may := u.TeamID == c.TeamID
	if c.Private {
		may = false
		for _, m := range c.Members {
			may = may || m == u.ID
		}
	}
	if !may {
		s.recordedError(w, r, "collections.documents-private-noaccess")
		return nil, false
	}
	return c, true
}

// collectionsDocuments answers the collection's tree in the shape of
// collections.documents-open.json: every document of the collection that
// is not deleted, children below their parent, in the order added.
func (s *Server) collectionsDocuments(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !postOnly(w, r) {
		return
	}
	u, okay := s.authenticate(w, r, body, false)
	if !okay {
		return
	}
	c, okay := s.readableCollection(w, r, u, body)
	if !okay {
		return
	}
	s.mu.Lock()
	var docs []*Document
	for _, d := range s.docs {
		if d.CollectionID == c.ID && d.DeletedAt.IsZero() {
			docs = append(docs, d)
		}
	}
	s.mu.Unlock()
	var tree func(parent string) []any
	tree = func(parent string) []any {
		nodes := []any{}
		for _, d := range docs {
			if d.ParentID == parent {
				nodes = append(nodes, map[string]any{
					"id": d.ID, "url": "/doc/" + slug(d.Title) + "-" + d.URLID, "title": d.Title,
					"children": tree(d.ID),
				})
			}
		}
		return nodes
	}
	ans := s.rec.body("collections.documents-open")
	ans["data"] = tree("")
	writeJSON(w, http.StatusOK, ans)
}

// attachmentsRedirect answers as attachments.redirect-member.json: a 302
// to signed storage, with a text/plain "Redirecting to …" body.
func (s *Server) attachmentsRedirect(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		apiError(w, r, 405, "method_not_allowed", "Method Not Allowed", nil)
		return
	}
	u, okay := s.authenticate(w, r, body, true)
	if !okay {
		return
	}
	id, _ := body["id"].(string)
	if id == "" {
		id = r.URL.Query().Get("id")
	}
	if !uuidRE.MatchString(id) {
		apiError(w, r, 400, "validation_error", "id: Invalid uuid", nil)
		return
	}
	s.mu.Lock()
	a := s.attachments[id]
	s.mu.Unlock()
	if a == nil {
		s.recordedError(w, r, "documents.info-unknown")
		return
	}
	if !a.Public && (u == nil || u.TeamID != a.TeamID) {
		s.recordedError(w, r, "documents.info-private-noaccess")
		return
	}
	sig := s.sign(a.ID)
	var target string
	if a.Local {
		target = s.Outline.URL + "/api/files.get?" + url.Values{"key": {a.ID}, "sig": {sig}}.Encode()
	} else {
		target = fmt.Sprintf("http://%s:%d/uploads/%s?%s", StorageHost, serverPort(s.Storage), a.ID,
			url.Values{"X-Amz-Expires": {"300"}, "X-Amz-Signature": {sig}}.Encode())
	}
	rec := s.rec.load("attachments.redirect-member")
	w.Header().Set("Location", target)
	w.Header().Set("Content-Type", rec.Headers["Content-Type"])
	w.WriteHeader(rec.Status)
	_, _ = io.WriteString(w, "Redirecting to "+target)
}

// filesGet serves a local-storage attachment by signature, like Outline's
// /api/files.get: the signature is the credential, no cookie is needed.
func (s *Server) filesGet(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("key")
	s.mu.Lock()
	a := s.attachments[id]
	s.mu.Unlock()
	if a == nil || !hmac.Equal([]byte(r.URL.Query().Get("sig")), []byte(s.sign(id))) {
		apiError(w, r, 403, "authorization_error", "Authorization error", nil)
		return
	}
	serveAttachment(w, r, a)
}

// serveStorage is object storage: /uploads/<id> with a valid signature.
func (s *Server) serveStorage(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/uploads/")
	s.mu.Lock()
	a := s.attachments[id]
	s.mu.Unlock()
	if a == nil || !hmac.Equal([]byte(r.URL.Query().Get("X-Amz-Signature")), []byte(s.sign(id))) {
		storageError(w, http.StatusForbidden, "AccessDenied")
		return
	}
	serveAttachment(w, r, a)
}

func serveAttachment(w http.ResponseWriter, r *http.Request, a *Attachment) {
	if a.Delay > 0 {
		select {
		case <-time.After(a.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if a.Hold != nil {
		select {
		case <-a.Hold:
		case <-r.Context().Done():
			return
		}
	}
	if a.StorageStatus != 0 {
		storageError(w, a.StorageStatus, http.StatusText(a.StorageStatus))
		return
	}
	w.Header().Set("Content-Type", a.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
	_, _ = w.Write(a.Body)
}

func storageError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code></Error>`, code)
}

func (s *Server) serveImages(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.external[r.URL.Path]
	s.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h(w, r)
}

func (s *Server) sign(id string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

func serverPort(ts *httptest.Server) uint16 {
	return uint16(ts.Listener.Addr().(*net.TCPAddr).Port)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == '-':
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func randomAlnum(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
