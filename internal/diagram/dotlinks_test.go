package diagram

import "testing"

func TestDropDotLinks(t *testing.T) {
	tests := []struct{ in, want string }{
		{`digraph { a [URL="javascript:1", label=x] }`, `digraph { a [_RL="javascript:1", label=x] }`},
		{`digraph { a [ "href" = "x" ] }`, `digraph { a [ "_ref" = "x" ] }`},
		{"digraph { a -> b [edgeURL=x\n headhref = <b>y</b>] }", "digraph { a -> b [_dgeURL=x\n _eadhref = <b>y</b>] }"},
		{`digraph { URL="g"; subgraph s { tailURL="t" } }`, `digraph { _RL="g"; subgraph s { _ailURL="t" } }`},
		// Names in labels, HTML labels and comments are text.
		{`digraph { a [label="URL=x href=y"] }`, `digraph { a [label="URL=x href=y"] }`},
		{`digraph { a [label=<URL=x <i>href</i>=y>] }`, `digraph { a [label=<URL=x <i>href</i>=y>] }`},
		{"digraph { // URL=x\n /* href=y */ a }", "digraph { // URL=x\n /* href=y */ a }"},
		{`digraph { a [label="say \"URL\"=x"] }`, `digraph { a [label="say \"URL\"=x"] }`},
		// A value named URL is no attribute.
		{`digraph { a [label=URL] }`, `digraph { a [label=URL] }`},
		{`digraph { URLs=1; myURL=2 }`, `digraph { URLs=1; myURL=2 }`},
	}
	for _, tt := range tests {
		if got := dropDotLinks(tt.in); got != tt.want {
			t.Errorf("dropDotLinks(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
