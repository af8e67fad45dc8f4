package outline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline/outlinetest"
)

// ImageSource is what a render takes as its images.
var _ images.Source = (*ImageSource)(nil)

// fixture is a fake Outline with a few users and a client for it.
type fixture struct {
	s                         *outlinetest.Server
	c                         *Client
	jane, bob, outsider       outlinetest.User
	suspended, ratelimited    outlinetest.User
	expired                   outlinetest.User
	doc, private, noDL, alien outlinetest.Document
}

func newFixture(t *testing.T, cfg func(*fetch.Config), opts ...Option) *fixture {
	t.Helper()
	s := outlinetest.New(t)
	f := &fixture{s: s}
	f.jane = s.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-1"})
	f.bob = s.AddUser(outlinetest.User{Name: "Bob Roe", Token: "tok.bob-2", Role: "viewer"})
	f.outsider = s.AddUser(outlinetest.User{Name: "Olga Other", Token: "tok.olga-3", TeamID: "team-other"})
	f.suspended = s.AddUser(outlinetest.User{Name: "Sam Suspended", Token: "tok.sam-4", Suspended: true})
	f.ratelimited = s.AddUser(outlinetest.User{Name: "Rita Rate", Token: "tok.rita-5", RateLimited: true})
	f.expired = s.AddUser(outlinetest.User{Name: "Eve Expired", Token: "tok.eve-6", Expired: true})
	author := outlinetest.Person{ID: f.jane.ID, Name: f.jane.Name}
	f.doc = s.AddDocument(outlinetest.Document{
		Title: "Welcome", Text: "Hello **world**\\nsecond line", CreatedBy: author,
		UpdatedAt: time.Date(2026, 5, 1, 12, 34, 56, 789e6, time.UTC),
	})
	f.private = s.AddDocument(outlinetest.Document{
		Title: "Jane only", Text: "secret", CreatedBy: author,
		Access: map[string]outlinetest.Access{f.jane.ID: {Read: true, Download: true}},
	})
	f.noDL = s.AddDocument(outlinetest.Document{
		Title: "Read only", Text: "look, don't take", CreatedBy: author,
		Access: map[string]outlinetest.Access{f.jane.ID: {Read: true}},
	})
	f.alien = s.AddDocument(outlinetest.Document{Title: "Elsewhere", Text: "x", TeamID: "team-other"})
	fc := s.FetchConfig()
	if cfg != nil {
		cfg(&fc)
	}
	f.c = NewClient(s.URL(), fetch.New(fc), opts...)
	return f
}

// checkHeaders asserts that a request Outline saw carried the reader's
// cookie and nothing else that identifies anyone.
func checkHeaders(t *testing.T, h outlinetest.Hit, token string, post bool) {
	t.Helper()
	if got, want := h.Header.Values("Cookie"), []string{"accessToken=" + token}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("%s %s: Cookie = %q, want %q", h.Method, h.Path, got, want)
	}
	if got := h.Header.Get("Accept"); got != "application/json" {
		t.Errorf("%s %s: Accept = %q, want application/json", h.Method, h.Path, got)
	}
	for _, k := range []string{"Authorization", "X-Api-Version", "X-Forwarded-For", "Referer"} {
		if v := h.Header.Values(k); len(v) != 0 {
			t.Errorf("%s %s: %s = %q, want none", h.Method, h.Path, k, v)
		}
	}
	if h.Query.Has("token") {
		t.Errorf("%s %s: query has token", h.Method, h.Path)
	}
	if post {
		if got := h.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("%s %s: Content-Type = %q, want application/json", h.Method, h.Path, got)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(h.Body), &body); err != nil {
			t.Errorf("%s %s: body %q is not JSON: %v", h.Method, h.Path, h.Body, err)
		}
		if _, ok := body["token"]; ok {
			t.Errorf("%s %s: body has a token field", h.Method, h.Path)
		}
	}
}

func outlineHits(s *outlinetest.Server) []outlinetest.Hit {
	var hits []outlinetest.Hit
	for _, h := range s.Hits() {
		if h.Server == "outline" {
			hits = append(hits, h)
		}
	}
	return hits
}

func TestAuthInfo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, err := f.c.AuthInfo(context.Background(), f.jane.Token)
	if err != nil {
		t.Fatalf("AuthInfo = %v", err)
	}
	want := User{ID: f.jane.ID, Name: "Jane Doe", Email: "jane.doe@example.com", Role: "member",
		Language: "en_US", TeamID: outlinetest.TeamID, TeamName: outlinetest.TeamName,
		TeamURL: f.s.Outline.URL} // the recorded timezone is null
	if *u != want {
		t.Errorf("AuthInfo = %+v, want %+v", *u, want)
	}
	hits := outlineHits(f.s)
	if len(hits) != 1 || hits[0].Method != "POST" || hits[0].Path != "/api/auth.info" || hits[0].Body != "{}" {
		t.Fatalf("Outline saw %+v, want one POST /api/auth.info with body {}", hits)
	}
	checkHeaders(t, hits[0], f.jane.Token, true)
}

func TestAuthInfoErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tests := []struct {
		name, token string
		status      int
		code        string
		asked       bool // whether Outline is asked at all
	}{
		{"unknown token", "tok.nobody", 401, CodeAuthenticationRequired, true},
		{"expired token", f.expired.Token, 401, CodeAuthenticationRequired, true},
		{"suspended", f.suspended.Token, 403, CodeUserSuspended, true},
		{"rate limited", f.ratelimited.Token, 429, CodeRateLimited, true},
		{"empty", "", 401, CodeAuthenticationRequired, false},
		{"cookie injection", "tok.jane-1; accessToken=tok.bob-2", 401, CodeAuthenticationRequired, false},
		{"header injection", "x\r\nAuthorization: Bearer tok.bob-2", 401, CodeAuthenticationRequired, false},
		{"space", "tok jane", 401, CodeAuthenticationRequired, false},
		{"comma", "a,b", 401, CodeAuthenticationRequired, false},
		{"api key", "ol_api_abcdef", 401, CodeAuthenticationRequired, false},
		{"too long", strings.Repeat("a", 5000), 401, CodeAuthenticationRequired, false},
	}
	for _, tt := range tests {
		f.s.ResetHits()
		_, err := f.c.AuthInfo(context.Background(), tt.token)
		var api *APIError
		if !tt.asked {
			// Refused without asking: the sentinel alone, never an answer
			// Outline did not send.
			if !errors.Is(err, ErrNoSession) || errors.As(err, &api) {
				t.Errorf("%s: AuthInfo = %v, want ErrNoSession and no *APIError", tt.name, err)
			}
		} else if !errors.As(err, &api) || api.Status != tt.status || api.Code != tt.code || !errors.Is(err, api.sentinel()) {
			t.Errorf("%s: AuthInfo = %v, want *APIError %d %s", tt.name, err, tt.status, tt.code)
			continue
		}
		if asked := len(f.s.Hits()) > 0; asked != tt.asked {
			t.Errorf("%s: Outline asked = %v, want %v", tt.name, asked, tt.asked)
		}
		if tt.code == CodeRateLimited && (RetryAfter(err) != 42*time.Second || !errors.Is(err, ErrRateLimited)) {
			t.Errorf("%s: RetryAfter = %v (%v), want 42s and ErrRateLimited", tt.name, RetryAfter(err), err)
		}
	}
}

func TestDocument(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, id := range []string{f.doc.ID, f.doc.URLID, "welcome-" + f.doc.URLID, strings.ToUpper(f.doc.ID)} {
		f.s.ResetHits()
		d, err := f.c.Document(context.Background(), f.jane.Token, id)
		if err != nil {
			t.Fatalf("Document(%s) = %v", id, err)
		}
		if d.ID != f.doc.ID || d.URLID != f.doc.URLID || d.Title != "Welcome" || d.Text != f.doc.Text ||
			d.Language != "en" || !d.CanDownload || d.URL != "/doc/welcome-"+f.doc.URLID {
			t.Errorf("Document(%s) = %+v, want the document Welcome", id, d)
		}
		if want := (Person{ID: f.jane.ID, Name: "Jane Doe"}); d.CreatedBy != want || d.UpdatedBy != want {
			t.Errorf("Document(%s) createdBy/updatedBy = %+v/%+v, want %+v", id, d.CreatedBy, d.UpdatedBy, want)
		}
		if !d.UpdatedAt.Equal(f.doc.UpdatedAt) || !d.CreatedAt.Equal(f.doc.CreatedAt) {
			t.Errorf("Document(%s) updatedAt = %v, createdAt = %v; want %v, %v", id, d.UpdatedAt, d.CreatedAt, f.doc.UpdatedAt, f.doc.CreatedAt)
		}
		hits := outlineHits(f.s)
		if len(hits) != 1 || hits[0].Method != "POST" || hits[0].Path != "/api/documents.info" {
			t.Fatalf("Outline saw %+v, want one POST /api/documents.info", hits)
		}
		checkHeaders(t, hits[0], f.jane.Token, true)
		if want := fmt.Sprintf(`{"id":%q}`, id); hits[0].Body != want {
			t.Errorf("documents.info body = %s, want %s", hits[0].Body, want)
		}
	}
}

func TestDocumentErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tests := []struct {
		name, token, id string
		status          int
		code            string
		sentinel        error
	}{
		{"unknown", f.jane.Token, "c0ffee00-0000-4000-8000-000000000000", 404, CodeNotFound, ErrNotFound},
		{"unknown urlId", f.jane.Token, "zzzzzzzzzz", 404, CodeNotFound, ErrNotFound},
		{"another team's document", f.jane.Token, f.alien.ID, 403, CodeAuthorization, ErrForbidden},
		{"reader of another team", f.outsider.Token, f.doc.ID, 403, CodeAuthorization, ErrForbidden},
		{"no access", f.bob.Token, f.private.ID, 403, CodeAuthorization, ErrForbidden},
		{"suspended", f.suspended.Token, f.doc.ID, 403, CodeUserSuspended, ErrSuspended},
		{"bad token", "tok.nobody", f.doc.ID, 401, CodeAuthenticationRequired, ErrNoSession},
		{"rate limited", f.ratelimited.Token, f.doc.ID, 429, CodeRateLimited, ErrRateLimited},
	}
	for _, tt := range tests {
		d, err := f.c.Document(context.Background(), tt.token, tt.id)
		var api *APIError
		if !errors.As(err, &api) || api.Status != tt.status || api.Code != tt.code || d != nil || !errors.Is(err, tt.sentinel) {
			t.Errorf("%s: Document = %v, %v; want *APIError %d %s (%v)", tt.name, d, err, tt.status, tt.code, tt.sentinel)
		}
	}
	// Jane may read the private document; Bob may not (above).
	if _, err := f.c.Document(context.Background(), f.jane.Token, f.private.ID); err != nil {
		t.Errorf("Document(private) as Jane = %v, want success", err)
	}
}

func TestDocumentNoDownload(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	d, err := f.c.Document(context.Background(), f.jane.Token, f.noDL.ID)
	if !errors.Is(err, ErrNoDownload) {
		t.Fatalf("Document = %v, want ErrNoDownload", err)
	}
	if d == nil || d.Title != "Read only" || d.CanDownload {
		t.Errorf("Document = %+v, want the document without CanDownload", d)
	}
}

func TestMalformedIDsNeverSent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, id := range []string{"", "short", "has space-hDYep1TPAM", "../../etc/passwd", "hDYep1TPAM/edit",
		"hDYep1TPAMxxxxxxxxx", "é-hDYep1TPAM", strings.Repeat("a-", 200) + "hDYep1TPAM"} {
		_, err := f.c.Document(context.Background(), f.jane.Token, id)
		var api *APIError
		if !errors.Is(err, ErrBadID) || errors.As(err, &api) {
			t.Errorf("Document(%q) = %v, want ErrBadID and no *APIError (Outline was not asked)", id, err)
		}
	}
	if h := f.s.Hits(); len(h) != 0 {
		t.Errorf("Outline saw %d requests, want none", len(h))
	}
	// Outline's own 400 for a malformed id comes back the same way.
	var out struct{}
	_, err := f.c.post(context.Background(), f.jane.Token, "documents.info", map[string]string{"id": "not valid!"}, maxAPIBytes, &out)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 400 || api.Code != CodeValidation || !errors.Is(err, ErrBadID) {
		t.Errorf("documents.info(malformed) = %v, want *APIError 400 validation_error (ErrBadID)", err)
	}
}

// TestOnlyTheCookieReachesOutline follows a hostile incoming request
// through the API an HTTP handler has: Bob's request carries Jane's token
// in the places Outline prefers over the cookie; Outline must see Bob's
// cookie and nothing else, and answer as Bob.
func TestOnlyTheCookieReachesOutline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	in := httptest.NewRequest("GET", "/render/"+f.doc.URLID+"?token="+f.jane.Token, nil)
	in.Header.Set("Authorization", "Bearer "+f.jane.Token)
	in.Header.Set("X-Api-Version", "3")
	in.Header.Set("X-Forwarded-For", "10.0.0.1")
	in.Header.Add("Cookie", "session=other; accessToken="+f.bob.Token+"; token="+f.jane.Token)
	tok := TokenFromRequest(in)
	if tok != f.bob.Token {
		t.Fatalf("TokenFromRequest = %q, want Bob's cookie", tok)
	}
	u, err := f.c.AuthInfo(context.Background(), tok)
	if err != nil || u.ID != f.bob.ID {
		t.Fatalf("AuthInfo = %+v, %v; want Bob", u, err)
	}
	// Jane's private document stays closed to Bob.
	if _, err := f.c.Document(context.Background(), tok, f.private.ID); err == nil {
		t.Errorf("Document(private) as Bob succeeded, want 403")
	}
	img := f.s.AddAttachment(outlinetest.Attachment{Body: []byte("PNG")})
	if _, err := f.c.Attachment(context.Background(), tok, img+"&token="+f.jane.Token); err != nil {
		t.Errorf("Attachment = %v", err)
	}
	for _, h := range f.s.Hits() {
		if h.Server == "outline" {
			checkHeaders(t, h, f.bob.Token, h.Method == "POST")
		}
		if strings.Contains(h.Body, f.jane.Token) || strings.Contains(h.Query.Encode(), f.jane.Token) {
			t.Errorf("%s %s carried Jane's token", h.Method, h.Path)
		}
		for k, vs := range h.Header {
			for _, v := range vs {
				if strings.Contains(v, f.jane.Token) {
					t.Errorf("%s %s: header %s carried Jane's token", h.Method, h.Path, k)
				}
			}
		}
	}
}

