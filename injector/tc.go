package injector

import (
	"github.com/commlab/commlab/internal/host"
)

// The injector deletes no tc object but its own (see internal/host/tc.go): fault
// qdiscs c2:, fault filters of priority 0xc1; a rate fault replaces the lab's
// base tbf c1: and puts it back.
const (
	ownPrio   = host.FaultFilterPrio
	ownQdisc  = host.FaultQdiscHandle
	clsactIn  = 0xfffffff2 // parent of clsact's ingress filters (ffff:fff2)
	clsactHdl = 0xffff0000
)

// tbfSizing returns tbf's burst and queue limit in bytes for rate (bytes/s) and a
// link MTU: the burst covers 4 ms of traffic (one tick at HZ=250) and at least two
// frames, the queue 50 ms more and at least 16 frames, so TCP neither collapses
// nor sees line rate, and a slow jumbo-frame link still queues enough packets for
// a loss to be repaired by fast retransmit (three duplicate ACKs), not a 200 ms RTO.
func tbfSizing(rateBps uint64, mtu int) (burst, limit uint32) {
	frame := uint64(mtu + 18)
	b := max(2*frame, rateBps*4/1000)
	l := b + rateBps*50/1000
	l = max(l, 16*frame)
	return uint32(min(b, 1<<30)), uint32(min(l, 1<<31))
}

// priorRoot is a NIC's root qdisc before a fault replaced it: the kernel's
// default (Kind ""), which comes back by itself when the fault's qdisc is
// deleted, or a tbf (labs/netns's base shaping), which is put back as it was.
type priorRoot struct {
	Kind     string `json:"kind,omitempty"`
	Handle   uint32 `json:"handle,omitempty"`
	Rate     uint64 `json:"rate,omitempty"`
	Limit    uint32 `json:"limit,omitempty"`
	Buffer   uint32 `json:"buffer,omitempty"`
	Peakrate uint64 `json:"peakrate,omitempty"`
	Minburst uint32 `json:"minburst,omitempty"`
}

// nl_TC_U32_TERMINAL is TC_U32_TERMINAL from linux/pkt_cls.h.
const nl_TC_U32_TERMINAL = 1
