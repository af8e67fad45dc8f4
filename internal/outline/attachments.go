package outline

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
)

// attachmentPath is where Outline's attachments are asked for; it answers
// with a redirect to storage.
const attachmentPath = "/api/attachments.redirect"

// Attachment fetches an attachment as the reader: GET
// /api/attachments.redirect?id=<uuid> on Outline with the reader's cookie,
// then the redirect to storage without it (fetch drops credentials on any
// change of host). pathAndQuery is the URL as Outline's Markdown writes it;
// only its id is used, so a token parameter smuggled into it never reaches
// Outline.
//
// Like an images.Source it returns at most limits.MaxImageBytes+1 bytes, a
// larger attachment cut there so the caller sees it is too large. Outline's
// refusals are *APIError (ErrForbidden, ErrNotFound); a failing Outline or
// storage is ErrUnavailable.
func (c *Client) Attachment(ctx context.Context, accessToken, pathAndQuery string) ([]byte, error) {
	id, err := redirectID(pathAndQuery, attachmentPath)
	if err != nil {
		return nil, err
	}
	return c.redirected(ctx, accessToken, "attachments.redirect", id)
}

// CustomEmoji fetches a custom emoji's image as the reader, like
// Attachment: GET /api/emojis.redirect?id=<uuid> on Outline with the
// reader's cookie, then the redirect to storage without it. pathAndQuery
// is the URL the Markdown parser made of `:<uuid>:`.
func (c *Client) CustomEmoji(ctx context.Context, accessToken, pathAndQuery string) ([]byte, error) {
	id, err := redirectID(pathAndQuery, emojiPath)
	if err != nil {
		return nil, err
	}
	return c.redirected(ctx, accessToken, "emojis.redirect", id)
}

// redirected asks Outline's method (attachments.redirect or
// emojis.redirect) for the file of id with the reader's cookie and follows
// the redirect to storage, which fetch makes without the cookie.
func (c *Client) redirected(ctx context.Context, accessToken, method, id string) ([]byte, error) {
	if !ValidToken(accessToken) {
		return nil, errBadToken("no valid accessToken cookie")
	}
	u := c.base.JoinPath("api", method)
	u.RawQuery = url.Values{"id": {id}}.Encode()
	resp, err := c.f.Do(ctx, fetch.Request{
		URL:           u.String(),
		Header:        headers(accessToken, false),
		Redirects:     fetch.FollowAny,
		MaxBytes:      limits.MaxImageBytes,
		KeepTruncated: true,
		Outline:       true,
	})
	if err != nil {
		return nil, c.transportError(ctx, method, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp.Body, nil
	}
	if c.onOutline(resp.URL) {
		_, err := decode(method, resp)
		return nil, err
	}
	// Storage refused or failed: a signature that expired on the way, a
	// missing object, a broken bucket. The reader cannot fix any of it.
	return nil, fmt.Errorf("%w: attachment %s: %w", ErrUnavailable, id,
		&fetch.StatusError{URL: "storage", StatusCode: resp.StatusCode})
}

// emojiPath is where a custom emoji's image is asked for (see
// markdown.CustomEmojiPath).
const emojiPath = "/api/emojis.redirect"

// redirectID takes the id out of an attachments.redirect or emojis.redirect
// path (relative, as Outline's Markdown writes it).
func redirectID(pathAndQuery, path string) (string, error) {
	u, err := url.Parse(pathAndQuery)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path != path {
		return "", errBadID("not an Outline attachment URL")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil || len(q["id"]) != 1 || !validUUID(q.Get("id")) {
		return "", errBadID("the attachment id is not a UUID")
	}
	return q.Get("id"), nil
}

// onOutline reports whether u is on Outline's host.
func (c *Client) onOutline(u *url.URL) bool {
	return u != nil && strings.EqualFold(u.Hostname(), c.base.Hostname()) && port(u) == port(c.base)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// ImageSource opens the images of one Outline document as one reader. It
// is an images.Source.
type ImageSource struct {
	c     *Client
	token string
}

// Images returns the source for the images of a document read with
// accessToken:
//
//   - /api/attachments.redirect?id=… (relative, or absolute on Outline's
//     host) is an attachment, fetched with the reader's cookie;
//   - /api/emojis.redirect?id=… (relative: a custom emoji `:<uuid>:`) is
//     fetched the same way;
//   - any other absolute http(s) URL, on Outline's host too, is an
//     ordinary remote image: the fetch.Client allows only images.allowHosts
//     and public addresses for it, and sends no credentials;
//   - anything else (other relative paths, file:, data:, "//host") is
//     refused.
func (c *Client) Images(accessToken string) *ImageSource {
	return &ImageSource{c: c, token: accessToken}
}

// Open fetches one image under the Source contract of package images: at
// most limits.MaxImageBytes+1 bytes, and errors wrapping images.ErrNotFound,
// images.ErrNotAllowed or images.ErrUnavailable for an image that cannot be
// had. The caller's own cancellation comes back unwrapped.
func (s *ImageSource) Open(ctx context.Context, raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse %q", images.ErrNotAllowed, raw)
	}
	switch {
	case u.Scheme == "" && u.Host == "" && u.Path == attachmentPath:
		return s.attachment(ctx, u)
	case u.Scheme == "" && u.Host == "" && u.Path == emojiPath:
		data, err := s.c.CustomEmoji(ctx, s.token, u.String())
		return s.imageError(ctx, data, err)
	case (u.Scheme == "http" || u.Scheme == "https") && u.Path == attachmentPath && s.c.onOutline(u):
		return s.attachment(ctx, &url.URL{Path: u.Path, RawQuery: u.RawQuery})
	case u.Scheme == "http" || u.Scheme == "https":
		return s.c.f.Images().Open(ctx, raw)
	}
	return nil, fmt.Errorf("%w: only Outline attachments and http(s) URLs are images of an Outline document", images.ErrNotAllowed)
}

func (s *ImageSource) attachment(ctx context.Context, u *url.URL) ([]byte, error) {
	data, err := s.c.Attachment(ctx, s.token, u.String())
	return s.imageError(ctx, data, err)
}

// imageError sorts the error of an attachment or emoji fetch into the
// images.Source contract.
func (s *ImageSource) imageError(ctx context.Context, data []byte, err error) ([]byte, error) {
	if err == nil {
		return data, nil
	}
	switch {
	case ctx.Err() != nil && !errors.Is(err, fetch.ErrTimeout):
		return nil, err
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrBadID):
		return nil, fmt.Errorf("%w: %w", images.ErrNotFound, err)
	case errors.Is(err, ErrNoSession), errors.Is(err, ErrSuspended), errors.Is(err, ErrForbidden),
		errors.Is(err, ErrPaymentRequired), errors.Is(err, ErrUnexpected):
		return nil, fmt.Errorf("%w: %w", images.ErrNotAllowed, err)
	}
	return nil, fmt.Errorf("%w: %w", images.ErrUnavailable, err)
}
