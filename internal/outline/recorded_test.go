package outline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/outline/outlinetest"
)

// The workspace of ../shared/outline-recordings: an admin, a member of the
// private collection, a viewer, a suspended user, a member without access
// to the private collection, an expired session; a workspace-wide
// collection and a private one.
type workspace struct {
	s                               *outlinetest.Server
	c                               *Client
	alice, bob, vera, sam, nina     outlinetest.User
	eve                             outlinetest.User
	everyone, handbook              outlinetest.Collection
	gallery, child, grandchild, pvt outlinetest.Document
	trashed                         outlinetest.Document
	image                           string
}

func newWorkspace(t *testing.T) *workspace {
	t.Helper()
	s := outlinetest.New(t)
	w := &workspace{s: s}
	w.alice = s.AddUser(outlinetest.User{Name: "Alice Admin", Role: "admin", Token: "tok.alice"})
	w.bob = s.AddUser(outlinetest.User{Name: "Bob Member", Token: "tok.bob"})
	w.vera = s.AddUser(outlinetest.User{Name: "Vera Viewer", Role: "viewer", Token: "tok.vera"})
	w.sam = s.AddUser(outlinetest.User{Name: "Sam Suspended", Token: "tok.sam", Suspended: true})
	w.nina = s.AddUser(outlinetest.User{Name: "Nina NoAccess", Token: "tok.nina"})
	w.eve = s.AddUser(outlinetest.User{Name: "Eve Expired", Token: "tok.eve", Expired: true})
	w.everyone = s.AddCollection(outlinetest.Collection{Name: "Everyone"})
	w.handbook = s.AddCollection(outlinetest.Collection{Name: "Handbook", Private: true,
		Members: []string{w.alice.ID, w.bob.ID}})
	author := outlinetest.Person{ID: w.alice.ID, Name: w.alice.Name}
	w.image = s.AddAttachment(outlinetest.Attachment{Body: []byte("\x89PNG\r\n\x1a\nimage"), Local: true})
	w.gallery = s.AddDocument(outlinetest.Document{Title: "Gallery", Text: outlinetest.Text(t, "gallery"),
		CollectionID: w.everyone.ID, CreatedBy: author})
	w.child = s.AddDocument(outlinetest.Document{Title: "Child page", Text: "child",
		CollectionID: w.everyone.ID, ParentID: w.gallery.ID, CreatedBy: author})
	w.grandchild = s.AddDocument(outlinetest.Document{Title: "Grandchild page", Text: "grandchild",
		CollectionID: w.everyone.ID, ParentID: w.child.ID, CreatedBy: author})
	w.pvt = s.AddDocument(outlinetest.Document{Title: "Private note", Text: "Private collection text.\n\n ![x](" + w.image + ")",
		CollectionID: w.handbook.ID, CreatedBy: author})
	w.trashed = s.AddDocument(outlinetest.Document{Title: "Trashed", Text: "gone",
		CollectionID: w.everyone.ID, CreatedBy: author, DeletedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)})
	w.c = NewClient(s.URL(), fetch.New(s.FetchConfig()))
	return w
}

