package jobs

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
)

// The idempotency digest: what decides a job's PDF, in one canonical
// encoding (each field its length, then its bytes), so that a client
// repeating its request with the same Idempotency-Key gets its job back
// and a different request under the same key is refused. It is written
// once, here: RequestDigest for an Input, UploadDigest for an upload whose
// assets were hashed while they were spooled to disk; both encode a
// Markdown request the same way (TestUploadDigest).

// digestVersion starts every digest; change it when the encoding changes.
const digestVersion = "outprint-job-v1"

// digester writes the fields of a digest.
type digester struct{ h hash.Hash }

func newDigester(kind string) digester {
	d := digester{h: sha256.New()}
	d.field([]byte(digestVersion))
	d.field([]byte(kind))
	return d
}

func (d digester) field(b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
}

func (d digester) sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

// RequestDigest is the digest Submit uses when Input.Digest is empty: the
// SHA-256 of a canonical encoding of what decides the PDF — the Outline
// document id for Outline jobs; the form's bytes and the values for forms
// jobs; the name, the document's bytes and the options for office jobs;
// otherwise the name, Markdown, metadata and every asset (sorted by
// name). Tenant, user and key are not part of it: the key is looked up
// within the tenant already.
func RequestDigest(in Input) string {
	if in.Outline != nil {
		d := newDigester(SourceOutline)
		d.field([]byte(in.Outline.DocumentID))
		return d.sum()
	}
	if in.Form != nil {
		d := newDigester(string(KindForm))
		sum := sha256.Sum256(in.Form.PDF)
		d.field(sum[:])
		d.field(in.Form.Values)
		return d.sum()
	}
	if in.Office != nil {
		d := newDigester(string(KindOffice))
		d.field([]byte(in.Name))
		sum := sha256.Sum256(in.Office.Doc)
		d.field(sum[:])
		d.field(in.Office.Options)
		return d.sum()
	}
	sums := make(map[string][sha256.Size]byte, len(in.Assets))
	for name, b := range in.Assets {
		sums[name] = sha256.Sum256(b)
	}
	return UploadDigest(in.Name, in.Markdown, in.Metadata, sums)
}

// UploadDigest is RequestDigest of a Markdown request from the SHA-256 of
// each asset instead of its bytes: the document, metadata and assets
// exactly as the client sent them, so that a client repeating its request
// gets its job back even when an external image changed meanwhile, and
// the assets, hashed while they arrived, need not be read again.
func UploadDigest(name string, markdown, metadata []byte, assetSums map[string][sha256.Size]byte) string {
	d := newDigester(SourceMarkdown)
	d.field([]byte(name))
	d.field(markdown)
	d.field(metadata)
	names := make([]string, 0, len(assetSums))
	for n := range assetSums {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d.field([]byte(n))
		sum := assetSums[n]
		d.field(sum[:])
	}
	return d.sum()
}
