package nccl

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// known is a message pattern with what it means and what to check. A
// pattern is a list of lower-case substrings, any of which matches: logs can
// be large, and substring search is far cheaper than regular expressions.
type known struct {
	any     []string
	meaning string
	check   string
}

func k(substrings, meaning, check string) known {
	return known{strings.Split(strings.ToLower(substrings), "|"), meaning, check}
}

func matchKnown(list []known, s string) (known, bool) {
	low := strings.ToLower(s)
	for _, x := range list {
		for _, sub := range x.any {
			if strings.Contains(low, sub) {
				return x, true
			}
		}
	}
	return known{}, false
}

// warnings explains NCCL WARN messages (and PyTorch's "Last error" copies of them).
var warnings = []known{
	k(`duplicate gpu detected`,
		"two ranks of one communicator use the same GPU; NCCL allows one rank per GPU",
		"each rank must call torch.cuda.set_device(LOCAL_RANK) before init; check CUDA_VISIBLE_DEVICES and --nproc_per_node against the GPUs present"),
	k(`no socket interface found|bootstrap : no socket interface|no usable listening interface`,
		"no network interface matches NCCL_SOCKET_IFNAME (or none is usable), so ranks cannot bootstrap",
		"compare NCCL_SOCKET_IFNAME with `ip -br addr`; a leading ^ excludes, = means an exact name"),
	k(`socketstartconnect|connection refused|call to connect|connect to `,
		"a rank could not open a TCP connection to a peer (bootstrap or socket transport)",
		"is the peer alive, is its address on the interface NCCL chose (Bootstrap/NET/Socket lines), does a firewall drop the port (`nft list ruleset`), is the route right (`ip route get`)"),
	k(`connection reset by peer|connection closed by remote peer|remote process exited|net : connection closed`,
		"the peer closed the connection: its process died or its network went away",
		"find the first error in the other ranks' logs; check the peer node (dmesg, OOM killer, Xid)"),
	k(`status=12|transport retry counter exceeded|ibv_wc_retry_exc_err`,
		"RDMA retransmissions ran out (status 12, retry exceeded): the IB/RoCE path dropped packets",
		"link state and errors (`ibstat`, `ethtool -S`), PFC/ECN on RoCE, the switch port, cable"),
	k(`got completion`,
		"an RDMA work request completed with an error",
		"the status number is an ibv_wc_status; check `ibstat`, port counters and the peer"),
	k(`ibv_`,
		"a verbs call failed while setting up RDMA",
		"locked-memory limit (`ulimit -l` unlimited), the RDMA device and its GID index (NCCL_IB_GID_INDEX), `ibv_devinfo`"),
	k(`/dev/shm|shared memory|shm_open|shmopen`,
		"the shared-memory transport could not create its segment",
		"size of /dev/shm (`df -h /dev/shm`; containers need --shm-size or --ipc=host)"),
	k(`out of memory`,
		"a CUDA allocation inside NCCL failed: the GPU is out of memory",
		"`nvidia-smi` for other processes on the GPU; smaller NCCL_BUFFSIZE; fewer channels"),
	k(`peer access|cudaipc|p2p is not supported|cumem`,
		"direct GPU-to-GPU access failed",
		"PCIe ACS/IOMMU blocking P2P (`lspci -vvv | grep ACSCtl`, `dmesg | grep -i iommu`), NCCL_P2P_DISABLE, containers sharing the IPC namespace"),
	k(`cuda failure`,
		"a CUDA call inside NCCL failed",
		"the CUDA error text; Xid events on the GPU (`commlab gpu health`)"),
	k(`failed to execute operation`,
		"NCCL's proxy thread, which drives network and SHM connections, failed an operation for a rank; retcode is the ncclResult_t",
		"the WARN lines just before it say which call failed"),
	k(`socket recv failed|socket send failed|recv failed|send failed`,
		"a socket read or write to a peer failed mid-operation",
		"the peer's process and node; the network path (loss, a link that flapped: `ip -s link`)"),
	k(`has already checked in`,
		"two processes registered as the same rank with the bootstrap root",
		"RANK and WORLD_SIZE per process; leftover processes of an earlier run still connected (same MASTER_ADDR/MASTER_PORT)"),
	k(`timeout|timed out`,
		"an operation waited too long for a peer",
		"a rank that never arrived or hangs; the network path between the ranks"),
	k(`version mismatch`,
		"ranks run different NCCL versions",
		"the same NCCL (and PyTorch) on every node"),
}

// infoNotes are INFO lines a learner should notice.
var infoNotes = []known{
	k(`net/ib : no device found|net/ib: no device found`, "no RDMA device: inter-node traffic will use TCP sockets (NET/Socket)", "`ibv_devices`, the RDMA driver, NCCL_IB_DISABLE"),
	k(`p2p is disabled|nccl_p2p_disable`, "GPU peer-to-peer is off: intra-node traffic goes through host memory (SHM)", "NCCL_P2P_DISABLE, PCIe ACS, the topology"),
	k(`nvls multicast support is not available`, "NVLink SHARP (NVLS) is not available here", ""),
}

