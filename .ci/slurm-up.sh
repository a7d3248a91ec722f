#!/usr/bin/env bash
# Brings up a real Slurm cluster on this host for commlab's Slurm tests: munge,
# slurmctld and two slurmd "nodes" (slurmd -N nodeN, each on its own port), and
# waits until sinfo shows both up (idle, or running a job across a slurmctld
# restart). Installs Debian's packages when absent. Both nodes lend their labs
# one lab NIC (cluster.lab_nics), commlab-lab0: see below.
# Idempotent: a cluster already up (ours) is left running.
#   COMMLAB_SLURM_NODES  node count (default 2)
#   COMMLAB_BIN          the commlab binary the epilog runs (default bin/commlab)
set -euo pipefail

nodes=${COMMLAB_SLURM_NODES:-2}
conf=/etc/slurm/slurm.conf
state=/var/lib/commlab-slurm
mark="# written by commlab .ci/slurm-up.sh"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends slurm-wlm slurmctld slurmd slurm-client munge >/dev/null
fi

if [[ -e $conf ]] && ! grep -qF "$mark" "$conf"; then
	echo "slurm-up: $conf exists and was not written by commlab; refusing to replace it" >&2
	exit 1
fi

# munge: one key for the controller and the nodes (all on this host).
if [[ ! -s /etc/munge/munge.key ]]; then
	dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
	chown munge:munge /etc/munge/munge.key
	chmod 0400 /etc/munge/munge.key
fi
mkdir -p /run/munge && chown munge:munge /run/munge
if ! munge -n </dev/null | unmunge >/dev/null 2>&1; then
	runuser -u munge -- munged --force
	for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi

# The lab NIC: one end of a veth pair, commlab-lab0/commlab-lab0p, up and
# without addresses (a veth, as the dummy driver is not on every kernel). The
# labs' nodes are macvlan children (bridge mode) of commlab-lab0, which reach
# each other through it as two real nodes' children reach each other through
# the fabric. Only this script creates it and nothing removes it.
labnic=commlab-lab0
ip link show "$labnic" >/dev/null 2>&1 || ip link add "$labnic" type veth peer name "${labnic}p"
if ! ip -d link show "${labnic}p" 2>/dev/null | grep -q "^ *veth"; then
	echo "slurm-up: $labnic exists but is not the veth this script makes (peer ${labnic}p); remove it or rename it" >&2
	exit 1
fi
ip link set "$labnic" up
ip link set "${labnic}p" up

mkdir -p "$state/ctld" /etc/slurm
nodelines=""
names=()
for i in $(seq "$nodes"); do
	names+=("node$i")
	nodelines+="NodeName=node$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((17000 + i)) CPUs=1 RealMemory=512 State=UNKNOWN"$'\n'
	mkdir -p "$state/node$i"
done
# The epilog: the shipped script, told where this checkout's commlab is.
repo=$(cd "$(dirname "$0")/.." && pwd)
epilog=$state/epilog
printf '#!/bin/sh\nCOMMLAB=%q exec %q\n' "${COMMLAB_BIN:-$repo/bin/commlab}" "$repo/labs/slurm/epilog.sh" >"$epilog.new"
chmod 0755 "$epilog.new" && mv "$epilog.new" "$epilog"
new=$(cat <<CONF
$mark
ClusterName=commlab
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/%n
SlurmctldPidFile=/run/slurmctld-commlab.pid
SlurmdPidFile=/run/slurmd-commlab-%n.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd-%n.log
Epilog=$epilog
KillWait=5
MinJobAge=30
${nodelines}PartitionName=commlab Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP
CONF
)
if [[ ! -e $conf ]] || [[ "$(cat "$conf")" != "$new" ]]; then
	printf '%s\n' "$new" >"$conf"
	changed=1
fi

pidalive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! pidalive /run/slurmctld-commlab.pid; then
	slurmctld -i
elif [[ ${changed:-} ]]; then
	scontrol reconfigure
fi
for n in "${names[@]}"; do
	pidalive "/run/slurmd-commlab-$n.pid" || slurmd -N "$n"
done

for _ in $(seq 120); do
	# Up: idle, or running a job of an earlier call (a restarted slurmctld).
	up=$(sinfo -h -N -p commlab -t idle,alloc,mix -o '%N' 2>/dev/null | sort -u | wc -l)
	if (( up >= nodes )); then
		sinfo -N -p commlab
		exit 0
	fi
	# A node left down by an earlier run comes back once its slurmd answers.
	for n in $(sinfo -h -N -p commlab -t down,drain -o '%N' 2>/dev/null | sort -u); do
		scontrol update nodename="$n" state=resume 2>/dev/null || true
	done
	sleep 0.5
done
echo "slurm-up: nodes not up after 60 s:" >&2
sinfo -N -p commlab >&2 || true
tail -n 20 "$state"/*.log >&2 || true
exit 1
