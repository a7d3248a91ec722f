#!/usr/bin/env bash
# bench-collective.sh: how close `commlab bench` gets to what the links allow.
# Builds two lab-like namespaces cl-bc<id>-n1/n2 joined by a veth "rdma0" pair,
# then prints a table: all_reduce busbw at 64 MiB vs iperf3 on the same shaped
# link (target >= 0.9x), unshaped busbw vs Open MPI's MPI_Allreduce of the same
# size on the same nodes (target >= 1.0x; needs mpirun and mpicc), and CPU time
# and peak memory per rank. Everything it creates is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then echo "bench-collective: needs root for network namespaces; skipped"; exit 0; fi
for t in ip tc iperf3; do command -v "$t" >/dev/null || { echo "bench-collective: $t missing; skipped"; exit 0; }; done
BIN=${COMMLAB_BIN:-bin/commlab}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/commlab

id=bc$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
N1=cl-$id-n1 N2=cl-$id-n2
tmp=$(mktemp -d)
cleanup() { ip netns del "$N1" 2>/dev/null || true; ip netns del "$N2" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
ip netns add "$N1"; ip netns add "$N2"
ip -n "$N1" link add rdma0 type veth peer name rdma0 netns "$N2"
i=1
for ns in "$N1" "$N2"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "198.18.1.$i/24" dev rdma0
  ip -n "$ns" link set rdma0 up
  i=2
done

shape() { for ns in "$N1" "$N2"; do
  if [ "$1" = none ]; then tc -n "$ns" qdisc del dev rdma0 root 2>/dev/null || true
  else tc -n "$ns" qdisc replace dev rdma0 root tbf rate "$1" burst 256kb limit 4mb; fi; done; }

iperf() { # prints GB/s n1 -> n2
  ip netns exec "$N2" iperf3 -s -1 -B 198.18.1.2 >/dev/null 2>&1 & local srv=$!
  local out=""
  for _ in $(seq 20); do sleep 0.1; out=$(ip netns exec "$N1" iperf3 -c 198.18.1.2 -t 3 -J 2>/dev/null) && break; done
  kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true
  echo "$out" | awk -F'[:,]' '/"sum_received"/{f=1} f&&/"bits_per_second"/{printf "%.4f\n", $2/8e9; exit}'
}

# run_bench ENV... : all_reduce 64 MiB on n1:1,n2:1; prints "busbw_GB/s" and saves the output
run_bench() {
  env NCCL_SOCKET_IFNAME=rdma0 "$@" "$BIN" bench all_reduce -b 64M -e 64M -n "${ITERS:-3}" -w 1 -c 0 \
    --sandbox "$id" --hosts n1:1,n2:1 >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; echo 0; return; }
  # busbw from size and mean time (2 ranks: factor 1)
  awk '$3=="float"{printf "%.4f\n", $1/(($6+$10)/2)/1e3}' "$tmp/out" | tail -1
}

printf '%-28s %12s %12s %8s %s\n' "case" "busbw GB/s" "ref GB/s" "ratio" "reference"
for rate in 200mbit 800mbit; do
  shape "$rate"
  ref=$(iperf)
  for t in socket roce; do
    if [ $t = socket ]; then bw=$(run_bench NCCL_IB_DISABLE=1); else bw=$(run_bench); fi
    printf '%-28s %12s %12s %8s %s\n' "all_reduce 64M $rate $t" "$bw" "$ref" "$(awk -v a="$bw" -v b="$ref" 'BEGIN{printf "%.2f", (b>0)?a/b:0}')" "iperf3 same link"
  done
done

shape none
ITERS=5
bw=$(run_bench NCCL_IB_DISABLE=1)
cp "$tmp/out" "$tmp/unshaped"
mpi=""
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  cat >"$tmp/allreduce.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t count = (64u << 20) / sizeof(float);
  float *s = malloc(count * sizeof(float)), *r = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; i++) s[i] = (float)(i % 7);
  MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < 5; i++) MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / 5;
  if (rank == 0) printf("%.4f\n", (double)count * sizeof(float) / t / 1e9 * 2.0 * (n - 1) / n);
  MPI_Finalize();
  return 0;
}
C
  mpicc -O2 -o "$tmp/allreduce" "$tmp/allreduce.c"
  # mpirun reaches each namespace through an rsh agent that enters it.
  cat >"$tmp/agent" <<A
#!/bin/sh
host=\$1; shift
exec ip netns exec cl-$id-\$host sh -c "\$*"
A
  chmod +x "$tmp/agent"
  mpi=$(mpirun --allow-run-as-root -np 2 --host n1:1,n2:1 --mca plm_rsh_agent "$tmp/agent" \
        --mca btl tcp,self --mca btl_tcp_if_include rdma0 --mca oob_tcp_if_include rdma0 "$tmp/allreduce" 2>/dev/null | tail -1) || mpi=""
fi
if [ -n "$mpi" ]; then
  printf '%-28s %12s %12s %8s %s\n' "all_reduce 64M unshaped" "$bw" "$mpi" "$(awk -v a="$bw" -v b="$mpi" 'BEGIN{printf "%.2f", (b>0)?a/b:0}')" "Open MPI MPI_Allreduce"
else
  printf '%-28s %12s %12s %8s %s\n' "all_reduce 64M unshaped" "$bw" "n/a" "n/a" "Open MPI not run (needs mpirun and mpicc: openmpi-bin, libopenmpi-dev)"
fi
echo
echo "per rank (unshaped run):"
grep '^# Rank .*cpu' "$tmp/unshaped" || true
