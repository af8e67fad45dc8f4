package markdown

import (
	"slices"
	"strings"
	"testing"
)

func TestEmojiNames(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"plain text", nil},
		{"a 😀 b 😀", []string{"1f600"}},                                         // repeated: once
		{"coder 👨‍💻", []string{"1f468-200d-1f4bb"}},                            // zero width joiner
		{"flag 🇩🇪 and 🇫🇷", []string{"1f1e9-1f1ea", "1f1eb-1f1f7"}},             // regional indicator pairs
		{"thumbs 👍🏽", []string{"1f44d-1f3fd"}},                                 // skin tone
		{"heart ❤️ and ♥ and ❤", []string{"2764"}},                             // U+FE0F dropped; text presentation stays text
		{"rainbow 🏳️‍🌈", []string{"1f3f3-fe0f-200d-1f308"}},                    // U+FE0F kept beside a joiner
		{"coffee ☕ tm ™ tm ™️", []string{"2615", "2122"}},                      // emoji presentation, and text + U+FE0F
		{"lone 🇩 indicator", nil},                                              // half a flag is no emoji
		{"family 👨‍👩‍👧‍👦", []string{"1f468-200d-1f469-200d-1f467-200d-1f466"}}, // four joined
	}
	for _, tt := range tests {
		if got := emojiNames(tt.in, MaxEmoji); !slices.Equal(got, tt.want) {
			t.Errorf("emojiNames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := strings.Repeat("😀\u200d", 1000)
	if got := emojiNames(long, MaxEmoji); len(got) != 1 || strings.Count(got[0], "-")+1 > maxEmojiRunes || strings.HasSuffix(got[0], "200d") {
		t.Errorf("emojiNames(1000 joined) = %d names, first %q: want sequences of at most %d code points", len(got), got[0], maxEmojiRunes)
	}
	var many strings.Builder
	for i := range 2 * MaxEmoji {
		many.WriteRune(0x1f400 + rune(i))
	}
	if got := emojiNames(many.String(), MaxEmoji); len(got) != MaxEmoji {
		t.Errorf("emojiNames(%d distinct) = %d names, want %d", 2*MaxEmoji, len(got), MaxEmoji)
	}
}

// TestEmojiLaTeX: an emoji with an image is \opemoji with its own text in
// hex and the image's file; one without an image, in a right-to-left
// stretch or in code stays text in the emoji font.
func TestEmojiLaTeX(t *testing.T) {
	src := "Smile 😀 and 👍🏽 and :tada: with `code 😀` and שלום 😀 עולם.\n"
	d, err := Parse([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Emoji(), []string{"1f600", "1f44d-1f3fd", "1f389"}; !slices.Equal(got, want) {
		t.Fatalf("Emoji() = %q, want %q", got, want)
	}
	imgs := map[string]Image{
		EmojiKey("1f600"): {File: "emoji-img-01.pdf", Width: 27, Height: 27},
		EmojiKey("1f389"): {File: "emoji-img-02.pdf", Width: 27, Height: 27},
	}
	out, err := d.LaTeX(Meta{}, imgs)
	if err != nil {
		t.Fatal(err)
	}
	body := out.Body
	for _, want := range []string{
		`Smile \opfontemoji{\opemoji{FEFFD83DDE00}{emoji-img-01.pdf}}`,
		`\opemoji{FEFFD83CDF89}{emoji-img-02.pdf}`, // :tada:
	} {
		if !strings.Contains(body, want) {
			t.Errorf("LaTeX lacks %s:\n%s", want, body)
		}
	}
	if got := strings.Count(body, `\opemoji`); got != 2 {
		t.Errorf("LaTeX has %d \\opemoji, want 2 (the code span's, the right-to-left one and 👍🏽 without an image stay text):\n%s", got, body)
	}
	if !strings.Contains(body, "👍🏽") {
		t.Errorf("LaTeX lost 👍🏽, which has no image:\n%s", body)
	}
}
