package jobs

import (
	"encoding/json"
	"strings"
	"time"
)

// View is the JSON of a job (SPEC §5): what GET /v1/jobs/{id} answers and
// what a job's webhook posts. It lives here, with the job, so that a
// job's life never calls back into the HTTP layer to be shown.
type View struct {
	ID string `json:"id"`
	// Title is the document's title, as the PDF carries it and its
	// download is named (a form job: NAME-filled), so that jobs made a
	// minute apart can be told apart in a list.
	Title      string     `json:"title"`
	State      string     `json:"state"`
	Progress   Progress   `json:"progress"`
	Attempts   int        `json:"attempts"`
	Error      *ViewError `json:"error"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	// ExpiresAt is when the input and result are deleted (jobs.ttl).
	ExpiresAt time.Time `json:"expiresAt"`
	Links     Links     `json:"links"`
	// Webhook is the delivery of the job's callback; absent without one.
	Webhook *WebhookView `json:"webhook,omitempty"`
}

// Progress is the "progress" member of a job.
type Progress struct {
	// Phase is null before the first attempt and after the job ended.
	Phase *string `json:"phase"`
	Pages int     `json:"pages"`
}

// ViewError is the "error" member of a failed job.
type ViewError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Links are the addresses of a job and of its result.
type Links struct {
	Self   string `json:"self"`
	Result string `json:"result"`
}

// WebhookView is the "webhook" member of a job.
type WebhookView struct {
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// LastStatus is the HTTP status of the last attempt; null before one
	// and when it got no answer.
	LastStatus *int `json:"lastStatus"`
	// NextAttemptAt is null once the delivery is delivered or dead.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
}

// Path is the collection of jobs in the public API; a job is Path/{id}.
const Path = "/v1/jobs"

// Link is the path of job id in the public API.
func Link(id string) string { return Path + "/" + id }

// NewView is the JSON of j.
func NewView(j Job) View {
	v := View{
		ID: j.ID, Title: Title(j), State: j.State, Progress: Progress{Pages: j.Pages}, Attempts: j.Attempts,
		CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, ExpiresAt: j.ExpiresAt,
		Links: Links{Self: Link(j.ID), Result: Link(j.ID) + "/result"},
	}
	if j.Phase != "" {
		phase := j.Phase
		v.Progress.Phase = &phase
	}
	if j.State == StateFailed {
		v.Error = &ViewError{Code: j.ErrorCode, Message: j.ErrorMessage}
	}
	if w := j.Webhook; w != nil {
		v.Webhook = &WebhookView{State: w.State, Attempts: w.Attempts, LastStatus: w.LastStatus, NextAttemptAt: w.NextAttemptAt}
	}
	return v
}

// Title is the title of j's document: its name without ".md" (a Markdown
// or Outline job is named after the title its PDF carries) or ".pdf" (a
// form job is named NAME-filled.pdf, an office job after its file: a
// report.docx is report.pdf). Its download is named Title.pdf.
func Title(j Job) string {
	return strings.TrimSuffix(strings.TrimSuffix(j.Name, ".md"), ".pdf")
}

// Document is the body of a job's webhook: the job as GET /v1/jobs/{id}
// shows it, with links made absolute with baseURL, and without the
// webhook member (whose state the delivery itself changes).
func Document(j Job, baseURL string) ([]byte, error) {
	j.Webhook = nil
	v := NewView(j)
	base := strings.TrimRight(baseURL, "/")
	v.Links.Self = base + v.Links.Self
	v.Links.Result = base + v.Links.Result
	return json.Marshal(v)
}
