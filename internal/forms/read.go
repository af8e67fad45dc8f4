package forms

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// Reading a form is bounded by what it holds, before qpdf does the costly
// part. qpdf's JSON costs per object, and most before its first byte is
// written: every object's dictionary (--json-key=qpdf) some 25 to 110 µs
// of CPU and 4 KB of memory each, the field list (--json-key=acroform)
// about 150 µs and 10 KB per field. A 17 MB form of 100,000 fields took
// 15 s and 960 MB of qpdf, and its 109 MB of JSON some 430 MiB more in
// outprint. So a form is read in three passes, each only when the one
// before found the form within its bounds:
//
//  0. qpdf lists the cross-reference table (--show-xref: it parses the
//     table, no object), and outprint counts the objects as the lines
//     come, stopping qpdf past MaxObjects.
//  1. qpdf writes every object's dictionary (--json-key=qpdf, no stream
//     data), and outprint reads them as they come (readObjects): it counts
//     their bytes and the markers of fields and widgets in them, and stops
//     qpdf past a bound. Each object is kept as its JSON text and decoded
//     only when the form model looks at it (qdoc.object).
//  2. qpdf lists the pages and fields (--json-key=pages, acroform,
//     encrypt), whose cost the markers bound.

// Bounds of the first pass.
const (
	// MaxObjects bounds the objects of a form's PDF. Forms of other
	// producers have 40 to 1,200 (a two-page IRS 1040 from LiveCycle
	// 1,139); a form of MaxFields fields, each with its appearance
	// streams, some 8,000.
	MaxObjects = 25_000
	// maxObjectBytes bounds the JSON of every object's dictionary
	// together, the memory a form's model holds.
	maxObjectBytes = 64 << 20
	// maxFieldMarkers bounds the /FT keys and /Widget subtypes of a form:
	// a field merged with its widget has one of each, a radio group one
	// plus one per button. Five per field leaves room for any real form
	// within MaxFields.
	maxFieldMarkers = 5 * MaxFields
	// maxListJSONBytes bounds the second pass's JSON (pages, fields).
	maxListJSONBytes = 32 << 20
)

var (
	markerField  = []byte(`"/FT"`)
	markerWidget = []byte(`"/Widget"`)
)

// qobjects is the first pass's result: qpdf's header and every object's
// JSON text by key ("obj:12 0 R", "trailer").
type qobjects struct {
	header qheader
	raw    map[string]json.RawMessage
}

// objectLimitError is a bound of the first pass, passed.
type objectLimitError struct{ msg string }

func (e *objectLimitError) Error() string { return e.msg }

// clientError is the answer for a passed bound.
func (e *objectLimitError) clientError() error {
	return &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
		Field: "pdf", Source: limits.SourceDocument, Code: limits.CodeTooLarge, Message: e.msg,
	}}}
}

// readObjects reads qpdf's JSON of --json-key=qpdf from r as it comes and
// stops at the first bound passed. It reads r to its end when it succeeds.
func readObjects(r io.Reader) (*qobjects, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	out := &qobjects{raw: map[string]json.RawMessage{}}
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if key, _ := tok.(string); key != "qpdf" {
			var skip json.RawMessage // "version", "parameters": small
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			continue
		}
		found = true
		if err := readQpdf(dec, out); err != nil {
			return nil, err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("qpdf json: no objects")
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, err
	}
	return out, nil
}

// expectDelim reads the next token of dec, which must be the delimiter
// want.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("qpdf json: %v where %v was expected", tok, want)
	}
	return nil
}

// readQpdf reads the value of the "qpdf" key, [header, {objects}], into
// out, one object at a time under the bounds.
func readQpdf(dec *json.Decoder, out *qobjects) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	if err := dec.Decode(&out.header); err != nil {
		return fmt.Errorf("qpdf json header: %w", err)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var b objectBounds
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if err := b.add(len(out.raw), key, raw); err != nil {
			return err
		}
		out.raw[key] = raw
	}
	if err := expectDelim(dec, '}'); err != nil {
		return err
	}
	return expectDelim(dec, ']')
}

// objectBounds counts what the objects read so far add up to: the bytes
// of their keys and values, and the field and widget markers in them.
type objectBounds struct {
	size, markers int
}

// add counts one more object, given how many were read before it; it is
// an *objectLimitError past a bound.
func (b *objectBounds) add(read int, key string, raw json.RawMessage) error {
	if read > MaxObjects {
		// Pass 0 counted fewer: a table qpdf had to rebuild.
		return &objectLimitError{fmt.Sprintf("the PDF has more than %d objects", MaxObjects)}
	}
	b.size += len(key) + len(raw)
	if b.size > maxObjectBytes {
		return &objectLimitError{fmt.Sprintf("the PDF's objects describe more than %d MiB of dictionaries", maxObjectBytes>>20)}
	}
	b.markers += bytes.Count(raw, markerField) + bytes.Count(raw, markerWidget)
	if b.markers > maxFieldMarkers {
		return &objectLimitError{fmt.Sprintf("the form has more fields and widgets than a form of %d fields can have", MaxFields)}
	}
	return nil
}

// countObjects is pass 0: it has qpdf list the cross-reference table and
// counts its entries as they come, stopping qpdf past MaxObjects (an
// *objectLimitError). A PDF qpdf cannot list is passed on: the next pass
// reports it.
func (f *Filler) countObjects(ctx context.Context, dir string, deadline time.Duration) error {
	_, err := f.sandbox(deadline, 0).runStream(ctx, dir, func(r io.Reader) error {
		sc := bufio.NewScanner(r)
		n := 0
		for sc.Scan() {
			if n++; n > MaxObjects {
				return &objectLimitError{fmt.Sprintf("the PDF has more than %d objects", MaxObjects)}
			}
		}
		_, err := io.Copy(io.Discard, r) // a line too long for the scanner
		return err
	}, "--show-xref", "in.pdf")
	var le *objectLimitError
	if errors.As(err, &le) || (err != nil && !errors.Is(err, errStreamRead)) {
		return err
	}
	return nil
}
