package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/tex"
)

// TestTeXErrorNesting: TeX running out of grouping levels (a document
// nested too deeply) is answered as such, not as a lack of memory or
// processes; other capacity problems keep the general message.
func TestTeXErrorNesting(t *testing.T) {
	p := &Pipeline{}
	for _, tc := range []struct {
		texMsg, want string
	}{
		{"TeX capacity exceeded, sorry [grouping levels=255].", "nests deeper than the typesetter allows (TeX's grouping levels)"},
		{"TeX capacity exceeded, sorry [input stack size=10000].", "nests deeper than the typesetter allows (TeX's input stack size)"},
		{"TeX capacity exceeded, sorry [main memory size=5000000].", "memory, processes or scratch space"},
	} {
		err := p.texError(fmt.Errorf("%w: %s", tex.ErrResource, tc.texMsg), &markdown.Output{})
		var le *limits.Error
		if !errors.As(err, &le) || le.Code() != limits.CodeResource {
			t.Fatalf("texError(%q) = %v, want a resource error", tc.texMsg, err)
		}
		if msg := le.Problems[0].Message; !strings.Contains(msg, tc.want) {
			t.Errorf("texError(%q) = %q, want it to contain %q", tc.texMsg, msg, tc.want)
		}
	}
}
