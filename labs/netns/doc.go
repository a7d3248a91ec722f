// Package netns is the default lab backend: a virtual GPU cluster built from
// Linux network namespaces on one host, one sandbox per lab session.
//
// # Layout of a sandbox
//
// A [Sandbox] with id <id> (1-12 of [a-z0-9]) and a validated topology becomes:
//
//   - a namespace cl-<id>-<node> per node, holding the node's NICs under their
//     real-looking names (eth0, rdma0, ib0...), its loopback, and nothing else,
//     owned by a user namespace of the node's own (every id mapped to itself;
//     hostns.CreateConfined), in which the learner's programs on that node run;
//   - a namespace cl-<id>-fab holding one bridge per switch (br-<switch>) and
//     the fabric end of every NIC (p<n>-<nic> for node number n), plus the
//     sandbox's nftables table cl-<id> (bridge family, forward chain) for
//     switch-level rules. Nothing of a sandbox lives in the host namespace:
//     veth pairs are created inside the node with their peer created directly
//     in the fabric, so no node ever holds a netnsid of the host;
//   - a tbf qdisc (handle c1:, internal/host.BaseQdiscHandle, see [TBFParams]) at the
//     NIC's rate on both ends of every shaped link, and on each node's
//     loopback for the intra-node fabric (ranks of one node talk over it);
//   - a cgroup commlab/<id> with pids, memory and CPU limits (v1 controllers on
//     hybrid hosts, the unified tree on v2), and a child commlab/<id>/<node>
//     per node holding that node's processes;
//   - a tmpfs /run/commlab/labs/cl-<id> (size-limited) with the learner's home
//     and tmp;
//   - a slot lease /run/commlab/labs/slots/<index> and a state file
//     <data>/sandboxes/<id>.json, both written and fsynced before anything
//     else exists.
//
// IPv6 is disabled in sandbox namespaces so that no autoconfiguration
// traffic appears in counters the learner reads.
//
// # Addresses
//
// The slot index (0-127, the lowest free one host-wide) picks the sandbox's
// /22 inside 198.18.0.0/15 (RFC 2544, never routed), each switch a /26 in it
// and node n host n+1 of each subnet: see topology.Plan, [Sandbox.Plan] and
// [Sandbox.Node]. The index also picks the learner uid (base + index).
//
// # Running things in a node
//
// [Sandbox.Exec] and [Sandbox.Shell] start processes on a throw-away OS
// thread that enters the node's namespaces (setns), so no other goroutine
// ever runs in a sandbox namespace. The process is in the node's cgroup
// before it runs any code of its own: cloned into it on cgroup v2, stopped at
// exec under ptrace and moved on v1; no commlab thread ever joins a sandbox
// cgroup, so killing a sandbox never hits commlab.
//
// Learner shells run bash --login as the sandbox's uid with ambient
// CAP_NET_ADMIN and CAP_NET_RAW only (the bounding set holds nothing else;
// no_new_privs), held in the node's user namespace: they count in the node's
// network namespace and nowhere else, so netlink requests for another namespace
// by its id (IFLA_TARGET_NETNSID: the fabric's is the node's veths'
// link-netnsid) are refused (EACCES, EPERM); in the node's cgroup, in a new
// PID namespace (so kernel
// lookups by pid, e.g. `ip link set X netns 1`, cannot reach the host) and a
// private mount namespace where /sys is the node's, /home, /tmp and /var/tmp
// are the sandbox's, /dev/shm and /run/lock are private (nothing the learner
// writes outlives the sandbox), and /run/netns, /run/commlab and the data
// directory are hidden. Each sandbox has its own learner uid, so learners
// cannot signal or ptrace each other's processes. Exec'd workloads run as
// root (of commlab's user namespace) in the node's namespaces and cgroup; if commlab dies they keep running
// until Sweep kills them through the cgroup.
//
// # Teardown
//
// Down, the end of Up's context, and the TTL each remove everything; Up removes
// what it built when it fails. After a crash, [Sweep] (at start-up and from
// `commlab sweep`) removes every sandbox whose owner process is gone (pid,
// start time and boot id recorded) or whose TTL passed, and any cl-<id>
// object with no record at all once it is older than a grace period (Up
// records first, so unrecorded objects belong to someone building namespaces
// by hand, maybe right now). It never touches anything not named by commlab.
//
// Left in place on purpose: the shared parent cgroup commlab/ (the injector
// uses it too), the directories /run/commlab/labs and its slots/, and
// /run/netns as a shared mount point (as iproute2 leaves it).
package netns
