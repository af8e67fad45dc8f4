package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Keys of one job in the artifact store. They are deterministic, so a retry
// or a rescued attempt writes the same result key and never a second result.
//
//	jobs/{id}/document.md     the Markdown
//	jobs/{id}/metadata.json   the JSON Binding, when given
//	jobs/{id}/assets/{name}   each image, name escaped (AssetKey)
//	jobs/{id}/form.pdf        a forms job's PDF form
//	jobs/{id}/values.json     a forms job's values
//	jobs/{id}/office          an office job's document (its format and
//	                          options are in the manifest)
//	jobs/{id}/result.pdf      the PDF of a succeeded job
//
// The input sits directly in the job's folder rather than in a folder of
// its own: on the filesystem store every folder a Submit creates is an
// inode to allocate and a folder to sync before the 202, and a second one
// per job cost about a third of acceptance throughput (bench/jobs).
type Keys struct{ ID string }

// Prefix is the folder of everything the job stored.
func (k Keys) Prefix() string { return "jobs/" + k.ID }

// Document is the key of the Markdown.
func (k Keys) Document() string { return k.Prefix() + "/document.md" }

// Metadata is the key of the JSON Binding.
func (k Keys) Metadata() string { return k.Prefix() + "/metadata.json" }

// Asset is the key of the image the Markdown refers to as name.
func (k Keys) Asset(name string) string { return k.Prefix() + "/assets/" + AssetKey(name) }

// FormPDF is the key of a forms job's PDF form.
func (k Keys) FormPDF() string { return k.Prefix() + "/form.pdf" }

// FormValues is the key of a forms job's values.
func (k Keys) FormValues() string { return k.Prefix() + "/values.json" }

// Office is the key of an office job's document.
func (k Keys) Office() string { return k.Prefix() + "/office" }

// Result is the key of the PDF.
func (k Keys) Result() string { return k.Prefix() + "/result.pdf" }

// Thumbnail is the key of page's PNG drawing width pixels wide, kept beside
// the result and deleted with it.
func (k Keys) Thumbnail(page, width int) string {
	return fmt.Sprintf("%s/pages/%d-%d.png", k.Prefix(), page, width)
}

// ThumbnailRefused is the key that records that page could not be drawn
// width pixels wide within the drawing's bounds, so that asking again
// costs no drawing (issue 24: failures were not cached).
func (k Keys) ThumbnailRefused(page, width int) string {
	return fmt.Sprintf("%s/pages/%d-%d.refused", k.Prefix(), page, width)
}

// maxAssetKeyBytes keeps an escaped asset name well below the 255-byte file
// name limit of common filesystems.
const maxAssetKeyBytes = 160

// AssetKey turns the path or URL the Markdown uses for an image into one
// key segment: letters, digits, '-', '_' and '.' stay (a leading '.' is
// escaped, so the segment is never "." or ".."), everything else becomes
// %XX. Long names become "h-" and the SHA-256 of the name; the manifest maps
// names to keys either way.
func AssetKey(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_',
			c == '.' && i > 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	if b.Len() == 0 || b.Len() > maxAssetKeyBytes {
		sum := sha256.Sum256([]byte(name))
		return "h-" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// manifest describes a stored input. It is kept in the job row
// (input_manifest), which commits after the files it lists are durable, so
// a manifest names only complete files — and costs no file sync of its own.
type manifest struct {
	Version  int             `json:"version"`
	Name     string          `json:"name,omitempty"`
	Metadata bool            `json:"metadata"`
	Assets   []manifestAsset `json:"assets,omitempty"`
	Outline  *OutlineSource  `json:"outline,omitempty"`
	// Form marks a forms job: its input is form.pdf and values.json, not
	// a document. The job row's source stays "markdown" (the column's
	// check allows markdown and outline), so the kind lives here.
	Form bool `json:"form,omitempty"`
	// Office marks an office job: its input is the document at
	// Keys.Office, of this format, with these options (JSON).
	Office *manifestOffice `json:"office,omitempty"`
}

type manifestOffice struct {
	Format  string          `json:"format"`
	Options json.RawMessage `json:"options,omitempty"`
}

type manifestAsset struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	Size int    `json:"size"`
}

// idTime returns the creation time encoded in a version-7 job id, which the
// sweep uses to judge the age of an input folder without a job row.
func idTime(id string) (time.Time, bool) {
	u, err := parseID(id)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}