// TestRecordedReaders is the list, against the fake answering as
// the recordings show: who may print what.
func TestRecordedReaders(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	ctx := context.Background()
	slugged := "gallery-" + w.gallery.URLID
	tests := []struct {
		name, token, id string
		status          int    // 0: the document, downloadable
		code            string // Outline's error code
		sentinel        error
	}{
		{"admin, private collection", w.alice.Token, w.pvt.ID, 0, "", nil},
		{"member, private collection", w.bob.Token, w.pvt.ID, 0, "", nil},
		{"member without access, private collection", w.nina.Token, w.pvt.URLID, 403, CodeAuthorization, nil},
		{"viewer, workspace-wide collection", w.vera.Token, w.gallery.URLID, 0, "", nil},
		{"viewer by slug-urlId", w.vera.Token, slugged, 0, "", nil},
		{"viewer by UUID", w.vera.Token, w.gallery.ID, 0, "", nil},
		{"suspended", w.sam.Token, w.gallery.URLID, 403, CodeUserSuspended, nil},
		{"expired token", w.eve.Token, w.gallery.URLID, 401, CodeAuthenticationRequired, nil},
		{"garbage token", "not.a.token", w.gallery.URLID, 401, CodeAuthenticationRequired, nil},
		{"unknown document", w.bob.Token, "zzzzzzzzzz", 404, CodeNotFound, nil},
		{"deleted document", w.alice.Token, w.trashed.ID, 0, "", ErrDeleted},
	}
	for _, tt := range tests {
		d, err := w.c.Document(ctx, tt.token, tt.id)
		var api *APIError
		switch {
		case tt.sentinel != nil:
			if !errors.Is(err, tt.sentinel) || d == nil {
				t.Errorf("%s: Document = %v, %v; want the document and %v", tt.name, d, err, tt.sentinel)
			}
		case tt.status == 0:
			if err != nil || !d.CanDownload {
				t.Errorf("%s: Document = %+v, %v; want a downloadable document", tt.name, d, err)
			}
		case !errors.As(err, &api) || api.Status != tt.status || api.Code != tt.code || !errors.Is(err, api.sentinel()):
			t.Errorf("%s: Document = %v, want *APIError %d %s", tt.name, err, tt.status, tt.code)
		}
	}

	// The private collection's answer is a list of membership ids, the
	// workspace-wide one booleans: both were asked above; prove the fake
	// really answered lists (the point of the fix).
	var lists, bools int
	for _, who := range []outlinetest.User{w.alice, w.bob} {
		ans := rawCall(t, w.s, who.Token, "documents.info", map[string]string{"id": w.pvt.ID})
		switch dl := ans["policies"].([]any)[0].(map[string]any)["abilities"].(map[string]any)["download"].(type) {
		case []any:
			lists++
		case bool:
			bools++
		default:
			t.Errorf("%s: download = %#v", who.Name, dl)
		}
	}
	if lists != 2 || bools != 0 {
		t.Errorf("private collection: %d list and %d boolean download abilities, want 2 lists", lists, bools)
	}

	// The image of the private document, fetched as its member through
	// attachments.redirect → files.get (local storage, as recorded).
	data, err := w.c.Images(w.bob.Token).Open(ctx, w.image)
	if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("image as the member: %q, %v", data, err)
	}

	// 402 payment_required is Outline's refusal, not an outage.
	w.s.SetPaymentRequired(true)
	_, err = w.c.Document(ctx, w.bob.Token, w.gallery.ID)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 402 || api.Code != CodePaymentRequired || errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrPaymentRequired) {
		t.Errorf("payment required: Document = %v, want *APIError 402 payment_required", err)
	}
}

// rawCall posts one API call to the fake as Outline's API and decodes the
// answer.
func rawCall(t *testing.T, s *outlinetest.Server, token, method string, in any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, s.Outline.URL+"/api/"+method, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: token})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // only read
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %s: %v", method, body, err)
	}
	m["__status"] = float64(resp.StatusCode)
	return m
}

// shape lists every key path of a JSON value with its JSON type, lists
// reduced to their first element.
func shape(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		out[prefix] = "object"
		for k, x := range v {
			shape(prefix+"."+k, x, out)
		}
	case []any:
		out[prefix] = "array"
		if len(v) > 0 {
			shape(prefix+"[]", v[0], out)
		}
	case nil:
		out[prefix] = "null"
	default:
		out[prefix] = fmt.Sprintf("%T", v)
	}
}

