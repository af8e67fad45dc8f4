#!/usr/bin/env bash
# third_party/goldmark is upstream goldmark, the version go.mod requires,
# exactly as the Go module cache holds it (go.sum pins its hash), with the
# patches of third_party/goldmark-patches/*.diff applied in order, minus
# upstream's CI, lint, benchmark and generator files (dropped below). Its
# own tests are kept: `make test` runs them. OUTPRINT.md says why each
# patch exists.
#
#   scripts/goldmark.sh check      fail, showing the difference, unless the tree
#                                  is exactly pristine + patches
#   scripts/goldmark.sh apply      rebuild the tree from pristine + patches
#   scripts/goldmark.sh pristine DIR
#                                  write the unpatched module (minus the dropped
#                                  files) to DIR, e.g. to make a new patch:
#                                  git init it, change it, git format-patch
#
# The module comes from the Go module cache (`go mod download`, through the
# module proxy when it is not cached yet).
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
root=$PWD
tree=third_party/goldmark
patches=third_party/goldmark-patches
module=github.com/yuin/goldmark
# Upstream files outprint does not keep: CI and lint settings, the Makefile,
# the C benchmark against cmark and the generators of the .gen.go tables.
dropped=(.github .gitignore .golangci.yml Makefile _benchmark _tools)

version=$(awk -v m="$module" '$1 == m && $2 ~ /^v/ { print $2; exit }' go.mod)
if [ -z "$version" ]; then
  echo "goldmark.sh: go.mod requires no version of $module" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# pristine DIR: the module as go.sum pins it, without the dropped files.
pristine() {
  local out=$1 info dir sum want
  # Outside any module, so that outprint's replace does not apply.
  info=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version")
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")
  sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")
  want=$(awk -v m="$module" -v v="$version" '$1 == m && $2 == v { print $3 }' "$root/go.sum")
  if [ -z "$dir" ] || [ "$sum" != "$want" ]; then
    echo "goldmark.sh: $module@$version from the module cache has hash '$sum', go.sum says '$want'" >&2
    exit 1
  fi
  mkdir -p "$out"
  cp -R "$dir/." "$out"
  chmod -R u+w "$out"
  for d in "${dropped[@]}"; do
    rm -rf "${out:?}/$d"
  done
}

# build DIR: pristine + every patch, in order; a patch that does not apply
# exactly (no fuzz) fails.
build() {
  local out=$1 p
  pristine "$out"
  # A repository of its own, so that git apply takes the paths from $out
  # whatever repository the temporary directory may be inside.
  git -C "$out" init -q
  for p in "$root/$patches"/*.diff; do
    if ! git -C "$out" apply --whitespace=nowarn -p1 "$p"; then
      echo "goldmark.sh: $p does not apply to $module@$version" >&2
      exit 1
    fi
  done
  rm -rf "$out/.git"
}

case "${1:-}" in
check)
  build "$work/built"
  if ! diff -r -q --exclude=OUTPRINT.md "$work/built" "$tree" >"$work/diff"; then
    echo "goldmark.sh: $tree is not $module@$version + $patches/*.diff:" >&2
    cat "$work/diff" >&2
    diff -r -u --exclude=OUTPRINT.md "$work/built" "$tree" | head -n 200 >&2 || true
    echo "goldmark.sh: change the tree through a patch (see OUTPRINT.md), then run scripts/goldmark.sh apply" >&2
    exit 1
  fi
  echo "goldmark.sh: $tree is $module@$version + $(ls "$patches"/*.diff | wc -l) patches"
  ;;
apply)
  build "$work/built"
  cp "$tree/OUTPRINT.md" "$work/built/OUTPRINT.md"
  rm -rf "$tree"
  cp -R "$work/built" "$tree"
  echo "goldmark.sh: $tree rebuilt from $module@$version + $patches/*.diff"
  ;;
pristine)
  [ -n "${2:-}" ] || { echo "usage: scripts/goldmark.sh pristine DIR" >&2; exit 2; }
  case $2 in /*) pristine "$2" ;; *) pristine "$caller/$2" ;; esac
  ;;
*)
  echo "usage: scripts/goldmark.sh check | apply | pristine DIR" >&2
  exit 2
  ;;
esac
