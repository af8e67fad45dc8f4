package markdown

import (
	"fmt"
	"os"
	"testing"
)

func TestTmpDump(t *testing.T) {
	src, _ := os.ReadFile(os.Getenv("MD"))
	d, err := Parse(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{Title: "Document", TOC: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(out.Body)
}
