package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
)

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	off := len(os.Args) > 3 && os.Args[3] == "off"
	tmp, _ := os.MkdirTemp("", "zz-")
	defer os.RemoveAll(tmp)
	pool, err := tex.NewPool(tex.PoolConfig{Runner: tex.RunnerConfig{TempDir: tmp}, Zygote: tex.ZygoteConfig{Off: off}})
	if err != nil {
		panic(err)
	}
	defer pool.Close(context.Background())
	pipe := render.New(render.Config{Engine: pool, TempDir: tmp})
	src, _ := os.ReadFile(os.Args[1])
	req := render.Request{Markdown: src}
	for i := 0; i < 5; i++ {
		pipe.Do(context.Background(), req, nil)
		time.Sleep(300 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "GO", pool.Stats().Forked)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		s := time.Now()
		_, err := pipe.Do(context.Background(), req, nil)
		if err != nil {
			panic(err)
		}
		if i < 5 {
			fmt.Fprintln(os.Stderr, time.Since(s))
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "END", time.Since(t0), pool.Stats().Forked)
}
