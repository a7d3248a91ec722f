#!/usr/bin/env bash
# test.sh [go test flags...]: every package's tests, in three lanes side by side.
#  - Host packages (their tests import internal/testenv: network namespaces, tc,
#    nftables, cgroups, lab sandboxes, Chromium) run one at a time: their tests measure
#    bandwidth and CPU, so two of them side by side would disturb each other.
#  - The other packages touch nothing of the host's; they run meanwhile, two at a time.
#    So do the host packages in $beside, which measure nothing another lab's load could
#    spoil: Slurm's labs (mostly waiting on its scheduler), the browser's and the CLI's
#    labs (ch01-tour, ch07-wrong-interface; listings, pages and terminals, no figure
#    compared).
#  - The chapter labs (labs/chapters) start with them: the labs that measure nothing
#    play at once; those that measure a fix or compare speeds wait until both other
#    lanes are done (labs/chapters.QuietEnv names the file that says so).
# Their outputs come one lane after the other; the exit status is non-zero if any failed.
set -uo pipefail
GO=${GO:-go}

# The packages whose own or test imports include internal/testenv, then the rest.
tiers=$("$GO" list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  awk '{ host = 0; for (i = 2; i <= NF; i++) if ($i ~ /\/internal\/testenv$/) host = 1; print (host ? "host" : "unit"), $1 }') || exit 1
beside=" github.com/commlab/commlab/labs/slurm github.com/commlab/commlab/web github.com/commlab/commlab/cmd/commlab "
mapfile -t host < <(awk -v beside="$beside" '$1 == "host" && index(beside, " " $2 " ") == 0 && $2 !~ /\/labs\/chapters$/ { print $2 }' <<<"$tiers")
mapfile -t unit < <(awk -v beside="$beside" '$1 == "unit" || index(beside, " " $2 " ") { print $2 }' <<<"$tiers")
chapters=$(awk '$2 ~ /\/labs\/chapters$/ { print $2 }' <<<"$tiers")

unit_out=$(mktemp)
chapters_out=$(mktemp)
quiet=$(mktemp -u)
trap 'rm -f "$unit_out" "$chapters_out" "$quiet"' EXIT
# Three lanes from the start: the other packages two at a time; the host packages one
# at a time; and the chapter labs, whose labs that measure nothing play at once while
# those that measure a fix or compare speeds wait until both other lanes are done
# (labs/chapters.QuietEnv: the file appears then).
"$GO" test -p 2 -count=1 -timeout 30m "$@" "${unit[@]}" >"$unit_out" 2>&1 &
unit_pid=$!
COMMLAB_TEST_QUIET_FILE=$quiet "$GO" test -count=1 -timeout 60m "$@" $chapters >"$chapters_out" 2>&1 &
chapters_pid=$!
"$GO" test -p 1 -count=1 -timeout 30m "$@" "${host[@]}"
host_rc=$?
wait "$unit_pid"
unit_rc=$?
touch "$quiet"
wait "$chapters_pid"
chapters_rc=$?
echo "== the chapter labs (run meanwhile; those that measure once the rest was done)"
cat "$chapters_out"
echo "== packages that do not use the host (run meanwhile)"
cat "$unit_out"
exit $((host_rc || unit_rc || chapters_rc))
