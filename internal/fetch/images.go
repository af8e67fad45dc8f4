package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
)

// Images is the Client as an images.Source: absolute http(s) URLs on
// allowed hosts, with the error sentinels package images turns into image
// problems.
type Images struct {
	c *Client
}

// Images returns the Client as an images.Source for remote images (chain it
// behind a local source with images.Chain). No header is sent: external
// image hosts get no credentials.
func (c *Client) Images() *Images { return &Images{c: c} }

// Open fetches one image. As the Source contract asks, it returns at most
// limits.MaxImageBytes+1 bytes: a larger image comes back cut there, and the
// images stage reports it as too large by its length. Refused URLs wrap
// images.ErrNotAllowed, a 404 or 410 images.ErrNotFound, and failures of the
// remote (other statuses, timeouts, too many redirects, network errors)
// images.ErrUnavailable. Only the caller's own cancellation comes back
// unwrapped.
func (s *Images) Open(ctx context.Context, rawURL string) ([]byte, error) {
	resp, err := s.c.Do(ctx, Request{URL: rawURL, MaxBytes: limits.MaxImageBytes, KeepTruncated: true})
	if err != nil {
		return nil, ImageError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, ImageError(ctx, &StatusError{URL: redact(resp.URL), StatusCode: resp.StatusCode})
	}
	return resp.Body, nil
}

// ImageError sorts an error of Do or Get under the sentinels of package
// images (see Images.Open). It is exported for other sources built on a
// Client, such as Outline's attachments.
func ImageError(ctx context.Context, err error) error {
	var status *StatusError
	switch {
	case ctx.Err() != nil && !errors.Is(err, ErrTimeout):
		return err
	case errors.Is(err, ErrHostNotAllowed), errors.Is(err, ErrForbiddenAddress):
		return fmt.Errorf("%w: %w", images.ErrNotAllowed, err)
	case errors.As(err, &status) && (status.StatusCode == http.StatusNotFound || status.StatusCode == http.StatusGone):
		return fmt.Errorf("%w: %w", images.ErrNotFound, err)
	}
	return fmt.Errorf("%w: %w", images.ErrUnavailable, err)
}
