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
	li := logInfo{pages: -1, total: -1}
	m := marker(nonce)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seenMissing := map[string]bool{}
	seenTOC := map[string]bool{}
	// Lines after a "! message" error that still lack a file:line.
	pendingBang := false
	bangLines := 0
	inWarning := "" // the package name whose continuation lines "(name)" follow
	for sc.Scan() {
		line := sc.Text()

		if strings.HasPrefix(line, m) {
			rest := line[len(m):]
			switch {
			case strings.HasPrefix(rest, "page "):
				if n, err := strconv.Atoi(strings.TrimSpace(rest[5:])); err == nil {
					li.lastPage = n
				}
			case strings.HasPrefix(rest, "end "):
				if n, err := strconv.Atoi(strings.TrimSpace(rest[4:])); err == nil {
					li.ended, li.endPage = true, n
				}
			case strings.HasPrefix(rest, "total "):
				if n, err := strconv.Atoi(strings.TrimSpace(rest[6:])); err == nil {
					li.total = n
				}
			case strings.HasPrefix(rest, "toc "):
				ext := strings.TrimSpace(rest[4:])
				if !seenTOC[ext] {
					seenTOC[ext] = true
					li.tocs = append(li.tocs, ext)
				}
			}
			continue
		}

		// Warnings and their continuation lines.
		if wm := warningRE.FindStringSubmatch(line); wm != nil {
			inWarning = wm[1]
			if inWarning == "" {
				inWarning = "LaTeX"
			}
			if fm := floatRE.FindStringSubmatch(line); fm != nil {
				if pt, err := strconv.ParseFloat(fm[1], 64); err == nil && pt > li.floatTooLarge {
					li.floatTooLarge = pt
				}
			}
			switch {
			case strings.Contains(line, "Rerun to get /PageLabels entry"):
				li.pageLabels = true
			case strings.Contains(line, "Rerun"):
				li.rerun = true
			}
			continue
		}
		if inWarning != "" {
			if strings.HasPrefix(line, "("+inWarning+")") {
				if strings.Contains(line, "Rerun") {
					li.rerun = true
				}
				continue
			}
			inWarning = ""
		}

		if mm := missingRE.FindStringSubmatch(line); mm != nil {
			if len(li.missing) < maxMissing {
				entry := glyphName(mm[1]) + " in font " + fontName(mm[2])
				if !seenMissing[entry] {
					seenMissing[entry] = true
					li.missing = append(li.missing, entry)
				}
			}
			continue
		}

		if om := overflowRE.FindStringSubmatch(line); om != nil {
			if pt, err := strconv.ParseFloat(om[1], 64); err == nil && pt > li.overflow {
				li.overflow, li.overflowPage = pt, li.lastPage+1
			}
			continue
		}

		if om := outputRE.FindStringSubmatch(line); om != nil {
			li.pages, _ = strconv.Atoi(om[1])
			continue
		}

		if strings.HasPrefix(line, "! TeX capacity exceeded") || strings.Contains(line, ": TeX capacity exceeded") {
			li.capacity = true
		}

		if pendingBang {
			if fm := fileLineRE.FindStringSubmatch(line); fm != nil {
				li.errFile = fm[1]
				li.errLine, _ = strconv.Atoi(fm[2])
				pendingBang = false
			} else if bangLines++; bangLines > 40 {
				pendingBang = false
			}
			continue
		}
		if li.errMsg != "" {
			continue
		}
		if strings.HasPrefix(line, "! ") {
			li.errMsg = strings.TrimSpace(line[2:])
			pendingBang = true
			bangLines = 0
			if strings.Contains(line, m+"page limit") {
				li.pageLimit = true
			}
			continue
		}
		if fm := fileLineRE.FindStringSubmatch(line); fm != nil {
			li.errMsg = strings.TrimSpace(fm[3])
			li.errFile = fm[1]
			li.errLine, _ = strconv.Atoi(fm[2])
			if strings.Contains(fm[3], m+"page limit") {
				li.pageLimit = true
			}
		}
	}
	return li
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
