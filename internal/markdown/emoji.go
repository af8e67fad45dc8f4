package markdown

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Emoji are drawn as small images where the render has them (an emoji
// image set, see render), because XeTeX cannot use colour emoji fonts: the
// writer sets each emoji sequence it finds in running text as
// \opemoji{hex}{file}, an image at text size inside a marked-content span
// whose /ActualText is the sequence itself, so copying and searching the
// PDF give back the emoji. Sequences without an image stay text in the
// emoji font (Symbola) as before.

// MaxEmoji bounds the distinct emoji sequences of one document that become
// images: each costs a conversion and an image in the PDF, so a document of
// thousands of different sequences keeps the rest as text.
const MaxEmoji = 256

// EmojiKey is the key of an emoji's image in the images map LaTeX takes:
// name is the sequence's name as Emoji returns it.
func EmojiKey(name string) string { return "emoji:" + name }

// Emoji returns the names of the distinct emoji sequences of the document
// in order of first appearance, at most MaxEmoji: each name is the
// sequence's code points in lowercase hex joined by "-", without U+FE0F
// unless the sequence has a zero width joiner (the naming of the common
// emoji image sets, e.g. "1f600", "1f468-200d-1f4bb", "1f1e9-1f1ea").
func (d *Document) Emoji() []string { return append([]string(nil), d.emoji...) }

// emojiNames lists the distinct emoji names of s, at most max.
func emojiNames(s string, max int) []string {
	var names []string
	seen := map[string]bool{}
	for i := 0; i < len(s) && len(names) < max; {
		n := emojiAt(s, i)
		if n == 0 {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			continue
		}
		name := EmojiName(s[i : i+n])
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		i += n
	}
	return names
}

// EmojiName returns the image name of an emoji sequence (see Emoji).
func EmojiName(seq string) string {
	zwj := strings.ContainsRune(seq, 0x200d)
	var b strings.Builder
	for _, r := range seq {
		if r == 0xfe0f && !zwj {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('-')
		}
		fmt.Fprintf(&b, "%x", r)
	}
	return b.String()
}

// emojiAt returns the length in bytes of the emoji sequence that starts at
// byte i of s, 0 if none does: an emoji (one shown as a picture by
// default, or any pictograph followed by U+FE0F) with its variation
// selector, skin tone, keycap and tag characters, joined by zero width
// joiners to further emoji; or a pair of regional indicators (a flag).
func emojiAt(s string, i int) int {
	r, size := utf8.DecodeRuneInString(s[i:])
	if isRegional(r) {
		if q := runeAt(s, i+size); isRegional(q) {
			return size + utf8.RuneLen(q)
		}
		return 0
	}
	if !isEmojiPresentation(r) && !(isPictograph(r) && runeAt(s, i+size) == 0xfe0f) {
		return 0
	}
	return emojiEnd(s, i+size) - i
}

// runeAt is the rune at byte j of s, -1 past its end.
func runeAt(s string, j int) rune {
	if j >= len(s) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(s[j:])
	return r
}

// emojiEnd is the end of the emoji sequence whose first emoji ends at byte
// j of s: the characters that belong to an emoji (emojiPart) and further
// emoji after zero width joiners, maxEmojiRunes at most.
func emojiEnd(s string, j int) int {
	for runes := 1; j < len(s) && runes < maxEmojiRunes; runes++ {
		q, qs := utf8.DecodeRuneInString(s[j:])
		switch {
		case emojiPart(q):
			j += qs
		case q == 0x200d && runes+2 <= maxEmojiRunes:
			p := runeAt(s, j+qs)
			if !isPictograph(p) && !isEmojiPresentation(p) {
				return j
			}
			j += qs + utf8.RuneLen(p)
			runes++
		default:
			return j
		}
	}
	return j
}

// emojiPart reports whether r belongs to the emoji before it: the
// variation selector U+FE0F, the keycap, a skin tone or a tag character
// (of a subdivision flag).
func emojiPart(r rune) bool {
	return r == 0xfe0f || r == 0x20e3 || r >= 0x1f3fb && r <= 0x1f3ff || r >= 0xe0020 && r <= 0xe007f
}

// maxEmojiRunes bounds an emoji sequence: the longest the emoji sets have
// (a family of four with its joiners, a subdivision flag with its tags)
// are well below it, and a longer chain of joiners is split.
const maxEmojiRunes = 16

func isRegional(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// isPictograph reports whether r is in a block of pictographs and
// symbols that have emoji forms (shown as text unless U+FE0F follows).
func isPictograph(r rune) bool { return unicode.Is(pictographs, r) }

// pictographs are the characters of isPictograph.
var pictographs = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0xa9, Hi: 0xa9, Stride: 1},
		{Lo: 0xae, Hi: 0xae, Stride: 1},
		{Lo: 0x203c, Hi: 0x203c, Stride: 1},
		{Lo: 0x2049, Hi: 0x2049, Stride: 1},
		{Lo: 0x2122, Hi: 0x2122, Stride: 1},
		{Lo: 0x2139, Hi: 0x2139, Stride: 1},
		{Lo: 0x2194, Hi: 0x21aa, Stride: 1},
		{Lo: 0x2300, Hi: 0x23ff, Stride: 1},
		{Lo: 0x24c2, Hi: 0x25ff, Stride: 1},
		{Lo: 0x2600, Hi: 0x27bf, Stride: 1},
		{Lo: 0x2934, Hi: 0x2935, Stride: 1},
		{Lo: 0x2b05, Hi: 0x2b55, Stride: 1},
		{Lo: 0x3030, Hi: 0x3030, Stride: 1},
		{Lo: 0x303d, Hi: 0x303d, Stride: 1},
		{Lo: 0x3297, Hi: 0x3297, Stride: 1},
		{Lo: 0x3299, Hi: 0x3299, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x1f000, Hi: 0x1faff, Stride: 1},
	},
	LatinOffset: 2,
}

