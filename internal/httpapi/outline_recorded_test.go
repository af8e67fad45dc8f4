package httpapi

import (
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline/outlinetest"
)

// TestOutlinePrivateCollection is the first promise, against the
// fake answering as a real Outline 1.9.1 did: in a private collection
// every ability is a list of membership ids, and the document prints for
// its admin and its member, with its image; a member without access, a
// viewer outside the collection, expired and garbage sessions, a deleted
// document and a workspace whose plan lapsed are refused with their own
// answers.
func TestOutlinePrivateCollection(t *testing.T) {
	e := newOlEnv(t, olOptions{tex: true})
	f := e.fake
	alice := f.AddUser(outlinetest.User{Name: "Alice Admin", Role: "admin", Token: "tok.alice"})
	member := f.AddUser(outlinetest.User{Name: "Bob Member", Token: "tok.member"})
	nina := f.AddUser(outlinetest.User{Name: "Nina NoAccess", Token: "tok.nina"})
	vera := f.AddUser(outlinetest.User{Name: "Vera Viewer", Role: "viewer", Token: "tok.vera"})
	eve := f.AddUser(outlinetest.User{Name: "Eve Expired", Token: "tok.eve", Expired: true})
	handbook := f.AddCollection(outlinetest.Collection{Name: "Handbook", Private: true,
		Members: []string{alice.ID, member.ID}})
	img := f.AddAttachment(outlinetest.Attachment{Body: olPNG(t, 120, 80), Local: true})
	author := outlinetest.Person{ID: alice.ID, Name: alice.Name}
	pvt := f.AddDocument(outlinetest.Document{Title: "Private note", CollectionID: handbook.ID, CreatedBy: author,
		Text: "Private collection text.\n\n ![A diagram](" + img + " \" =120x80\")"})
	trashed := f.AddDocument(outlinetest.Document{Title: "Trashed", Text: "gone", CreatedBy: author,
		DeletedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)})

	for _, who := range []outlinetest.User{alice, member} {
		for _, id := range []string{pvt.ID, pvt.URLID, "private-note-" + pvt.URLID} {
			a := e.get("/render/"+id, who.Token, nil)
			if a.status != http.StatusOK {
				t.Fatalf("%s: GET /render/%s = %d, want 200: %s", who.Name, id, a.status, a.body)
			}
			if txt := olPDFTool(t, a.body, "pdftotext", "-enc", "UTF-8"); !strings.Contains(txt, "Private collection text.") {
				t.Errorf("%s: the PDF lacks the document's text:\n%s", who.Name, txt)
			}
			list := olPDFTool(t, a.body, "pdfimages", "-list")
			if rows := strings.Split(strings.TrimSpace(list), "\n")[2:]; len(rows) != 1 {
				t.Errorf("%s: pdfimages -list has %d images, want the attachment:\n%s", who.Name, len(rows), list)
			}
			if testing.Short() {
				break // one id form per reader is enough to prove the point
			}
		}
	}

	tests := []struct {
		name, path, token string
		status            int
		source            limits.Source
		code              string
	}{
		{"member without access", "/render/" + pvt.ID, nina.Token, 403, limits.SourceAuth, httperr.CodeForbidden},
		{"viewer outside the collection", "/render/" + pvt.URLID, vera.Token, 403, limits.SourceAuth, httperr.CodeForbidden},
		{"expired session", "/render/" + pvt.ID, eve.Token, 401, limits.SourceAuth, httperr.CodeUnauthorized},
		{"garbage session", "/render/" + pvt.ID, "garbage.token", 401, limits.SourceAuth, httperr.CodeUnauthorized},
		{"deleted document", "/render/" + trashed.ID, alice.Token, 410, limits.SourceDocument, CodeDeleted},
		{"status of a deleted document", "/status/" + trashed.ID, alice.Token, 200, "", ""},
	}
	for _, tt := range tests {
		a := e.get(tt.path, tt.token, nil)
		if a.status != tt.status {
			t.Errorf("%s: GET %s = %d, want %d: %s", tt.name, tt.path, a.status, tt.status, a.body)
			continue
		}
		if tt.status == 200 {
			if !strings.Contains(string(a.body), `"renderable":false`) || !strings.Contains(string(a.body), CodeDeleted) {
				t.Errorf("%s: %s, want renderable false with %s", tt.name, a.body, CodeDeleted)
			}
			continue
		}
		if p := a.problems(t)[0]; p.Source != tt.source || p.Code != tt.code {
			t.Errorf("%s: problem = %s/%s, want %s/%s (%q)", tt.name, p.Source, p.Code, tt.source, tt.code, p.Message)
		}
	}

	// A workspace whose plan lapsed: Outline answers 402 to every call.
	// That is Outline refusing this reader's workspace, not an outage
	// (no 502): 403 forbidden.
	f.SetPaymentRequired(true)
	a := e.get("/render/"+pvt.ID, member.Token, nil)
	if a.status != http.StatusForbidden {
		t.Fatalf("402 from Outline: GET /render = %d, want 403: %s", a.status, a.body)
	}
	if p := a.problems(t)[0]; p.Code != httperr.CodeForbidden || !strings.Contains(p.Message, "payment required") {
		t.Errorf("402 from Outline: problem = %+v, want forbidden naming the payment", p)
	}
}

