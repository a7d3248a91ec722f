#!/usr/bin/env bash
# bench-labs.sh: time lab sandboxes (netns backend) coming up and going down,
# and count how many 4-node sandboxes the host holds at once. Run by `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-labs: skipped (needs root for network namespaces, tc and cgroups)"
  exit 0
fi
exec go run ./labs/cmd/labs-bench "$@"