// TestFakeHonoursOutlineTokenOrder proves that the checks above can fail:
// the fake, like Outline, prefers an Authorization header, a token field and
// a token parameter over the cookie, and answers ProseMirror JSON with
// x-api-version 3.
func TestFakeHonoursOutlineTokenOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	post := func(path, body string, h map[string]string) map[string]any {
		req, _ := http.NewRequest("POST", f.s.Outline.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Cookie", "accessToken="+f.bob.Token)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }() // only read
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return out
	}
	userID := func(out map[string]any) any {
		data, _ := out["data"].(map[string]any)
		user, _ := data["user"].(map[string]any)
		return user["id"]
	}
	cases := []struct {
		name, path, body string
		h                map[string]string
	}{
		{"bearer", "/api/auth.info", "{}", map[string]string{"Authorization": "Bearer " + f.jane.Token}},
		{"field", "/api/auth.info", `{"token":"` + f.jane.Token + `"}`, nil},
		{"param", "/api/auth.info?token=" + f.jane.Token, "{}", nil},
	}
	for _, c := range cases {
		if got := userID(post(c.path, c.body, c.h)); got != f.jane.ID {
			t.Errorf("fake with a %s token answered as %v, want Jane (%s)", c.name, got, f.jane.ID)
		}
	}
	out := post("/api/documents.info", `{"id":"`+f.doc.ID+`"}`, map[string]string{"x-api-version": "3"})
	if data, _ := out["data"].(map[string]any); data == nil || data["text"] != nil || data["content"] == nil {
		t.Errorf("fake with x-api-version 3 answered %v, want content instead of text", out)
	}
}

func TestOutlineUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, WithTimeout(300*time.Millisecond))
	for _, status := range []int{500, 502, 503, 504, 404, 401} {
		f.s.SetFailure(status)
		_, err := f.c.AuthInfo(context.Background(), f.jane.Token)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Outline answering %d (HTML): AuthInfo = %v, want ErrUnavailable", status, err)
		}
		_, err = f.c.Document(context.Background(), f.jane.Token, f.doc.ID)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Outline answering %d (HTML): Document = %v, want ErrUnavailable", status, err)
		}
	}
	f.s.SetFailure(0)

	f.s.SetDelay(5 * time.Second)
	_, err := f.c.AuthInfo(context.Background(), f.jane.Token)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, fetch.ErrTimeout) {
		t.Errorf("slow Outline: AuthInfo = %v, want ErrUnavailable (timeout)", err)
	}
	f.s.SetDelay(0)

	// The caller going away is not Outline's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.c.AuthInfo(ctx, f.jane.Token)
	if errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: AuthInfo = %v, want context.Canceled, not ErrUnavailable", err)
	}

	// Outline down: nothing listens on its port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down, _ := url.Parse("http://" + l.Addr().String())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c := NewClient(down, fetch.New(fetch.Config{Outline: down}))
	_, err = c.AuthInfo(context.Background(), f.jane.Token)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Outline down: AuthInfo = %v, want ErrUnavailable", err)
	}
}