// pytorchMessages are c10d messages about NCCL that are not tied to a code.
var pytorchMessages = []known{
	k(`nccl communicator was aborted`, "PyTorch aborted the communicator after an error or a timeout on this rank", "the first error or timeout before this line, on every rank"),
	k(`watchdog got stuck|heartbeat monitor timed out`, "PyTorch's NCCL watchdog thread itself stopped making progress (often a hung CUDA call or driver)", "GPU state (`commlab gpu health`), a hung collective on some rank"),
	k(`some nccl operations have failed or timed out`, "collectives failed or timed out; later results may be corrupt, so the process is brought down", "the timeout or error lines before it"),
	k(`timeout at nccl work|detected by watchdog at work`, "the work sequence numbers at the time of the timeout: ranks that enqueued less are the ones that fell behind", "compare last enqueued/completed work across ranks"),
	k(`distbackenderror`, "torch.distributed raised an NCCL backend error", "the NCCL error text on this line and the WARN lines before it"),
}

// transportMeaning explains a transport family.
var transportMeaning = map[string]string{
	"P2P":        "direct GPU-to-GPU over NVLink or PCIe (CUDA IPC / cuMem); the fast path inside a node",
	"SHM":        "through a shared host-memory buffer: GPU -> host -> GPU, used when P2P is unavailable or disabled",
	"NET/IB":     "RDMA (InfiniBand or RoCE) between nodes; GDRDMA means the NIC reads and writes GPU memory directly",
	"NET/Socket": "TCP sockets between nodes: the slowest path, used without RDMA or when IB is disabled",
	"CollNet":    "in-network reduction (SHARP) through the switches",
	"NVLS":       "NVLink SHARP: reductions in the NVSwitches",
}

