package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Defaults of S3Config.
const (
	// DefaultRetryFor is how long an operation keeps retrying transient
	// errors: longer than a store restart or a leader election takes, far
	// shorter than a job's attempt.
	DefaultRetryFor = 30 * time.Second
	// DefaultRetryBase and DefaultRetryMax shape the backoff between
	// tries: base·2^n with ±50 % jitter, at most max.
	DefaultRetryBase = 100 * time.Millisecond
	DefaultRetryMax  = 2 * time.Second
	// DefaultCreateParallel bounds the concurrent PUTs of one CreateAll.
	DefaultCreateParallel = 8
)

// S3Config configures an S3 store. Credentials come from the caller (cmd
// reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), never from a file.
type S3Config struct {
	// Location is the bucket, prefix, endpoint and region (Scheme "s3").
	Location Location
	// AccessKeyID and SecretAccessKey sign every request; both required.
	AccessKeyID     string
	SecretAccessKey string
	// RetryFor, RetryBase and RetryMax bound the retries of transient
	// errors (defaults DefaultRetryFor, DefaultRetryBase, DefaultRetryMax).
	RetryFor  time.Duration
	RetryBase time.Duration
	RetryMax  time.Duration
	// HTTPClient carries the requests (default: a client of its own with
	// bounded connection and header timeouts).
	HTTPClient *http.Client
}

// WithDefaults returns c with zero fields set to their defaults.
func (c S3Config) WithDefaults() S3Config {
	if c.RetryFor == 0 {
		c.RetryFor = DefaultRetryFor
	}
	if c.RetryBase == 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = time.Minute
		tr.MaxIdleConnsPerHost = 32
		c.HTTPClient = &http.Client{Transport: tr}
	}
	return c
}

func (c S3Config) validate() error {
	switch {
	case c.Location.Scheme != "s3" || c.Location.Bucket == "" || c.Location.Region == "":
		return errors.New("store: an S3 store needs an s3:// location with a bucket and region")
	case c.AccessKeyID == "" || c.SecretAccessKey == "":
		return errors.New("store: an s3:// store needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
	case c.RetryFor < 0 || c.RetryBase <= 0 || c.RetryMax < c.RetryBase:
		return fmt.Errorf("store: retry bounds %s/%s/%s: want RetryFor ≥ 0 and 0 < RetryBase ≤ RetryMax", c.RetryFor, c.RetryBase, c.RetryMax)
	}
	return nil
}

// S3 stores objects in a bucket of an S3-compatible service, each key under
// the location's prefix. A PUT is atomic on every S3 implementation: an
// object becomes visible only when its whole body arrived, and its
// Content-MD5 makes the service refuse a body damaged on the way. Every
// operation retries transient errors (connection failures, 5xx, 429,
// throttling) with backoff for up to RetryFor; permanent ones (403, a
// missing bucket) return at once. It is safe for concurrent use.
type S3 struct {
	client *s3.Client
	cfg    S3Config
}

// NewS3 returns a store for cfg. It does not contact the service; Check
// and EnsureBucket do.
func NewS3(cfg S3Config) (*S3, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	loc := cfg.Location
	opts := s3.Options{
		Region:       loc.Region,
		UsePathStyle: true, // self-hosted stores have no per-bucket host names
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		HTTPClient:   cfg.HTTPClient,
		// Retries are this package's (retry below): the SDK's own give up
		// after three tries, too soon for a store that restarts.
		Retryer: aws.NopRetryer{},
		// Content-MD5 is set by Put itself; trailing checksums in
		// aws-chunked bodies are not understood by every self-hosted store.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if loc.Endpoint != "" {
		opts.BaseEndpoint = aws.String(loc.Endpoint)
	}
	return &S3{client: s3.New(opts), cfg: cfg}, nil
}

// key returns the object key of a store key.
func (s *S3) key(key string) string {
	if s.cfg.Location.Prefix == "" {
		return key
	}
	return s.cfg.Location.Prefix + "/" + key
}

// Check reports whether the bucket is reachable with the credentials,
// retrying transient errors like any operation.
func (s *S3) Check(ctx context.Context) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Location.Bucket})
		return err
	})
	if err != nil {
		return fmt.Errorf("store %s: %w", s.cfg.Location.Bucket, err)
	}
	return nil
}

// EnsureBucket creates the bucket when it does not exist (outprint
// migrate calls it, so that a fresh deployment needs no separate tool).
func (s *S3) EnsureBucket(ctx context.Context) error {
	b := &s.cfg.Location.Bucket
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b})
		if err == nil || !isNotFound(err) {
			return err
		}
		_, err = s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b})
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(err, &owned) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", *b, err)
	}
	return nil
}

// Put stores everything r yields under key, replacing any earlier object.
// The body is read into memory first so that a retry can send it again
// (job inputs and PDFs are bounded by SPEC §3).
func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	if !ValidKey(key) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("put %s: read: %w", key, err)
	}
	if err := s.put(ctx, key, data); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (s *S3) put(ctx context.Context, key string, data []byte) error {
	sum := md5.Sum(data)
	md5b64 := base64.StdEncoding.EncodeToString(sum[:])
	k := s.key(key)
	return s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        &s.cfg.Location.Bucket,
			Key:           &k,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			ContentMD5:    &md5b64,
		})
		return err
	})
}

