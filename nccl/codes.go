package nccl

import (
	"strconv"
	"strings"
)

// Result is an ncclResult_t code, as in nccl.h.
type Result int

// The ncclResult_t values (nccl.h). ncclTimeout exists only in the newest
// releases' nccl.h; older ones stop at ncclInProgress.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8
)

type resultInfo struct {
	name    string // ncclSystemError
	text    string // ncclGetErrorString, without the "(run with ...)" advice
	meaning string
	check   string
}

var results = map[Result]resultInfo{
	Success:            {"ncclSuccess", "no error", "the call succeeded", ""},
	UnhandledCudaError: {"ncclUnhandledCudaError", "unhandled cuda error", "a CUDA call inside NCCL failed", "the WARN line before it names the CUDA error: out of memory, an Xid on the GPU (`commlab gpu health`), peer access refused between GPUs (P2P blocked by ACS/IOMMU)"},
	SystemError:        {"ncclSystemError", "unhandled system error", "a system call (socket, shared memory, malloc) or an external library (libibverbs) failed", "the WARN line names the call: sockets (firewall, NCCL_SOCKET_IFNAME, the peer gone), /dev/shm too small for the SHM transport, ibv_* calls (RDMA device, memlock limit)"},
	InternalError:      {"ncclInternalError", "internal error", "an internal check in NCCL failed, often after a remote peer failed or the network dropped a connection", "look at the other ranks' logs for the first WARN; version mismatch between ranks; memory corruption"},
	InvalidArgument:    {"ncclInvalidArgument", "invalid argument", "a call got an invalid value (pointer, count, device, interface name)", "NCCL_* variables with bad values (NCCL_SOCKET_IFNAME naming no interface), wrong device for the buffer"},
	InvalidUsage:       {"ncclInvalidUsage", "invalid usage", "NCCL was used in a way it does not allow", "two ranks on one GPU (\"Duplicate GPU detected\"); an NCCL_* setting that matches nothing (NCCL 2.28 reports NCCL_SOCKET_IFNAME naming no interface this way); mismatched collectives between ranks"},
	RemoteError:        {"ncclRemoteError", "remote process exited or there was a network error", "a peer process died or a network link failed under a connection", "the first error in the other ranks' logs, NIC and link state (`ip -s link`, `ibstat`), the fabric"},
	InProgress:         {"ncclInProgress", "NCCL operation in progress", "a non-blocking communicator has an operation still running", "not an error in itself; poll ncclCommGetAsyncError"},
	Timeout:            {"ncclTimeout", "timeout", "an NCCL operation timed out", "a peer that never joined or hangs; the network path between ranks"},
}

// Name is the code's name in nccl.h ("ncclSystemError"), or "ncclResult N".
func (r Result) Name() string {
	if i, ok := results[r]; ok {
		return i.name
	}
	return "ncclResult " + strconv.Itoa(int(r))
}

// Meaning says what the code means.
func (r Result) Meaning() string { return results[r].meaning }

// Check says what to look at when the code appears.
func (r Result) Check() string { return results[r].check }

// resultFromText maps ncclGetErrorString's sentence (as PyTorch prints it in
// "NCCL error in: FILE:LINE, <text>, NCCL version X") or a code name to a code.
func resultFromText(s string) (Result, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	for r, i := range results {
		if r == Success {
			continue
		}
		if strings.Contains(s, strings.ToLower(i.name)) {
			return r, true
		}
	}
	// Longest sentences first so "unhandled system error" is not read as
	// something shorter it contains.
	for _, r := range []Result{RemoteError, InProgress, UnhandledCudaError, SystemError, InternalError, InvalidArgument, InvalidUsage} {
		if strings.HasPrefix(s, strings.ToLower(results[r].text)) {
			return r, true
		}
	}
	return 0, false
}
