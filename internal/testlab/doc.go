// Package testlab builds the scratch labs of root tests: network namespaces
// named as sandbox nodes (cl-<id>-<node>, internal/host), joined by veths,
// either through one bridge per NIC in a fabric namespace, as labs/netns wires
// nodes to switches, or pairwise. It is the one such builder; the injector,
// bench and labs/netns tests use it. A lab is removed in t.Cleanup, and the
// test fails if anything of it is left (see [Leftovers]). Linux only.
package testlab
