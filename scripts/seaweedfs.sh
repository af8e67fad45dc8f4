#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible server the tests run) from
# its Go module once and caches it outside the clone. Idempotent: with the
# binary cached it only prints its path.
set -euo pipefail
version="v0.0.0-20261109003541-7506e5f91cd6"
cache="${OUTPRINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outprint}/seaweedfs-$version"
bin="$cache/weed"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
export PATH="/usr/local/go/bin:$PATH"
mkdir -p "$cache"
dir=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "github.com/seaweedfs/seaweedfs@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
work=$(mktemp -d)
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
(cd "$work" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" ./weed) >&2
mv "$bin.tmp" "$bin"
rm -rf "$work"
echo "$bin"