// TestDecoding runs the client against hand-written answers: lenient where
// Outline adds fields, strict where the answer is not Outline's.
func TestDecoding(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	answer := func(w http.ResponseWriter, r *http.Request) {}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := answer
		mu.Unlock()
		a(w, r)
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	c := NewClient(base, fetch.New(fetch.Config{Outline: base}))
	set := func(status int, body string, h map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		answer = func(w http.ResponseWriter, r *http.Request) {
			for k, v := range h {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			// A failed write shows on the client's side, which is what
			// the test reads.
			_, _ = io.WriteString(w, body)
		}
	}
	const id = "9bcbf864-1090-4eb6-ba05-4da0c3a5c58e"

	// Unknown fields, list-valued abilities, null and odd dates.
	set(200, `{"data":{"id":"`+id+`","urlId":"hDYep1TPAM","title":"T","text":"x","newField":{"a":[1,2]},
		"createdAt":null,"updatedAt":"yesterday","createdBy":null,"revision":3},
		"policies":[{"id":"other","abilities":{"download":true}},
		            {"id":"`+id+`","abilities":{"read":true,"download":true,"move":["a","b"],"share":false}}],
		"pagination":null,"status":200,"ok":true}`, nil)
	d, err := c.Document(context.Background(), "tok", id)
	if err != nil || !d.CanDownload || !d.UpdatedAt.IsZero() || d.Revision != 3 {
		t.Errorf("lenient answer: Document = %+v, %v; want CanDownload, zero UpdatedAt", d, err)
	}
	// An ability is true, false or the list of membership ids granting it
	// (a private collection): a non-empty list grants, as in Outline's app;
	// false, [] and a right granted only for another document refuse.
	for _, tc := range []struct {
		abilities string
		want      bool
	}{
		{`{"download":true}`, true},
		{`{"download":["72c72290-929c-4679-8aec-a758074541ab"]}`, true},
		{`{"download":false}`, false},
		{`{"download":[]}`, false},
		{`{"download":null}`, false},
		{`{"download":"yes"}`, false},
		{`{"read":true}`, false},
	} {
		set(200, `{"data":{"id":"`+id+`","urlId":"hDYep1TPAM","text":"x"},"policies":[{"id":"other","abilities":{"download":true}},{"id":"`+id+`","abilities":`+tc.abilities+`}],"ok":true}`, nil)
		d, err := c.Document(context.Background(), "tok", id)
		if got := err == nil && d.CanDownload; got != tc.want || (!tc.want && !errors.Is(err, ErrNoDownload)) {
			t.Errorf("abilities %s: Document = %v, CanDownload %v; want granted %v", tc.abilities, err, got, tc.want)
		}
	}

	tests := []struct {
		name, body string
		status     int
		h          map[string]string
	}{
		{"not JSON", "<html>hello</html>", 200, nil},
		{"ok false", `{"ok":false,"data":{}}`, 200, nil},
		{"no data", `{"ok":true,"status":200}`, 200, nil},
		{"ProseMirror instead of Markdown", `{"ok":true,"data":{"id":"` + id + `","content":{"type":"doc"}},"policies":[]}`, 200, nil},
		{"another document", `{"ok":true,"data":{"id":"00000000-1090-4eb6-ba05-4da0c3a5c58e","text":"x"},"policies":[]}`, 200, nil},
		{"redirect", "", 302, map[string]string{"Location": "https://login.example.com/"}},
		{"5xx JSON", `{"ok":false,"error":"internal_error","status":500,"message":"boom"}`, 500, nil},
		{"4xx HTML", "<html>Forbidden</html>", 403, nil},
		{"4xx JSON without error", `{"message":"nope"}`, 403, nil},
	}
	for _, tt := range tests {
		set(tt.status, tt.body, tt.h)
		if _, err := c.Document(context.Background(), "tok", id); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Document = %v, want ErrUnavailable", tt.name, err)
		}
	}

	// auth.info without a user id cannot key the per-user limit.
	set(200, `{"data":{"user":{"name":"x"},"team":{"id":"t"}},"ok":true}`, nil)
	if _, err := c.AuthInfo(context.Background(), "tok"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("auth.info without user id: AuthInfo = %v, want ErrUnavailable", err)
	}
	// A user flagged suspended in a 200 answer is still refused.
	set(200, `{"data":{"user":{"id":"u","isSuspended":true},"team":{"id":"t"}},"ok":true}`, nil)
	var api *APIError
	if _, err := c.AuthInfo(context.Background(), "tok"); !errors.Is(err, ErrSuspended) || errors.As(err, &api) {
		t.Errorf("isSuspended true: AuthInfo = %v, want ErrSuspended (Outline answered 200, no *APIError)", err)
	}
	// Retry-After as an HTTP date.
	set(429, `{"ok":false,"error":"rate_limit_exceeded","status":429,"message":"slow down"}`,
		map[string]string{"Retry-After": time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)})
	if _, err := c.AuthInfo(context.Background(), "tok"); !errors.As(err, &api) || api.RetryAfter < 80*time.Second || api.RetryAfter > 91*time.Second {
		t.Errorf("429 with a date: AuthInfo = %v (RetryAfter %v), want about 90s", err, api.RetryAfter)
	}

	// A document answer over the cap ends in ErrTooLarge after a bounded read.
	huge := `{"data":{"id":"` + id + `","text":"` + strings.Repeat("x", maxDocumentBytes) + `"},"ok":true}`
	set(200, huge, nil)
	if _, err := c.Document(context.Background(), "tok", id); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge answer: Document = %v, want ErrTooLarge", err)
	}
	// A document at the Markdown limit, escaped at its worst, fits.
	text := strings.Repeat("\x01", limits.MaxMarkdownBytes)
	b, _ := json.Marshal(map[string]any{"ok": true, "data": map[string]any{"id": id, "text": text},
		"policies": []any{map[string]any{"id": id, "abilities": map[string]bool{"download": true}}}})
	set(200, string(b), nil)
	if d, err := c.Document(context.Background(), "tok", id); err != nil || len(d.Text) != limits.MaxMarkdownBytes {
		t.Errorf("1 MiB of control characters: Document = %v, want the text", err)
	}
}