// Explain writes a readable summary of the log: who, how they connect, and
// what went wrong with what it means.
func (l *Log) Explain(w io.Writer) error {
	var b strings.Builder
	ver := l.Version
	if ver == "" {
		ver = "version not in the log (set NCCL_DEBUG=INFO or VERSION)"
	}
	fmt.Fprintf(&b, "NCCL %s", ver)
	if l.CUDADriver > 0 {
		fmt.Fprintf(&b, ", CUDA driver %d.%d", l.CUDADriver/1000, l.CUDADriver%1000/10)
	}
	fmt.Fprintf(&b, "; %d lines read\n", l.Lines)

	comms := map[string][]Rank{}
	var commOrder []string
	for _, r := range l.Ranks {
		g := r.Group()
		if _, ok := comms[g]; !ok {
			commOrder = append(commOrder, g)
		}
		comms[g] = append(comms[g], r)
	}
	if len(l.Ranks) == 0 {
		b.WriteString("ranks: no communicator init lines (NCCL_DEBUG=INFO prints them)\n")
	}
	for _, c := range commOrder {
		rs := comms[c]
		fmt.Fprintf(&b, "communicator %s: %d of %d ranks seen", c, len(rs), rs[0].NRanks)
		if l.NNodes > 0 {
			fmt.Fprintf(&b, " on %d node(s)", l.NNodes)
		}
		b.WriteString("\n")
		for _, r := range rs {
			state := "init started, never completed"
			if r.Complete {
				state = "init complete"
			}
			fmt.Fprintf(&b, "  rank %d: host %s pid %d, CUDA device %d, busId %s (%s): %s\n", r.Rank, r.Host, r.PID, r.CUDADev, r.BusID, r.PCIBusID(), state)
		}
	}
	if len(l.Bootstrap) > 0 {
		fmt.Fprintf(&b, "bootstrap interface: %s\n", strings.Join(l.Bootstrap, ", "))
	}
	if l.Network != "" || len(l.SocketIfs) > 0 || len(l.IBDevs) > 0 {
		fmt.Fprintf(&b, "network transport: %s", orText(l.Network, "?"))
		if len(l.IBDevs) > 0 {
			fmt.Fprintf(&b, "; RDMA devices %s", strings.Join(l.IBDevs, " "))
		}
		if len(l.SocketIfs) > 0 {
			fmt.Fprintf(&b, "; socket interfaces %s", strings.Join(l.SocketIfs, " "))
		}
		b.WriteString("\n")
	}
	if len(l.Env) > 0 {
		keys := make([]string, 0, len(l.Env))
		for k := range l.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("set by environment:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, l.Env[k])
		}
		b.WriteString("\n")
	}
	if c := l.Channels; c != nil {
		fmt.Fprintf(&b, "channels: %d collective, %d CollNet, %d NVLS, %d p2p (%d per peer)\n", c.Coll, c.CollNet, c.NVLS, c.P2P, c.P2PPerPeer)
	}
	if len(l.Rings) > 0 {
		fmt.Fprintf(&b, "rings: %d channels; channel %d order %v\n", len(l.Rings), l.Rings[0].Channel, l.Rings[0].Order)
	}
	if len(l.Trees) > 0 {
		fmt.Fprintf(&b, "trees (first channels): %s\n", firstFields(l.Trees[0], 6))
	}
	if peers := l.Peers(); len(peers) > 0 {
		b.WriteString("transports by peer:\n")
		for _, p := range peers {
			fmt.Fprintf(&b, "  %d -> %d via %s (channels %s)\n", p.From, p.To, strings.Join(p.Via, ", "), intsText(p.Channels))
		}
		for _, kind := range l.TransportKinds() {
			if m := transportMeaning[kind]; m != "" {
				fmt.Fprintf(&b, "  %s: %s\n", kind, m)
			}
		}
	} else if len(l.Ranks) > 0 && allOneRank(l.Ranks) {
		b.WriteString("transports: none (a communicator of one rank has no peer to connect to)\n")
	}
	if len(l.Algos) > 0 {
		seen := map[string]bool{}
		var parts []string
		for _, a := range l.Algos {
			s := a.Coll + " " + a.Algo + "/" + a.Proto
			if !seen[s] {
				seen[s] = true
				parts = append(parts, s)
			}
		}
		fmt.Fprintf(&b, "algorithms chosen: %s\n", strings.Join(parts, ", "))
	} else if v, ok := l.Env["NCCL_ALGO"]; ok {
		fmt.Fprintf(&b, "algorithms: forced by NCCL_ALGO=%s\n", v)
	}
	for _, n := range l.Notes {
		if n.Meaning == "" {
			continue
		}
		fmt.Fprintf(&b, "note (line %d): %s\n  means: %s\n", n.Line, n.Text, n.Meaning)
		if n.Check != "" {
			fmt.Fprintf(&b, "  check: %s\n", n.Check)
		}
	}
	writeEvents(&b, "warnings", l.Warnings)
	writeEvents(&b, "errors", l.Errors)
	if len(l.Codes) > 0 {
		var codes []Result
		for c := range l.Codes {
			codes = append(codes, c)
		}
		sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
		b.WriteString("result codes seen:")
		for _, c := range codes {
			fmt.Fprintf(&b, " %s(%d)×%d", c.Name(), int(c), l.Codes[c])
		}
		b.WriteString("\n")
	}
	if len(l.Timeouts) > 0 {
		fmt.Fprintf(&b, "timeouts (%d):\n", len(l.Timeouts))
		for _, t := range l.Timeouts {
			fmt.Fprintf(&b, "  line %d: rank %d %s (SeqNum %d, %d elements) ran %d ms, timeout %d ms\n",
				t.Line, t.Rank, t.Op, t.SeqNum, t.NumelIn, t.RanMs, t.TimeoutMs)
		}
		b.WriteString("  means: a collective did not complete on every rank in time; the ranks that did not time out, or timed out\n" +
			"  on a later SeqNum, are waiting on the ones that fell behind or never arrived\n" +
			"  check: which rank is missing or slow, its network path (NCCL_SOCKET_IFNAME, firewall, NIC state), a hang on its GPU\n")
	}
	if l.Failed() {
		fmt.Fprintf(&b, "verdict: problems found (%d warnings, %d errors, %d timeouts)\n", len(l.Warnings), len(l.Errors), len(l.Timeouts))
	} else {
		b.WriteString("verdict: no warnings, errors or timeouts\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeEvents prints events, one entry per distinct text: ranks repeat
// the same error, and the reader needs it once, with where it recurs.
func writeEvents(b *strings.Builder, title string, evs []Event) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintf(b, "%s (%d):\n", title, len(evs))
	seen := map[string]int{}
	var order []string
	lines := map[string][]int{}
	first := map[string]Event{}
	for _, e := range evs {
		k := e.Text
		if _, ok := seen[k]; !ok {
			order = append(order, k)
			first[k] = e
		}
		seen[k]++
		lines[k] = append(lines[k], e.Line)
	}
	for _, k := range order {
		e := first[k]
		where := e.Source
		if e.Host != "" {
			where = fmt.Sprintf("%s:%d dev %d %s", e.Host, e.PID, e.Dev, e.Source)
		}
		fmt.Fprintf(b, "  line %d [%s]: %s\n", e.Line, strings.TrimSpace(where), e.Text)
		if n := seen[k]; n > 1 {
			fmt.Fprintf(b, "    (×%d, lines %s)\n", n, intsText(lines[k]))
		}
		if e.Meaning != "" {
			fmt.Fprintf(b, "    means: %s\n", e.Meaning)
		}
		if e.Check != "" {
			fmt.Fprintf(b, "    check: %s\n", e.Check)
		}
	}
}

// firstFields keeps a long NCCL line readable: the first n "[c] ..." groups.
func firstFields(s string, n int) string {
	parts := strings.Split(s, " [")
	if len(parts) <= n {
		return s
	}
	return strings.Join(parts[:n], " [") + fmt.Sprintf(" … (%d channels listed)", len(parts))
}

func allOneRank(rs []Rank) bool {
	for _, r := range rs {
		if r.NRanks != 1 {
			return false
		}
	}
	return true
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func intsText(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
