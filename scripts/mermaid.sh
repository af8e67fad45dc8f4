#!/usr/bin/env bash
# Installs the Mermaid renderer outprint draws ```mermaid fences with: the
# browser bundle of the npm package mermaid (pinned version and checksum,
# the version Outline's editor pins), to the fixed folder
# diagram.DefaultMermaidDir names. Idempotent: with the file in place and
# its checksum right it only checks it. Needs npm and node (the Dockerfile
# runs it in a Node stage). MIT licence, kept beside the bundle.
set -euo pipefail
version="11.16.1"
# The tarball's integrity as the registry publishes it (npm view
# mermaid@11.16.1 dist.integrity) and the SHA-256 of the one file outprint
# loads (internal/diagram checks it again when it starts).
integrity="sha512-TQsq6u22fAn3rek5VOubrhKPo1g5hwC3FXUN9hiyupTckcYiGuuKGkNQrKYwGJkXUxZdojwRG46gsSCFZMDp4g=="
bundle_sha256="18327bef70d96fb505fe7287d9f6a7362ebf07ff6576ddfaffb1a06f3e1a2954"
dest="${1:-/usr/local/share/outprint/mermaid}/mermaid-$version"
if [ -f "$dest/mermaid.min.js" ] && echo "$bundle_sha256  $dest/mermaid.min.js" | sha256sum --quiet -c - 2>/dev/null; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "mermaid@$version" --silent --loglevel=error >/dev/null)
tgz="$work/mermaid-$version.tgz"
got="sha512-$(node -e 'const c=require("crypto"),f=require("fs");process.stdout.write(c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tgz")"
if [ "$got" != "$integrity" ]; then
  echo "mermaid: $tgz has checksum $got, want $integrity" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" package/dist/mermaid.min.js package/LICENSE
if ! echo "$bundle_sha256  $work/package/dist/mermaid.min.js" | sha256sum --quiet -c -; then
  echo "mermaid: dist/mermaid.min.js does not have SHA-256 $bundle_sha256" >&2
  exit 1
fi
$SUDO rm -rf "$dest.tmp"
$SUDO mkdir -p "$dest.tmp"
$SUDO cp "$work/package/dist/mermaid.min.js" "$dest.tmp/mermaid.min.js"
$SUDO cp "$work/package/LICENSE" "$dest.tmp/LICENSE"
$SUDO chmod -R a+rX "$dest.tmp"
$SUDO rm -rf "$dest"
$SUDO mv "$dest.tmp" "$dest"
