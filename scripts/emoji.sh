#!/usr/bin/env bash
# Installs the emoji image set outprint draws emoji with: Twemoji's SVGs
# from the npm package @discordapp/twemoji (pinned version and checksum),
# to the fixed folder render.DefaultEmojiDir names. Idempotent: with the
# set in place it only checks it. Needs npm and node (the Dockerfile runs
# it in a Node stage). Graphics CC-BY 4.0 (README, "Emoji").
set -euo pipefail
version="16.0.1"
integrity="sha512-figLiBWzjS5cyrAjLaGjM8AAaowO3qvK8rg5bA2dElB4qsaPMvBVlFDMO2d3x+nC1igt7kgWH4dvNmvvUHUF8w=="
dest="${1:-/usr/local/share/outprint/emoji}/twemoji-$version"
# The set has 3,846 files; fewer means an interrupted copy.
want=3846
if [ -f "$dest/svg/1f600.svg" ] && [ "$(find "$dest/svg" -name '*.svg' | wc -l)" -eq "$want" ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy in npm's cache is taken without asking the registry (the image
# tests lend the build this machine's cache); the checksum below is checked
# either way.
(cd "$work" && npm pack "@discordapp/twemoji@$version" --prefer-offline --silent --loglevel=error >/dev/null)
tgz="$work/discordapp-twemoji-$version.tgz"
got="sha512-$(node -e 'const c=require("crypto"),f=require("fs");process.stdout.write(c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tgz")"
if [ "$got" != "$integrity" ]; then
  echo "emoji: $tgz has checksum $got, want $integrity" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" package/dist/svg package/LICENSE
n=$(find "$work/package/dist/svg" -name '*.svg' | wc -l)
if [ "$n" -ne "$want" ]; then
  echo "emoji: the package holds $n SVGs, want $want" >&2
  exit 1
fi
$SUDO rm -rf "$dest.tmp"
$SUDO mkdir -p "$dest.tmp"
$SUDO cp -r "$work/package/dist/svg" "$dest.tmp/svg"
$SUDO cp "$work/package/LICENSE" "$dest.tmp/LICENSE"
$SUDO chmod -R a+rX "$dest.tmp"
$SUDO rm -rf "$dest"
$SUDO mv "$dest.tmp" "$dest"
