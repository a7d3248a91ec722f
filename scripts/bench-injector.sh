#!/usr/bin/env bash
# bench-injector.sh: the fault injector's benchmark, printed as Markdown tables:
# apply/revert latency per kind (p50/p99), nic-rate precision (asked vs iperf3) at
# 10, 100 and 1000 Mbit/s, loss precision at 0.1, 1 and 10 %, delay precision at
# 1, 2 and 5 ms with its throughput cost (netem, or the userspace wire) and as commlab bench's
# small all_reduce calls see it (bench/delay_netns_test.go), and a long crash loop
# (kill -9 mid-apply/revert, then sweep). Needs root: it builds scratch namespaces.
# Knobs: COMMLAB_BENCH_ITER (iterations per kind, default 200), COMMLAB_CRASH_LOOPS
# (default 300), COMMLAB_BENCH_ONLY (latency, rate, loss, delay or crash).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-injector: skipped, needs root (network namespaces, tc, nftables, cgroups)" >&2
  exit 0
fi
export COMMLAB_INJECTOR_BENCH=1
export COMMLAB_BENCH_ITER="${COMMLAB_BENCH_ITER:-200}"
export COMMLAB_CRASH_LOOPS="${COMMLAB_CRASH_LOOPS:-300}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { ${GO:-go} test -count=1 -timeout 60m -run '^TestInjectorBench$' -v ./injector/ &&
  case "${COMMLAB_BENCH_ONLY:-delay}" in delay) ${GO:-go} test -count=1 -timeout 10m -run '^TestNetnsDelayBench$' -v ./bench/ ;; esac; } >"$log" 2>&1; then
  grep -v '^time=\|INFO injector' "$log" | tail -40 >&2
  echo "bench-injector: FAILED" >&2
  exit 1
fi
echo "## Fault injector ($(uname -r), $(nproc) CPUs)"
grep -E '^(\||###|kernel features|$)' "$log" | cat -s
