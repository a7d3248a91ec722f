// Package slurm runs commlab labs on a Slurm cluster: a lab is one batch job
// (sbatch) whose steps run `commlab agent` on every node it was given; the
// agents dial back to the server over a websocket ([Hub]) with a per-lab token
// handed through the job's environment, build the node's sandbox and apply and
// revert faults there through the node's own journaled injector. When the job
// ends for any reason the agent reverts what it applied, and the shipped epilog
// (epilog.sh: `commlab lab sweep --slurm-job`) sweeps what a killed agent left.
//
// This is the first slice of the cluster path: commands and faults run on the
// nodes; learner terminals and workloads through the agent are still to come.
package slurm
