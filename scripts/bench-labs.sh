#!/usr/bin/env bash
# bench-labs.sh: time lab sandboxes (netns backend) coming up and going down,
# count how many 4-node sandboxes the host holds at once, and print per catalog lab
# the time to the learner's prompt, to scoring confirmed and of a grading. Run by
# `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-labs: skipped (needs root for network namespaces, tc and cgroups)"
  exit 0
fi
go run ./labs/cmd/labs-bench "$@"
echo "== per-lab start and grading times (BenchmarkLabTimes)"
exe="$PWD/bin/commlab"
[ -x "$exe" ] || exe=""
COMMLAB_LAB_TIMES=1 COMMLAB_EXE="$exe" go test ./cmd/commlab -run '^$' -bench '^BenchmarkLabTimes$' -benchtime 1x -timeout 40m
