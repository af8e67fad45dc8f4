package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// formBodyHead is the start of a multipart form request whose pdf part is
// a PDF of size bytes: the head, the boundary's content type, and the
// tail that closes the body.
func formBodyHead() (head []byte, ctype string, tail []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_, _ = mw.CreateFormFile("pdf", "form.pdf") // into b, a bytes.Buffer: cannot fail
	head = append([]byte(nil), b.Bytes()...)
	b.Reset()
	_ = mw.Close()
	return head, mw.FormDataContentType(), append([]byte("\r\n"), bytes.TrimPrefix(b.Bytes(), []byte("\r\n"))...)
}

// countedBody streams a form request of n PDF bytes without holding them,
// counting what the client's transport took from it: a body the server
// refuses before reading is never taken whole.
type countedBody struct {
	head, tail []byte
	n, sent    int64
	taken      atomic.Int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	var k int
	switch {
	case c.sent < int64(len(c.head)):
		k = copy(p, c.head[c.sent:])
	case c.sent < int64(len(c.head))+c.n:
		k = int(min(int64(len(p)), int64(len(c.head))+c.n-c.sent))
		clear(p[:k])
	case c.sent < int64(len(c.head))+c.n+int64(len(c.tail)):
		k = copy(p, c.tail[c.sent-int64(len(c.head))-c.n:])
	default:
		return 0, io.EOF
	}
	c.sent += int64(k)
	c.taken.Store(c.sent)
	return k, nil
}

// TestFormCountedBeforeBody: form uploads are counted (tenant and user)
// before their body is read, as /v1/jobs is (issue 24: sixteen parallel
// 48 MB uploads of one user with perUser 1 were all read — server RSS 363
// → 1,702 MiB — before fifteen were refused). While one upload of alice's
// is in progress, fifteen more of hers on both form routes are 429
// user_limit with their 48 MB bodies not taken; alice of another tenant
// is not held back by her namesake.
func TestFormCountedBeforeBody(t *testing.T) {
	testenv.Require(t, "qpdf")
	t.Parallel()
	e := newEnv(t, envOptions{
		keys:      map[string]string{"key-acme": "alice/acme", "key-beta": "alice/beta"},
		admission: admission.Config{Slots: 2, QueueDepth: 4, PerUser: 1},
	})
	head, ctype, tail := formBodyHead()
	post := func(ctx context.Context, key, route string, body io.Reader) answer {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+route, body)
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", "Bearer "+key)
		return do(ctx, req)
	}
	// The first upload sends its head and then waits.
	pr, pw := io.Pipe()
	first := async(func() answer { return post(context.Background(), "key-acme", "/v1/forms/fill", pr) })
	go func() { _, _ = pw.Write(head) }() // ends when the server reads the head, or at CloseWithError
	e.waitFor("the first upload to be counted", func(st admission.Stats) bool { return st.Tickets == 1 })

	const n, size = 15, 48 << 20
	var wg sync.WaitGroup
	bodies := make([]*countedBody, n)
	answers := make([]answer, n)
	for i := range n {
		bodies[i] = &countedBody{head: head, tail: tail, n: size}
		route := "/v1/forms/fill"
		if i%2 == 1 {
			route = "/v1/forms/fields"
		}
		wg.Add(1)
		go func() { // ends with its request
			defer wg.Done()
			answers[i] = post(context.Background(), "key-acme", route, bodies[i])
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil && a.status == 0 {
			// The server answered and closed before the client finished
			// sending; the client may see the reset instead of the answer.
			continue
		}
		a.wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
		if taken := bodies[i].taken.Load(); taken > size/4 {
			t.Errorf("upload %d: %d of %d bytes taken before the refusal, want the body left unread", i, taken, size)
		}
	}
	// The namesake of another tenant is admitted: her (bad) PDF is read
	// and answered 422, not 429.
	var b bytes.Buffer
	b.Write(head)
	b.WriteString("not a pdf")
	b.Write(tail)
	if a := post(context.Background(), "key-beta", "/v1/forms/fields", &b); a.status == http.StatusTooManyRequests {
		t.Errorf("beta/alice while acme/alice uploads = 429 %s, want her request read", a.body)
	}
	pw.CloseWithError(fmt.Errorf("client gave up"))
	<-first
	e.waitFor("every count given back", func(st admission.Stats) bool { return st.Tickets == 0 })
}

// TestFormJobCheckBudget: reading a form at a job's acceptance runs under
// the check budget like the cheap checks of a Markdown job (issue 24: qpdf
// ran outside the slots and the budget there, a 17 MB form 26.6 s). With a
// budget no qpdf run fits in, the job is refused 413 resource naming the
// form, and no job exists.
func TestFormJobCheckBudget(t *testing.T) {
	testenv.Require(t, "qpdf", "prlimit")
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", checkBudget: time.Millisecond})
	form := sharedFormFile(t, "acrobat-textfields.pdf")
	ps := e.do(formJobBody(keyAlice, form, `{}`, nil, false)).wantError(t, http.StatusRequestEntityTooLarge, limits.CodeResource)
	if !strings.Contains(ps[0].Message, "its form takes longer than 1ms") {
		t.Errorf("refusal = %q, want it to name the form and the budget", ps[0].Message)
	}
	list := e.do(request{method: http.MethodGet, path: "/v1/jobs", key: keyAlice})
	if list.status != http.StatusOK || strings.Contains(string(list.body), `"id"`) {
		t.Errorf("jobs after the refusal = %d %s, want none", list.status, list.body)
	}
	waitTickets(t, e.adm, 0)
}

// TestFormAbandonedCancels: a form request whose client leaves after a
// legal epilogue (bytes after the closing boundary) is cancelled: the
// server reads the body to its end and then watches the connection
// (issue 24: it never noticed, and qpdf ran 32.6 s for nobody). Here the
// request waits in the queue for the one slot, which another user's
// render holds; when its client leaves it leaves the queue at once.
func TestFormAbandonedCancels(t *testing.T) {
	testenv.Require(t, "qpdf")
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{keys: users, admission: admission.Config{Slots: 1, QueueDepth: 2, PerUser: 1}, wrap: g.wrap})
	defer g.open()
	held := async(func() answer { return e.postJSON(context.Background(), "key-bob", doc("Held"), nil) })
	<-g.entered

	head, ctype, tail := formBodyHead()
	var body bytes.Buffer
	body.Write(head)
	body.Write(sharedFormFile(t, "acrobat-textfields.pdf"))
	body.Write(tail)
	body.WriteString("\r\nan epilogue, which RFC 2046 lets a client send and a server ignore\r\n")
	conn, br := rawRequest(t, e.url, fmt.Sprintf("POST /v1/forms/fields HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-ann\r\n"+
		"Content-Type: %s\r\nContent-Length: %d\r\n\r\n%s", ctype, body.Len(), body.Bytes()))
	e.waitFor("the form request to wait for the slot", func(st admission.Stats) bool { return st.Queued == 1 })
	_ = conn.Close()
	e.waitFor("the abandoned form request to leave the queue", func(st admission.Stats) bool { return st.Queued == 0 && st.Tickets == 1 })
	g.open()
	(<-held).wantPDF(t)
	_ = br
}
