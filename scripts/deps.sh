#!/usr/bin/env bash
# deps.sh GROUP...: make sure the Debian packages a make target needs are installed.
# As root it installs what is missing with apt-get; otherwise it names the missing
# packages and exits non-zero. Groups: run (labs), test (run + browser), bench (test + load tools).
set -euo pipefail

declare -A cmd_of=(
  [iproute2]=ip [nftables]=nft [iperf3]=iperf3 [ethtool]=ethtool [iputils-ping]=ping
  [tcpdump]=tcpdump [procps]=ps [util-linux]=nsenter [chromium]=chromium
  [nginx-light]=nginx [wrk]=wrk [openmpi-bin]=mpirun [libopenmpi-dev]=mpicc [gcc]=gcc
  [nodejs]=node [npm]=npm [poppler-utils]=pdftotext
)
# A package without a command (a font) is checked with dpkg.
installed() {
  local c=${cmd_of[$1]:-}
  if [ -z "$c" ]; then
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'
    return
  fi
  command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ]
}
pkgs=()
for group in "$@"; do
  case "$group" in
    run)   pkgs+=(iproute2 nftables iperf3 ethtool iputils-ping tcpdump procps util-linux nodejs npm fonts-dejavu-core fonts-droid-fallback) ;; # fonts: certificate PDFs (server/certpdf.go)
    test)  pkgs+=(iproute2 nftables iperf3 ethtool iputils-ping tcpdump procps util-linux nodejs npm fonts-dejavu-core fonts-droid-fallback chromium fonts-noto-cjk poppler-utils nginx-light) ;; # Noto CJK: readable screenshots; pdftotext: certificate PDF test; nginx: the two-replica test
    bench) pkgs+=(wrk openmpi-bin libopenmpi-dev gcc) ;; # Open MPI: scripts/bench-collective.sh
    *) echo "deps.sh: unknown group '$group' (want run, test or bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
  installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "commlab needs these Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Tests start their own nginx: keep Debian from starting the packaged service (port 80).
guard=; [[ -e /usr/sbin/policy-rc.d ]] || { guard=1; printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [[ $guard ]]; then rm -f /usr/sbin/policy-rc.d; fi
