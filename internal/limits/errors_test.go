package limits

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestCapProblems(t *testing.T) {
	list := func(n int) []Problem {
		var ps []Problem
		for i := range n {
			ps = append(ps, Problem{Source: SourceDocument, Code: CodeMath, Line: i + 1, Message: "bad"})
		}
		return ps
	}
	for _, tc := range []struct {
		n, extra int
		wantLen  int
		wantLast string
	}{
		{0, 0, 0, ""},
		{5, 0, 5, "bad"},
		{MaxProblems + 1, 0, MaxProblems + 1, "bad"},
		{MaxProblems + 2, 0, MaxProblems + 1, "and 2 more problems"},
		{MaxProblems, 1, MaxProblems + 1, "and 1 more problem"},
		{200_000, 0, MaxProblems + 1, "and 199900 more problems"},
	} {
		got := CapProblems(list(tc.n), tc.extra)
		last := ""
		if len(got) > 0 {
			last = got[len(got)-1].Message
		}
		if len(got) != tc.wantLen || last != tc.wantLast {
			t.Errorf("CapProblems(%d problems, %d) = %d entries ending %q, want %d ending %q",
				tc.n, tc.extra, len(got), last, tc.wantLen, tc.wantLast)
		}
		if len(got) > 0 && got[len(got)-1].Code != CodeMath {
			t.Errorf("CapProblems(%d, %d): last code %q, want %q", tc.n, tc.extra, got[len(got)-1].Code, CodeMath)
		}
	}
}

// TestInvalidCapped: a list of 200,000 problems is answered with 101
// entries of SPEC §5's shape, and capping twice changes nothing.
func TestInvalidCapped(t *testing.T) {
	var ps []Problem
	for i := range 200_000 {
		ps = append(ps, Problem{Source: SourceDocument, Code: CodeMath, Line: i + 1, Message: fmt.Sprintf("formula %d", i)})
	}
	le := Invalid(ps...).(*Error)
	if len(le.Problems) != MaxProblems+1 {
		t.Fatalf("Invalid(200000 problems) has %d entries, want %d", len(le.Problems), MaxProblems+1)
	}
	again := Invalid(le.Problems...).(*Error)
	if fmt.Sprint(again.Problems) != fmt.Sprint(le.Problems) {
		t.Errorf("Invalid of a capped list changed it: last %q, want %q", again.Problems[MaxProblems].Message, le.Problems[MaxProblems].Message)
	}
	b, err := json.Marshal(map[string]any{"errors": le.Problems})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 20_000 {
		t.Errorf("error list JSON is %d bytes, want under 20,000", len(b))
	}
	if !strings.Contains(string(b), `{"field":null,"source":"document","code":"math","message":"and 199900 more problems","line":null}`) &&
		!strings.Contains(string(b), `"message":"and 199900 more problems"`) {
		t.Errorf("error list JSON lacks the summary entry: …%s", b[len(b)-200:])
	}
}
