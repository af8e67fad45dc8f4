#!/usr/bin/env bash
# Prints the path of the binary of a pinned Go tool, PACKAGE@VERSION,
# building it first if this machine has not yet: once per machine, tool
# version and Go version, into tools/ of the cache the other scripts use
# (${OUTPRINT_CACHE:-~/.cache/outprint}), outside any clone, as
# scripts/seaweedfs.sh keeps SeaweedFS. The Go
# version is in the name because a linter built by one Go cannot read the
# packages of a newer one, as `go run` never let happen.
#
# `make test` runs its linters so rather than with `go run PACKAGE@VERSION`,
# which asks the module proxy about the module's deprecation on every run,
# even with the module cached: a proxy that took the connection and never
# answered once held a CI rehearsal for minutes.
set -euo pipefail
if [ $# -ne 1 ] || [[ $1 != *@* ]]; then
  echo "usage: scripts/tool.sh PACKAGE@VERSION" >&2
  exit 2
fi
spec=$1
pkg=${spec%@*}
version=${spec##*@}
cmd=$(basename "$pkg")
dir="${OUTPRINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outprint}/tools"
bin=$dir/$cmd-$version-$(go env GOVERSION)
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "tool: building $spec into $dir" >&2
  GOBIN=$tmp go install "$spec" >&2
  mv "$tmp/$cmd" "$bin"
fi
echo "$bin"