// TestOutlineGallery renders the text a real Outline 1.9.1 serialized for
// a document with every common construct (../shared/outline-recordings/
// gallery-serialized.md, the text of documents.info-gallery.json) through
// GET /render, and checks the PDF with pdftotext: every construct's text
// is there, and none of Outline's markup is left over.
func TestOutlineGallery(t *testing.T) {
	e := newOlEnv(t, olOptions{tex: true})
	f := e.fake
	// The attachment ids are the recorded ones: the text names them.
	f.AddAttachment(outlinetest.Attachment{ID: "1319ca30-dca4-40da-a01e-cd188af70ffa", Body: olPNG(t, 160, 100), Local: true})
	doc := f.AddDocument(outlinetest.Document{Title: "Gallery", Text: outlinetest.Text(t, "gallery"), CreatedBy: e.janePerson})
	a := e.get("/render/"+doc.URLID, e.jane.Token, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET /render/%s = %d, want 200: %s", doc.URLID, a.status, a.body)
	}
	raw := olPDFTool(t, a.body, "pdftotext", "-enc", "UTF-8")
	txt := strings.Join(strings.Fields(raw), " ")
	for _, want := range []string{
		"Heading one inside the text", "Heading two", "Heading three", "Heading four",
		"Plain bold, italic, underline, strike, highlight, code, placeholder, a link, https://", "example.org.", // a URL may break after //
		"Line one", "line two after a hard break.",
		"price $5 and $10, env $HOME/$PATH.",
		"An info notice.", "A warning notice.", "A tip notice with bold.", "A success notice.",
		"Toggle title", "Toggle body.", "Nested toggle title", "Nested body.",
		"bullet one", "nested bullet", "deeper bullet", "bullet two",
		"first", "second", "nested ordered", "alpha one", "alpha two", "upper one", "upper two",
		"open task", "done task", "A quote on two lines.",
		"Left", "Center", "Right",
		`func main() { fmt.Println("hi") }`, "graph TD; A-->B;",
		"Mention @Bob Member and emoji 😄 👍 🔥 ❤", "🎉",
		"report.pdf", "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
		"After a page break. Characters: * _ ` ~ [ # + : 1. < > & \"quotes\" ’single’.", // TeX's quotes
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("pdftotext lacks %q", want)
		}
	}
	for _, bad := range []string{"+++", ":::", "==", `\n`, ":smile:", ":thumbs_up:", ":fire:", ":red_heart:", ":tada:",
		"!!", "mention://", "attachments.redirect", "$$", `\int`, "=160x100", "right-50"} {
		if strings.Contains(raw, bad) {
			t.Errorf("pdftotext shows %q, which must not print", bad)
		}
	}
	// The image (twice, same attachment) is in the PDF.
	list := olPDFTool(t, a.body, "pdfimages", "-list")
	if rows := strings.Split(strings.TrimSpace(list), "\n")[2:]; len(rows) < 1 {
		t.Errorf("pdfimages -list has no image:\n%s", list)
	}
	// The page break (***) starts a page: the last paragraph is alone on
	// the last page.
	pages := strings.Split(raw, "\f")
	if len(pages) < 2 || !strings.Contains(pages[len(pages)-2], "After a page break") && !strings.Contains(pages[len(pages)-1], "After a page break") {
		t.Errorf("no page break before the last paragraph")
	}
}

var keepPDFs = flag.String("outline-pdfs", "", "write TestOutlineConstructs' PDFs into this folder, to look at them")

