// Package outline talks to an Outline wiki as one of its readers: it asks
// Outline who the reader is (auth.info), fetches a document with the
// reader's rights (documents.info) and its attachments
// (attachments.redirect). See ../shared/outline-api.md for the shapes.
//
// The reader is identified by the accessToken cookie their browser sent
// with the request, and by nothing else: a Client sends that one cookie,
// never the request's other cookies, Authorization header or token
// parameter (Outline takes a token from those first, so a forwarded one
// would let a client speak as someone else). The API gives no way to pass
// them: methods take the token value only.
//
// Every call goes through a fetch.Client, whose dial guard allows Outline's
// own host even on a private address and nothing else internal; answers are
// size-capped and time-bounded. Errors are the sentinels of errors.go
// (Outline's own refusals an *APIError matching one), for the HTTP layer
// to map.
package outline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/limits"
)

// Defaults of a Client.
const (
	// DefaultTimeout bounds one API call.
	DefaultTimeout = 10 * time.Second
	// maxAPIBytes caps the answer of auth.info (a user and a team).
	maxAPIBytes = 2 << 20
	// maxDocumentBytes caps the answer of documents.info. A document of
	// limits.MaxMarkdownBytes can grow six-fold in JSON (a control character
	// is escaped as \u00XX), so the cap sits above that: a document that
	// fits the Markdown limit is never refused for its JSON, and a larger
	// one ends in ErrTooLarge after a bounded read.
	maxDocumentBytes = 6*limits.MaxMarkdownBytes + 1<<20
)

// Client is an Outline API client. It is safe for concurrent use and holds
// no reader state: every call takes the reader's token.
type Client struct {
	base    *url.URL
	f       *fetch.Client
	timeout time.Duration
}

// Option changes a Client.
type Option func(*Client)

