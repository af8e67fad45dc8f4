package httpapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline/outlinetest"
	"github.com/outprint/outprint/internal/testenv"
)

// adminKeys is an AdminAuthenticator over the job tests' keys: alice is
// an admin, bob and oscar are not.
type adminKeys map[string]bool

func (k adminKeys) LookupAdmin(bearer string) (string, bool, bool) {
	admin, ok := map[string]bool(k)[bearer]
	return bearer, admin, ok
}

var testAdmins = adminKeys{keyAlice: true, keyBob: false, keyOscar: false}

// riverRow is one row of River's job table, as stored.
type riverRow struct {
	kind, args, errors, metadata string
}

// riverRows reads every row of river_job from the job database.
func (e *jobsEnv) riverRows() []riverRow {
	e.t.Helper()
	ctx := context.Background()
	var out []riverRow
	if p, ok := strings.CutPrefix(e.dataDB, "sqlite://"); ok {
		db, err := sql.Open("sqlite", "file:"+p+"?mode=ro")
		if err != nil {
			e.t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		// River keeps JSON as SQLite's binary JSONB; json() gives the text.
		rows, err := db.QueryContext(ctx, `SELECT kind, json(args), COALESCE(json(errors), ''), json(metadata) FROM river_job`)
		if err != nil {
			e.t.Fatalf("read river_job: %v", err)
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var r riverRow
			if err := rows.Scan(&r.kind, &r.args, &r.errors, &r.metadata); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			e.t.Fatal(err)
		}
		return out
	}
	conn, err := pgx.Connect(ctx, e.dataDB)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT kind, args::text, COALESCE(errors::text, ''), metadata::text FROM river_job`)
	if err != nil {
		e.t.Fatalf("read river_job: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r riverRow
		if err := rows.Scan(&r.kind, &r.args, &r.errors, &r.metadata); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestConsole: River's web console answers admin keys only, shows the
// real jobs of the queue, and what it shows of them (arguments, errors,
// metadata) holds ids only: no document text, no title, no Outline
// cookie, for a Markdown job, an Outline job and a job that failed on its
// document alike. Its job actions are refused; pausing a queue works.
func TestConsole(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var base Config
			e := newJobsEnv(t, jobsOptions{kind: kind, outline: true, maxPages: 1,
				configure: func(e *jobsEnv, cfg *Config) {
					ctx, cancel := context.WithCancel(context.Background())
					t.Cleanup(cancel)
					c, err := e.svc.Console(ctx, ConsolePath, quietJobLogger())
					if err != nil {
						t.Fatalf("Console: %v", err)
					}
					cfg.Console = Console{Handler: c, Admins: testAdmins}
					base = *cfg
				}})

			// Secrets a console must never show.
			const (
				bodyText  = "Quarterly-figures-QX7731 stay internal."
				titleText = "Board-memo-TT8842"
				olText    = "Outline-body-OB5519 for readers only."
				pageText  = "Overflow-text-PG2290"
			)
			jane := e.fake.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-cookie-CK4471"})
			d := e.fake.AddDocument(outlinetest.Document{Title: "Outline-title-OT3306", Text: olText + "\n",
				CreatedBy: outlinetest.Person{ID: jane.ID, Name: jane.Name}, Access: map[string]outlinetest.Access{jane.ID: {Read: true, Download: true}}})
			secrets := []string{bodyText, "QX7731", titleText, olText, "OB5519", "OT3306", pageText, jane.Token, "CK4471"}

			md := e.do(jsonBody(keyAlice, map[string]any{"markdown": "# Memo\n\n" + bodyText + "\n", "metadata": map[string]any{"title": titleText}}, nil)).view(t, http.StatusAccepted)
			ol := e.do(as(jsonBody("", map[string]any{"source": map[string]any{"outline": map[string]any{"documentId": d.ID}}}, nil), jane.Token)).view(t, http.StatusAccepted)
			// Two pages with render.maxPages 1: fails on the first
			// attempt with too_many_pages, which only TeX can find.
			long := e.do(jsonBody(keyBob, map[string]any{"markdown": pageText + "\n\n" + longDoc("Long", 2)}, nil)).view(t, http.StatusAccepted)
			// An SVG whose header passes acceptance but which the
			// converter cannot draw: the job fails at render time with an
			// image error that names the image (the document's text).
			badSVG := e.do(multipartBody(keyOscar, "# Chart\n\n![c](images/Chart-SV6120.svg)\n", nil,
				asset{"images/Chart-SV6120.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"/>`)})).view(t, http.StatusAccepted)
			secrets = append(secrets, "SV6120")
			if v := e.waitState(keyOscar, badSVG.ID, jobs.StateFailed); v.State != jobs.StateFailed || v.Error == nil || v.Error.Code != limits.CodeImage || !strings.Contains(v.Error.Message, "SV6120") {
				t.Fatalf("bad SVG job = %+v (error %+v), want failed with an image error naming the image", v, v.Error)
			}
			if v := e.waitState(keyAlice, md.ID, jobs.StateSucceeded); v.State != jobs.StateSucceeded {
				t.Fatalf("Markdown job = %+v, want succeeded", v)
			}
			if v := e.waitState(jane.Token, ol.ID, jobs.StateSucceeded); v.State != jobs.StateSucceeded {
				t.Fatalf("Outline job = %+v, want succeeded", v)
			}
			if v := e.waitState(keyBob, long.ID, jobs.StateFailed); v.State != jobs.StateFailed || v.Error == nil || v.Error.Code != limits.CodeTooManyPages {
				t.Fatalf("long job = %+v, want failed with too_many_pages", v)
			}
			// The search below finds what is stored, so its silence
			// about the console means something.
			if where := e.find("QX7731"); where == "" {
				t.Fatalf("the Markdown job's text is stored nowhere; the searches prove nothing")
			}

			// Who may open it.
			get := func(key, path string, decorate func(*http.Request)) answer {
				t.Helper()
				req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				if decorate != nil {
					decorate(req)
				}
				a := do(context.Background(), req)
				if a.err != nil {
					t.Fatal(a.err)
				}
				return a
			}
			for _, path := range []string{ConsolePath + "/", ConsolePath + "/api/jobs?state=completed"} {
				a := get("", path, nil)
				a.wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
				if ch := a.header.Values("WWW-Authenticate"); !slices.ContainsFunc(ch, func(c string) bool { return strings.HasPrefix(c, "Basic ") }) {
					t.Errorf("GET %s without a key: WWW-Authenticate = %q, want a Basic challenge (browsers prompt)", path, ch)
				}
				get("wrong-key", path, nil).wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
				get(keyBob, path, nil).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
				get("", path, func(r *http.Request) { r.SetBasicAuth("anyone", keyOscar) }).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
				if a := get(keyAlice, path, nil); a.status != http.StatusOK {
					t.Errorf("GET %s as admin = %d %s, want 200", path, a.status, a.body)
				}
			}
			page := get("", ConsolePath+"/", func(r *http.Request) { r.SetBasicAuth("ops", keyAlice) })
			if page.status != http.StatusOK || !strings.Contains(string(page.body), ConsolePath+"/") {
				t.Errorf("console page with Basic admin credentials = %d, want 200 with its assets under %s:\n%.300s", page.status, ConsolePath, page.body)
			}
			if got := page.header.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("console X-Frame-Options = %q, want DENY", got)
			}

			// What it shows: every render job with its arguments, the
			// job id and nothing else. River finalizes its rows shortly
			// after outprint's (its completer batches), so the list is
			// read until the three jobs are there.
			// list reads every job the console lists in a final state
			// (failed jobs are cancelled in River) and its detail page;
			// it returns what it read and the outprint job ids of the
			// render jobs with the detail of each.
			list := func() (shown []string, ids map[string]string) {
				ids = map[string]string{}
				for _, state := range []string{"completed", "cancelled", "discarded"} {
					a := get(keyAlice, ConsolePath+"/api/jobs?limit=100&state="+state, nil)
					if a.status != http.StatusOK {
						t.Fatalf("console job list %s = %d %s", state, a.status, a.body)
					}
					shown = append(shown, string(a.body))
					var list struct {
						Data []struct {
							ID   int64  `json:"id"`
							Kind string `json:"kind"`
							Args string `json:"args"`
						} `json:"data"`
					}
					if err := json.Unmarshal(a.body, &list); err != nil {
						t.Fatalf("console job list: %v\n%s", err, a.body)
					}
					for _, j := range list.Data {
						detail := get(keyAlice, ConsolePath+"/api/jobs/"+strconv.FormatInt(j.ID, 10), nil)
						if detail.status == http.StatusNotFound && j.Kind != "outprint_render" {
							// A lease check or sweep that completed is
							// deleted every few seconds (jobs'
							// forgetInternal), so one listed may be gone
							// by the time its detail is read.
							continue
						}
						if detail.status != http.StatusOK {
							t.Fatalf("console job %d = %d %s", j.ID, detail.status, detail.body)
						}
						shown = append(shown, string(detail.body))
						if j.Kind != "outprint_render" {
							continue
						}
						var args map[string]any
						if err := json.Unmarshal([]byte(j.Args), &args); err != nil {
							t.Fatalf("job %d args %q: %v", j.ID, j.Args, err)
						}
						id, _ := args["job_id"].(string)
						if len(args) != 1 || id == "" {
							t.Errorf("console args of job %d = %s, want {\"job_id\": …} only", j.ID, j.Args)
						}
						ids[id] = string(detail.body)
					}
				}
				return shown, ids
			}
			// River finalizes its rows shortly after outprint's (its
			// completer batches): read until the three jobs are there.
			var (
				shown []string
				ids   map[string]string
			)
			testenv.EventuallyWithin(t, time.Minute, "River's rows of the jobs", func() bool {
				shown, ids = list()
				return len(ids) >= 4
			})
			if d, ok := ids[long.ID]; ok && !strings.Contains(d, limits.CodeTooManyPages) {
				t.Errorf("console detail of the failed job does not name its code %s:\n%s", limits.CodeTooManyPages, d)
			}
			for _, want := range []string{md.ID, ol.ID, long.ID, badSVG.ID} {
				if _, ok := ids[want]; !ok {
					t.Errorf("console does not list job %s (listed %v)", want, ids)
				}
			}
			// And as stored, which is what the console reads.
			rows := e.riverRows()
			if len(rows) < 3 {
				t.Fatalf("river_job has %d rows, want the 3 jobs at least", len(rows))
			}
			for _, r := range rows {
				shown = append(shown, r.args, r.errors, r.metadata)
				if r.kind == "outprint_render" {
					var args map[string]any
					if err := json.Unmarshal([]byte(r.args), &args); err != nil || len(args) != 1 || args["job_id"] == nil {
						t.Errorf("stored args = %s, want {\"job_id\": …} only", r.args)
					}
				}
			}
			all := strings.Join(shown, "\n")
			for _, s := range secrets {
				if strings.Contains(all, s) {
					t.Errorf("the console shows %q", s)
				}
			}

			// Job actions are refused; queue pause and resume work.
			act := func(key, method, path, body string) answer {
				t.Helper()
				req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				a := do(context.Background(), req)
				if a.err != nil {
					t.Fatal(a.err)
				}
				return a
			}
			for _, p := range []string{"/api/jobs/cancel", "/api/jobs/delete", "/api/jobs/retry"} {
				act(keyAlice, http.MethodPost, ConsolePath+p, `{"job_ids":["1"]}`).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
			}
			act(keyAlice, http.MethodPatch, ConsolePath+"/api/queues/outprint_render", `{}`).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
			act(keyBob, http.MethodPut, ConsolePath+"/api/queues/outprint_render/pause", `{}`).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
			for _, action := range []string{"pause", "resume"} {
				if a := act(keyAlice, http.MethodPut, ConsolePath+"/api/queues/outprint_render/"+action, `{}`); a.status != http.StatusOK {
					t.Errorf("%s the render queue as admin = %d %s, want 200", action, a.status, a.body)
				}
			}
			var q struct {
				PausedAt *string `json:"paused_at"`
			}
			if a := get(keyAlice, ConsolePath+"/api/queues/outprint_render", nil); a.status != http.StatusOK || json.Unmarshal(a.body, &q) != nil || q.PausedAt != nil {
				t.Errorf("render queue after resume = %d %s, want 200 and not paused", a.status, a.body)
			}

			// Anonymous mode (loopback, no keys): refused unless the
			// operator opted in; without a console the path is unknown.
			serve := func(cfg Config) string {
				hs := httptest.NewServer(mustServer(t, cfg).Handler())
				t.Cleanup(hs.Close)
				return hs.URL
			}
			anon := base
			anon.Auth, anon.Anonymous = nil, true
			anon.Console.Admins = nil
			closed := serve(anon)
			anon.Console.Anonymous = true
			open := serve(anon)
			none := base
			none.Console = Console{}
			unmounted := serve(none)
			for _, tc := range []struct {
				url, key string
				status   int
				code     string
			}{
				{closed, "", http.StatusForbidden, httperr.CodeForbidden},
				{closed, keyAlice, http.StatusUnauthorized, httperr.CodeUnauthorized},
				{open, "", http.StatusOK, ""},
				{unmounted, keyAlice, http.StatusNotFound, httperr.CodeNotFound},
			} {
				req, _ := http.NewRequest(http.MethodGet, tc.url+ConsolePath+"/api/jobs?state=completed", nil)
				if tc.key != "" {
					req.Header.Set("Authorization", "Bearer "+tc.key)
				}
				a := do(context.Background(), req)
				if a.err != nil {
					t.Fatal(a.err)
				}
				if tc.code != "" {
					a.wantError(t, tc.status, tc.code)
				} else if a.status != tc.status {
					t.Errorf("anonymous console (allowAnonymous) = %d %s, want %d", a.status, a.body, tc.status)
				}
			}
		})
	}
}