func TestAttachment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *fetch.Config) { c.Timeout = 500 * time.Millisecond })
	png := []byte("\x89PNG\r\n\x1a\nfake")
	stored := f.s.AddAttachment(outlinetest.Attachment{Body: png})
	local := f.s.AddAttachment(outlinetest.Attachment{Body: png, Local: true})

	for _, path := range []string{stored, local} {
		f.s.ResetHits()
		got, err := f.c.Attachment(context.Background(), f.jane.Token, path)
		if err != nil || !bytes.Equal(got, png) {
			t.Fatalf("Attachment(%s) = %q, %v; want the PNG", path, got, err)
		}
		hits := f.s.Hits()
		if len(hits) != 2 {
			t.Fatalf("Attachment(%s): hits = %+v, want Outline then storage", path, hits)
		}
		if h := hits[0]; h.Server != "outline" || h.Method != "GET" || h.Path != "/api/attachments.redirect" {
			t.Errorf("first hit = %s %s %s, want GET attachments.redirect on Outline", h.Server, h.Method, h.Path)
		} else {
			checkHeaders(t, h, f.jane.Token, false)
		}
		if h := hits[1]; h.Server == "storage" {
			for _, k := range []string{"Cookie", "Authorization", "Referer"} {
				if v := h.Header.Get(k); v != "" {
					t.Errorf("storage got %s: %q, want none", k, v)
				}
			}
		} else if h.Path != "/api/files.get" {
			t.Errorf("second hit = %s %s, want storage or files.get", h.Server, h.Path)
		}
	}
}

func TestAttachmentErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *fetch.Config) { c.Timeout = 300 * time.Millisecond })
	foreign := f.s.AddAttachment(outlinetest.Attachment{Body: []byte("x"), TeamID: "team-other"})
	slow := f.s.AddAttachment(outlinetest.Attachment{Body: []byte("x"), Delay: 10 * time.Second})
	failing := f.s.AddAttachment(outlinetest.Attachment{Body: []byte("x"), StorageStatus: 500})
	expired := f.s.AddAttachment(outlinetest.Attachment{Body: []byte("x"), StorageStatus: 403})

	var api *APIError
	_, err := f.c.Attachment(context.Background(), f.jane.Token, "/api/attachments.redirect?id=c0ffee00-0000-4000-8000-000000000000")
	if !errors.As(err, &api) || api.Status != 404 || api.Code != CodeNotFound || !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown: Attachment = %v, want *APIError 404", err)
	}
	_, err = f.c.Attachment(context.Background(), f.jane.Token, foreign)
	if !errors.As(err, &api) || api.Status != 403 || api.Code != CodeAuthorization || !errors.Is(err, ErrForbidden) {
		t.Errorf("other team: Attachment = %v, want *APIError 403", err)
	}
	_, err = f.c.Attachment(context.Background(), f.suspended.Token, foreign)
	if !errors.As(err, &api) || api.Code != CodeUserSuspended || !errors.Is(err, ErrSuspended) {
		t.Errorf("suspended: Attachment = %v, want *APIError user_suspended", err)
	}
	for name, path := range map[string]string{"slow": slow, "failing": failing, "expired": expired} {
		_, err = f.c.Attachment(context.Background(), f.jane.Token, path)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Attachment = %v, want ErrUnavailable", name, err)
		}
	}
	// The read limit is checked with the default timeout: reading 10 MiB
	// under the race detector on a busy machine can take longer than the
	// 300 ms that makes "slow" slow.
	fb := newFixture(t, nil)
	big := fb.s.AddAttachment(outlinetest.Attachment{Body: bytes.Repeat([]byte("x"), limits.MaxImageBytes+100)})
	got, err := fb.c.Attachment(context.Background(), fb.jane.Token, big)
	if err != nil || len(got) != limits.MaxImageBytes+1 {
		t.Errorf("too large: Attachment = %d bytes, %v; want MaxImageBytes+1 bytes", len(got), err)
	}

	f.s.ResetHits()
	for _, p := range []string{"/api/attachments.redirect?id=nope", "/api/attachments.redirect",
		"/api/files.get?key=x", "/api/attachments.redirect?id=a&id=b", "https://evil.test/api/attachments.redirect?id=c0ffee00-0000-4000-8000-000000000000"} {
		_, err := f.c.Attachment(context.Background(), f.jane.Token, p)
		if !errors.Is(err, ErrBadID) || errors.As(err, &api) {
			t.Errorf("Attachment(%q) = %v, want ErrBadID and no *APIError", p, err)
		}
	}
	if h := f.s.Hits(); len(h) != 0 {
		t.Errorf("malformed attachment URLs reached the fake: %+v", h)
	}
}

