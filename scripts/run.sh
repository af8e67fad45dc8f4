#!/usr/bin/env bash
# `make run`: renders the project's example document with the freshly built
# binary and says where the PDF is. (When `outprint serve` lands, this starts
# the server on embedded defaults instead.)
set -euo pipefail
bin=${1:-bin/outprint}
out=examples/showcase.pdf
"$bin" render examples/showcase.md -o "$out"
echo
echo "outprint rendered examples/showcase.md -> $(pwd)/$out"
echo "render your own: $bin render path/to/doc.md [-o out.pdf] [--metadata meta.json] [--json]"
