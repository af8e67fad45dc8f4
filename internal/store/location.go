package store

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

// ParseLocation parses a `store` setting. It returns why v was refused in
// words an operator can act on; the configuration prefixes the setting's
// name.
func ParseLocation(v string) (Location, error) {
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
		if prefix != "" && !ValidKey(prefix) {
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
			switch k {
			case "endpoint":
				e, err := url.Parse(vs[0])
				if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" ||
					e.User != nil || e.RawQuery != "" || e.Fragment != "" || strings.Trim(e.Path, "/") != "" {
					return Location{}, fmt.Errorf("endpoint %q must be an http or https base URL such as http://127.0.0.1:8333", vs[0])
				}
				loc.Endpoint = strings.TrimRight(vs[0], "/")
			case "region":
				if vs[0] == "" || strings.ContainsAny(vs[0], " /\t") {
					return Location{}, fmt.Errorf("region %q must be a region name such as us-east-1", vs[0])
				}
				loc.Region = vs[0]
			default:
				return Location{}, fmt.Errorf("unknown parameter %q (want endpoint and region)", k)
			}
		}
		if loc.Region == "" {
			return Location{}, fmt.Errorf("needs region=…, such as s3://%s?region=us-east-1 (self-hosted stores accept any name)", loc.Bucket)
		}
		return loc, nil
	default:
		return Location{}, fmt.Errorf("must be file:///FOLDER or s3://BUCKET/PREFIX?endpoint=URL&region=REGION")
	}
}
