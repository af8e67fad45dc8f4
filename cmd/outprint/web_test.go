package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/testenv"
)

// The web page's tests drive Debian's Chromium through chromedp against a
// real `serve` (the same function `outprint serve` runs) with real XeLaTeX
// behind it: what a person does, as a person does it — choose files, type,
// press buttons, read the page — and what they get, checked with pdfinfo.
// axe-core checks each page; the console must stay free of errors.

// moduleRoot is the module's root relative to this package.
const moduleRoot = "../.."

// webPage is one browser tab on a running serve.
type webPage struct {
	t   *testing.T
	ctx context.Context
	url string
	axe string
	// console collects the errors the page logged.
	console chan string
}

func openPage(t *testing.T, s *served) *webPage {
	t.Helper()
	ctx := testenv.Browser(t)
	p := &webPage{t: t, ctx: ctx, url: s.url, axe: testenv.AxeScript(t, moduleRoot), console: make(chan string, 100)}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// The browser logs every 4xx answer as a failed resource;
			// those the test provokes (401 before the key, 422 for a bad
			// document) are answers the page shows, not errors of the
			// page.
			if m.Source == "network" && strings.Contains(m.Text, "status of 4") {
				continue
			}
			if m.Type == "error" || m.IsException() {
				select {
				case p.console <- m.String():
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		close := false
		for !close {
			select {
			case m := <-p.console:
				t.Errorf("console error: %s", m)
			default:
				close = true
			}
		}
	})
	return p
}

