// Package transport moves bytes between two ranks of a commlab bench communicator,
// the way NCCL's transports do: P2P (a Unix socket between processes of one node),
// SHM (a ring of slots in a /dev/shm file), NET/Socket (several TCP sockets per peer,
// bound to a chosen NIC) and NET/IB (an emulation of RoCE: reliable connection with
// go-back-N retransmission over UDP port 4791).
//
// A Conn is directed: the dialing side only sends, the accepting side only receives.
package transport

import (
	"errors"
	"fmt"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// Kind is a transport, named as NCCL names it in its INFO lines.
type Kind int

// The transports, in NCCL's order of preference within a node.
const (
	P2P Kind = iota + 1
	SHM
	Socket
	IB
)

// String is the label NCCL prints after "via" (without the device suffix).
func (k Kind) String() string {
	switch k {
	case P2P:
		return "P2P/IPC"
	case SHM:
		return "SHM/direct/direct"
	case Socket:
		return "NET/Socket"
	case IB:
		return "NET/IB"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// IsNet reports whether the transport goes over a NIC.
func (k Kind) IsNet() bool { return k == Socket || k == IB }

// Conn is one directed, reliable, in-order byte stream between two ranks.
// Both sides must use the same message boundaries: a Send of n bytes is
// matched by Recv calls that add up to n bytes.
type Conn interface {
	// Send hands p to the transport; p may be reused when Send returns.
	Send(p []byte) error
	// Recv fills p completely.
	Recv(p []byte) error
	// Close aborts any blocked Send or Recv and releases the resources.
	Close() error
	// Kind is the transport used.
	Kind() Kind
	// Dev is the index of the NET device used (0 for P2P and SHM).
	Dev() int
}

// ErrClosed is returned by Send and Recv after Close.
var ErrClosed = errors.New("connection closed")

// WCError is a work-completion error of the RoCE emulation, worded like NCCL's
// "NET/IB : Got completion from peer ... with error 12" warning.
type WCError struct {
	Peer      string // peer's out-of-band address, ip<port>
	Status    int    // ibv_wc_status: 12 is IBV_WC_RETRY_EXC_ERR
	Opcode    int    // ibv_wc_opcode: 0 is IBV_WC_SEND
	Len       int
	VendorErr int
	Type      string // Send or Recv
	LocalGid  string
	RemoteGid string
	HCA       string // the emulated HCA: the NIC's name
}

// Error is NCCL 2.28.9's WARN text (2.28.7-2.28.9 only: 2.29 words it anew).
func (e *WCError) Error() string {
	return ncclmsg.IBCompletion.Sprintf(e.Peer, wcStatus[e.Status], e.Status, wcOpcode[e.Opcode], e.Opcode, e.Len, e.VendorErr, e.Type,
		" localGid ", e.LocalGid, " remoteGids", e.RemoteGid, e.HCA)
}

// NCCLSrc is where NCCL prints the warning.
func (e *WCError) NCCLSrc() string { return ncclmsg.IBCompletion.Src }

// Names of the ibv_wc_status and ibv_wc_opcode values the emulation reports.
var (
	wcStatus = map[int]string{12: "IBV_WC_RETRY_EXC_ERR"}
	wcOpcode = map[int]string{0: "IBV_WC_SEND"}
)
