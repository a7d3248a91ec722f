// Package slurm runs commlab labs on a Slurm cluster: a lab is one batch job
// (sbatch) whose steps run `commlab agent` on every node it was given; the
// agents dial back to the server over a websocket ([Hub]) with a per-lab token
// handed through the job's environment, build the node's sandbox and apply and
// revert faults there through the node's own journaled injector. When the job
// ends for any reason the agent reverts what it applied, and the shipped epilog
// (epilog.sh: `commlab lab sweep --slurm-job`) sweeps what a killed agent left.
//
// The lab's nodes reach each other over the site's lab NICs (cluster.lab_nics):
// each node's NICs are macvlan children of them in the job's namespace, in an
// address slice the server gives each lab, and the workload's ranks run on
// every node, each started by its node's agent ([Env.Workload]).
//
// The agents also run the learner's terminals and the workload's ranks
// (streams), see the node's profile scripts as the local backend's shells do
// (labs.ShellRC, labs.ProfileD), and reach a TLS server (cluster.tls) trusting a CA file or a
// pinned certificate. While a lab's job waits, its queue position and squeue's
// reason reach the lab page (session.Progress).
package slurm
