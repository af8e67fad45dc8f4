#!/usr/bin/env bash
# Runs each argument as a bash command, all at the same time, and prints
# each one's output whole (not interleaved) when it ends, headed by the
# command and how long it took. Exits 1, naming the commands that failed,
# if any did; 0 when all passed.
#
# `make test` runs its first step this way: the linters, the suites that
# mostly wait (the image tests on podman, the 10,000-job burst on fsync)
# and the -race run, which leaves a core idle while its tests wait on
# leases, timeouts and processes, instead of one after another.
set -uo pipefail
if [ $# -eq 0 ]; then
  echo "usage: scripts/together.sh 'COMMAND' ['COMMAND' ...]" >&2
  exit 2
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pids=()
for i in $(seq 0 $(($# - 1))); do
  cmd=${*:i+1:1}
  (
    start=$SECONDS
    bash -c "$cmd" >"$dir/$i.out" 2>&1
    rc=$?
    echo "$rc $((SECONDS - start))" >"$dir/$i.rc"
  ) &
  pids+=("$!")
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  cmd=${*:i+1:1}
  read -r rc secs <"$dir/$i.rc"
  echo "=== $cmd (exit $rc, ${secs}s)"
  cat "$dir/$i.out"
  if [ "$rc" != 0 ]; then
    failed+=("$cmd")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
