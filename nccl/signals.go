package nccl

import (
	"regexp"
	"strings"
)

// signal is one kind of line that points at a symptom. A line matches when
// its lower-cased text contains any of the substrings (and re, if set, finds
// a match): pastes have no reliable prefix, so the message text is all that
// can be trusted.
type signal struct {
	symptom string
	any     []string
	re      *regexp.Regexp
	says    string   // what the line means, for the evidence list
	causes  []string // causes the line itself points to, strongest first
	// versions says which NCCL (or PyTorch) releases print the line in this
	// form, checked against the tagged sources; "" when it never changed.
	versions string
}

func sig(symptom, substrings, says string, causes ...string) signal {
	return signal{symptom: symptom, any: strings.Split(strings.ToLower(substrings), "|"), says: says, causes: causes}
}

func (s signal) in(versions string) signal { s.versions = versions; return s }

func (s signal) where(re string) signal { s.re = regexp.MustCompile(re); return s }

// signals are checked in order; a line takes the first that matches, so
// the narrow forms come before the broad ones.
var signals = []signal{
	sig("duplicate-gpu", `duplicate gpu detected`, "two ranks of one communicator are on the same CUDA device", "rank-device-mapping"),
	sig("driver-mismatch", `driver version is insufficient|cudaerrorinsufficientdriver`, "the installed NVIDIA driver is too old for this CUDA runtime", "driver-too-old"),

	sig("shm-failure", `posix_fallocate failed`, "SHM segment could not be sized: /dev/shm is full", "shm-limit").in("NCCL 2.7-2.11 (include/shm.h)"),
	sig("shm-failure", `failed to extend /dev/shm`, "SHM segment could not be grown: /dev/shm is full", "shm-limit").
		where(`failed to extend /dev/shm/\S+ to \d+ bytes(, error: .*)?`).in("NCCL 2.12+ (misc/shmutils.cc); the ', error: TEXT (N)' suffix since 2.22"),
	sig("shm-failure", `attaching to shared memory segment`, "a peer's SHM segment is not visible to this rank", "shm-namespace"),
	sig("shm-failure", `creating shared memory segment|shm_open|/dev/shm/nccl`, "the SHM transport could not create its segment", "shm-limit"),

	sig("no-interface", `no socket interface found|no usable listening interface|no ncclsocketifname|no nccl_socket_ifname interface`, "no interface matches NCCL_SOCKET_IFNAME (or none has an address)", "ifname-mismatch", "no-ip-interface"),
	sig("no-interface", `is neither af_inet(2) nor af_inet6(10)`, "bootstrap got an empty address: the NCCL_SOCKET_IFNAME interface does not exist", "ifname-mismatch"),
	sig("no-interface", `socket creation failed : address family not supported`, "no usable IP interface for sockets", "no-ip-interface").in("NCCL <= 2.4 prints WARN without the NCCL tag"),

	sig("ib-completion", `got completion`, "an RDMA work request completed with an error status", "network-fault").
		where(`got completion (?:with error|from peer \S+ with (?:error|status=))`),
	sig("ib-setup", `ibv_reg_mr|cannot allocate memory`, "memory registration for RDMA failed", "memlock-limit").where(`ibv_\w+.*(failed|cannot allocate)|cannot allocate memory`),
	sig("ib-setup", `ibv_modify_qp|gid index|ncclibgidindex`, "QP state transition failed (often the RoCE GID index)", "gid-index").where(`ibv_modify_qp|gid`),
	sig("ib-setup", `call to ibv_|ibv_create_|ibv_open_device|unable to open device|ibv_get_device`, "a verbs call failed while setting up RDMA", "rdma-unavailable", "memlock-limit"),

	sig("gpu-lost", `fallen off the bus`, "the GPU stopped answering on PCIe (Xid 79)", "gpu-hardware"),
	sig("nvlink-error", `nvlink error|nvlink: |uncorrectable nvlink`, "an NVLink error was reported", "nvlink-hardware"),
	sig("pcie-error", `pcie bus error|aer: |(downgraded)`, "PCIe errors or a link below its capability", "pcie-link"),
	sig("ib-link-down", `state: down|port_down|physical state: polling|physical state: disabled|state:\s+down`, "an RDMA port is not active", "network-fault").where(`state:\s*(down|port_down)|physical state:\s*(polling|disabled)`),

	sig("cuda-error", `out of memory`, "a GPU allocation failed", "gpu-oom"),
	sig("cuda-error", `named symbol not found|no kernel image`, "the binary has no code for this GPU/CUDA", "cuda-build-mismatch"),
	sig("cuda-error", `nvls.cc`, "a CUDA call for NVLink SHARP (NVLS) failed", "nvls-unsupported").where(`nvls\.cc.*cuda failure|cuda failure.*nvls`),
	sig("cuda-error", `cuda failure 999|'unknown error'`, "the CUDA driver returned 999 'unknown error': the GPU or driver is in a bad state", "gpu-hardware"),
	sig("cuda-error", `cuda failure|cuda error:`, "a CUDA call inside NCCL failed", "gpu-hardware"),

	sig("version-mismatch", `version mismatch`, "ranks disagree on the NCCL version", "nccl-version-mismatch"),

	sig("connect-failed", `exceeded error retry count`, "connect retries ran out (NCCL returns ncclRemoteError)", "firewall", "peer-not-started").in("NCCL 2.24+"),
	sig("connect-failed", `socketstartconnect|socketpollconnect|call to connect|connect timeout|connect to |exceeded timeouts|no route to host|software caused connection abort|connection refused`, "a TCP connection to a peer could not be opened", "firewall", "peer-not-started"),
	sig("peer-closed", `connection closed by remote peer|connection reset by peer|broken pipe|remote process exited|socket recv failed|call to recv|net : connection closed|connection closed by localrank`, "a peer closed the connection: its process died or the network broke", "peer-crash", "network-fault"),

	sig("socket-fallback", `net/ib : no device found|net/ib: no device found|failed to open libibverbs|nccl_ib_disable set by environment to 1`, "no RDMA device: NCCL uses TCP sockets between nodes", "rdma-unavailable"),

	sig("watchdog-stuck", `heartbeat monitor timed out|watchdog got stuck`, "PyTorch's watchdog thread stopped making progress", "cuda-hang").in("PyTorch 2.2+ (heartbeat monitor)"),
	sig("watchdog-timeout", `watchdog caught collective operation timeout`, "a collective did not finish on this rank within the timeout", "rank-desync").
		where(`watchdog caught collective operation timeout`),
	sig("watchdog-timeout", `timeout at nccl work|operation timed out|collective operation timeout|ncclcommwatchdog`, "PyTorch timed a collective out", "rank-desync"),

	// A bare return code still narrows the causes to its family (nccl.h).
	sig("unexplained-error", `unhandled cuda error|ncclunhandledcudaerror`, "NCCL returned ncclUnhandledCudaError (1): a CUDA call failed, the WARN before it says which", "gpu-oom", "driver-too-old", "gpu-hardware"),
	sig("unexplained-error", `unhandled system error|ncclsystemerror`, "NCCL returned ncclSystemError (2): a system call or library call failed, the WARN before it says which", "shm-limit", "firewall", "memlock-limit"),
	sig("unexplained-error", `unhandled system error|unhandled cuda error|internal error|invalid usage|invalid argument|remote process exited or there was a network error|test nccl failure|nccl failure common.cu|ncclsystemerror|ncclinternalerror|ncclunhandledcudaerror|nccl error`, "NCCL returned an error; this line does not say why", "shm-limit", "firewall", "peer-crash"),
}

