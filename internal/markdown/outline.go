package markdown

import (
	"bytes"
	"sync"

	"github.com/yuin/goldmark"
	emoji "github.com/yuin/goldmark-emoji"
	"github.com/yuin/goldmark-emoji/definition"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Dialect says which rules a document is read with.
//
// CommonMark (the default) is CommonMark with GitHub's tables,
// strikethrough, task lists, autolinks and footnotes, plus outprint's
// extensions that give no CommonMark text another meaning they would not
// otherwise have in print: notices (`:::info`), `==highlight==`,
// `!!placeholder!!`, GitHub's emoji names, and `$…$` / `$$…$$` math with
// pandoc's rules (tex_math_dollars).
//
// Outline is the dialect of Outline's serializer
// (shared/editor/lib/markdown/serializer.ts and each node's toMarkdown).
// On top of the above it changes what CommonMark means: a literal `\n` in
// a paragraph is a hard break, `__x__` is underline (not strong), `$` math
// follows Outline's rule (only the next `$` is tried as the closer), a bare
// `+++…` fence is a toggle whose first block is its title, `***` is a page
// break, `a.`/`A.` items are letter lists, and emoji are emoji-mart names
// (`:thumbs_up:`). Outline documents are always read with it; other
// documents when their metadata says `dialect: outline`.
type Dialect string

// The dialects.
const (
	DialectCommonMark Dialect = "commonmark"
	DialectOutline    Dialect = "outline"
)

// outline reports whether the options select Outline's dialect.
func (o Options) outline() bool { return o.Dialect == DialectOutline }

// parsers are built once per dialect: read-only after their first use and
// safe for concurrent Parse calls.
var (
	commonMarkParser = sync.OnceValue(func() parser.Parser { return buildParser(false) })
	outlineParser    = sync.OnceValue(func() parser.Parser { return buildParser(true) })
)

func parserFor(d Dialect) parser.Parser {
	if d == DialectOutline {
		return outlineParser()
	}
	return commonMarkParser()
}

// buildParser builds one dialect's parser. Every container and the default
// inline parsers run under the nesting guards of bounds.go.
func buildParser(outline bool) parser.Parser {
	var inline []util.PrioritizedValue
	for _, v := range parser.DefaultInlineParsers() {
		// `*` and `_` get parsers of their own instead of goldmark's
		// shared one: bounded (bounds.go), and in Outline's dialect `__x__`
		// is underline.
		if bytes.Equal(v.Value.(parser.InlineParser).Trigger(), []byte{'*', '_'}) {
			continue
		}
		inline = append(inline, guardInline(v))
	}
	emojis := emoji.NewParser()
	under := strongUnderParser
	if outline {
		under = underParser
	}
	inline = append(inline,
		util.Prioritized(starParser, 500),
		util.Prioritized(under, 500),
	)
	if outline {
		emojis = emoji.NewParser(emoji.WithEmojis(outlineEmojis()).(emoji.ParserOption))
		inline = append(inline, util.Prioritized(customEmojiParser{}, 590))
	}
	inline = append(inline,
		util.Prioritized(mathInlineParser{outline: outline}, 150),
		util.Prioritized(placeholderParser, 150),
		util.Prioritized(highlightParser, 500),
		util.Prioritized(emojis, 600),
		util.Prioritized(extension.NewFootnoteParser(), 101),
	)
	blocks := append(parser.DefaultBlockParsers(),
		util.Prioritized(noticeParser{}, 750),
		util.Prioritized(mathBlockParser{}, 760),
		// extension.Footnote's parsers, added here so that definitions
		// nest under the same depth guard as the other containers.
		util.Prioritized(extension.NewFootnoteBlockParser(), 999),
	)
	if outline {
		blocks = append(blocks, util.Prioritized(toggleParser{}, 250))
	}
	p := parser.NewParser(
		parser.WithBlockParsers(guardDepth(blocks)...),
		parser.WithInlineParsers(inline...),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
		parser.WithASTTransformers(
			util.Prioritized(extension.NewFootnoteASTTransformer(), 999),
			util.Prioritized(htmlTableTransformer{}, 900),
		),
	)
	md := goldmark.New(
		goldmark.WithParser(p),
		goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify,
			extension.TaskList),
	)
	return md.Parser()
}

// outlineEmojis is the emoji set of the Outline dialect: Outline's own
// names (emoji-mart ids in snake case and Unicode names, outlineEmojiNames)
// first, GitHub's short names after them, for documents imported into
// Outline with those.
var outlineEmojis = sync.OnceValue(func() definition.Emojis {
	list := make([]definition.Emoji, 0, len(outlineEmojiNames))
	for name, char := range outlineEmojiNames {
		list = append(list, definition.NewEmoji(name, []rune(char), name))
	}
	set := definition.NewEmojis(list...)
	set.Add(definition.Github())
	return set
})

