package collection

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
)

// TestRead: the tree is read in order with each document's depth; a
// document the reader may only read is skipped with the reason, one they
// cannot read at all (no access, gone, deleted) is left out with its
// children still read, and any other failure of Outline stops the walk.
func TestRead(t *testing.T) {
	t.Parallel()
	answers := map[string]func() (*outline.Document, error){
		"a":  func() (*outline.Document, error) { return &outline.Document{Title: "A", Text: "a"}, nil },
		"a1": func() (*outline.Document, error) { return &outline.Document{Title: "A1", Text: "a1"}, nil },
		"readonly": func() (*outline.Document, error) {
			return &outline.Document{Title: "RO"}, fmt.Errorf("x: %w", outline.ErrNoDownload)
		},
		"private": func() (*outline.Document, error) {
			return nil, &outline.APIError{Status: 403, Code: outline.CodeAuthorization}
		},
		"gone": func() (*outline.Document, error) {
			return nil, &outline.APIError{Status: 404, Code: outline.CodeNotFound}
		},
		"trashed": func() (*outline.Document, error) {
			return &outline.Document{Title: "T"}, fmt.Errorf("x: %w", outline.ErrDeleted)
		},
		"b2":   func() (*outline.Document, error) { return &outline.Document{Title: "B2", Text: "b2"}, nil },
		"down": func() (*outline.Document, error) { return nil, fmt.Errorf("%w: status 500", outline.ErrUnavailable) },
	}
	var asked []string
	read := func(_ context.Context, id string) (*outline.Document, error) {
		asked = append(asked, id)
		return answers[id]()
	}
	tree := []outline.TreeNode{
		{ID: "a", Children: []outline.TreeNode{{ID: "a1"}, {ID: "readonly"}}},
		{ID: "private", Children: []outline.TreeNode{{ID: "b2"}}},
		{ID: "gone"}, {ID: "trashed"},
	}
	docs, skipped, err := Read(context.Background(), tree, read)
	if err != nil {
		t.Fatal(err)
	}
	want := []Doc{{Title: "A", Depth: 0, Text: "a"}, {Title: "A1", Depth: 1, Text: "a1"}, {Title: "B2", Depth: 1, Text: "b2"}}
	if !reflect.DeepEqual(docs, want) {
		t.Errorf("Read docs = %+v, want %+v", docs, want)
	}
	if len(skipped) != 1 || skipped[0].Title != "RO" {
		t.Errorf("Read skipped = %+v, want the read-only document", skipped)
	}
	if got := strings.Join(asked, ","); got != "a,a1,readonly,private,b2,gone,trashed" {
		t.Errorf("asked Outline for %s, want the tree in order", got)
	}

	asked = nil
	if _, _, err := Read(context.Background(), []outline.TreeNode{{ID: "a"}, {ID: "down"}, {ID: "b2"}}, read); !errors.Is(err, outline.ErrUnavailable) {
		t.Errorf("Read with Outline down = %v, want ErrUnavailable", err)
	}
	if got := strings.Join(asked, ","); got != "a,down" {
		t.Errorf("asked Outline for %s after the failure, want the walk stopped", got)
	}
}

// TestReadBound: reading stops with 413 as soon as the texts read pass
// limits.MaxCollectionBytes.
func TestReadBound(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", limits.MaxMarkdownBytes)
	var tree []outline.TreeNode
	for i := range limits.MaxCollectionBytes/limits.MaxMarkdownBytes + 5 {
		tree = append(tree, outline.TreeNode{ID: fmt.Sprint(i)})
	}
	n := 0
	_, _, err := Read(context.Background(), tree, func(context.Context, string) (*outline.Document, error) {
		n++
		return &outline.Document{Title: "T", Text: big}, nil
	})
	var le *limits.Error
	if !errors.As(err, &le) || le.Kind != limits.KindTooLarge {
		t.Fatalf("Read past the collection bound = %v, want too_large", err)
	}
	if want := limits.MaxCollectionBytes/limits.MaxMarkdownBytes + 1; n != want {
		t.Errorf("documents read = %d, want %d (stopped at the first past the bound)", n, want)
	}
}