// CreateAll stores new objects, several PUTs at a time. Each is atomic and
// acknowledged durable by the service when CreateAll returns; when one
// fails after its retries, the objects already written are removed.
func (s *S3) CreateAll(ctx context.Context, objects map[string][]byte) error {
	keys := slices.Sorted(maps.Keys(objects))
	for _, key := range keys {
		if !ValidKey(key) {
			return fmt.Errorf("create %s: %w", key, ErrInvalidKey)
		}
	}
	var (
		mu      sync.Mutex
		written []string
		first   error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, DefaultCreateParallel)
	for _, key := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() { // owned by CreateAll, which waits for it below
			defer func() { <-sem; wg.Done() }()
			err := s.put(ctx, key, objects[key])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("create %s: %w", key, err)
				}
				return
			}
			written = append(written, key)
		}()
	}
	wg.Wait()
	if first != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RetryFor+5*time.Second)
		defer cancel()
		for _, key := range written {
			_ = s.deleteKey(dctx, s.key(key))
		}
	}
	return first
}

// Get opens the object stored under key, or returns an error wrapping
// ErrNotFound. Only the request is retried; the caller reads the body.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if !ValidKey(key) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	k := s.key(key)
	var body io.ReadCloser
	err := s.retry(ctx, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Location.Bucket, Key: &k})
		if err != nil {
			return err
		}
		body = out.Body
		return nil
	})
	if isNotFound(err) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return body, nil
}

// Delete removes the object prefix and every object below prefix + "/".
// Deleting what does not exist is not an error.
func (s *S3) Delete(ctx context.Context, prefix string) error {
	prefix = strings.TrimSuffix(prefix, "/")
	if !ValidKey(prefix) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, prefix)
	}
	full := s.key(prefix)
	keys := []string{full}
	err := s.list(ctx, full+"/", "", func(out *s3.ListObjectsV2Output) {
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", prefix, err)
	}
	for _, k := range keys {
		if err := s.deleteKey(ctx, k); err != nil {
			return fmt.Errorf("delete %s: %w", prefix, err)
		}
	}
	return nil
}

func (s *S3) deleteKey(ctx context.Context, k string) error {
	return s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Location.Bucket, Key: &k})
		if isNotFound(err) {
			return nil
		}
		return err
	})
}

// List returns the names of the entries directly below prefix (objects
// and "folders" — common prefixes — alike), sorted.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if !ValidKey(prefix) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidKey, prefix)
	}
	base := s.key(prefix) + "/"
	seen := map[string]bool{}
	err := s.list(ctx, base, "/", func(out *s3.ListObjectsV2Output) {
		for _, p := range out.CommonPrefixes {
			seen[strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), base), "/")] = true
		}
		for _, o := range out.Contents {
			seen[strings.TrimPrefix(aws.ToString(o.Key), base)] = true
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	delete(seen, "")
	names := slices.Collect(maps.Keys(seen))
	sort.Strings(names)
	return names, nil
}

// list calls page for every page of the listing of prefix, each page's
// request retried on its own.
func (s *S3) list(ctx context.Context, prefix, delimiter string, page func(*s3.ListObjectsV2Output)) error {
	in := &s3.ListObjectsV2Input{Bucket: &s.cfg.Location.Bucket, Prefix: &prefix}
	if delimiter != "" {
		in.Delimiter = &delimiter
	}
	for {
		var out *s3.ListObjectsV2Output
		err := s.retry(ctx, func(ctx context.Context) error {
			var err error
			out, err = s.client.ListObjectsV2(ctx, in)
			return err
		})
		if err != nil {
			return err
		}
		page(out)
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// retry runs op until it succeeds, fails permanently, ctx ends or RetryFor
// has passed since the first try, sleeping base·2^n (±50 %, at most max)
// between tries.
func (s *S3) retry(ctx context.Context, op func(context.Context) error) error {
	deadline := time.Now().Add(s.cfg.RetryFor)
	wait := s.cfg.RetryBase
	for {
		err := op(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		d := wait/2 + rand.N(wait)
		if time.Now().Add(d).After(deadline) {
			return fmt.Errorf("gave up after %s: %w", s.cfg.RetryFor, err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, s.cfg.RetryMax)
	}
}

// transient reports whether err may pass on its own: the request never
// got an answer (connection refused or reset, a timeout), the answer was
// cut off, or the service said so (5xx, 429, SlowDown).
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		return true
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) {
		code := resp.HTTPStatusCode()
		if code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout {
			return true
		}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling":
			return true
		}
		return false
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return true // the answer was cut off mid-way
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// isNotFound reports a missing object: NoSuchKey, or NotFound and a bare
// 404 (HEAD answers have no body). A missing bucket (NoSuchBucket) is a
// configuration error, not a missing object.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
		return false
	}
	var resp *smithyhttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusNotFound
}
