// Package topology describes a lab's virtual cluster: nodes, their NICs, the
// switches the NICs plug into, link rates and MTUs, and an optional intra-node
// fabric. Topologies are declared in YAML (a few ship built in: 2x1, 4x2, 8x1,
// 2-node-rail); loading validates them and reports every problem as
// file:line:column. A validated topology plus a sandbox index gives a [Plan]:
// the deterministic address of every NIC inside the RFC 2544 benchmarking block
// 198.18.0.0/15, one /22 slice per sandbox and one /26 per switch.
//
// The package is pure Go: it creates nothing on the host.
//
// # File format
//
//	name: 4x2                      # [a-z0-9][a-z0-9._-]*
//	description: four nodes, two RoCE rails
//	switches:                      # at most 16; order fixes each subnet
//	  - {name: mgmt, role: management, rate: 25Mbit}   # rate optional here: unshaped
//	  - {name: rail0, rate: 200Mbit, mtu: 1500}        # data switches need a rate
//	  - {name: rail1, rate: 200Mbit}
//	intra_node: {name: nvlink, rate: 1Gbit}            # optional
//	nics:                          # every node's NICs, unless the node lists its own
//	  - {name: eth0, switch: mgmt}
//	  - {name: rdma0, switch: rail0}
//	  - {name: rdma1, switch: rail1, rate: 100Mbit}    # a NIC may be slower than its switch
//	nodes:                         # 1 to 62
//	  - name: node1
//	  - name: node2
//	    nics: [{name: eth0, switch: mgmt}, {name: ib0, switch: rail0}]
//
// Rates need a unit (bit, kbit, mbit, gbit, tbit; any case): a bare number or
// tc's byte units (bps, mbps, ...) are refused as ambiguous. Rates are kept in
// bits per second.
package topology
