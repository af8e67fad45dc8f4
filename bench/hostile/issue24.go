package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// The findings of issue 24 (forms, previews, events, webhooks): each is
// replayed against the same server as issue 10's. The webhook finding
// (webhooks.go) runs last: its backlog of deliveries to a receiver that
// never answers stays in the server.

// formFile is the example form of the repository.
const formFile = "examples/onboarding-form.pdf"

func issue24Findings() []finding {
	return []finding{
		{name: "24.1 16 x 48 MB forms, one user", fire: formUploads},
		{name: "24.2 4 MiB of value keys", fire: valueKeys},
		{name: "24.3 40 previews + bystander", fire: previews},
		{name: "24.4 colleague: page, events", fire: colleague},
		{name: "24.7 form epilogue, client gone", fire: abandonedForm},
		{name: "24.8 form job acceptance", fire: formJob},
		{name: "24.5 10k dead webhooks + healthy", fire: webhookStarvation, bound: 15 * time.Minute},
	}
}

// formBody is a multipart form request of parts (name → data).
func formBody(parts map[string][]byte) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, name := range []string{"pdf", "values"} {
		if data, ok := parts[name]; ok {
			w, _ := mw.CreateFormFile(name, name)
			_, _ = w.Write(data) // into b, a bytes.Buffer: cannot fail
		}
	}
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// formUploads sends 16 form requests of 48 MB at once as one user
// (perUser 1): 15 must be refused before their bodies are read.
func formUploads(ctx context.Context, s *server) string {
	ctype, body := formBody(map[string][]byte{"pdf": make([]byte, 48<<20)})
	return s.parallel(ctx, 16, func(int) answer {
		return s.post(ctx, s.key("forms-uploader"), "/v1/forms/fields", ctype, body)
	})
}

// valueKeys fills the example form with 4 MiB of unknown value keys.
func valueKeys(ctx context.Context, s *server) string {
	form, err := os.ReadFile(formFile)
	if err != nil {
		return "setup: " + err.Error()
	}
	var v strings.Builder
	v.WriteString("{")
	for i := 0; v.Len() < 4<<20; i++ {
		if i > 0 {
			v.WriteString(",\n")
		}
		fmt.Fprintf(&v, "%q: \"x\"", fmt.Sprintf("key%d", i))
	}
	v.WriteString("}")
	ctype, body := formBody(map[string][]byte{"pdf": form, "values": []byte(v.String())})
	return s.post(ctx, s.key("value-keys"), "/v1/forms/fill", ctype, body).String()
}

