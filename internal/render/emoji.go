package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
)

// DefaultEmojiDir is where scripts/setup.sh and the Dockerfile install the
// emoji image set: Twemoji's SVGs (npm @discordapp/twemoji 16.0.1, graphics
// CC-BY 4.0), one file per sequence named like markdown.Document.Emoji's
// names ("1f600.svg", "1f468-200d-1f4bb.svg").
const DefaultEmojiDir = "/usr/local/share/outprint/emoji/twemoji-16.0.1/svg"

// emojiProbe is a file every version of the set has: a folder without it
// is not an emoji set.
const emojiProbe = "1f600.svg"

// maxEmojiSVG bounds one file read from the set (Twemoji's largest is
// about 20 KB).
const maxEmojiSVG = 256 << 10

// EmojiSet returns dir when it holds an emoji image set, else "" (emoji
// then print as the emoji font's outlines): `outprint config check` shows
// which.
func EmojiSet(dir string) string {
	if dir == "" {
		return ""
	}
	if fi, err := os.Stat(filepath.Join(dir, emojiProbe)); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return dir
}

// EmojiDir returns the emoji set the pipeline draws emoji with, "" when
// there is none (emoji are then Symbola's outlines): the service logs it
// and `outprint config check` shows it, so an operator sees the fallback.
func (p *Pipeline) EmojiDir() string { return p.emojiDir }

// emojiSource opens an emoji's SVG in the set by its name; only names the
// markdown package made (hex digits and "-") are looked up.
type emojiSource struct{ dir string }

func (s emojiSource) Open(_ context.Context, name string) ([]byte, error) {
	if name == "" || strings.Trim(name, "0123456789abcdef-") != "" {
		return nil, fmt.Errorf("emoji %q: not an emoji name", name)
	}
	f, err := os.Open(filepath.Join(s.dir, name+".svg"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	return io.ReadAll(io.LimitReader(f, maxEmojiSVG))
}

// emojiFile returns the set's file name (without .svg) for an emoji name,
// "" when the set has none: sequences typed without their U+FE0F still
// find the fully qualified file and the other way round.
func emojiFile(dir, name string) string {
	for _, n := range []string{name, strings.ReplaceAll(name, "-fe0f", ""), name + "-fe0f"} {
		if _, err := os.Stat(filepath.Join(dir, n+".svg")); err == nil {
			return n
		}
	}
	return ""
}

// emojiImages converts the document's emoji that the set has into PDFs in
// a folder inside dir (the SVG cache keeps them across renders) and
// returns their entries for the images map LaTeX takes, by
// markdown.EmojiKey, and for the TeX job's files. An emoji the set lacks,
// or a set file that fails the image checks, stays text: an emoji never
// fails a render.
func (p *Pipeline) emojiImages(ctx context.Context, dir string, names []string) (map[string]markdown.Image, map[string]string, error) {
	if p.emojiDir == "" || len(names) == 0 {
		return nil, nil, nil
	}
	files := make(map[string]string, len(names)) // emoji name → set file name
	refs := make([]images.Ref, 0, len(names))
	for _, n := range names {
		if f := emojiFile(p.emojiDir, n); f != "" {
			if _, dup := files[f]; !dup {
				refs = append(refs, images.Ref{URL: f})
			}
			files[n] = f
		}
	}
	if len(refs) == 0 {
		return nil, nil, nil
	}
	set, err := images.LoadMax(ctx, refs, emojiSource{p.emojiDir}, markdown.MaxEmoji)
	var le *limits.Error
	if errors.As(err, &le) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("emoji: %w", err)
	}
	sub := filepath.Join(dir, "emoji")
	if err := os.Mkdir(sub, 0o755); err != nil {
		return nil, nil, fmt.Errorf("emoji folder: %w", err)
	}
	canon, err := set.Convert(ctx, sub, p.svgs)
	if errors.As(err, &le) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("emoji: %w", err)
	}
	imgs := make(map[string]markdown.Image, len(files))
	paths := make(map[string]string, len(canon))
	for name, f := range files {
		c, ok := canon[f]
		if !ok {
			continue
		}
		texName := "emoji-" + c.File
		imgs[markdown.EmojiKey(name)] = markdown.Image{File: texName, Width: c.Width, Height: c.Height}
		paths[texName] = filepath.Join(sub, c.File)
	}
	return imgs, paths, nil
}
