package httpapi

import (
	"net/http"
	"strings"

	"github.com/outprint/outprint/internal/httperr"
)

// The operators' console: River's own web console (riverui, mounted by
// cmd through Config.Console) under ConsolePath, for API keys marked
// admin only.
//
// Browsers cannot add a Bearer header to the page's own loads (scripts,
// styles, the console's API calls), so the console also takes the API key
// as the password of HTTP Basic authentication (any user name), and its 401
// answers ask for it: a browser prompts once and sends it with every later
// request below the path. Clients that can send headers use the Bearer form
// as everywhere else. A browser also sends Basic credentials with requests
// another site makes it send; that is why the console allows no POST at all
// (a cross-site form can POST) and its only actions are PUTs, which another
// site cannot send without a CORS preflight (OPTIONS), which is refused.
//
// The console is read-only for jobs. River's job actions (cancel, delete,
// retry) change River's rows without outprint_jobs, whose state clients
// read: a job cancelled there would stay "running" for its tenant, one
// deleted there "queued" forever. Those calls are refused (403); jobs are
// cancelled through DELETE /v1/jobs/{id}. Pausing and resuming a queue is
// allowed: it only stops workers from claiming, which outprint already
// handles (jobs wait, queued).

// ConsolePath is where the console is served. A gateway in front of
// workers would mount the same handler at the same path.
const ConsolePath = "/admin/river"

// Console configures the operators' console.
type Console struct {
	// Handler is the console (riverui, from jobs.Service.Console); it
	// gets the whole path, ConsolePath included.
	Handler http.Handler
	// Admins confirms admin API keys; nil admits none.
	Admins AdminAuthenticator
	// Anonymous lets anonymous requests in (Config.Anonymous mode, which
	// is loopback only, has no key to send): admin.allowAnonymous.
	Anonymous bool
}

// AdminAuthenticator confirms that an API key may use the console.
// *config.Config implements it.
type AdminAuthenticator interface {
	// LookupAdmin returns the user of the API key bearer and whether the
	// key is marked admin; ok is false for an unknown key.
	LookupAdmin(bearer string) (user string, admin, ok bool)
}

var (
	errNotAdmin = httperr.Forbidden("this API key is not an admin key (auth.apiKeys[].admin)")
	// errAnonymousConsole answers anonymous mode (no API keys
	// configured): there is no key to send, so the operator must opt in.
	errAnonymousConsole = httperr.Forbidden("the console needs an admin API key; with no API keys configured, " +
		"set admin.allowAnonymous: true to open it to anonymous loopback requests")
	errConsoleReadOnly = httperr.Forbidden("the console is read-only for jobs: cancel a job with DELETE /v1/jobs/{id}; " +
		"only pausing and resuming queues is allowed here")
)

// consoleRoutes mounts the console when one is configured; without one
// the paths are unknown endpoints (404).
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	if s.cfg.Console.Handler == nil {
		return
	}
	h := http.HandlerFunc(s.console)
	mux.Handle(ConsolePath, h)
	mux.Handle(ConsolePath+"/", h)
}

// console checks the caller, then hands the request to riverui.
func (s *Server) console(w http.ResponseWriter, r *http.Request) {
	// The console's pages must not be framed by another site (its
	// buttons act with the operator's credentials).
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.authorizeConsole(r); err != nil {
		if err == errNoCredentials || err == errUnknownKey {
			w.Header().Add("WWW-Authenticate", `Basic realm="outprint console", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="outprint"`)
		}
		s.writeError(w, r, err)
		return
	}
	if !consoleAllowed(r) {
		s.writeError(w, r, errConsoleReadOnly)
		return
	}
	s.cfg.Console.Handler.ServeHTTP(w, r)
}

// authorizeConsole returns nil for an admin key (Bearer, or Basic with the
// key as password), a 401 for none or an unknown one, and a 403 for a
// valid key that is not admin and for anonymous
// mode unless Console.Anonymous.
func (s *Server) authorizeConsole(r *http.Request) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		if s.cfg.Anonymous {
			if s.cfg.Console.Anonymous {
				return nil
			}
			return errAnonymousConsole
		}
		return errNoCredentials
	}
	key, ok := bearerToken(h)
	if !ok {
		if _, pw, basic := r.BasicAuth(); basic && pw != "" {
			key, ok = pw, true
		}
	}
	if !ok {
		return errNoCredentials
	}
	if s.cfg.Console.Admins == nil {
		return errUnknownKey
	}
	_, admin, known := s.cfg.Console.Admins.LookupAdmin(key)
	switch {
	case !known:
		return errUnknownKey
	case !admin:
		return errNotAdmin
	}
	return nil
}

// consoleAllowed reports whether the console may serve r: any read, and
// pausing or resuming a queue (PUT {prefix}/api/queues/{name}/pause|resume).
func consoleAllowed(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	p := strings.TrimPrefix(r.URL.Path, ConsolePath)
	if r.Method == http.MethodPut && strings.HasPrefix(p, "/api/queues/") {
		name := strings.TrimPrefix(p, "/api/queues/")
		name, action, _ := strings.Cut(name, "/")
		return name != "" && !strings.Contains(action, "/") && (action == "pause" || action == "resume")
	}
	return false
}
