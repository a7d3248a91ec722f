package injector

import (
	"fmt"
)

// MTUMismatch sets a NIC's MTU to a value its peers do not use, so large frames
// are dropped on one side (ip link set dev X mtu N).
type MTUMismatch struct {
	NIC string `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma0"`
	MTU int    `json:"mtu" param:"mtu,required" doc:"new MTU, 68 to 65535, different from the current one"`
}

var _ Fault = (*MTUMismatch)(nil)

// MTUMismatchKind registers mtu-mismatch.
func MTUMismatchKind() Kind {
	return Kind{Name: "mtu-mismatch", Summary: "set a NIC's MTU different from its peers'",
		New: func() Fault { return &MTUMismatch{} }, NewUndo: func() Undo { return &mtuUndo{} }}
}

// Kind implements Fault.
func (f *MTUMismatch) Kind() string { return "mtu-mismatch" }

// Validate implements Fault.
func (f *MTUMismatch) Validate() error {
	if err := ValidNIC(f.NIC); err != nil {
		return err
	}
	if f.MTU < 68 || f.MTU > 65535 {
		return invalid("mtu %d: want 68 to 65535", f.MTU)
	}
	return nil
}

func (f *MTUMismatch) nics() []string   { return []string{f.NIC} }
func (f *MTUMismatch) claims() []string { return []string{"mtu:" + f.NIC} }

// Command implements Fault.
func (f *MTUMismatch) Command(Target) []string {
	return []string{fmt.Sprintf("ip link set dev %s mtu %d", f.NIC, f.MTU)}
}

type mtuUndo struct {
	Target Target `json:"target"`
	NIC    string `json:"nic"`
	Index  int    `json:"index"`
	Prior  int    `json:"prior_mtu"`
}
