#!/usr/bin/env bash
# Installs what outprint needs and is missing, and nothing else. Idempotent:
# on a machine that has everything it only checks (a second or so).
#
#   scripts/setup.sh serve   what `make build` and `make run` need: the
#                            packages outprint runs, a C compiler for the
#                            zygote shim, the Go modules, the emoji set
#   scripts/setup.sh test    that, and what only the tests and benchmarks
#                            use (`make test`, the default)
#
# Debian 12 or 13, as root or with sudo; Go (go.mod's version or newer) in
# PATH or /usr/local/go. Slow things are cached outside the clone, in
# ${OUTPRINT_CACHE:-~/.cache/outprint}.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case "$mode" in
  serve | test) ;;
  *) echo "usage: scripts/setup.sh [serve|test]" >&2; exit 2 ;;
esac

# What serving needs: scripts/packages-serve.txt and
# scripts/packages-office.txt (LibreOffice and the fonts Office documents
# ask for), the lists the container image installs too (add a package
# outprint runs there, and its program to internal/programs); gcc for the TeX pool's zygote shim (scripts/shim.sh;
# without it the pool warms every process itself); curl, with which
# scripts/run.sh waits for the server.
mapfile -t serve_packages < <(sed 's/#.*//' scripts/packages-serve.txt scripts/packages-office.txt | tr -s ' \t' '\n' | grep .)
serve_packages+=(gcc libc6-dev curl)

# What only tests and benchmarks use (add test-only packages here):
# pandoc and pdftk-java for the benchmarks' peers; jpegtran
# (libjpeg-turbo-progs) for the image tests' progressive JPEGs; prometheus
# for promtool (the tests check and unit-test deploy/prometheus; Debian has
# no package of promtool alone, and where systemd runs the package also
# starts a Prometheus server, which outprint does not need); Chromium for
# the web page's browser tests (serving installs it too, for diagrams);
# podman and what it runs with, debootstrap
# and netavark's DNS for the image tests (internal/imagetest,
# scripts/containers.sh); iproute2, socat and PostgreSQL's client
# programs for cmd/outprint's TestShellExamples, which runs the README's
# examples on their fixed ports in a network namespace of their own
# (createdb, and PostgreSQL's socket reached as 127.0.0.1:5432).
test_packages=(
  pandoc pdftk-java libjpeg-turbo-progs prometheus chromium
  podman runc crun conmon uidmap slirp4netns fuse-overlayfs netavark aardvark-dns iptables debootstrap
  iproute2 socat postgresql-client
)

packages=("${serve_packages[@]}")
if [ "$mode" = test ]; then
  packages+=("${test_packages[@]}")
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# One dpkg-query for all: only what is not installed is listed.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null | awk '$NF == "installed" {print $1}' || true)
missing=()
for p in "${packages[@]}"; do
  if ! grep -qxF "$p" <<<"$installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
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
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
}

# The emoji image set (Twemoji's SVGs, an npm package) in
# /usr/local/share/outprint/emoji, where the service looks for it.
if [ ! -f /usr/local/share/outprint/emoji/twemoji-16.0.1/svg/1f600.svg ]; then
  need_npm
  echo "setup: installing the emoji image set" >&2
fi
bash scripts/emoji.sh

# Mermaid's browser bundle (npm mermaid, pinned) in
# /usr/local/share/outprint/mermaid, where internal/diagram looks for it;
# it runs in Chromium.
if [ ! -f /usr/local/share/outprint/mermaid/mermaid-11.16.1/mermaid.min.js ]; then
  need_npm
  echo "setup: installing the Mermaid renderer" >&2
fi
bash scripts/mermaid.sh

if [ "$mode" = serve ]; then
  exit 0
fi

# The web page's browser tests check accessibility with axe-core, an npm
# package pinned by internal/web/testdata/package-lock.json.
if [ ! -f internal/web/testdata/node_modules/axe-core/axe.min.js ]; then
  need_npm
  echo "setup: installing axe-core for the browser tests" >&2
  npm ci --prefix internal/web/testdata --no-audit --no-fund --loglevel=error >/dev/null
fi

# SeaweedFS's weed, the S3-compatible server the store and cluster tests
# start: built once from its Go module and cached outside the clone.
bash scripts/seaweedfs.sh >/dev/null

# The image tests' podman set-up, base-image stand-ins and docker compose
# (as root; elsewhere the image tests say what is missing).
if [ "$(id -u)" -eq 0 ]; then
  bash scripts/containers.sh >/dev/null
fi
