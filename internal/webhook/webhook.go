// Package webhook signs and sends job completion webhooks (issue 16) under
// the Standard Webhooks specification (standardwebhooks.com), and decides
// which callback URLs a job may name.
//
// A delivery is a POST of the job's status document with three headers:
// webhook-id (the event id, the same on every attempt), webhook-timestamp
// (Unix seconds of this attempt) and webhook-signature, "v1,<base64
// HMAC-SHA256 of id.timestamp.body>" for each active secret of the job's
// tenant, space-separated, so that a receiver keeps verifying while secrets
// rotate. Receivers verify with any Standard Webhooks library.
//
// Every connection goes through fetch's dial-time guard: callbacks reach
// public addresses over https, redirects are never followed, and only the
// hosts of webhooks.allowHosts may be reached over http or at private and
// loopback addresses. Policy.Check refuses at acceptance what can be known
// then (scheme, host syntax, literal addresses, localhost); the guard
// refuses the rest (names resolving inside) at every dial.
//
// The durable part — when a delivery is due, retries, the record of each
// attempt — is package jobs'; Sender makes one attempt.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/jobs"
)

// Bounds of one delivery.
const (
	// MaxBody bounds the request body: a status document is a few hundred
	// bytes, and a receiver need not accept more.
	MaxBody = 64 << 10
	// MaxResponse bounds what is read of an answer; the rest is dropped.
	MaxResponse = 64 << 10
	// DefaultTimeout bounds one attempt, connection to last byte.
	DefaultTimeout = 10 * time.Second
)

// Headers of Standard Webhooks.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// Secret key lengths accepted, in bytes after base64 decoding. Standard
// Webhooks recommends 24 to 64.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// ParseSecret decodes "whsec_" + base64 (standard alphabet) into the HMAC
// key.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("a webhook secret starts with %s", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("a webhook secret is %s followed by base64: %w", SecretPrefix, err)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("a webhook secret holds %d to %d bytes, not %d", MinSecretBytes, MaxSecretBytes, len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature value for one message: a "v1,"
// signature per key, space-separated.
func Sign(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		h := hmac.New(sha256.New, k)
		h.Write([]byte(id))
		h.Write([]byte{'.'})
		h.Write([]byte(strconv.FormatInt(timestamp, 10)))
		h.Write([]byte{'.'})
		h.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(h.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// Secrets gives the signing keys of a tenant; *Policy implements it.
type Secrets interface {
	Secrets(tenant string) [][]byte
}

// SenderConfig wires a Sender.
type SenderConfig struct {
	// Client makes the requests: a fetch.Client with AnyHTTPS and
	// TrustAllowHosts set and webhooks.allowHosts as its AllowHosts.
	Client *fetch.Client
	// Secrets gives each tenant's signing keys at every attempt, so that
	// rotated secrets apply to deliveries still retrying.
	Secrets Secrets
	// Document renders a job's status document with links made absolute
	// with baseURL (httpapi.JobDocument).
	Document func(job jobs.Job, baseURL string) ([]byte, error)
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// Now is the clock of webhook-timestamp (default time.Now).
	Now func() time.Time
}

// Sender makes delivery attempts; it implements jobs.WebhookSender.
type Sender struct {
	cfg SenderConfig
}

// NewSender returns a Sender for cfg.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Client == nil || cfg.Secrets == nil || cfg.Document == nil {
		return nil, errors.New("webhook: Client, Secrets and Document are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sender{cfg: cfg}, nil
}

// Send makes one attempt: the body is built and signed now, POSTed without
// following redirects, and at most MaxResponse bytes of the answer are
// read.
func (s *Sender) Send(ctx context.Context, d jobs.WebhookDelivery) jobs.WebhookResult {
	keys := s.cfg.Secrets.Secrets(d.Job.Tenant)
	if len(keys) == 0 {
		return jobs.WebhookResult{Err: fmt.Errorf("no webhook secret is configured for tenant %q (auth.apiKeys[].webhookSecrets)", d.Job.Tenant), Permanent: true}
	}
	body, err := s.cfg.Document(d.Job, d.BaseURL)
	if err != nil {
		return jobs.WebhookResult{Err: fmt.Errorf("status document: %w", err), Permanent: true}
	}
	if len(body) > MaxBody {
		return jobs.WebhookResult{Err: fmt.Errorf("the status document has %d bytes, more than %d", len(body), MaxBody), Permanent: true}
	}
	ts := s.cfg.Now().Unix()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "outprint-webhooks")
	h.Set(HeaderID, d.EventID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(keys, d.EventID, ts, body))
	resp, err := s.cfg.Client.Do(ctx, fetch.Request{
		Method: http.MethodPost, URL: d.URL, Header: h, Body: body,
		Redirects: fetch.FollowNone, MaxBytes: MaxResponse, KeepTruncated: true, Timeout: s.cfg.Timeout,
	})
	if err != nil {
		permanent := errors.Is(err, fetch.ErrHostNotAllowed) || errors.Is(err, fetch.ErrForbiddenAddress)
		return jobs.WebhookResult{Err: err, Permanent: permanent}
	}
	return jobs.WebhookResult{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), s.cfg.Now())}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date. 0 when
// absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(7*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