// TestOutlineConstructs renders one document per construct of Outline's
// serializer that the gallery lacks (testdata/outline/, written as
// Outline's toMarkdown methods write them) through GET /render, and checks
// each PDF with pdftotext: the text the reader saw in Outline is there, the
// markup is not.
func TestOutlineConstructs(t *testing.T) {
	e := newOlEnv(t, olOptions{tex: true})
	// The custom emoji of emoji.md, an uploaded image.
	e.fake.AddAttachment(outlinetest.Attachment{ID: "5c1d7a2e-3b4f-4a6c-9d8e-7f6a5b4c3d2e", Body: olPNG(t, 64, 64)})
	tests := []struct {
		file      string
		want, not []string
	}{
		{"letter-lists.md",
			[]string{"a. alpha item", "b. bravo item", "a. inner alpha", "b. inner bravo", "c. charlie item",
				"A. Upper alpha", "B. Upper bravo", "y. yankee item", "z. zulu item", "aa. double alpha item", "ab. double bravo item"},
			[]string{"1. alpha", "11. double", "2. bravo"}},
		{"toggles.md",
			[]string{"Outer toggle title", "Outer toggle body.", "Inner toggle title", "Inner toggle body.",
				"A toggle with a list inside", "first bullet in toggle", "second bullet in toggle"},
			[]string{"+++"}},
		{"notices.md",
			[]string{"Warning", "Careful with this warning.", "Toggle inside a notice", "Body of the toggle inside the notice.",
				"Toggle holding a notice", "Tip", "Tip inside a toggle."},
			[]string{":::", "+++"}},
		{"emoji.md",
			[]string{"Emoji by Outline’s names:", "😀", "👎", "🤩", "🤭", "❤", "🚀"},
			[]string{":grinning:", ":thumbs_down:", ":star_struck:", ":face_with_hand_over_mouth:", ":heart:", ":rocket:",
				"5c1d7a2e", "::"}},
		{"mentions.md",
			[]string{"@Jane Doe", "@Design Team", "@Release Plan", "@Engineering", "@Fix login", "@Add export", "@Apollo", "@Status page"},
			[]string{"mention://", "](", "user/"}},
		{"media.md",
			[]string{"report.pdf (", "Quarterly review (PDF,", "launch-demo.mp4 (video)", "Interview recording",
				"https://www.youtube.com/watch?v=dQw4w9WgXcQ"},
			[]string{"pdf:204800", "640x480", "102400", "attachments.redirect"}},
		{"footnotes.md",
			[]string{"A sentence with a footnote", "The first footnote’s text.", "The second footnote’s text."},
			[]string{"[^1]", "[^2]"}},
		{"layouts.md",
			[]string{"Left column text.", "Right column text."},
			[]string{":::", "layout_section"}},
		{"dates.md",
			[]string{"Due on 1 March 2026, reviewed 2026-04-15, open: Choose a date."},
			[]string{"date:"}},
		{"page-links.md",
			[]string{"Engineering handbook", "Engineering"},
			[]string{"/doc/", "/collection/"}},
		{"math.md",
			[]string{"Price $5, env $HOME/$PATH here."},
			[]string{`\sum`, `\frac`, "$$", "$a"}},
		{"tables.md",
			[]string{"Name", "Notes", "Amount", "first row", "line one", "line two", "second", "code", "10", "20"},
			[]string{"<br>", "|"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("testdata", "outline", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			doc := e.fake.AddDocument(outlinetest.Document{Title: strings.TrimSuffix(tt.file, ".md"), Text: string(text), CreatedBy: e.janePerson})
			a := e.get("/render/"+doc.ID, e.jane.Token, nil)
			if a.status != http.StatusOK {
				t.Fatalf("GET /render = %d, want 200: %s", a.status, a.body)
			}
			raw := olPDFTool(t, a.body, "pdftotext", "-enc", "UTF-8")
			txt := strings.Join(strings.Fields(raw), " ")
			for _, want := range tt.want {
				if !strings.Contains(txt, want) {
					t.Errorf("pdftotext lacks %q:\n%s", want, raw)
				}
			}
			if *keepPDFs != "" {
				if err := os.WriteFile(filepath.Join(*keepPDFs, tt.file+".pdf"), a.body, 0o644); err != nil {
					t.Error(err)
				}
			}
			if tt.file == "emoji.md" {
				// The custom emoji is the one image, at its own size.
				list := olPDFTool(t, a.body, "pdfimages", "-list")
				if rows := strings.Split(strings.TrimSpace(list), "\n")[2:]; len(rows) != 1 || !strings.Contains(rows[0], " 64 ") {
					t.Errorf("pdfimages -list = %s, want the custom emoji's 64x64 image", list)
				}
			}
			for _, bad := range tt.not {
				if strings.Contains(raw, bad) {
					t.Errorf("pdftotext shows %q, which must not print:\n%s", bad, raw)
				}
			}
		})
	}
}