// ibStatus names ibv_wc_status values (infiniband/verbs.h).
var ibStatus = map[int]string{
	1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 4: "IBV_WC_LOC_PROT_ERR", 5: "IBV_WC_WR_FLUSH_ERR",
	8: "IBV_WC_LOC_ACCESS_ERR", 9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR", 11: "IBV_WC_REM_OP_ERR",
	12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR", 20: "IBV_WC_RESP_TIMEOUT_ERR", 21: "IBV_WC_GENERAL_ERR",
}

var (
	ibStatusRe = regexp.MustCompile(`(?i)got completion (from peer \S+ )?with (error |status=)(?:\w+\()?(\d+)`)
	xidRe      = regexp.MustCompile(`Xid \([^)]*\): (\d+)`)
)

// ibCompletion refines an IB completion line: the status decides the cause,
// and the wording tells the NCCL release.
func ibCompletion(line string) (status int, name, versions string, causes []string) {
	m := ibStatusRe.FindStringSubmatch(line)
	if m == nil {
		return -1, "", "", []string{"network-fault"}
	}
	status = atoiOr(m[3], -1)
	switch {
	case m[1] == "":
		versions = "NCCL 2.7-2.9 ('Got completion with error N')"
	case m[2] == "error ":
		versions = "NCCL 2.10-2.19 ('from peer ... with error N')"
	case strings.Contains(strings.ToLower(line), "status=") && strings.Contains(line, "("+m[3]+")"):
		versions = "NCCL 2.29+ ('status=NAME(N)')"
	default:
		versions = "NCCL 2.20+ ('status=N')"
	}
	switch status {
	case 12, 20:
		causes = []string{"network-fault"}
	case 4, 8, 10:
		causes = []string{"gpudirect-registration", "network-fault"}
	case 5:
		// A flushed request is the echo of an earlier error on the same QP.
		causes = []string{"network-fault", "peer-crash"}
	case 13:
		causes = []string{"peer-crash", "network-fault"}
	default:
		causes = []string{"network-fault"}
	}
	return status, ibStatus[status], versions, causes
}

// xidSymptom classifies an NVRM Xid line by number (NVIDIA's Xid catalog).
func xidSymptom(xid int) (string, string, []string) {
	switch {
	case xid == 79:
		return "gpu-lost", "Xid 79: the GPU has fallen off the bus", []string{"gpu-hardware"}
	case xid == 74 || (xid >= 144 && xid <= 150):
		return "nvlink-error", "NVLink Xid " + itoa(xid), []string{"nvlink-hardware"}
	case xid == 48 || xid == 63 || xid == 64 || xid == 92 || xid == 94 || xid == 95:
		return "gpu-xid", "memory (ECC/row-remap) Xid " + itoa(xid), []string{"gpu-hardware"}
	case xid == 31 || xid == 13 || xid == 43 || xid == 45:
		return "gpu-xid", "application-side Xid " + itoa(xid) + " (a fault in a kernel, or a channel torn down)", []string{"gpu-hardware", "cuda-hang"}
	default:
		return "gpu-xid", "Xid " + itoa(xid), []string{"gpu-hardware"}
	}
}
