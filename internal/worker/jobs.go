package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/render"
)

// JobsConfig configures a Jobs: what each kind of job runs on.
type JobsConfig struct {
	// Pipeline checks and fetches a Markdown job's stored document again
	// (the worker does not trust the gateway); Renderer runs its Render
	// stage (default Pipeline). Without a Pipeline, Markdown jobs fail.
	Pipeline *render.Pipeline
	Renderer Renderer
	// Forms fills forms jobs; without it they fail.
	Forms *forms.Filler
	// Office converts office jobs (an *office.Pool); without it they fail
	// with ErrOfficeUnavailable. Limits bound their time, pages and PDF
	// (default: those of Pipeline, else limits.DefaultRender()), and
	// Observer is told about each conversion (default: none).
	Office   Converter
	Limits   limits.Render
	Observer Observer
}

// Jobs renders stored jobs, each kind by its own work: the job side of
// the runtime, for `serve`'s job workers and `outprint worker` alike. The
// job service holds a Budget slot around every call. It implements
// jobs.Renderer.
type Jobs struct {
	cfg JobsConfig
}

// NewJobs returns the job runtime on cfg.
func NewJobs(cfg JobsConfig) *Jobs {
	if cfg.Renderer == nil && cfg.Pipeline != nil {
		cfg.Renderer = cfg.Pipeline
	}
	if cfg.Limits.Timeout <= 0 {
		if cfg.Pipeline != nil {
			cfg.Limits = cfg.Pipeline.Limits()
		} else {
			cfg.Limits = limits.DefaultRender()
		}
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Jobs{cfg: cfg}
}

// errNoWork is a job of a kind this process has nothing to run it with.
var errNoWork = errors.New("no work configured for this kind of job")

// Render runs one job by its kind. Problems of the input are
// *limits.Error, as package jobs wants for failing at once; anything else
// is transient and retried. progress takes the phases of SPEC §5.
func (j *Jobs) Render(ctx context.Context, in jobs.RenderInput, progress func(phase string, pages int)) ([]byte, error) {
	if progress == nil {
		progress = func(string, int) {}
	}
	switch k := in.Kind(); k {
	case jobs.KindMarkdown:
		return j.markdown(ctx, in, progress)
	case jobs.KindForm:
		return j.form(ctx, in, progress)
	case jobs.KindOffice:
		return j.office(ctx, in, progress)
	default:
		return nil, fmt.Errorf("job %s of kind %q: %w", in.JobID, k, errNoWork)
	}
}

// markdown renders a Markdown (or Outline) job through the pipeline: the
// stored input checked again, its stored images loaded and validated, the
// Render stage run with progress.
func (j *Jobs) markdown(ctx context.Context, in jobs.RenderInput, progress func(string, int)) ([]byte, error) {
	if j.cfg.Pipeline == nil {
		return nil, fmt.Errorf("markdown job %s: %w", in.JobID, errNoWork)
	}
	checked, err := j.cfg.Pipeline.Check(in.Request())
	if err != nil {
		return nil, err
	}
	prepared, err := j.cfg.Pipeline.Fetch(ctx, checked)
	if err != nil {
		return nil, err
	}
	res, err := j.cfg.Renderer.Render(ctx, prepared, func(p render.Progress) { progress(p.Phase, p.Pages) })
	if err != nil {
		return nil, err
	}
	return res.PDF, nil
}

// form fills and flattens a forms job. A problem of the form or the values
// is a *limits.Error (the job fails at once).
func (j *Jobs) form(ctx context.Context, in jobs.RenderInput, progress func(string, int)) ([]byte, error) {
	if j.cfg.Forms == nil {
		return nil, fmt.Errorf("forms job %s: %w", in.JobID, errNoWork)
	}
	res, err := j.cfg.Forms.Fill(ctx, in.Form.PDF, in.Form.Values, func(phase string) {
		if phase == forms.PhaseReading {
			progress(jobs.PhasePreparing, 0)
		} else {
			progress(jobs.PhaseRendering, 0)
		}
	})
	if err != nil {
		return nil, err
	}
	progress(jobs.PhaseRendering, res.Pages)
	return res.PDF, nil
}

// office converts an office job: the stored document recognised again
// (the worker does not trust the gateway's acceptance), its options read
// again, the conversion run within the render limits. A problem of the
// document is a *limits.Error (the job fails at once).
func (j *Jobs) office(ctx context.Context, in jobs.RenderInput, progress func(string, int)) ([]byte, error) {
	progress(jobs.PhasePreparing, 0)
	if j.cfg.Office == nil {
		return nil, ErrOfficeUnavailable
	}
	// The job is named after its PDF (report.pdf); the name acceptance
	// recognised the document with ended in its format (a CSV is told
	// from other text by its name alone).
	f, err := office.Detect(in.Office.Doc, "document."+in.Office.Format)
	if err != nil {
		return nil, err
	}
	o, err := OfficeOptions(in.Office.Options)
	if err != nil {
		return nil, err
	}
	progress(jobs.PhaseRendering, 0)
	start := time.Now()
	res, err := Convert(ctx, j.cfg.Office, in.Office.Doc, f, o, j.cfg.Limits)
	j.cfg.Observer.ObserveConversion(f.Name, Result(ctx, err), time.Since(start))
	if err != nil {
		return nil, err
	}
	progress(jobs.PhaseRendering, res.Pages)
	return res.PDF, nil
}
