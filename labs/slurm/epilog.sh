#!/bin/sh
# Slurm epilog for commlab labs (slurm.conf: Epilog=/path/to/epilog.sh). slurmd
# runs it as root on every node of every job after the job ends, for any reason
# (scancel, time limit, node failure, agent killed). For a commlab lab job it
# reverts every fault the job's agents journaled on this node and removes the
# job's sandbox; for other jobs it does nothing. It must exit 0: a failing epilog
# drains the node.
#   COMMLAB   the commlab binary (default: commlab on PATH, then /usr/local/bin/commlab)
# slurmd gives epilogs no search path.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
[ -n "$SLURM_JOB_ID" ] || exit 0
[ -d "/run/commlab-slurm/job-$SLURM_JOB_ID" ] || exit 0
bin=${COMMLAB:-$(command -v commlab || echo /usr/local/bin/commlab)}
out=$("$bin" lab sweep --slurm-job "$SLURM_JOB_ID" 2>&1) ||
	logger -t commlab-epilog "job $SLURM_JOB_ID: sweep failed: $out"
exit 0
