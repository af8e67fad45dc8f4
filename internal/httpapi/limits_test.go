package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
)

// tooLargeDoc is 1.3 MB of Markdown that would also be a metadata error
// (an unknown front matter field) and a math error: only a server that
// refuses it before parsing answers 413 too_large rather than 422.
func tooLargeDoc() string {
	var b strings.Builder
	b.WriteString("---\nnot_a_field: 1\n---\n# Too large\n\n$\\input{/etc/passwd}$\n\n")
	line := strings.Repeat("word ", 20) + "\n"
	for b.Len() < 1_300_000 {
		b.WriteString(line)
	}
	return b.String()
}

// TestTooLargeBeforeParse: Markdown over 1 MiB is 413 too_large before
// the Binding, the math or any image is looked at, in both body forms.
func TestTooLargeBeforeParse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	big := tooLargeDoc()

	// The same text under the limit is refused for its metadata: the 413
	// below is the size check, not an accident of the text.
	small := big[:4096]
	ps := e.postJSON(ctx, "", small, nil).wantError(t, http.StatusUnprocessableEntity, limits.CodeUnknown)
	if ps[0].Source != limits.SourceMetadata {
		t.Fatalf("control document: source = %q, want metadata", ps[0].Source)
	}

	for name, a := range map[string]answer{
		"json":      e.postJSON(ctx, "", big, nil),
		"multipart": e.postMultipart(ctx, "", []byte(big), ""),
		// An image part would be an image error too; it is never looked at.
		"multipart with image": e.postMultipart(ctx, "", []byte(big+"\n![x](missing.png)\n"), "", asset{"other.png", []byte("not an image")}),
	} {
		ps := a.wantError(t, http.StatusRequestEntityTooLarge, limits.CodeTooLarge)
		if len(ps) != 1 || ps[0].Source != limits.SourceDocument {
			t.Errorf("%s: problems = %+v, want one document problem", name, ps)
		}
	}
	if st := e.adm.Stats(); st.Tickets != 0 || st.RefusedUserLimit+st.RefusedQueueFull != 0 {
		t.Errorf("a too-large document reached admission: %+v", st)
	}
}

// blockingReader never ends until closed: a client that announces a huge
// body and sends it slowly.
type blockingReader struct{ done chan struct{} }

func (b blockingReader) Read(p []byte) (int, error) {
	<-b.done
	return 0, io.EOF
}

// TestDeclaredBodyTooLarge: a multipart body whose declared length cannot
// fit the limits is refused before it is read.
func TestDeclaredBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	done := make(chan struct{})
	defer close(done)
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/render", io.MultiReader(strings.NewReader("--x\r\n"), blockingReader{done}))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 200 << 20
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	do(context.Background(), req).wantError(t, http.StatusRequestEntityTooLarge, limits.CodeTooLarge)
}