// job submits a Markdown job as user and waits for it to succeed.
func (s *server) job(ctx context.Context, user, md string) (string, error) {
	id, err := s.submit(ctx, user, map[string]string{"markdown": md})
	if err != nil {
		return "", err
	}
	for ctx.Err() == nil {
		if a := s.get(ctx, user, "/v1/jobs/"+id); a.status == http.StatusOK {
			var j struct{ State string }
			_ = json.Unmarshal(a.body, &j)
			switch j.State {
			case "succeeded":
				return id, nil
			case "failed", "cancelled":
				return "", fmt.Errorf("job %s", j.State)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", ctx.Err()
}

type got struct {
	status int
	body   []byte
}

func (s *server) get(ctx context.Context, user, path string) got {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.key(user))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return got{}
	}
	defer func() { _ = resp.Body.Close() }()
	if strings.HasSuffix(path, "/events") {
		return got{status: resp.StatusCode}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return got{status: resp.StatusCode, body: b}
}

func pages(n int) string {
	var b strings.Builder
	b.WriteString("# Pages\n\n")
	for i := range n {
		fmt.Fprintf(&b, "## Part %d\n\n%s\n\n\\newpage\n\n", i, strings.Repeat("Words of text to fill the page. ", 150))
	}
	return b.String()
}

// previews asks for 40 previews at once (distinct widths, none cached) of
// one user's result while a bystander of another tenant renders; the
// bystander's render time is printed beside the one it took alone.
func previews(ctx context.Context, s *server) string {
	id, err := s.job(ctx, "previewer", pages(3))
	if err != nil {
		return "setup: " + err.Error()
	}
	md := pages(6)
	logOff := s.logSize()
	t0 := time.Now()
	alone := s.postJSON(ctx, s.key("bystander"), md)
	aloneTook := time.Since(t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := s.get(ctx, "previewer", fmt.Sprintf("/v1/jobs/%s/pages/%d.png?width=%d", id, 1+i%3, 50*(1+i%32)))
			mu.Lock()
			codes[g.status]++
			mu.Unlock()
		}()
	}
	t1 := time.Now()
	during := s.postJSON(ctx, s.key("bystander"), md)
	duringTook := time.Since(t1)
	wg.Wait()
	// Where the bystander's time went, from the server's log: the Render
	// stage (a slot held: TeX, and waiting for a processor) and TeX's CPU;
	// the rest of the request is mostly the wait for a slot.
	// The server writes a request's log line as it ends, and the log
	// reaches its file through a pipe: give it a moment.
	var renders []renderTimes
	for wait := time.Now().Add(3 * time.Second); len(renders) < 2 && time.Now().Before(wait); {
		time.Sleep(100 * time.Millisecond)
		renders = s.bystanderRenders(logOff)
	}
	for i, r := range renders {
		fmt.Fprintf(os.Stderr, "hostile: 24.3: bystander render %d: request %d ms, Render stage %d ms (TeX CPU %d ms), before it %d ms\n",
			i+1, r.total, r.render, r.cpu, r.total-r.render)
	}
	return fmt.Sprintf("%s; bystander %d %.1fs alone, %d %.1fs during", codesOf(codes), alone.status, aloneTook.Seconds(), during.status, duringTook.Seconds())
}

// renderTimes is one synchronous render as the server logged it, in ms.
type renderTimes struct{ total, render, cpu int64 }

// bystanderRenders reads the bystander's renders the server logged after
// offset: the "rendered" line (Render stage, TeX CPU) joined to its
// "request" line (the whole request) by request id.
func (s *server) bystanderRenders(offset int64) []renderTimes {
	f, err := os.Open(s.logPath())
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }() // read only
	// From the start the log holds other runs' lines: no answer beats a
	// wrong one.
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	rendered := map[string]renderTimes{}
	var out []renderTimes
	for {
		line, err := br.ReadBytes('\n')
		var m map[string]any
		if len(line) < 64<<10 && json.Unmarshal(line, &m) == nil {
			str := func(k string) string { x, _ := m[k].(string); return x }
			num := func(k string) int64 { x, _ := m[k].(float64); return int64(x) }
			switch id := str("request_id"); {
			case str("msg") == "rendered" && str("tenant") == "bystander":
				rendered[id] = renderTimes{render: num("render_ms"), cpu: num("cpu_ms")}
			case str("msg") == "request" && str("path") == "/v1/render":
				if r, ok := rendered[id]; ok {
					r.total = num("duration_ms")
					out = append(out, r)
				}
			}
		}
		if err != nil {
			return out
		}
	}
}

func codesOf(m map[int]int) string {
	var parts []string
	for _, c := range []int{200, 404, 413, 429, 500, 502, 503, 504} {
		if m[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", m[c], c))
		}
	}
	return strings.Join(parts, " ")
}

// colleague reads another user's (same tenant) page preview and events.
func colleague(ctx context.Context, s *server) string {
	id, err := s.job(ctx, "owner", pages(1))
	if err != nil {
		return "setup: " + err.Error()
	}
	p := s.get(ctx, "colleague", "/v1/jobs/"+id+"/pages/1.png")
	e := s.get(ctx, "colleague", "/v1/jobs/"+id+"/events")
	return fmt.Sprintf("page %d, events %d (want 404, 404)", p.status, e.status)
}

// abandonedForm sends a form request with an epilogue after the closing
// boundary and leaves at once: the server must notice.
func abandonedForm(ctx context.Context, s *server) string {
	form, err := os.ReadFile(formFile)
	if err != nil {
		return "setup: " + err.Error()
	}
	ctype, body := formBody(map[string][]byte{"pdf": form, "values": []byte("{}")})
	body = append(body, []byte("\r\nepilogue\r\n")...)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		return err.Error()
	}
	// The client leaves on purpose; whether the server read it all is
	// what the bench reports, not these writes.
	_, _ = fmt.Fprintf(conn, "POST /v1/forms/fill HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		s.key("abandoner"), ctype, len(body))
	_, _ = conn.Write(body)
	time.Sleep(100 * time.Millisecond)
	_ = conn.Close()
	return "sent and left"
}

// formJob submits the example form as a job (acceptance reads it under
// the check budget).
func formJob(ctx context.Context, s *server) string {
	form, err := os.ReadFile(formFile)
	if err != nil {
		return "setup: " + err.Error()
	}
	ctype, body := formBody(map[string][]byte{"pdf": form, "values": []byte("{}")})
	return s.post(ctx, s.key("form-jobs"), "/v1/jobs", ctype, body).String()
}