// letterLists rewrites the markers of Outline's letter lists (`a.`, `B.`,
// and after `z.` `aa.`, as OrderedList.toMarkdown writes them) into
// numeric markers of the same width, which CommonMark reads as ordered
// list items, and returns where it did: by byte offset of the line, the
// letter value (a = 1, aa = 27) and whether it was upper case. Outline's
// own parser does the same (shared/editor/rules/alphaLists.ts, for one
// letter); lines inside fenced code are left alone.
func letterLists(src []byte) ([]byte, map[int]letterItem) {
	var items map[int]letterItem
	var fence []byte // the open code fence, nil outside one
	for off := 0; off < len(src); {
		end := bytes.IndexByte(src[off:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += off
		}
		line := src[off:end]
		indent := 0
		for indent < len(line) && (line[indent] == ' ' || line[indent] == '\t') {
			indent++
		}
		rest := line[indent:]
		var code bool
		if fence, code = codeFence(fence, rest); !code {
			if v, upper, width, ok := letterMarker(rest); ok {
				if items == nil {
					// The first marker: src is the caller's, rewrite a copy.
					items = map[int]letterItem{}
					src = append([]byte(nil), src...)
				}
				for i := 0; i < width; i++ {
					src[off+indent+i] = '1'
				}
				items[off] = letterItem{value: v, upper: upper}
			}
		}
		off = end + 1
	}
	return src, items
}

// codeFence follows fenced code line by line: given the open fence (nil
// outside one) and a line without its indent, it returns the fence open
// after the line and whether the line is part of the code (its fences
// included).
func codeFence(fence, rest []byte) (open []byte, code bool) {
	switch {
	case fence != nil:
		if bytes.HasPrefix(rest, fence) && len(bytes.Trim(rest, string(fence[:1])+" \t\r")) == 0 {
			return nil, true
		}
		return fence, true
	case bytes.HasPrefix(rest, []byte("```")) || bytes.HasPrefix(rest, []byte("~~~")):
		n := 0
		for n < len(rest) && rest[n] == rest[0] {
			n++
		}
		return append([]byte(nil), rest[:n]...), true
	}
	return nil, false
}

// letterItem is one rewritten letter-list marker.
type letterItem struct {
	value int
	upper bool
}

// letterMarker reads a letter-list marker at the start of s: one to three
// letters of one case, a period and a space or tab.
func letterMarker(s []byte) (value int, upper bool, width int, ok bool) {
	n := 0
	for n < len(s) && n < 4 && (s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z') {
		n++
	}
	if n == 0 || n > 3 || n+1 >= len(s) || s[n] != '.' || (s[n+1] != ' ' && s[n+1] != '\t') {
		return 0, false, 0, false
	}
	upper = s[0] <= 'Z'
	for _, c := range s[:n] {
		if (c <= 'Z') != upper {
			return 0, false, 0, false
		}
		value = value*26 + int(c|0x20-'a') + 1
	}
	return value, upper, n, true
}

// letterLabel is the label of the letter-list item at value: 1 → a,
// 26 → z, 27 → aa (OrderedList.toMarkdown's bijective base 26).
func letterLabel(value int, upper bool) string {
	base := byte('a')
	if upper {
		base = 'A'
	}
	var b []byte
	for n := value - 1; n >= 0; n = n/26 - 1 {
		b = append([]byte{base + byte(n%26)}, b...)
	}
	return string(b)
}

// CustomEmojiPath is where Outline serves a custom emoji's image
// (`/api/emojis.redirect?id=<uuid>`, a redirect to its file, read with the
// reader's session like an attachment).
const CustomEmojiPath = "/api/emojis.redirect"

// customEmojiParser reads Outline's custom emoji, `:<uuid>:` (Emoji's
// toMarkdown writes the emoji's id as its name), as a small inline image of
// CustomEmojiPath: the document's images fetch it like any other.
type customEmojiParser struct{}

func (customEmojiParser) Trigger() []byte { return []byte{':'} }

func (customEmojiParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, _ := block.PeekLine()
	const n = 36 // a UUID
	if len(line) < n+2 || line[n+1] != ':' || !isUUID(line[1:n+1]) {
		return nil
	}
	id := string(bytes.ToLower(line[1 : n+1]))
	block.Advance(n + 2)
	link := ast.NewLink()
	link.Destination = []byte(CustomEmojiPath + "?id=" + id)
	link.Title = []byte(" =18x18") // about the height of a line, as Outline shows it
	return ast.NewImage(link)
}

func isUUID(b []byte) bool {
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
