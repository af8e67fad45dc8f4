#!/usr/bin/env bash
# `make run`: starts `outprint serve` on its embedded defaults (listen
# 127.0.0.1:8080, data in ./outprint-data, anonymous on loopback), waits
# until it is ready, and prints how to render a file with curl. The server
# runs in the foreground: Ctrl-C stops it (gracefully; a second Ctrl-C
# stops running renders at once).
set -euo pipefail
bin=${1:-bin/outprint}
cd "$(dirname "$0")/.."

# Honour an operator's address (OUTPRINT_LISTEN or a config file's listen
# can differ); the default is what serve uses without either.
listen=${OUTPRINT_LISTEN:-127.0.0.1:8080}
if [ -n "${OUTPRINT_CONFIG:-}" ]; then
  cfg_listen=$("$bin" config check 2>/dev/null | sed -n 's/^listen: \([^ ]*\).*/\1/p' || true)
  listen=${cfg_listen:-$listen}
fi
url="http://${listen/0.0.0.0/127.0.0.1}"

# The server gets a session of its own, so that a Ctrl-C on the terminal
# reaches it once, forwarded by the trap below, and not twice (the
# terminal's SIGINT to the whole group plus the trap's SIGTERM would count
# as the "second signal" that cuts running renders short).
setsid "$bin" serve &
pid=$!
# Ctrl-C and SIGTERM go to the server, which shuts down gracefully; this
# script then waits for it and exits with its code.
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM

ready=""
for _ in $(seq 1 240); do
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || exit $?
    exit 1
  fi
  if curl -sf -o /dev/null "$url/readyz" 2>/dev/null; then
    ready=yes
    break
  fi
  sleep 0.25
done

if [ -n "$ready" ]; then
  cat >&2 <<EOF

outprint is ready at $url (logs above and below are JSON, one line per request).

Render a Markdown file with its images (each asset's filename is the path the Markdown uses):

  curl -sf -o showcase.pdf \\
    -F document=@examples/showcase.md \\
    -F 'asset=@examples/images/bars.png;filename=images/bars.png' \\
    -F 'asset=@examples/images/landscape.jpg;filename=images/landscape.jpg' \\
    -F 'asset=@examples/images/flow.svg;filename=images/flow.svg' \\
    $url/v1/render

Or send JSON:

  curl -s -o hello.pdf -H 'Content-Type: application/json' \\
    -d '{"markdown": "# Hello\\n\\nFrom outprint.", "metadata": {"author": "me"}}' \\
    $url/v1/render

Errors come back as JSON ({"errors":[...]}); add -w '%{http_code}\\n' to see the status.
Health: $url/healthz   readiness: $url/readyz   metrics: $url/metrics
Stop with Ctrl-C.

EOF
else
  echo "outprint: not ready after 60 s; see the logs above ($url/readyz)" >&2
fi

set +e
wait "$pid"
code=$?
# The first wait returns early when the trap runs; wait again for the
# server's own exit.
if kill -0 "$pid" 2>/dev/null; then
  wait "$pid"
  code=$?
fi
exit "$code"