// do runs browser actions, each bounded so that a page that never gets
// there fails the test instead of hanging it.
func (p *webPage) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *webPage) eval(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitText waits until the text of the element sel is want.
func (p *webPage) waitText(sel, want string, d time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, d+5*time.Second)
	defer cancel()
	expr := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === %q`, sel, want)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		got := p.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
		p.t.Fatalf("%s text = %q after %s, want %q", sel, got, d, want)
	}
}

// recordStates makes the page remember every state and page count it
// shows, so the test can see the events that arrived (the test's own
// observer, injected; the page has none).
func (p *webPage) recordStates() {
	p.eval(`window.__seen = []; new MutationObserver(() => {
		const s = document.getElementById('j-state').textContent + '/' + document.getElementById('j-pages').textContent;
		if (window.__seen[window.__seen.length-1] !== s) window.__seen.push(s);
	}).observe(document.getElementById('job'), {subtree: true, childList: true, characterData: true}); ''`)
}

// void runs a and drops its value.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

// TestWebPrint prints examples/showcase.md with its images as a person
// would: choose the files, set a title, press Print, watch the job to the
// end, see the page thumbnails, download the PDF.
func TestWebPrint(t *testing.T) {
	testenv.Require(t, "pdfinfo")
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\noffice: {enabled: false}\n", data)))
	s.waitReady()
	p := openPage(t, s)
	p.do("open the page", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#print-form")))
	testenv.Screenshot(t, p.ctx, "1-start")
	testenv.Axe(t, p.ctx, p.axe, "start page")

	examples, err := filepath.Abs(filepath.Join(moduleRoot, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{
		filepath.Join(examples, "showcase.md"),
		filepath.Join(examples, "images", "bars.png"),
		filepath.Join(examples, "images", "landscape.jpg"),
		filepath.Join(examples, "images", "flow.svg"),
	}
	downloads := t.TempDir()
	testenv.AllowDownloads(t, p.ctx, downloads)
	p.do("choose the files and a title",
		chromedp.SetUploadFiles(chromedp.CSS("#files"), files),
		chromedp.SendKeys(chromedp.CSS("#m-title"), "Showcase from the page"),
		chromedp.SendKeys(chromedp.CSS("#m-author"), "Web Tester"),
	)
	p.waitText("#chosen", "Document: showcase.md · 3 images", 5*time.Second)
	p.recordStates()
	p.do("print", chromedp.Click(chromedp.CSS("#submit")))
	p.waitText("#j-state", "Succeeded", 3*time.Minute)
	seen := p.eval(`window.__seen.join(' ')`)
	if !strings.Contains(seen, "Running/") || !strings.HasSuffix(seen, "Succeeded/"+p.eval(`document.getElementById('j-pages').textContent`)) {
		t.Errorf("states shown = %q, want Running … then Succeeded with the page count", seen)
	}
	pages, err := strconv.Atoi(p.eval(`document.getElementById('j-pages').textContent`))
	if err != nil || pages < 2 {
		t.Fatalf("pages shown = %v (%v), want the showcase's pages", pages, err)
	}

	// Every page's thumbnail arrives and is a real image.
	p.do("thumbnails", void(chromedp.Poll[bool](fmt.Sprintf(`(() => { const imgs = [...document.querySelectorAll('#thumbs img')];
		return imgs.length === %d && imgs.every(i => i.complete && i.naturalWidth === 300); })()`, min(pages, 24)),
		chromedp.WithPollingTimeout(time.Minute))))
	testenv.Screenshot(t, p.ctx, "2-succeeded")
	testenv.Axe(t, p.ctx, p.axe, "finished job")

	p.do("download", chromedp.Click(chromedp.CSS("#download")))
	pdf := testenv.WaitFile(t, downloads, "*.pdf", time.Minute)
	if !strings.Contains(filepath.Base(pdf), "Showcase from the page") {
		t.Errorf("downloaded file %s, want it named after the title", filepath.Base(pdf))
	}
	info, err := exec.Command("pdfinfo", pdf).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo %s: %v\n%s", pdf, err, info)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]string{"Pages": strconv.Itoa(pages), "Title": "Showcase from the page", "Author": "Web Tester"} {
		if fields[k] != want {
			t.Errorf("pdfinfo %s = %q, want %q", k, fields[k], want)
		}
	}

	// The job shows its document's title, on its page and in "Your
	// jobs", so jobs made a minute apart can be told apart.
	if got := p.eval(`document.getElementById('job-title').textContent`); got != "Showcase from the page" {
		t.Errorf("job heading = %q, want the document's title", got)
	}
	p.do("refresh the list", chromedp.Click(chromedp.CSS("#refresh")))
	p.waitText("#job-rows tr td:nth-child(3)", "Succeeded", 10*time.Second)
	p.waitText("#job-rows tr td:nth-child(1)", "Showcase from the page", 10*time.Second)

	// At 360 px wide nothing runs off the side.
	p.do("narrow", chromedp.EmulateViewport(360, 780))
	if w := p.eval(`String(document.documentElement.scrollWidth)`); w != "360" {
		t.Errorf("page width at 360 px = %s px, want no horizontal overflow", w)
	}
	testenv.Screenshot(t, p.ctx, "3-narrow")
}

// TestWebErrorsAndCancel: a document with errors shows them with their
// lines, each linking into the source shown beside them; a long job can be
// cancelled from the page and shows cancelled within 2 s.
func TestWebErrorsAndCancel(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\noffice: {enabled: false}\n", data)))
	s.waitReady()
	p := openPage(t, s)
	p.do("open the page", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#print-form")))

	bad := "# Broken\n\nFine text.\n\nA formula $\\input{/etc/passwd}$ here.\n\nAnother $\\write18{ls}$ too.\n"
	p.do("paste and print", chromedp.SetValue(chromedp.CSS("#markdown"), bad), chromedp.Click(chromedp.CSS("#submit")),
		chromedp.WaitVisible(chromedp.CSS("#problem-list li")))
	items := p.eval(`[...document.querySelectorAll('#problem-list li')].map(li => li.textContent).join('\n')`)
	for _, want := range []string{"Line 5: ", "Line 7: "} {
		if !strings.Contains(items, want) {
			t.Errorf("problems shown:\n%s\nwant one starting %q", items, want)
		}
	}
	p.do("follow the link of line 5", chromedp.Click(chromedp.CSS(`#problem-list a[href="#src-line-5"]`)))
	if got := p.eval(`document.querySelector('#source li.hit').id + ' ' + document.activeElement.id`); got != "src-line-5 src-line-5" {
		t.Errorf("after the link: highlighted and focused = %q, want src-line-5 both", got)
	}
	if got := p.eval(`document.getElementById('src-line-5').textContent`); !strings.Contains(got, `\input`) {
		t.Errorf("source line 5 = %q, want the formula's line", got)
	}
	testenv.Screenshot(t, p.ctx, "4-errors")
	testenv.Axe(t, p.ctx, p.axe, "errors")

	// A long document: about 150 pages keep TeX busy for seconds.
	var long strings.Builder
	long.WriteString("# Long\n\n")
	for i := range 1500 {
		fmt.Fprintf(&long, "## Section %d\n\n%s\n\n", i, strings.Repeat("All work and no play makes a long document. ", 12))
	}
	p.do("paste the long one and print", chromedp.SetValue(chromedp.CSS("#markdown"), long.String()), chromedp.Click(chromedp.CSS("#submit")))
	p.waitText("#j-state", "Running", 2*time.Minute)
	p.do("cancel", chromedp.Click(chromedp.CSS("#cancel")))
	p.waitText("#j-state", "Cancelled", 2*time.Second)
	testenv.Screenshot(t, p.ctx, "5-cancelled")
}

