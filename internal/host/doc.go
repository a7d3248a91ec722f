// Package host is the one place that names what commlab creates on a host and
// fixes the conventions its two host-facing parts share: the lab sandboxes
// (labs/netns, labs/cgroup) and the fault injector (injector).
//
//   - names.go: sandbox ids, node names, and the namespaces, cgroups and run-time
//     directories derived from them (cl-<id>-<node>, commlab/<id>/<node>).
//   - tc.go: the tc handles and priorities commlab owns (c1: base shaping, c2:
//     fault qdiscs, filter priority 0xc1), so each side deletes only its own.
//   - nft.go: the nftables tables commlab owns and how they are named.
//
// The package is pure (no syscalls, no build tags), so every rule here is unit
// tested without root and on any OS. The cgroup implementation itself lives in
// labs/cgroup, the feature probe in labs/netns (Probe), the creation of named
// network namespaces in internal/hostns.
package host
