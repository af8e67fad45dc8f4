// outprint's drawing page: set up once per page, after mermaid.min.js.
// It defines __outprintDraw(source, maxSide), which draws one diagram into
// the page at its natural size and answers {w, h, sw, sh} in CSS pixels,
// or {error}; and __outprintReset(), which puts the page back as it was
// set up. A page serves one document after another (the pool keeps it,
// with Mermaid loaded and its code compiled), so nothing of one diagram
// may reach the next: every drawing starts from a reset page, and the
// pool resets it again when a document gives it back.
(() => {
  "use strict";
  // The document's faces: Noto Sans, its CJK, Arabic (Naskh, as the
  // document), Hebrew, Indic and Thai twins, then the symbols.
  const fonts = '"Noto Sans", "Noto Sans CJK JP", "Noto Naskh Arabic", "Noto Sans Hebrew", ' +
    '"Noto Sans Devanagari", "Noto Sans Bengali", "Noto Sans Tamil", "Noto Sans Thai", ' +
    '"Noto Sans Symbols", "Noto Sans Symbols2", "Noto Sans Math", sans-serif';
  // settings is Mermaid's configuration, a new object each time (Mermaid
  // keeps what it is given).
  const settings = () => ({
    startOnLoad: false,
    // Labels are sanitized (DOMPurify), links and click callbacks are off.
    securityLevel: "strict",
    // An error is an answer, not a drawing of a bomb.
    suppressErrorRendering: true,
    // The source bound is outprint's (64 KiB); Mermaid's default is 50,000
    // characters.
    maxTextSize: 65536,
    maxEdges: 500,
    deterministicIds: true,
    deterministicIDSeed: "outprint",
    fontFamily: fonts,
    themeVariables: { fontFamily: fonts },
    // Commit labels read across the page, where pdftotext finds them as
    // words (turned 45°, each letter is a word of its own).
    gitGraph: { rotateCommitLabel: false },
    // Keys a diagram's %%{init}%% directive or front matter may not change:
    // Mermaid's own list, and what could load or run anything (CSS of the
    // diagram's own, fonts, the sanitizer's configuration).
    secure: [
      "secure", "securityLevel", "startOnLoad", "maxTextSize", "suppressErrorRendering",
      "maxEdges", "themeCSS", "fontFamily", "altFontFamily", "dompurifyConfig",
      "deterministicIds", "deterministicIDSeed", "legacyMathML", "forceLegacyMathML",
    ],
  });
  const root = document.documentElement;
  const head = Array.from(document.head.childNodes);
  // reset puts the page back as it was set up: the head's own elements
  // only, a body of one empty box, no size or style on either (an earlier
  // drawing sized them), and Mermaid's configuration as outprint sets it —
  // Mermaid drops a diagram's directives at each render already; this
  // holds even if it did not.
  const reset = () => {
    document.head.replaceChildren(...head);
    const box = document.createElement("div");
    box.id = "d";
    document.body.replaceChildren(box);
    for (const node of [root, document.body]) {
      for (const a of Array.from(node.attributes)) {
        node.removeAttribute(a.name);
      }
    }
    document.body.style.fontFamily = fonts;
    mermaid.initialize(settings());
  };
  reset();
  // n numbers the drawings of a document: their element ids.
  let n = 0;
  window.__outprintReset = () => {
    reset();
    n = 0;
    return true;
  };
  // draw draws one diagram into box at its natural size, or scaled down
  // so that its longest side is maxSide CSS pixels (the SVG scales, its
  // text stays text), and answers {w, h, sw, sh}: its natural size and its
  // size on the page; or {error}.
  const draw = async (box, src, maxSide) => {
    n++;
    let svg;
    try {
      ({ svg } = await mermaid.render("op" + n, src));
    } catch (e) {
      return { error: String((e && e.message) || e) };
    }
    box.innerHTML = svg;
    const el = box.querySelector("svg");
    if (!el) {
      return { error: "Mermaid drew nothing" };
    }
    // A printed diagram links nowhere: Chromium's printer would make each
    // link an annotation of the PDF.
    for (const a of box.querySelectorAll("[href], [*|href]")) {
      a.removeAttribute("href");
      a.removeAttributeNS("http://www.w3.org/1999/xlink", "href");
    }
    // The drawing's box: its viewBox joined with what it draws (a pie's
    // title starts above the viewBox Mermaid gives it), and a margin for
    // strokes, which getBBox leaves out.
    const vb = el.viewBox && el.viewBox.baseVal;
    let bb;
    try {
      bb = el.getBBox();
    } catch (e) {
      bb = null;
    }
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const r of [vb, bb]) {
      if (r && r.width > 0 && r.height > 0) {
        x0 = Math.min(x0, r.x);
        y0 = Math.min(y0, r.y);
        x1 = Math.max(x1, r.x + r.width);
        y1 = Math.max(y1, r.y + r.height);
      }
    }
    if (!(x1 > x0 && y1 > y0)) {
      return { error: "Mermaid drew nothing" };
    }
    const m = 2;
    x0 = Math.floor(x0 - m);
    y0 = Math.floor(y0 - m);
    const w = Math.ceil(x1 + m) - x0;
    const h = Math.ceil(y1 + m) - y0;
    el.setAttribute("viewBox", x0 + " " + y0 + " " + w + " " + h);
    const s = Math.min(1, maxSide / Math.max(w, h));
    const sw = Math.max(1, Math.ceil(w * s));
    const sh = Math.max(1, Math.ceil(h * s));
    el.style.maxWidth = "none";
    el.style.display = "block";
    el.setAttribute("width", String(sw));
    el.setAttribute("height", String(sh));
    el.style.width = sw + "px";
    el.style.height = sh + "px";
    return { w, h, sw, sh };
  };

  // __outprintDraw draws one diagram alone in a reset page whose size is
  // the drawing's: the page is printed with the drawing's paper size.
  window.__outprintDraw = async (src, maxSide) => {
    reset();
    const res = await draw(document.getElementById("d"), src, maxSide);
    if (!res.error) {
      for (const node of [root, document.body]) {
        node.style.width = res.sw + "px";
        node.style.height = res.sh + "px";
      }
    }
    return res;
  };

  // __outprintAdd draws one more diagram of a document as a print page of
  // its own (a named CSS page the drawing's size), after the document's
  // earlier ones: the document's diagrams are then printed as one PDF, one
  // page each, which costs one print instead of one per diagram (each
  // print starts a print compositor process). The page is reset by the
  // pool before the document's first diagram; Mermaid's configuration is
  // set again before each one.
  window.__outprintAdd = async (src, maxSide) => {
    mermaid.initialize(settings());
    document.getElementById("d")?.remove();
    // Only the document's print pages stay: whatever else an earlier
    // render left in the body goes.
    for (const node of Array.from(document.body.children)) {
      if (!node.classList.contains("op-page")) {
        node.remove();
      }
    }
    const first = document.body.children.length === 0;
    const box = document.createElement("div");
    box.className = "op-page";
    document.body.appendChild(box);
    const res = await draw(box, src, maxSide);
    if (res.error) {
      box.remove();
      return res;
    }
    const name = "op" + n;
    Object.assign(box.style, {
      width: res.sw + "px", height: res.sh + "px", overflow: "hidden",
      page: name, breakBefore: first ? "auto" : "page", breakInside: "avoid",
    });
    let sheet = document.getElementById("op-pages");
    if (!sheet) {
      sheet = document.createElement("style");
      sheet.id = "op-pages";
      document.head.appendChild(sheet);
    }
    sheet.append("@page " + name + " { size: " + res.sw + "px " + res.sh + "px; margin: 0 }\n");
    return res;
  };
})();