// TestWebAsksForKey: with API keys configured the page asks for one, keeps
// it for the tab and uses it; without it nothing of the API is shown.
func TestWebAsksForKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\noffice: {enabled: false}\n", data)+
		fmt.Sprintf(serveKeys, config.KeyDigest("ann-key"), config.KeyDigest("bob-key")))
	s := startService(t, cfg)
	s.waitReady()
	p := openPage(t, s)
	p.do("open the page", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#key")))
	testenv.Axe(t, p.ctx, p.axe, "key prompt")
	// Keyboard only: type the key and press Enter.
	p.do("enter the key", chromedp.Focus(chromedp.CSS("#key")), chromedp.KeyEvent("ann-key\r"),
		chromedp.WaitNotVisible(chromedp.CSS("#key-section")))
	if got := p.eval(`sessionStorage.getItem('outprint.apiKey') + ' ' + String(localStorage.length) + ' ' + location.href`); got != "ann-key 0 "+s.url+"/" {
		t.Errorf("key kept as %q, want in sessionStorage only and never in the URL", got)
	}
	// Type the document, Tab to the Print button and press Enter.
	p.do("type", chromedp.Focus(chromedp.CSS("#markdown")), chromedp.KeyEvent("# Memo\r\rTyped by keyboard.\r"))
	for i := 0; p.eval(`document.activeElement.id`) != "submit"; i++ {
		if i == 30 {
			t.Fatalf("Tab never reached the Print button (at %q)", p.eval(`document.activeElement.id`))
		}
		p.do("tab", chromedp.KeyEvent("\t"))
	}
	p.do("press Enter", chromedp.KeyEvent("\r"))
	p.waitText("#j-state", "Succeeded", 3*time.Minute)
	if _, err := os.Stat(data); err != nil {
		t.Fatal(err)
	}
}

