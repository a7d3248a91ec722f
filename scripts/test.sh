#!/usr/bin/env bash
# test.sh [go test flags...]: every package's tests, in two tiers side by side.
#  - Host packages (their tests import internal/testenv: network namespaces, tc,
#    nftables, cgroups, lab sandboxes, Chromium) run one at a time: lab tests measure
#    bandwidth and CPU, so two of them side by side would disturb each other.
#  - The other packages touch nothing of the host's; they run meanwhile, two at a time,
#    and say when they are done: the chapter labs that measure a fix or compare speeds
#    wait for that (labs/chapters.QuietEnv), the others play meanwhile. So do the host
#    packages in $beside, which measure nothing another lab's load could spoil: Slurm's
#    labs (mostly waiting on its scheduler), the browser's and the CLI's labs (ch01-tour,
#    ch07-wrong-interface; listings, pages and terminals, no figure compared).
# Their outputs come one tier after the other; the exit status is non-zero if either failed.
set -uo pipefail
GO=${GO:-go}

# The packages whose own or test imports include internal/testenv, then the rest.
tiers=$("$GO" list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  awk '{ host = 0; for (i = 2; i <= NF; i++) if ($i ~ /\/internal\/testenv$/) host = 1; print (host ? "host" : "unit"), $1 }') || exit 1
beside=" github.com/commlab/commlab/labs/slurm github.com/commlab/commlab/web github.com/commlab/commlab/cmd/commlab "
# The chapter labs last: they wait for the other lane anyway (see above), so the host
# packages before them use that time.
mapfile -t host < <(awk -v beside="$beside" '$1 == "host" && index(beside, " " $2 " ") == 0 { print ($2 ~ /\/labs\/chapters$/ ? 1 : 0), $2 }' <<<"$tiers" | sort -s -k1,1n | cut -d' ' -f2)
mapfile -t unit < <(awk -v beside="$beside" '$1 == "unit" || index(beside, " " $2 " ") { print $2 }' <<<"$tiers")

out=$(mktemp)
quiet=$(mktemp -u)
trap 'rm -f "$out" "$quiet"' EXIT
# The other lane runs two packages at a time and says when it is done: the chapter labs
# that measure a fix wait for it (labs/chapters.QuietEnv), the others play meanwhile.
( "$GO" test -p 2 -count=1 -timeout 30m "$@" "${unit[@]}" >"$out" 2>&1; rc=$?; touch "$quiet"; exit $rc ) &
unit_pid=$!
COMMLAB_TEST_QUIET_FILE=$quiet "$GO" test -p 1 -count=1 -timeout 80m "$@" "${host[@]}"
host_rc=$?
wait "$unit_pid"
unit_rc=$?
echo "== packages that do not use the host (run meanwhile)"
cat "$out"
exit $((host_rc || unit_rc))
