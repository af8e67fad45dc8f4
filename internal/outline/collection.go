package outline

import (
	"context"
	"fmt"
)

// Collection is an Outline collection as its reader sees it: its name and
// its documents' tree, in the order Outline shows them.
type Collection struct {
	ID   string
	Name string
	Tree []TreeNode
}

// TreeNode is one document of a collection's tree (collections.documents).
type TreeNode struct {
	ID       string     `json:"id"`
	Title    string     `json:"title"`
	URL      string     `json:"url"`
	Children []TreeNode `json:"children"`
}

// maxTreeDepth bounds the nesting of a tree decoded from Outline: deeper
// than any real collection, shallow enough for recursion.
const maxTreeDepth = 64

// Collection asks Outline for a collection and its tree as the reader
// (POST /api/collections.info and /api/collections.documents). id is a
// UUID or a urlId; anything else is ErrBadID without asking Outline. A
// reader without access gets Outline's 403 (ErrForbidden), as for a
// document.
func (c *Client) Collection(ctx context.Context, accessToken, id string) (*Collection, error) {
	if !ValidCollectionID(id) {
		return nil, errBadID("the collection id is not a UUID or urlId")
	}
	var info struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if _, err := c.post(ctx, accessToken, "collections.info", map[string]string{"id": id}, maxAPIBytes, &info); err != nil {
		return nil, err
	}
	if info.ID == "" {
		return nil, fmt.Errorf("%w: collections.info: the answer has no id", ErrUnavailable)
	}
	var tree []TreeNode
	// The tree's own size is bounded like a document's answer: titles and
	// ids of thousands of documents.
	if _, err := c.post(ctx, accessToken, "collections.documents", map[string]string{"id": info.ID}, maxDocumentBytes, &tree); err != nil {
		return nil, err
	}
	if depth(tree, 0) > maxTreeDepth {
		return nil, fmt.Errorf("%w: collections.documents: the tree is nested more than %d deep", ErrUnavailable, maxTreeDepth)
	}
	return &Collection{ID: info.ID, Name: info.Name, Tree: tree}, nil
}

func depth(nodes []TreeNode, d int) int {
	m := d
	for _, n := range nodes {
		m = max(m, depth(n.Children, d+1))
	}
	return m
}

// ValidCollectionID reports whether id can name a collection: a UUID or a
// urlId (10–15 alphanumerics), optionally after a slug.
func ValidCollectionID(id string) bool { return ValidDocumentID(id) }
