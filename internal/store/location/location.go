// Package location parses the `store` setting: where job inputs and
// results live (a folder, or a bucket on an S3-compatible service). It is
// a leaf of its own so that the configuration can check the setting
// without linking the S3 client (package store).
package location

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Location is a parsed `store` setting: a folder (file:///path) or a
// bucket and key prefix on an S3-compatible service
// (s3://bucket/prefix?endpoint=…&region=…).
type Location struct {
	// Scheme is "file" or "s3".
	Scheme string
	// Path is the folder of a file store (absolute).
	Path string
	// Bucket, Prefix, Endpoint and Region describe an S3 store. Prefix
	// has no leading or trailing slash and may be empty; Endpoint is the
	// service's base URL (empty for AWS itself).
	Bucket   string
	Prefix   string
	Endpoint string
	Region   string
}

// String gives the setting back in its canonical form.
func (l Location) String() string {
	if l.Scheme == "file" {
		return "file://" + l.Path
	}
	u := url.URL{Scheme: "s3", Host: l.Bucket}
	if l.Prefix != "" {
		u.Path = "/" + l.Prefix
	}
	q := url.Values{}
	if l.Endpoint != "" {
		q.Set("endpoint", l.Endpoint)
	}
	q.Set("region", l.Region)
	u.RawQuery = q.Encode()
	return u.String()
}

// bucketName is the S3 bucket naming rule (lower-case DNS label-like names
// of 3–63 characters), which path-style self-hosted stores share.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// Parse parses a `store` setting. It returns why v was refused in
// words an operator can act on; the configuration prefixes the setting's
// name.
func Parse(v string) (Location, error) {
	v = strings.TrimSpace(v)
	u, err := url.Parse(v)
	if err != nil {
		return Location{}, fmt.Errorf("must be file:///FOLDER or s3://BUCKET/PREFIX?endpoint=URL&region=REGION")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return Location{}, fmt.Errorf("must be file:///FOLDER with an absolute folder and nothing else (no host, query or fragment)")
		}
		if !filepath.IsAbs(u.Path) || strings.ContainsRune(u.Path, 0) {
			return Location{}, fmt.Errorf("must be file:///FOLDER with an absolute folder")
		}
		return Location{Scheme: "file", Path: filepath.Clean(u.Path)}, nil
	case "s3":
		return parseS3(u)
	default:
		return Location{}, fmt.Errorf("must be file:///FOLDER or s3://BUCKET/PREFIX?endpoint=URL&region=REGION")
	}
}

// maxPrefixBytes bounds a key prefix as package store bounds a key.
const maxPrefixBytes = 1024

// validPrefix reports whether p is a relative, slash-separated path whose
// segments are neither empty, "." nor ".." nor a temporary file's name
// (".tmp-…"), without backslashes or NUL bytes: the key syntax of package
// store (store.ValidKey).
func validPrefix(p string) bool {
	if p == "" || len(p) > maxPrefixBytes || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, ".tmp-") {
			return false
		}
	}
	return true
}

// parseS3 reads s3://BUCKET/PREFIX?endpoint=URL&region=REGION.
func parseS3(u *url.URL) (Location, error) {
	if u.User != nil {
		return Location{}, fmt.Errorf("must not carry credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
	}
	if u.Fragment != "" || u.Opaque != "" {
		return Location{}, fmt.Errorf("must be s3://BUCKET/PREFIX?endpoint=URL&region=REGION")
	}
	if !bucketName.MatchString(u.Host) || strings.Contains(u.Host, "..") {
		return Location{}, fmt.Errorf("bucket %q is not a valid bucket name (3 to 63 lower-case letters, digits, '.' and '-')", u.Host)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" && !validPrefix(prefix) {
		return Location{}, fmt.Errorf("prefix %q is not a valid key prefix (no empty, '.' or '..' segments)", prefix)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Location{}, fmt.Errorf("query %q: %v", u.RawQuery, err)
	}
	loc := Location{Scheme: "s3", Bucket: u.Host, Prefix: prefix}
	for k, vs := range q {
		if len(vs) != 1 {
			return Location{}, fmt.Errorf("%s is given %d times", k, len(vs))
		}
		if err := loc.param(k, vs[0]); err != nil {
			return Location{}, err
		}
	}
	if loc.Region == "" {
		return Location{}, fmt.Errorf("needs region=…, such as s3://%s?region=us-east-1 (self-hosted stores accept any name)", loc.Bucket)
	}
	return loc, nil
}

// param sets one query parameter of an s3:// location.
func (loc *Location) param(k, v string) error {
	switch k {
	case "endpoint":
		e, err := url.Parse(v)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" ||
			e.User != nil || e.RawQuery != "" || e.Fragment != "" || strings.Trim(e.Path, "/") != "" {
			return fmt.Errorf("endpoint %q must be an http or https base URL such as http://127.0.0.1:8333", v)
		}
		loc.Endpoint = strings.TrimRight(v, "/")
	case "region":
		if v == "" || strings.ContainsAny(v, " /\t") {
			return fmt.Errorf("region %q must be a region name such as us-east-1", v)
		}
		loc.Region = v
	default:
		return fmt.Errorf("unknown parameter %q (want endpoint and region)", k)
	}
	return nil
}