// TestImageLimits: every image bound of SPEC §3 that the gateway checks is
// a 422 with an image problem, and the user count taken for the fetch is
// given back.
func TestImageLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var many strings.Builder
	many.WriteString("# Many images\n\n")
	for i := range limits.MaxImages + 1 {
		fmt.Fprintf(&many, "![image %d](img/%d.png)\n\n", i, i)
	}
	var manyParts []asset
	for i := range limits.MaxImages + 1 {
		manyParts = append(manyParts, asset{fmt.Sprintf("img/%d.png", i), pngImage(t, 2, 2)})
	}
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><!--` +
		strings.Repeat("x", limits.MaxSVGBytes) + `--><rect width="10" height="10"/></svg>`)
	const nine = 9 << 20
	var total []asset
	var totalDoc strings.Builder
	totalDoc.WriteString("# Heavy\n\n")
	for i := range 6 { // 6 × 9 MiB = 54 MiB, each under 10 MiB
		name := fmt.Sprintf("img/big-%d.png", i)
		total = append(total, asset{name, paddedPNG(t, nine)})
		fmt.Fprintf(&totalDoc, "![big %d](%s)\n\n", i, name)
	}

	cases := []struct {
		name   string
		doc    string
		assets []asset
		want   string // in the first problem's message
	}{
		{"51 images referenced", many.String(), nil, fmt.Sprintf("%d images, at most %d", limits.MaxImages+1, limits.MaxImages)},
		{"51 asset parts", "# Parts\n\n![a](img/0.png)\n", manyParts, "too many asset parts"},
		{"one image over 10 MiB", "# Big\n\n![big](big.png)\n", []asset{{"big.png", paddedPNG(t, 11<<20)}}, "larger than"},
		{"pixels over 40 million in the header", "# Bomb\n\n![bomb](bomb.png)\n", []asset{{"bomb.png", hugeHeaderPNG(t, 8000, 6000)}}, "48000000 pixels"},
		{"all images over 50 MiB", totalDoc.String(), total, "together exceed"},
		{"SVG over 2 MiB", "# Drawing\n\n![d](d.svg)\n", []asset{{"d.svg", svg}}, "SVG of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := e.postMultipart(context.Background(), "", []byte(tc.doc), "", tc.assets...)
			ps := a.wantError(t, http.StatusUnprocessableEntity, limits.CodeImage)
			if ps[0].Source != limits.SourceImage {
				t.Errorf("source = %q, want image", ps[0].Source)
			}
			if !strings.Contains(ps[0].Message, tc.want) {
				t.Errorf("message = %q, want it to contain %q", ps[0].Message, tc.want)
			}
			e.wantIdle()
		})
	}
	if st := e.adm.Stats(); st.Running != 0 {
		t.Errorf("an image error took a slot: %+v", st)
	}
}

// TestPageLimit: with OUTPRINT_MAX_PAGES lowered to 2, a five-page
// document is 413 too_many_pages.
func TestPageLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{limits: limits.Render{MaxPages: 2}})
	var b strings.Builder
	b.WriteString("---\ndialect: outline\n---\n# Pages\n\n") // *** is a page break
	for i := range 5 {
		fmt.Fprintf(&b, "Page %d.\n\n***\n\n", i+1)
	}
	ps := e.postJSON(context.Background(), "", b.String(), nil).wantError(t, http.StatusRequestEntityTooLarge, limits.CodeTooManyPages)
	if !strings.Contains(ps[0].Message, "more than 2") {
		t.Errorf("message = %q, want the lowered limit", ps[0].Message)
	}
	e.wantIdle()
}

// TestPDFSizeLimit: with OUTPRINT_MAX_PDF_BYTES lowered below any PDF, a
// render is 413 pdf_too_large.
func TestPDFSizeLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{limits: limits.Render{MaxPDFBytes: 2000}})
	e.postJSON(context.Background(), "", doc("Small"), nil).wantError(t, http.StatusRequestEntityTooLarge, limits.CodePDFTooLarge)
	e.wantIdle()
}

// TestRequestErrors: malformed requests get the error list with their
// status, and never reach admission.
func TestRequestErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	post := func(ctype, body string) answer {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/render", strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		return do(ctx, req)
	}
	multipartBody := func(parts ...string) (string, string) {
		var b bytes.Buffer
		for _, p := range parts {
			b.WriteString("--B\r\n" + p + "\r\n")
		}
		b.WriteString("--B--\r\n")
		return "multipart/form-data; boundary=B", b.String()
	}
	noDoc, noDocBody := multipartBody("Content-Disposition: form-data; name=\"metadata\"\r\n\r\n{}")
	unknown, unknownBody := multipartBody("Content-Disposition: form-data; name=\"document\"\r\n\r\n# x", "Content-Disposition: form-data; name=\"extra\"\r\n\r\ny")
	nameless, namelessBody := multipartBody("Content-Disposition: form-data; name=\"document\"\r\n\r\n# x", "Content-Disposition: form-data; name=\"asset\"\r\n\r\nbytes")
	bigMeta, bigMetaBody := multipartBody("Content-Disposition: form-data; name=\"document\"\r\n\r\n# x",
		"Content-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"title\":\""+strings.Repeat("t", maxMetadataBytes)+"\"}")

	cases := []struct {
		name   string
		a      answer
		status int
		code   string
	}{
		{"plain text", post("text/plain", "# x"), http.StatusUnsupportedMediaType, httperr.CodeUnsupported},
		{"no content type", post("", "# x"), http.StatusUnsupportedMediaType, httperr.CodeUnsupported},
		{"broken JSON", post("application/json", `{"markdown": `), http.StatusBadRequest, limits.CodeInvalid},
		{"JSON without markdown", post("application/json", `{"metadata": {}}`), http.StatusBadRequest, limits.CodeInvalid},
		{"JSON unknown field", post("application/json", `{"markdown": "# x", "md": 1}`), http.StatusBadRequest, limits.CodeInvalid},
		{"JSON trailing data", post("application/json", `{"markdown": "# x"} {}`), http.StatusBadRequest, limits.CodeInvalid},
		{"multipart without document", post(noDoc, noDocBody), http.StatusBadRequest, limits.CodeInvalid},
		{"multipart unknown part", post(unknown, unknownBody), http.StatusBadRequest, limits.CodeInvalid},
		{"asset without file name", post(nameless, namelessBody), http.StatusBadRequest, limits.CodeInvalid},
		{"metadata part too large", post(bigMeta, bigMetaBody), http.StatusBadRequest, limits.CodeInvalid},
		{"metadata error", e.postJSON(ctx, "", "# x\n", map[string]any{"colour": "red"}), http.StatusUnprocessableEntity, limits.CodeUnknown},
		{"unknown path", e.get(ctx, "/v2/render"), http.StatusNotFound, httperr.CodeNotFound},
		{"wrong method", e.get(ctx, "/v1/render"), http.StatusMethodNotAllowed, httperr.CodeMethod},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.a.wantError(t, tc.status, tc.code)
		})
	}
	if allow := cases[len(cases)-1].a.header.Get("Allow"); allow != http.MethodPost {
		t.Errorf("405 Allow = %q, want POST", allow)
	}
	if st := e.adm.Stats(); st != (admission.Stats{Slots: 1, QueueDepth: st.QueueDepth}) {
		t.Errorf("malformed requests reached admission: %+v", st)
	}
}

// TestSlowBody: a client that stops sending its body is answered 408 once
// the body timeout passes, and the connection's later reads are not cut
// short by the deadline (the same server renders afterwards).
func TestSlowBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{bodyTimeout: 300 * time.Millisecond})
	done := make(chan struct{})
	defer close(done)
	for _, ctype := range []string{"multipart/form-data; boundary=x", "application/json"} {
		start := "--x\r\nContent-Disposition: form-data; name=\"document\"\r\n\r\n# Slow"
		if ctype == "application/json" {
			start = `{"markdown": "# Slow`
		}
		req, err := http.NewRequest(http.MethodPost, e.url+"/v1/render", io.MultiReader(strings.NewReader(start), blockingReader{done}))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		do(context.Background(), req).wantError(t, http.StatusRequestTimeout, limits.CodeInvalid)
	}
	e.wantIdle()
}
