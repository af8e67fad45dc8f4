package tex

import (
	"bufio"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// logInfo is what the runner needs from a TeX log.
type logInfo struct {
	// The first error: its message, and the file and line TeX named.
	errMsg  string
	errFile string
	errLine int
	// pageLimit: the harness stopped TeX at the page limit.
	pageLimit bool
	// capacity: "TeX capacity exceeded" (TeX's own memory).
	capacity bool
	// pages from "Output written on main.pdf (N pages"; -1 when absent.
	pages int
	// lastPage is the last page the harness reported.
	lastPage int
	missing  []string
	// rerun: a warning asked for another run.
	rerun bool
	// pageLabels: hyperref asked for a rerun to get its /PageLabels
	// entry (and nothing else asked); see needsRerun.
	pageLabels bool
	// tocs are the extensions of the table-of-contents files read.
	tocs []string
	// overflow is the largest "Overfull \vbox (N pt too high) has occurred
	// while \output is active": a page's content taller than the page by
	// N pt, which is set below its bottom edge and lost; overflowPage is
	// the page it happened on (the harness's last page + 1).
	overflow     float64
	overflowPage int
	// ended: the harness's end mark, placed right after the body, was
	// shipped out (on page endPage). A mark that never ships means TeX
	// stopped reading before the body's end or dropped the material that
	// held it.
	ended   bool
	endPage int
	// total is the page total the preamble reported for its footer
	// ("Page N of total", \OutprintTotal), -1 when it reported none.
	total int
	// floatTooLarge is the largest "Float too large for page by N pt":
	// a float taller than a page, whose bottom is cut off.
	floatTooLarge float64
}

const maxMissing = 50

var (
	// "./body.tex:12: Undefined control sequence." (-file-line-error).
	fileLineRE = regexp.MustCompile(`^((?:\.{0,2}/)?[^\s:]*[^\s:/]):(\d+): (.*)$`)
	outputRE   = regexp.MustCompile(`^Output written on .*\((\d+) pages?`)
	missingRE  = regexp.MustCompile(`^Missing character: There is no (.+?) in font (.*?)!?$`)
	overflowRE = regexp.MustCompile(`^Overfull \\vbox \(([0-9.]+)pt too high\) has occurred while \\output is active`)
	floatRE    = regexp.MustCompile(`^LaTeX Warning: Float too large for page by ([0-9.]+)pt`)
	// A warning starts a block: "LaTeX Warning: ...", "Package x Warning:
	// ...", "Class x Warning: ...", "LaTeX Font Warning: ...".
	warningRE = regexp.MustCompile(`^(?:LaTeX|Package|Class)(?: (\S+))?(?: \S+)? Warning: `)
	// The directories of an absolute path: a slash at the start or after
	// a space, quote, bracket or equals sign, up to the last slash.
	absPathRE = regexp.MustCompile("(^|[\\s'\"`(\\[=])/(?:[^\\s'\"`()\\[\\]]*/)?")
)

// parseLog reads a TeX log. nonce identifies the harness's lines.
func parseLog(r io.Reader, nonce string) logInfo {
	p := &logParser{
		li:          logInfo{pages: -1, total: -1},
		mark:        marker(nonce),
		seenMissing: map[string]bool{},
		seenTOC:     map[string]bool{},
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.line(sc.Text())
	}
	return p.li
}

// logParser is the state of parseLog between lines.
type logParser struct {
	li   logInfo
	mark string // the harness's line prefix
	// seenMissing and seenTOC keep li.missing and li.tocs free of
	// repeats.
	seenMissing map[string]bool
	seenTOC     map[string]bool
	// pendingBang: lines after a "! message" error that still lack a
	// file:line; bangLines counts them.
	pendingBang bool
	bangLines   int
	// inWarning is the package name whose continuation lines "(name)"
	// follow.
	inWarning string
}

// line reads one line of the log. The kinds of line are tried in an
// order that matters: the harness's own lines first, then warnings
// (whose continuation lines would otherwise look like anything), then
// the measures, and errors last.
func (p *logParser) line(line string) {
	if rest, ok := strings.CutPrefix(line, p.mark); ok {
		p.harness(rest)
		return
	}
	if p.warning(line) || p.measure(line) {
		return
	}
	if strings.HasPrefix(line, "! TeX capacity exceeded") || strings.Contains(line, ": TeX capacity exceeded") {
		p.li.capacity = true
	}
	p.texError(line)
}

// harness reads a line the harness wrote (rest follows its mark): the
// page shipped, the end mark, the footer's page total, a contents file.
func (p *logParser) harness(rest string) {
	word, arg, found := strings.Cut(rest, " ")
	if !found {
		return
	}
	arg = strings.TrimSpace(arg)
	if word == "toc" {
		if !p.seenTOC[arg] {
			p.seenTOC[arg] = true
			p.li.tocs = append(p.li.tocs, arg)
		}
		return
	}
	n, err := strconv.Atoi(arg)
	if err != nil {
		return
	}
	switch word {
	case "page":
		p.li.lastPage = n
	case "end":
		p.li.ended, p.li.endPage = true, n
	case "total":
		p.li.total = n
	}
}

// warning reads a warning's first line or a continuation line of one,
// and reports whether line was either.
func (p *logParser) warning(line string) bool {
	if wm := warningRE.FindStringSubmatch(line); wm != nil {
		p.inWarning = wm[1]
		if p.inWarning == "" {
			p.inWarning = "LaTeX"
		}
		if fm := floatRE.FindStringSubmatch(line); fm != nil {
			if pt, err := strconv.ParseFloat(fm[1], 64); err == nil && pt > p.li.floatTooLarge {
				p.li.floatTooLarge = pt
			}
		}
		switch {
		case strings.Contains(line, "Rerun to get /PageLabels entry"):
			p.li.pageLabels = true
		case strings.Contains(line, "Rerun"):
			p.li.rerun = true
		}
		return true
	}
	if p.inWarning == "" {
		return false
	}
	if strings.HasPrefix(line, "("+p.inWarning+")") {
		if strings.Contains(line, "Rerun") {
			p.li.rerun = true
		}
		return true
	}
	p.inWarning = ""
	return false
}

// measure reads a line that reports a missing glyph, a page's overflow
// or the page count, and reports whether line was one.
func (p *logParser) measure(line string) bool {
	if mm := missingRE.FindStringSubmatch(line); mm != nil {
		if len(p.li.missing) < maxMissing {
			entry := glyphName(mm[1]) + " in font " + fontName(mm[2])
			if !p.seenMissing[entry] {
				p.seenMissing[entry] = true
				p.li.missing = append(p.li.missing, entry)
			}
		}
		return true
	}
	if om := overflowRE.FindStringSubmatch(line); om != nil {
		if pt, err := strconv.ParseFloat(om[1], 64); err == nil && pt > p.li.overflow {
			p.li.overflow, p.li.overflowPage = pt, p.li.lastPage+1
		}
		return true
	}
	if om := outputRE.FindStringSubmatch(line); om != nil {
		p.li.pages, _ = strconv.Atoi(om[1])
		return true
	}
	return false
}

// texError reads the first error: a "! message" line, whose file:line
// follows within 40 lines, or a file:line: message line.
func (p *logParser) texError(line string) {
	if p.pendingBang {
		if fm := fileLineRE.FindStringSubmatch(line); fm != nil {
			p.li.errFile = fm[1]
			p.li.errLine, _ = strconv.Atoi(fm[2])
			p.pendingBang = false
		} else if p.bangLines++; p.bangLines > 40 {
			p.pendingBang = false
		}
		return
	}
	if p.li.errMsg != "" {
		return
	}
	if strings.HasPrefix(line, "! ") {
		p.li.errMsg = strings.TrimSpace(line[2:])
		p.pendingBang = true
		p.bangLines = 0
		p.li.pageLimit = strings.Contains(line, p.mark+"page limit")
		return
	}
	if fm := fileLineRE.FindStringSubmatch(line); fm != nil {
		p.li.errMsg = strings.TrimSpace(fm[3])
		p.li.errFile = fm[1]
		p.li.errLine, _ = strconv.Atoi(fm[2])
		p.li.pageLimit = strings.Contains(fm[3], p.mark+"page limit")
	}
}

// glyphName turns "☃ (U+2603)" into "U+2603 ☃".
func glyphName(s string) string {
	if i := strings.LastIndex(s, " (U+"); i >= 0 && strings.HasSuffix(s, ")") {
		return s[i+2:len(s)-1] + " " + s[:i]
	}
	return s
}

// fontName shortens XeTeX's font identifier to its name:
// "Noto Serif Regular/OT:script=latn;..." → "Noto Serif Regular";
// "[/usr/share/fonts/x.ttf]/OT" → "x.ttf".
func fontName(s string) string {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i > 0 {
			return filepath.Base(s[1:i])
		}
	}
	if i := strings.IndexAny(s, "/:"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// sanitize makes a TeX message fit for a client: no directory of ours (the
// scratch folder, TeX's installation), valid UTF-8, bounded.
func sanitize(msg, dir string) string {
	if dir != "" {
		msg = strings.ReplaceAll(msg, dir+"/", "")
		msg = strings.ReplaceAll(msg, dir, ".")
	}
	msg = absPathRE.ReplaceAllString(msg, "$1")
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) > 300 {
		cut := 300
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return strings.TrimSpace(msg)
}
