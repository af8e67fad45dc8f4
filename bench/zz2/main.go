package main

import (
	"context"
	"os"

	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
)

type dump struct{}

func (dump) Run(ctx context.Context, job tex.Job) (*tex.Result, error) {
	os.MkdirAll("/tmp/xdvtest", 0o755)
	for name, src := range job.Files {
		b, _ := os.ReadFile(src); os.WriteFile("/tmp/xdvtest/"+name, b, 0o644)
	}
	os.WriteFile("/tmp/xdvtest/main.tex", []byte(job.Preamble+"\n\\begin{document}\n"+job.Body+"\n\\end{document}\n"), 0o644)
	os.Exit(0)
	return nil, nil
}

func main() {
	pipe := render.New(render.Config{Engine: dump{}, TempDir: os.TempDir()})
	src, _ := os.ReadFile(os.Args[1])
	pipe.Do(context.Background(), render.Request{Markdown: src}, nil)
}
