// Package injector breaks a lab environment on purpose and puts it back.
//
// Each fault kind (nic-rate, loss, roce-drop, env-force, ...) is a typed parameter
// struct implementing [Fault]: it validates its parameters, applies the fault to a
// [Target] (a node of a sandbox: a cl- network namespace, its cgroup, its /etc) and
// returns an [Undo] that is idempotent and also works after a partial apply. Kinds
// are collected in a [Registry] that the caller builds explicitly.
//
// An [Injector] owns the crash safety: before a fault touches the host its undo is
// appended to a journal and fsynced; a fault leaves the journal only after its
// revert succeeded. Every fault has a deadline enforced by [Injector.Watch] and at
// start-up by [Injector.Sweep], which reverts journaled faults; revert treats
// "already gone" as success. Everything the injector creates carries commlab's
// name: interfaces cl-..., nftables tables commlab-<sandbox>, tc handle c2: and
// filter priority 193, routes with protocol 193, processes tagged with the fault
// id; a qdisc it replaces (the lab's base tbf c1:) is journaled and put back. Only argv exec and
// netlink are used, never a shell, and every name is validated first.
//
// [Probe] reports what the running kernel supports (this project's CI kernel has
// tbf, htb, ifb and nftables but no sch_netem), so that a lab needing a missing
// feature says so up front ([Injector.Supports]); [Mechanism] says how each kind
// is applied here. Without sch_netem, delay and jitter run through a userspace
// wire (kind_wire.go): a tc BPF redirect into a veth pair cl-<id>a/cl-<id>b and a
// helper process relaying the frames back out with AF_PACKET after the delay.
//
// # Using it
//
// The serving process opens one Injector on its data directory, calls
// [Injector.Sweep] at start-up and runs [Injector.Watch] for the deadlines;
// the CLI (commlab inject, faults, revert, sweep) opens another on the same
// directory, and both share the journal. Faults that act on a workload rather
// than on the network reach it through the launcher: it adds [EnvFor]'s
// variables to each rank's environment (env-force) and starts ranks inside
// [ShmNamespace]'s mount namespace when there is one (shm-small); ranks must
// run in the target's cgroup for cpu-squeeze and mem-pressure to bite.
//
// A kind's parameters, validation and command are portable (content checks
// run on any OS); what touches the host (Apply, Revert, tc, nftables, the
// probe) lives in *_linux.go files, and host_other.go refuses it elsewhere
// with labs.ErrNeedsLinux.
package injector
