package injector

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// NICDown sets a NIC administratively down (ip link set dev X down).
type NICDown struct {
	NIC string `json:"nic" param:"nic,required" doc:"NIC inside the node, e.g. rdma1"`
}

var _ Fault = (*NICDown)(nil)

// NICDownKind registers nic-down.
func NICDownKind() Kind {
	return Kind{Name: "nic-down", Summary: "set a NIC down",
		New: func() Fault { return &NICDown{} }, NewUndo: func() Undo { return &linkStateUndo{} }}
}

// Kind implements Fault.
func (f *NICDown) Kind() string { return "nic-down" }

// Validate implements Fault.
func (f *NICDown) Validate() error { return ValidNIC(f.NIC) }

func (f *NICDown) nics() []string   { return []string{f.NIC} }
func (f *NICDown) claims() []string { return []string{"state:" + f.NIC} }

// Command implements Fault.
func (f *NICDown) Command(Target) []string {
	return []string{fmt.Sprintf("ip link set dev %s down", f.NIC)}
}

func linkUp(h *netlink.Handle, nic string) (bool, error) {
	l, err := h.LinkByName(nic)
	if err != nil {
		return false, err
	}
	return l.Attrs().Flags&net.FlagUp != 0, nil
}

// linkStateUndo brings a NIC back up if it was up before (nic-down, nic-flap),
// after stopping the flap driver, if any.
type linkStateUndo struct {
	Target Target `json:"target"`
	NIC    string `json:"nic"`
	Index  int    `json:"index"`
	WasUp  bool   `json:"was_up"`
	// Flap: the fault id that tags the driver process, and the process once started.
	FaultID string `json:"fault_id,omitempty"`
	Driver  *Proc  `json:"driver,omitempty"`
}