// isEmojiPresentation reports whether r is shown as a picture even without
// U+FE0F: the pictographs from U+1F000 on (less the skin tone modifiers
// and regional indicators, which only modify) and the older symbols that
// Unicode gives emoji presentation.
func isEmojiPresentation(r rune) bool {
	switch {
	case r >= 0x1f3fb && r <= 0x1f3ff, isRegional(r):
		return false
	case r >= 0x1f000 && r <= 0x1faff:
		// The few text-default pictographs of these blocks (e.g. U+1F321
		// thermometer) still look right as images.
		return true
	}
	switch r {
	case 0x231a, 0x231b, 0x23e9, 0x23ea, 0x23eb, 0x23ec, 0x23f0, 0x23f3, 0x25fd, 0x25fe,
		0x2614, 0x2615, 0x267f, 0x2693, 0x26a1, 0x26aa, 0x26ab, 0x26bd, 0x26be, 0x26c4, 0x26c5,
		0x26ce, 0x26d4, 0x26ea, 0x26f2, 0x26f3, 0x26f5, 0x26fa, 0x26fd, 0x2705, 0x270a, 0x270b,
		0x2728, 0x274c, 0x274e, 0x2753, 0x2754, 0x2755, 0x2757, 0x2795, 0x2796, 0x2797, 0x27b0,
		0x27bf, 0x2b1b, 0x2b1c, 0x2b50, 0x2b55:
		return true
	}
	return r >= 0x2648 && r <= 0x2653
}

// emojiHex is the /ActualText of an emoji sequence: UTF-16BE in hex with
// its byte order mark.
func emojiHex(seq string) string {
	var hex strings.Builder
	hex.WriteString("FEFF")
	for _, u := range utf16.Encode([]rune(seq)) {
		fmt.Fprintf(&hex, "%04X", u)
	}
	return hex.String()
}

// hasEmojiStart reports whether s may hold an emoji sequence (a cheap
// test before emojiAt is run at each position).
func hasEmojiStart(s string) bool {
	for _, r := range s {
		if r >= 0x2000 || r == 0xa9 || r == 0xae {
			return true
		}
	}
	return false
}
