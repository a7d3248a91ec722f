#!/usr/bin/env bash
# bench-collective.sh: how close `commlab bench` gets to what the links allow.
# Builds two lab-like namespaces cl-bc<id>-n1/n2 joined by a veth "rdma0" pair,
# then prints a table: all_reduce busbw at 64 MiB vs iperf3 on the same shaped
# link (200, 400 and 800 Mbit/s; target >= 0.9x), unshaped busbw vs Open MPI's
# MPI_Allreduce of the same size on the same nodes (target >= 1.0x; needs mpirun
# and mpicc), P2P vs SHM within one node, and CPU time and peak memory per rank.
# Every ratio compares two measurements of the same run. Everything it creates
# is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then echo "bench-collective: needs root for network namespaces; skipped"; exit 0; fi
for t in ip tc iperf3; do command -v "$t" >/dev/null || { echo "bench-collective: $t missing; skipped"; exit 0; }; done
BIN=${COMMLAB_BIN:-bin/commlab}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/commlab
RATES=${RATES:-200mbit 400mbit 800mbit}

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

# run_bench HOSTS ENV... : all_reduce 64 MiB on two ranks; prints busbw in GB/s and saves the output
run_bench() {
  local hosts=$1; shift
  env NCCL_SOCKET_IFNAME=rdma0 "$@" "$BIN" bench all_reduce -b 64M -e 64M -n "${ITERS:-3}" -w 1 -c 0 \
    --sandbox "$id" --hosts "$hosts" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; echo 0; return; }
  # busbw from size and mean time (2 ranks: factor 1; the table rounds to 2 decimals)
  awk '$3=="float"{printf "%.4f\n", $1/(($6+$10)/2)/1e3}' "$tmp/out" | tail -1
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", (b>0)?a/b:0}'; }
row() { printf '%-34s %10s %10s %7s  %s\n' "$@"; }

row "case" "GB/s" "ref GB/s" "ratio" "reference"
for rate in $RATES; do
  shape "$rate"
  ref=$(iperf)
  bw=$(run_bench n1:1,n2:1 NCCL_IB_DISABLE=1)
  row "all_reduce 64M $rate socket" "$bw" "$ref" "$(ratio "$bw" "$ref")" "iperf3, same link"
  bw=$(run_bench n1:1,n2:1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
  row "all_reduce 64M $rate roce" "$bw" "$ref" "$(ratio "$bw" "$ref")" "iperf3, same link"
  grep -h 'QP to rank' "$tmp/out" | sed 's/^.*NCCL INFO /    /' || true
done

shape none
ITERS=5
mpi_bw() { echo ""; }
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  # allreduce SIZE ITERS: one warm-up, then the mean of ITERS MPI_Allreduce
  # calls on floats (mean over ranks); checks the sums; prints busbw as nccl-tests does.
  cat >"$tmp/allreduce.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t bytes = argc > 1 ? strtoull(argv[1], 0, 0) : 64u << 20;
  int iters = argc > 2 ? atoi(argv[2]) : 5;
  size_t count = bytes / sizeof(float);
  float *s = malloc(bytes), *r = malloc(bytes);
  for (size_t i = 0; i < count; i++) s[i] = (float)((i + rank) % 7);
  MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / iters, tsum;
  MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  double tmean = tsum / n; /* mean over ranks, as commlab bench's table */
  long wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int k = 0; k < n; k++) want += (float)((i + k) % 7);
    wrong += r[i] != want;
  }
  if (rank == 0) printf("busbw %.4f GB/s time %.1f us wrong %ld\n", bytes / tmean / 1e9 * 2.0 * (n - 1) / n, tmean * 1e6, wrong);
  MPI_Finalize();
  return wrong != 0;
}
C
  mpicc -O2 -o "$tmp/allreduce" "$tmp/allreduce.c"
  # mpirun runs in n1 and reaches each node through an rsh agent that enters
  # the node's namespace; the TCP BTL and ORTE's own traffic use rdma0 only.
  # rtc ^hwloc: Open MPI 4.1.4's orted sometimes crashed in hwloc_shmem_topology_write.
  cat >"$tmp/agent" <<A
#!/bin/sh
host=\$1; shift
exec ip netns exec cl-$id-\$host env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c "\$*"
A
  chmod +x "$tmp/agent"
  mpi_bw() {
    ip netns exec "$N1" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun -np 2 --host n1:1,n2:1 --mca plm_rsh_agent "$tmp/agent" --mca rtc ^hwloc --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include rdma0 --mca oob_tcp_if_include rdma0 "$tmp/allreduce" $((64 << 20)) "$ITERS" \
      >"$tmp/mpi" 2>&1 || { cat "$tmp/mpi" >&2; echo 0; return; }
    awk '/^busbw/{print $2}' "$tmp/mpi"
  }
fi
# Alternate the two twice and keep each one's best, so that neither gets the quieter moment.
best() { awk -v a="$1" -v b="$2" 'BEGIN{print (a>b)?a:b}'; }
s1=$(run_bench n1:1,n2:1 NCCL_IB_DISABLE=1); cp "$tmp/out" "$tmp/unshaped"; m1=$(mpi_bw)
s2=$(run_bench n1:1,n2:1 NCCL_IB_DISABLE=1); m2=$(mpi_bw)
r1=$(run_bench n1:1,n2:1)
sock=$(best "$s1" "$s2")
if [ -n "$m1" ]; then
  mpi=$(best "$m1" "$m2")
  row "all_reduce 64M unshaped socket" "$sock" "$mpi" "$(ratio "$sock" "$mpi")" "Open MPI MPI_Allreduce (TCP BTL), same nodes"
  row "all_reduce 64M unshaped roce" "$r1" "$mpi" "$(ratio "$r1" "$mpi")" "Open MPI MPI_Allreduce (TCP BTL), same nodes"
else
  row "all_reduce 64M unshaped socket" "$sock" "n/a" "n/a" "Open MPI not run (needs mpirun and mpicc: openmpi-bin, libopenmpi-dev)"
fi

p2p=$(run_bench n1:2)
shm=$(run_bench n1:2 NCCL_P2P_DISABLE=1)
row "all_reduce 64M one node p2p" "$p2p" "$shm" "$(ratio "$p2p" "$shm")" "SHM (NCCL_P2P_DISABLE=1), same node"
echo
echo "per rank (unshaped socket run):"
grep '^# Rank .*cpu' "$tmp/unshaped" || true