// TestFakeAnswersAsRecorded compares each answer of the fake with the
// recording of the same call: the same status and the same keys with the
// same JSON types (values differ: ids, names, texts are the fake's).
func TestFakeAnswersAsRecorded(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	tests := []struct {
		recording, token, method string
		in                       map[string]string
	}{
		{"auth.info-admin", w.alice.Token, "auth.info", map[string]string{}},
		{"auth.info-member", w.bob.Token, "auth.info", map[string]string{}},
		{"auth.info-expired", w.eve.Token, "auth.info", map[string]string{}},
		{"auth.info-garbage", "garbage", "auth.info", map[string]string{}},
		{"auth.info-none", "", "auth.info", map[string]string{}},
		{"auth.info-suspended", w.sam.Token, "auth.info", map[string]string{}},
		{"documents.info-private-admin", w.alice.Token, "documents.info", map[string]string{"id": w.pvt.URLID}},
		{"documents.info-private-member", w.bob.Token, "documents.info", map[string]string{"id": w.pvt.ID}},
		{"documents.info-private-noaccess", w.nina.Token, "documents.info", map[string]string{"id": w.pvt.URLID}},
		{"documents.info-open-viewer", w.vera.Token, "documents.info", map[string]string{"id": w.gallery.URLID}},
		{"documents.info-slug", w.alice.Token, "documents.info", map[string]string{"id": "gallery-" + w.gallery.URLID}},
		{"documents.info-suspended", w.sam.Token, "documents.info", map[string]string{"id": w.gallery.URLID}},
		{"documents.info-unknown", w.bob.Token, "documents.info", map[string]string{"id": "zzzzzzzzzz"}},
		{"documents.info-malformed", w.bob.Token, "documents.info", map[string]string{"id": "../etc"}},
		{"collections.info-open", w.alice.Token, "collections.info", map[string]string{"id": w.everyone.ID}},
		{"collections.documents-open", w.alice.Token, "collections.documents", map[string]string{"id": w.everyone.ID}},
		{"collections.documents-private-noaccess", w.nina.Token, "collections.documents", map[string]string{"id": w.handbook.ID}},
	}
	dir := outlinetest.RecordingsDir()
	for _, tt := range tests {
		raw, err := os.ReadFile(filepath.Join(dir, tt.recording+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Status int
			Body   any
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		got := rawCall(t, w.s, tt.token, tt.method, tt.in)
		if int(got["__status"].(float64)) != rec.Status {
			t.Errorf("%s: status %v, want %d", tt.recording, got["__status"], rec.Status)
		}
		delete(got, "__status")
		want, have := map[string]string{}, map[string]string{}
		shape("", rec.Body, want)
		shape("", got, have)
		var diff []string
		for k, v := range want {
			// A recorded null may be a value in the fake (an icon, a
			// parent) and the other way round; every other type holds.
			if h, ok := have[k]; !ok || (h != v && h != "null" && v != "null") {
				diff = append(diff, fmt.Sprintf("%s: %s, fake %q", k, v, h))
			}
		}
		for k := range have {
			if _, ok := want[k]; !ok && !strings.HasPrefix(k, ".data[].children[]") {
				diff = append(diff, k+": not recorded")
			}
		}
		sort.Strings(diff)
		if len(diff) > 0 {
			t.Errorf("%s: the fake's answer differs from the recording:\n%s", tt.recording, strings.Join(diff, "\n"))
		}
	}
	// Error bodies are the recorded ones, word for word.
	got := rawCall(t, w.s, w.sam.Token, "documents.info", map[string]string{"id": w.gallery.URLID})
	if got["message"] != "Your access has been suspended by a workspace admin" {
		t.Errorf("suspended: message %q, want the recorded one", got["message"])
	}
}

// TestCollectionTree reads the recorded-shape tree of collections.documents.
func TestCollectionTree(t *testing.T) {
	t.Parallel()
	w := newWorkspace(t)
	ans := rawCall(t, w.s, w.alice.Token, "collections.documents", map[string]string{"id": w.everyone.ID})
	var titles []string
	var walk func(nodes []any, depth int)
	walk = func(nodes []any, depth int) {
		for _, n := range nodes {
			m := n.(map[string]any)
			titles = append(titles, fmt.Sprintf("%d:%s", depth, m["title"]))
			walk(m["children"].([]any), depth+1)
		}
	}
	walk(ans["data"].([]any), 0)
	if got, want := strings.Join(titles, ","), "0:Gallery,1:Child page,2:Grandchild page"; got != want {
		t.Errorf("tree = %s, want %s (the trashed document left out)", got, want)
	}
}