// WithTimeout bounds each API call (default 10 s). Attachments are bounded
// by the fetch.Client's own timeout.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// NewClient returns a client for the Outline at base (outline.url, e.g.
// https://wiki.example.com). f must have been made with
// fetch.Config.Outline set to the same URL: that is what lets it reach
// Outline on a private address, and what keeps it from reaching anything
// else internal. Build f with the images.allowHosts too; Images uses it for
// external images.
func NewClient(base *url.URL, f *fetch.Client, opts ...Option) *Client {
	b := *base
	b.Path = strings.TrimSuffix(b.Path, "/")
	b.RawPath, b.RawQuery, b.Fragment = "", "", ""
	c := &Client{base: &b, f: f, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns Outline's URL, against which relative document links
// (/doc/…, /collection/…) resolve.
func (c *Client) BaseURL() *url.URL {
	b := *c.base
	return &b
}

// User is the reader as Outline confirms them. ID is the key of the
// per-user admission count; TeamID the tenant.
type User struct {
	ID        string
	Name      string
	Email     string
	Role      string // admin, member, viewer or guest
	Language  string
	Timezone  string
	Suspended bool
	TeamID    string
	TeamName  string
	TeamURL   string
}

// AuthInfo asks Outline who owns accessToken (POST /api/auth.info). A
// missing or malformed token is ErrNoSession without asking Outline; a
// suspended user is ErrSuspended.
func (c *Client) AuthInfo(ctx context.Context, accessToken string) (*User, error) {
	var data struct {
		User struct {
			ID          string `json:"id"`
			Name        string `json:"name"`
			Email       string `json:"email"`
			Role        string `json:"role"`
			Language    string `json:"language"`
			Timezone    string `json:"timezone"`
			IsSuspended bool   `json:"isSuspended"`
		} `json:"user"`
		Team struct {
			ID   string `json:"id"`
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"team"`
	}
	if _, err := c.post(ctx, accessToken, "auth.info", struct{}{}, maxAPIBytes, &data); err != nil {
		return nil, err
	}
	u := data.User
	// The user id keys the per-user limit: an answer without one is not an
	// answer we can act on.
	if u.ID == "" {
		return nil, fmt.Errorf("%w: auth.info: the answer names no user", ErrUnavailable)
	}
	if u.IsSuspended {
		return nil, fmt.Errorf("auth.info: %w", ErrSuspended)
	}
	return &User{
		ID: u.ID, Name: u.Name, Email: u.Email, Role: u.Role, Language: u.Language,
		Timezone: u.Timezone, TeamID: data.Team.ID, TeamName: data.Team.Name, TeamURL: data.Team.URL,
	}, nil
}

// Person is a user as a document names them.
type Person struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Document is an Outline document as its reader sees it. Text is the
// Markdown in Outline's dialect, without the title.
type Document struct {
	ID               string
	URLID            string
	URL              string // Outline's path of the document, e.g. /doc/welcome-hDYep1TPAM
	Title            string
	Text             string
	Icon             string
	Language         string
	CollectionID     string
	ParentDocumentID string
	Revision         int
	CreatedAt        time.Time
	UpdatedAt        time.Time
	PublishedAt      time.Time
	// DeletedAt is set for a document in Outline's trash, which Outline
	// still shows to those who may restore it.
	DeletedAt time.Time
	CreatedBy Person
	UpdatedBy Person
	// CanDownload is policies[].abilities.download for this document.
	CanDownload bool
}

// Document fetches a document as the reader (POST /api/documents.info,
// without x-api-version so that text is Markdown). id is a UUID, urlId or
// slug-urlId; a malformed id is ErrBadID without asking Outline.
//
// When the reader may read but not download the document, Document returns
// the document together with an error wrapping ErrNoDownload, so that
// /status can still show its title; a render must stop there. A document in
// Outline's trash (deletedAt set) is returned the same way with ErrDeleted:
// it would print as if it were live, so it is refused until restored.
func (c *Client) Document(ctx context.Context, accessToken, id string) (*Document, error) {
	if !ValidDocumentID(id) {
		return nil, errBadID("the document id is not a UUID, urlId or slug-urlId")
	}
	var data struct {
		ID               string      `json:"id"`
		URLID            string      `json:"urlId"`
		URL              string      `json:"url"`
		Title            string      `json:"title"`
		Text             *string     `json:"text"`
		Icon             string      `json:"icon"`
		Language         string      `json:"language"`
		CollectionID     string      `json:"collectionId"`
		ParentDocumentID string      `json:"parentDocumentId"`
		Revision         int         `json:"revision"`
		CreatedAt        lenientTime `json:"createdAt"`
		UpdatedAt        lenientTime `json:"updatedAt"`
		PublishedAt      lenientTime `json:"publishedAt"`
		DeletedAt        lenientTime `json:"deletedAt"`
		CreatedBy        *Person     `json:"createdBy"`
		UpdatedBy        *Person     `json:"updatedBy"`
	}
	policies, err := c.post(ctx, accessToken, "documents.info", map[string]string{"id": id}, maxDocumentBytes, &data)
	if err != nil {
		return nil, err
	}
	if data.ID == "" || data.Text == nil {
		// Without text the answer is not the Markdown form (a newer API
		// version, or not a document at all).
		return nil, fmt.Errorf("%w: documents.info: the answer has no id or no Markdown text", ErrUnavailable)
	}
	if !sameDocument(id, data.ID, data.URLID) {
		return nil, fmt.Errorf("%w: documents.info: asked for %q, got document %s", ErrUnavailable, id, data.ID)
	}
	d := &Document{
		ID: data.ID, URLID: data.URLID, URL: data.URL, Title: data.Title, Text: *data.Text,
		Icon: data.Icon, Language: data.Language, CollectionID: data.CollectionID,
		ParentDocumentID: data.ParentDocumentID, Revision: data.Revision,
		CreatedAt: data.CreatedAt.Time, UpdatedAt: data.UpdatedAt.Time, PublishedAt: data.PublishedAt.Time,
		DeletedAt: data.DeletedAt.Time,
	}
	if data.CreatedBy != nil {
		d.CreatedBy = *data.CreatedBy
	}
	if data.UpdatedBy != nil {
		d.UpdatedBy = *data.UpdatedBy
	}
	for _, p := range policies {
		if p.ID == d.ID {
			d.CanDownload = p.Abilities["download"]
		}
	}
	if !d.CanDownload {
		return d, fmt.Errorf("document %s: %w", d.ID, ErrNoDownload)
	}
	if !d.DeletedAt.IsZero() {
		return d, fmt.Errorf("document %s: %w", d.ID, ErrDeleted)
	}
	return d, nil
}

// sameDocument checks that Outline answered about the document asked for:
// a UUID must come back as the id, a urlId (alone or after a slug) as the
// urlId.
func sameDocument(asked, id, urlID string) bool {
	if uuidRE.MatchString(asked) {
		return strings.EqualFold(asked, id)
	}
	i := strings.LastIndexByte(asked, '-')
	return asked[i+1:] == urlID
}

// policy is one entry of Outline's "policies". An ability is answered as
// true, false or — when it is granted through memberships, as in every
// private collection — the list of membership ids that grant it
// (server/presenters/policy.ts: Record<string, boolean | string[]>).
// Outline's own app treats a non-empty list as granted, so does this:
// true and a non-empty list grant, false, [] and anything else refuse.
type policy struct {
	ID        string
	Abilities map[string]bool
}

func (p *policy) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID        string                     `json:"id"`
		Abilities map[string]json.RawMessage `json:"abilities"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	p.ID, p.Abilities = raw.ID, map[string]bool{}
	for k, v := range raw.Abilities {
		p.Abilities[k] = granted(v)
	}
	return nil
}

// granted reads one ability: true, or a list with at least one membership
// id.
func granted(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if bytes.Equal(v, []byte("true")) {
		return true
	}
	var ids []string
	if json.Unmarshal(v, &ids) != nil {
		return false
	}
	for _, id := range ids {
		if id != "" {
			return true
		}
	}
	return false
}

// lenientTime is a timestamp that decodes null, "" or an unknown format as
// the zero time instead of failing the whole answer: a date is a nicety,
// the document is not.
type lenientTime struct{ time.Time }

func (t *lenientTime) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	if v, err := time.Parse(time.RFC3339Nano, s); err == nil {
		t.Time = v.UTC()
	}
	return nil
}

// envelope is Outline's answer around data.
type envelope struct {
	OK       bool            `json:"ok"`
	Status   int             `json:"status"`
	Data     json.RawMessage `json:"data"`
	Policies []policy        `json:"policies"`
	Error    string          `json:"error"`
	Message  string          `json:"message"`
}

// headers builds the only headers Outline ever gets from us: the reader's
// cookie and the JSON content negotiation Outline needs. No x-api-version:
// with it documents.info answers ProseMirror JSON instead of Markdown.
func headers(accessToken string, withBody bool) http.Header {
	h := http.Header{}
	h.Set("Cookie", CookieName+"="+accessToken)
	h.Set("Accept", "application/json")
	if withBody {
		h.Set("Content-Type", "application/json")
	}
	return h
}

// post calls one API method and decodes data into out; it returns the
// policies of the answer.
func (c *Client) post(ctx context.Context, accessToken, method string, in any, maxBytes int64, out any) ([]policy, error) {
	if !ValidToken(accessToken) {
		return nil, errBadToken("no valid accessToken cookie")
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", method, err)
	}
	resp, err := c.f.Do(ctx, fetch.Request{
		Method:    http.MethodPost,
		URL:       c.base.JoinPath("api", method).String(),
		Header:    headers(accessToken, true),
		Body:      body,
		Redirects: fetch.FollowNone,
		MaxBytes:  maxBytes,
		Timeout:   c.timeout,
		Outline:   true,
	})
	if err != nil {
		return nil, c.transportError(ctx, method, err)
	}
	env, err := decode(method, resp)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return nil, fmt.Errorf("%w: %s: decode data: %v", ErrUnavailable, method, err)
	}
	return env.Policies, nil
}

// transportError sorts an error of fetch: too large stays too large, the
// caller's cancellation stays itself, everything else means Outline could
// not be asked.
func (c *Client) transportError(ctx context.Context, method string, err error) error {
	switch {
	case errors.Is(err, fetch.ErrTooLarge):
		return fmt.Errorf("%s: %w: %w", method, ErrTooLarge, err)
	case ctx.Err() != nil && !errors.Is(err, fetch.ErrTimeout):
		return fmt.Errorf("%s: %w", method, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, method, err)
}

// decode reads Outline's envelope: a 2xx with ok true is data, a 4xx with
// Outline's error body an *APIError, and anything else (5xx, a redirect, a
// proxy's HTML page, a body that is not Outline's JSON) ErrUnavailable.
func decode(method string, resp *fetch.Response) (*envelope, error) {
	var env envelope
	jsonErr := json.Unmarshal(resp.Body, &env)
	switch s := resp.StatusCode; {
	case s >= 200 && s <= 299:
		if jsonErr != nil || !env.OK || len(env.Data) == 0 || string(env.Data) == "null" {
			return nil, fmt.Errorf("%w: %s: status %d without Outline's JSON answer", ErrUnavailable, method, s)
		}
		return &env, nil
	case s >= 400 && s <= 499 && jsonErr == nil && env.Error != "":
		e := &APIError{Status: s, Code: env.Error, Message: env.Message}
		if s == http.StatusTooManyRequests {
			e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
		}
		return nil, e
	case s >= 300 && s <= 399:
		return nil, fmt.Errorf("%w: %s: Outline answered a redirect to %q; check outline.url", ErrUnavailable, method, resp.Header.Get("Location"))
	}
	return nil, fmt.Errorf("%w: %s: status %d", ErrUnavailable, method, resp.StatusCode)
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d.Round(time.Second)
		}
	}
	return 0
}