// TestWebForm fills a PDF form from the page: choose the form, read its
// fields, fill them in (text in two scripts, a choice, a check box), fill
// as a job, download; the PDF has the values and no form left.
func TestWebForm(t *testing.T) {
	testenv.Require(t, "pdftotext", "qpdf")
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\noffice: {enabled: false}\n", data)))
	s.waitReady()
	p := openPage(t, s)
	form, err := filepath.Abs(filepath.Join(moduleRoot, "examples", "onboarding-form.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	downloads := t.TempDir()
	testenv.AllowDownloads(t, p.ctx, downloads)
	p.do("open the page and read the form's fields", chromedp.Navigate(s.url+"/"),
		chromedp.SetUploadFiles(chromedp.CSS("#form-pdf"), []string{form}),
		chromedp.Click(chromedp.CSS("#form-read")),
		chromedp.WaitVisible(chromedp.CSS("#form-fields input")))
	labels := p.eval(`[...document.querySelectorAll('#form-fields label')].map(l => l.textContent).join(',')`)
	if labels != "name,city,employeeId,team,remote,contact,notes,agree" {
		t.Errorf("field labels = %q, want the form's eight fields in order", labels)
	}
	byLabel := func(name string) chromedp.CSS {
		id := p.eval(fmt.Sprintf(`[...document.querySelectorAll('#form-fields label')].find(l => l.textContent === %q).htmlFor`, name))
		return chromedp.CSS("#" + id)
	}
	p.do("fill in",
		chromedp.SendKeys(byLabel("name"), "Zoë Müller"),
		chromedp.SendKeys(byLabel("city"), "東京"),
		chromedp.SetValue(byLabel("team"), "Sales"),
		chromedp.Click(byLabel("agree")),
	)
	testenv.Screenshot(t, p.ctx, "6-form")
	testenv.Axe(t, p.ctx, p.axe, "form fields")
	p.do("fill and flatten", chromedp.Click(chromedp.CSS("#form-submit")))
	p.waitText("#j-state", "Succeeded", 3*time.Minute)
	p.do("download", chromedp.Click(chromedp.CSS("#download")))
	pdf := testenv.WaitFile(t, downloads, "*.pdf", time.Minute)
	text, err := exec.Command("pdftotext", pdf, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	for _, want := range []string{"Zoë Müller", "東京", "Sales"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("filled PDF lacks %q:\n%s", want, text)
		}
	}
	js, err := exec.Command("qpdf", "--json", "--json-key=acroform", pdf).Output()
	if err != nil {
		t.Fatalf("qpdf --json: %v", err)
	}
	if !strings.Contains(string(js), `"hasacroform": false`) {
		t.Errorf("the filled PDF still has a form:\n%.400s", js)
	}
}

// TestWebOffice: a Word document chosen on the page where a person
// chooses Markdown, with A4 paper, is converted as a job by LibreOffice;
// the PDF downloaded from the page has the document's words on A4 pages.
func TestWebOffice(t *testing.T) {
	testenv.Require(t, "pdftotext", "pdfinfo", "soffice")
	data := filepath.Join(t.TempDir(), "data")
	// The render timeout bounds a conversion: a loaded test machine
	// starts LibreOffice slowly (officeEnv).
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\nrender:\n  timeout: 5m\n", data)))
	s.waitReady()
	p := openPage(t, s)
	name := "word-google-docs.docx"
	doc, err := filepath.Abs(sharedOffice(t, name)) // the browser reads the file by its absolute path
	if err != nil {
		t.Fatal(err)
	}
	downloads := t.TempDir()
	testenv.AllowDownloads(t, p.ctx, downloads)
	p.do("open the page and choose the Word document", chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#print-form")),
		chromedp.SetUploadFiles(chromedp.CSS("#files"), []string{doc}),
		chromedp.SetValue(chromedp.CSS("#m-paper"), "a4"),
	)
	p.waitText("#chosen", "Office document: "+name, 5*time.Second)
	p.do("print", chromedp.Click(chromedp.CSS("#submit")))
	p.waitText("#j-state", "Succeeded", 5*time.Minute)
	testenv.Screenshot(t, p.ctx, "7-office")
	testenv.Axe(t, p.ctx, p.axe, "converted Office document")
	p.do("download", chromedp.Click(chromedp.CSS("#download")))
	pdf := testenv.WaitFile(t, downloads, "*.pdf", time.Minute)
	if got := filepath.Base(pdf); got != "word-google-docs.pdf" {
		t.Errorf("downloaded file %s, want word-google-docs.pdf", got)
	}
	text, err := exec.Command("pdftotext", pdf, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext %s: %v", pdf, err)
	}
	for _, w := range officeWords(t, name) {
		if !strings.Contains(string(text), w) {
			t.Errorf("pdftotext of the downloaded PDF lacks %q", w)
		}
	}
	info, err := exec.Command("pdfinfo", pdf).Output()
	if err != nil {
		t.Fatalf("pdfinfo %s: %v", pdf, err)
	}
	if !strings.Contains(string(info), "(A4)") {
		t.Errorf("pdfinfo of the downloaded PDF:\n%s\nwant A4 pages (the paper chosen on the page)", info)
	}
}
