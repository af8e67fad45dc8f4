#!/usr/bin/env bash
# Compiles the TeX pool's zygote shim (internal/tex/zygote/shim.c) into DIR
# as zygote-HASH.so, HASH being the first 16 hex digits of the source's
# SHA-256: the name the pool looks for beside the outprint binary and in
# ../lib/outprint, so a shim built from another source is never loaded.
# Warnings are errors. `make build` runs it for bin/, the Dockerfile in a
# build stage of its own (the image has no C compiler). Idempotent.
#
#   scripts/shim.sh [SOURCE [DIR]]     (default internal/tex/zygote/shim.c bin)
set -euo pipefail
src=${1:-internal/tex/zygote/shim.c}
dir=${2:-bin}
hash=$(sha256sum "$src" | cut -c1-16)
out="$dir/zygote-$hash.so"
mkdir -p "$dir"
# Shims of earlier sources are of no use to this binary.
find "$dir" -maxdepth 1 -name 'zygote-*.so' ! -name "zygote-$hash.so" -delete
if [ -f "$out" ]; then
  exit 0
fi
${CC:-gcc} -O2 -shared -fPIC -Wall -Wextra -Werror -Wl,-z,now -o "$out.tmp" "$src" -ldl
mv "$out.tmp" "$out"
