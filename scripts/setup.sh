#!/usr/bin/env bash
# Installs what outprint needs and is missing, and nothing else. Idempotent:
# on a machine that has everything it only checks (a second or so).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: XeLaTeX and the LaTeX packages the preamble uses, fonts for
# every script of the corpus (Noto, Noto CJK, Symbola for monochrome emoji),
# TeX Gyre Schola Math for formulas (unicode-math; it matches Noto Serif),
# rsvg-convert for SVG images, poppler (pdfinfo, pdftotext, pdffonts) and qpdf
# for checking PDFs in tests and for filling forms, pandoc and pdftk-java for
# the benchmarks' peers, prometheus for promtool (the tests check and
# unit-test deploy/prometheus and lint a scrape; Debian has no package of
# promtool alone, and where systemd runs, the package also starts a
# Prometheus server of its own, which outprint does not need), Chromium for
# the web page's browser tests, gcc and libc6-dev for the TeX pool's zygote
# shim (internal/tex/zygote/shim.c, built when the pool starts; without them
# the pool warms every process itself).
# jpegtran (libjpeg-turbo-progs) makes the progressive JPEGs of the image tests.
packages=(
  gcc libc6-dev
  texlive-xetex texlive-latex-recommended texlive-latex-extra
  texlive-lang-cjk texlive-lang-chinese texlive-lang-arabic texlive-lang-other
  texlive-lang-european texlive-lang-german texlive-lang-french texlive-lang-spanish
  texlive-lang-italian texlive-lang-portuguese texlive-lang-polish texlive-lang-czechslovak
  texlive-lang-cyrillic texlive-lang-greek
  texlive-fonts-recommended lmodern fonts-noto-core fonts-noto-cjk fonts-noto-mono fonts-symbola
  fonts-texgyre-math
  librsvg2-bin poppler-utils qpdf pandoc pdftk-java libjpeg-turbo-progs
  prometheus chromium
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  else
    echo "setup: Go is not installed (need go $(sed -n 's/^go //p' go.mod) or newer)" >&2
    exit 1
  fi
fi
go mod download

need_npm() {
  if ! command -v npm >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
}

# The web page's browser tests check accessibility with axe-core, an npm
# package pinned by internal/web/testdata/package-lock.json.
if [ ! -f internal/web/testdata/node_modules/axe-core/axe.min.js ]; then
  need_npm
  echo "setup: installing axe-core for the browser tests" >&2
  npm ci --prefix internal/web/testdata --no-audit --no-fund --loglevel=error >/dev/null
fi

# The emoji image set (Twemoji's SVGs, an npm package) in
# /usr/local/share/outprint/emoji, where the service looks for it.
if [ ! -f /usr/local/share/outprint/emoji/twemoji-16.0.1/svg/1f600.svg ]; then
  need_npm
  echo "setup: installing the emoji image set" >&2
fi
bash scripts/emoji.sh

# SeaweedFS's weed, the S3-compatible server the store and cluster tests
# start: built once from its Go module and cached outside the clone.
bash scripts/seaweedfs.sh >/dev/null