// TestConsoleAllowed: the console's read-only filter, request by request.
func TestConsoleAllowed(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{http.MethodGet, ConsolePath + "/", true},
		{http.MethodHead, ConsolePath + "/api/jobs", true},
		{http.MethodPut, ConsolePath + "/api/queues/outprint_render/pause", true},
		{http.MethodPut, ConsolePath + "/api/queues/outprint_render/resume", true},
		{http.MethodPut, ConsolePath + "/api/queues//pause", false},
		{http.MethodPut, ConsolePath + "/api/queues/a/pause/x", false},
		{http.MethodPut, ConsolePath + "/api/queues/a/delete", false},
		{http.MethodPost, ConsolePath + "/api/queues/a/pause", false},
		{http.MethodPost, ConsolePath + "/api/jobs/cancel", false},
		{http.MethodPost, ConsolePath + "/api/jobs/retry", false},
		{http.MethodPost, ConsolePath + "/api/jobs/delete", false},
		{http.MethodPatch, ConsolePath + "/api/queues/a", false},
		{http.MethodDelete, ConsolePath + "/api/jobs/1", false},
		{http.MethodOptions, ConsolePath + "/api/queues/a/pause", false}, // a CORS preflight
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if got := consoleAllowed(r); got != tc.want {
			t.Errorf("consoleAllowed(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
