package images

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// TestLoadStopsAtTotal: once the images fetched pass MaxTotalImageBytes
// together, Load fetches no further image (issue 10: 50 remote images of
// 10 MiB were all fetched and held before the total was checked). Each
// image here is 9 MiB, so the sixth passes 50 MiB; the fetchers that were
// already busy may finish theirs.
func TestLoadStopsAtTotal(t *testing.T) {
	img := pngFile(1000, 1000, 0, make([]byte, 9<<20))
	var opens atomic.Int32
	src := sourceFunc(func(ctx context.Context, url string) ([]byte, error) {
		opens.Add(1)
		return img, nil
	})
	var refs []Ref
	for i := range limits.MaxImages {
		refs = append(refs, Ref{URL: fmt.Sprintf("https://images.example.com/%d.png", i), Line: i + 1})
	}
	_, err := Load(context.Background(), refs, src)
	if err == nil || !strings.Contains(err.Error(), "together exceed") {
		t.Errorf("Load = %v, want the images-together problem", err)
	}
	over := int(limits.MaxTotalImageBytes/int64(len(img))) + 1
	if n := int(opens.Load()); n > over+fetchers-1 {
		t.Errorf("Load opened %d images, want at most %d (%d pass the total, %d fetchers were busy)", n, over+fetchers-1, over, fetchers)
	}
}
