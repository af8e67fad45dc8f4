package tex

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseLog(t *testing.T) {
	const nonce = "abc123"
	tests := []struct {
		name string
		log  string
		want logInfo
	}{
		{
			name: "clean run",
			log: "OUTPRINT-abc123 page 1\nOUTPRINT-abc123 page 2\n" +
				"Output written on main.pdf (2 pages, 1234 bytes).\n",
			want: logInfo{total: -1, pages: 2, lastPage: 2},
		},
		{
			name: "file line error",
			log: "(./body.tex\n./body.tex:12: Undefined control sequence.\nl.12 \\foo\n" +
				"./body.tex:13: Another error.\nNo pages of output.\n",
			want: logInfo{total: -1, pages: -1, errMsg: "Undefined control sequence.", errFile: "./body.tex", errLine: 12},
		},
		{
			name: "bang error then emergency stop",
			log: "! LaTeX Error: File `x.tex' not found.\n\nType X to quit\nEnter file name: \n" +
				"./body.tex:3: Emergency stop.\n<read *>\n",
			want: logInfo{total: -1, pages: -1, errMsg: "LaTeX Error: File `x.tex' not found.", errFile: "./body.tex", errLine: 3},
		},
		{
			name: "page limit",
			log: "OUTPRINT-abc123 page 501\n./body.tex:501: OUTPRINT-abc123 page limit.\n" +
				"Output written on main.pdf (501 pages, 1 bytes).\n",
			want: logInfo{total: -1, pages: 501, lastPage: 501, pageLimit: true, errMsg: "OUTPRINT-abc123 page limit.", errFile: "./body.tex", errLine: 501},
		},
		{
			name: "forged page limit with another nonce",
			log:  "./body.tex:2: OUTPRINT-ffffff page limit.\n",
			want: logInfo{total: -1, pages: -1, errMsg: "OUTPRINT-ffffff page limit.", errFile: "./body.tex", errLine: 2},
		},
		{
			name: "capacity",
			log:  "./body.tex:1: TeX capacity exceeded, sorry [input stack size=10000].\n",
			want: logInfo{total: -1, pages: -1, capacity: true, errMsg: "TeX capacity exceeded, sorry [input stack size=10000].", errFile: "./body.tex", errLine: 1},
		},
		{
			name: "rerun warnings",
			log: "Package rerunfilecheck Warning: File `main.out' has changed.\n(rerunfilecheck)                Rerun to get outlines right\n" +
				"(rerunfilecheck)                or use package `bookmark'.\n",
			want: logInfo{total: -1, pages: -1, rerun: true},
		},
		{
			name: "page labels",
			log:  "Package hyperref Warning: Rerun to get /PageLabels entry.\n",
			want: logInfo{total: -1, pages: -1, pageLabels: true},
		},
		{
			name: "labels changed",
			log:  "LaTeX Warning: Label(s) may have changed. Rerun to get cross-references right.\n",
			want: logInfo{total: -1, pages: -1, rerun: true},
		},
		{
			name: "rerun in document text is no warning",
			log:  "Overfull \\hbox (3pt too wide) in paragraph\n[]\\TU/NotoSerif(0)/m/n/10 Rerun to get\nRerun LaTeX.\n",
			want: logInfo{total: -1, pages: -1},
		},
		{
			name: "undefined references alone",
			log:  "LaTeX Warning: There were undefined references.\n",
			want: logInfo{total: -1, pages: -1},
		},
		{
			name: "content overflowing the page",
			log: "OUTPRINT-abc123 page 1\nOUTPRINT-abc123 page 2\n" +
				"Overfull \\vbox (2.5pt too high) has occurred while \\output is active []\n" +
				"Overfull \\vbox (497.0549pt too high) has occurred while \\output is active []\n" +
				"Overfull \\vbox (3pt too high) detected at line 12\n",
			want: logInfo{total: -1, pages: -1, lastPage: 2, overflow: 497.0549, overflowPage: 3},
		},
		{
			name: "toc and missing glyphs",
			log: "OUTPRINT-abc123 toc toc\nOUTPRINT-abc123 toc lof\nOUTPRINT-abc123 toc toc\n" +
				"Missing character: There is no ☃ (U+2603) in font Noto Serif Regular/OT:script=latn;language=dflt;mapping=tex-text;!\n" +
				"Missing character: There is no ☃ (U+2603) in font Noto Serif Regular/OT:script=latn;language=dflt;mapping=tex-text;!\n" +
				"Missing character: There is no 字 (U+5B57) in font [/usr/share/fonts/x/Font.ttf]/OT!\n",
			want: logInfo{total: -1, pages: -1, tocs: []string{"toc", "lof"}, missing: []string{"U+2603 ☃ in font Noto Serif Regular", "U+5B57 字 in font Font.ttf"}},
		},
		{
			name: "end, total and a float too large",
			log: "OUTPRINT-abc123 page 1\nOUTPRINT-abc123 total 2\nOUTPRINT-abc123 end 2\nOUTPRINT-abc123 page 2\n" +
				"LaTeX Warning: Float too large for page by 12.5pt on input line 4.\n" +
				"LaTeX Warning: Float too large for page by 299.05998pt on input line 9.\n" +
				"OUTPRINT-ffffff end 9\nOUTPRINT-ffffff total 9\n" +
				"Output written on main.xdv (2 pages, 1234 bytes).\n",
			want: logInfo{total: 2, pages: 2, lastPage: 2, ended: true, endPage: 2, floatTooLarge: 299.05998},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseLog(strings.NewReader(tt.log), nonce)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseLog(%q) =\n %+v, want\n %+v", tt.log, got, tt.want)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"File `/etc/passwd.tex' not found.", "File `passwd.tex' not found."},
		{"File `/tmp/scratch/outprint-tex-1/x.tex' not found.", "File `x.tex' not found."},
		{"File `../../secret.tex' not found.", "File `../../secret.tex' not found."},
		{"Font \\x=[/usr/share/fonts/a.ttf] not loadable", "Font \\x=[a.ttf] not loadable"},
		{"at /usr/share/texlive/texmf-dist/tex/latex/hyperref/hyperref.sty here", "at hyperref.sty here"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{strings.Repeat("é", 200), strings.Repeat("é", 150) + "…"},
	}
	for _, tt := range tests {
		if got := sanitize(tt.in, "/tmp/scratch/outprint-tex-1"); got != tt.want {
			t.Errorf("sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