// TestImageSource is the source an Outline render uses: attachments with
// the reader's cookie, external images only from allowed hosts and public
// addresses, everything else refused, and every refused address never
// reached.
func TestImageSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *fetch.Config) {
		c.Timeout = 300 * time.Millisecond
		c.AllowHosts = append(c.AllowHosts, outlinetest.PrivateHost, outlinetest.MetadataHost,
			outlinetest.LoopbackHost, "127.0.0.1", "169.254.169.254")
	})
	png := []byte("\x89PNG\r\n\x1a\nfake")
	att := f.s.AddAttachment(outlinetest.Attachment{Body: png})
	foreign := f.s.AddAttachment(outlinetest.Attachment{Body: png, TeamID: "team-other"})
	slow := f.s.AddAttachment(outlinetest.Attachment{Body: png, Delay: 10 * time.Second})
	failing := f.s.AddAttachment(outlinetest.Attachment{Body: png, StorageStatus: 503})
	ext := f.s.AddImage("/pic.png", "image/png", png)
	toOutline := f.s.AddRedirect("/to-outline.png", f.s.Outline.URL+att)
	toOtherLoopback := f.s.AddRedirect("/to-other.png", "http://127.0.0.1:1/admin")
	toMetadata := f.s.AddRedirect("/to-metadata.png", "http://169.254.169.254/latest/meta-data/")
	imagesPort := f.s.Images.Listener.Addr().(*net.TCPAddr).Port
	src := f.c.Images(f.jane.Token)

	tests := []struct {
		url  string
		want error // nil: the PNG
	}{
		{att, nil},
		{f.s.Outline.URL + att, nil},
		{ext, nil},
		{"/api/attachments.redirect?id=c0ffee00-0000-4000-8000-000000000000", images.ErrNotFound},
		{"/api/attachments.redirect?id=nope", images.ErrNotFound},
		{foreign, images.ErrNotAllowed},
		{slow, images.ErrUnavailable},
		{failing, images.ErrUnavailable},
		{f.s.ImagesURL("/missing.png"), images.ErrNotFound},
		{toOtherLoopback, images.ErrNotAllowed},
		{toMetadata, images.ErrNotAllowed},
		// An external image that redirects to Outline is an ordinary
		// remote image there (issue 10): Outline's host is reached only for
		// attachments.redirect asked with the reader's cookie, so the
		// redirect to Outline on loopback is refused like any other.
		{toOutline, images.ErrNotAllowed},
		// Any other URL on Outline's host is an ordinary remote image too,
		// even with Outline's host on the allow list: its address is
		// loopback, so it is never requested.
		{f.s.Outline.URL + "/secret.png", images.ErrNotAllowed},
		{f.s.Outline.URL + "/api/documents.info", images.ErrNotAllowed},
		{fmt.Sprintf("http://127.0.0.1:%d/pic.png", imagesPort), images.ErrNotAllowed},
		{fmt.Sprintf("http://%s:%d/pic.png", outlinetest.LoopbackHost, imagesPort), images.ErrNotAllowed},
		{"http://" + outlinetest.PrivateHost + "/pic.png", images.ErrNotAllowed},
		{"http://" + outlinetest.MetadataHost + "/latest/meta-data/", images.ErrNotAllowed},
		{"http://169.254.169.254/latest/meta-data/", images.ErrNotAllowed},
		{"https://not-allowed.test/pic.png", images.ErrNotAllowed},
		{"img/pic.png", images.ErrNotAllowed},
		{"/uploads/pic.png", images.ErrNotAllowed},
		{"file:///etc/passwd", images.ErrNotAllowed},
		{"data:image/png;base64,iVBORw0KGgo=", images.ErrNotAllowed},
		{"//images.test/pic.png", images.ErrNotAllowed},
	}
	for _, tt := range tests {
		got, err := src.Open(context.Background(), tt.url)
		switch {
		case tt.want == nil && (err != nil || !bytes.Equal(got, png)):
			t.Errorf("Open(%s) = %q, %v; want the PNG", tt.url, got, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("Open(%s) = %v, want %v", tt.url, err, tt.want)
		}
	}

	for _, h := range f.s.Hits() {
		// The external host and storage never see a credential.
		if h.Server != "outline" {
			for _, k := range []string{"Cookie", "Authorization"} {
				if v := h.Header.Get(k); v != "" {
					t.Errorf("%s %s got %s: %q", h.Server, h.Path, k, v)
				}
			}
		}
		// Outline is only asked for attachments.
		if h.Server == "outline" && h.Path != "/api/attachments.redirect" {
			t.Errorf("Outline saw %s %s, want only attachments.redirect", h.Method, h.Path)
		}
		if h.Server == "images" && h.Path != "/pic.png" && h.Path != "/missing.png" && !strings.HasPrefix(h.Path, "/to-") {
			t.Errorf("images host saw %s", h.Path)
		}
	}
	// Internal addresses were never dialed: every dial went to the fake's
	// public stand-ins or to Outline itself.
	outlineAddr := f.s.Outline.Listener.Addr().String()
	for _, d := range f.s.Dials() {
		if !strings.HasPrefix(d, "203.0.113.") && d != outlineAddr {
			t.Errorf("dialed %s, want only public addresses and Outline", d)
		}
	}
	// Outline saw the reader's cookie on every request: nothing but
	// package outline's own calls reached it.
	var anonymous int
	for _, h := range f.s.Hits() {
		if h.Server == "outline" && h.Header.Get("Cookie") == "" {
			anonymous++
		}
	}
	if anonymous != 0 {
		t.Errorf("Outline saw %d requests without the cookie, want none", anonymous)
	}
}

func TestConcurrentReaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	readers := []outlinetest.User{f.jane, f.bob}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			r := readers[i%2]
			u, err := f.c.AuthInfo(context.Background(), r.Token)
			if err == nil && u.ID != r.ID {
				err = fmt.Errorf("AuthInfo(%s) = %s, want %s", r.Name, u.ID, r.ID)
			}
			if err == nil {
				_, err = f.c.Document(context.Background(), r.Token, f.doc.URLID)
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

func TestValidDocumentID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{"9bcbf864-1090-4eb6-ba05-4da0c3a5c58e", true},
		{"9BCBF864-1090-4EB6-BA05-4DA0C3A5C58E", true},
		{"hDYep1TPAM", true},
		{"hDYep1TPAMabcde", true},
		{"welcome-hDYep1TPAM", true},
		{"my-long_title~x-hDYep1TPAM", true},
		{"-hDYep1TPAM", true},
		{"hDYep1TPA", false},
		{"hDYep1TPAMabcdef", false},
		{"welcome hDYep1TPAM", false},
		{"welcome-hDYep1TPAM/edit", false},
		{"../hDYep1TPAM", false},
		{"welcome-hDYep1TP-M", false},
		{"héllo-hDYep1TPAM", false},
		{"", false},
		{"9bcbf864-1090-4eb6-ba05-4da0c3a5c58", true}, // slug "9bcbf864-1090-4eb6-ba05" + urlId "4da0c3a5c58"
		{strings.Repeat("a", 300), false},
	}
	for _, tt := range tests {
		if got := ValidDocumentID(tt.id); got != tt.want {
			t.Errorf("ValidDocumentID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestTokenFromRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cookie string
		want   string
	}{
		{"accessToken=eyJhbGciOi.eyJzdWIi.sig-_", "eyJhbGciOi.eyJzdWIi.sig-_"},
		{"a=1; accessToken=tok; b=2", "tok"},
		{"accessToken=first; accessToken=second", "first"},
		{"accesstoken=tok", ""},
		{"token=tok", ""},
		{"accessToken=ol_api_123", ""},
		{"accessToken=\"quoted\"", "quoted"},
		{"", ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/render/x", nil)
		if tt.cookie != "" {
			r.Header.Set("Cookie", tt.cookie)
		}
		r.Header.Set("Authorization", "Bearer header-token")
		if got := TokenFromRequest(r); got != tt.want {
			t.Errorf("TokenFromRequest(Cookie: %s) = %q, want %q", tt.cookie, got, tt.want)
		}
	}
}
