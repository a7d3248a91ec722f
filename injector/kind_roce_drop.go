package injector

import (
	"fmt"
)

// roceV2Port is RoCEv2's UDP destination port; every RoCEv2 packet, request or
// response, is sent to it (the source port is a flow hash).
const roceV2Port = 4791

// RoCEDrop loses a share of the RoCEv2 packets (UDP destination port 4791) on a
// NIC, as Loss does (nftables inbound, tc BPF outbound). It only reaches traffic
// that passes the kernel's stack (soft-RoCE, the emulated transport of the netns
// labs); hardware RoCE bypasses netfilter and tc.
type RoCEDrop struct {
	NIC       string    `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	Percent   Percent   `json:"percent" param:"percent" doc:"share of RoCE packets dropped, 0.01% to 100%"`
	Direction Direction `json:"direction" param:"direction" doc:"in, out or both"`
}

var _ Fault = (*RoCEDrop)(nil)

// RoCEDropKind registers roce-drop.
func RoCEDropKind() Kind {
	return Kind{Name: "roce-drop", Summary: "drop a share of RoCEv2 packets (UDP 4791) on a NIC",
		Needs: []Feature{NeedNftables},
		New:   func() Fault { return &RoCEDrop{Percent: 10000, Direction: DirBoth} }, NewUndo: func() Undo { return &lossUndo{} }}
}

// Kind implements Fault.
func (f *RoCEDrop) Kind() string { return "roce-drop" }

// Validate implements Fault.
func (f *RoCEDrop) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.Percent < 1 || f.Percent > 10000 {
		return invalid("percent %s: want 0.01%% to 100%%", f.Percent)
	}
	if !f.Direction.valid() {
		return invalid("direction %q: want in, out or both", f.Direction)
	}
	return nil
}

func (f *RoCEDrop) nics() []string { return []string{f.NIC} }

func (f *RoCEDrop) claims() []string { return netdevClaims(f.NIC, f.Direction) }

// Command implements Fault.
func (f *RoCEDrop) Command(t Target) []string {
	return netdevCommands(t, f.NIC, f.Direction, fmt.Sprintf("udp dport %d ", roceV2Port), uint32(f.Percent))
}
