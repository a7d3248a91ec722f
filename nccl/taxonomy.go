package nccl

// The verdict model's fixed vocabulary: symptom classes, root causes, and the
// commands that confirm each cause. VerdictModel names its version; change it
// whenever an id is added, removed or changes meaning, so stored verdicts and
// the corpus stay comparable (docs: nccl/VERDICT.md).
const VerdictModel = "commlab-verdict/1"

// SymptomInfo is one class of the taxonomy.
type SymptomInfo struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	TitleZH  string   `json:"title_zh"`
	Chapters []string `json:"chapters"` // course chapters that teach it
	causes   []string // likely causes in their usual order
}

// Symptoms lists the classes, most specific first: when a paste shows
// several, the first one in this list is the verdict (a WARN that names the
// failing call beats the timeout or abort it led to).
var Symptoms = []SymptomInfo{
	{"duplicate-gpu", "two ranks on one GPU", "多个 rank 使用同一块 GPU", []string{"ch12", "ch07"}, []string{"rank-device-mapping"}},
	{"driver-mismatch", "CUDA driver older than the CUDA runtime", "CUDA 驱动版本低于运行时", []string{"ch12", "ch25"}, []string{"driver-too-old"}},
	{"shm-failure", "shared-memory (SHM) transport could not create or attach its segment", "SHM 共享内存段创建或挂载失败", []string{"ch10", "ch27"}, []string{"shm-limit", "shm-namespace"}},
	{"no-interface", "no network interface usable for bootstrap", "找不到可用于 bootstrap 的网卡", []string{"ch08", "ch07"}, []string{"ifname-mismatch", "no-ip-interface"}},
	{"ib-setup", "RDMA (verbs) setup call failed", "RDMA verbs 初始化调用失败", []string{"ch09", "ch04"}, []string{"memlock-limit", "gid-index", "rdma-unavailable"}},
	{"ib-completion", "RDMA work completion with an error status", "RDMA 完成队列报错（按状态码）", []string{"ch09", "ch12"}, []string{"network-fault", "gpudirect-registration", "peer-crash"}},
	{"gpu-lost", "GPU fell off the bus (Xid 79)", "GPU 掉卡（Xid 79）", []string{"ch10", "ch25"}, []string{"gpu-hardware"}},
	{"nvlink-error", "NVLink error (Xid 74, 144-150)", "NVLink 错误（Xid 74、144-150）", []string{"ch10", "ch03"}, []string{"nvlink-hardware"}},
	{"pcie-error", "PCIe bus errors or a downgraded link", "PCIe 总线错误或链路降级", []string{"ch10", "ch03"}, []string{"pcie-link"}},
	{"gpu-xid", "GPU Xid error", "GPU Xid 错误", []string{"ch10", "ch25"}, []string{"gpu-hardware", "gpu-oom"}},
	{"ib-link-down", "RDMA port down", "RDMA 端口未激活", []string{"ch09", "ch25"}, []string{"network-fault", "rdma-unavailable"}},
	{"cuda-error", "CUDA call failed inside NCCL", "NCCL 内部 CUDA 调用失败", []string{"ch12", "ch10"}, []string{"gpu-hardware", "gpu-oom", "nvls-unsupported", "cuda-build-mismatch"}},
	{"version-mismatch", "ranks run different NCCL versions", "各 rank 的 NCCL 版本不一致", []string{"ch12"}, []string{"nccl-version-mismatch"}},
	{"connect-failed", "TCP connect to a peer failed or timed out", "连接对端 TCP 失败或超时", []string{"ch08", "ch12"}, []string{"firewall", "wrong-interface", "peer-not-started", "network-fault"}},
	{"peer-closed", "a peer closed or reset its connection", "对端关闭或重置了连接", []string{"ch12", "ch06"}, []string{"peer-crash", "network-fault", "firewall"}},
	{"wrong-results", "collective results are wrong (#wrong > 0)", "集合通信结果错误（#wrong > 0）", []string{"ch11", "ch14"}, []string{"p2p-corruption", "gpu-hardware"}},
	{"socket-fallback", "no RDMA device: inter-node traffic over TCP sockets", "没有 RDMA 设备，跨节点走 TCP socket", []string{"ch08", "ch04", "ch07"}, []string{"rdma-unavailable"}},
	{"watchdog-stuck", "PyTorch watchdog itself stuck (heartbeat monitor)", "PyTorch watchdog 自身卡住（heartbeat monitor）", []string{"ch12"}, []string{"cuda-hang", "rank-desync"}},
	{"watchdog-timeout", "PyTorch watchdog timeout on a collective", "PyTorch watchdog 集合通信超时", []string{"ch12", "ch07"}, []string{"rank-desync", "network-fault", "cuda-hang"}},
	{"collective-hang", "hang inside a collective (init done, no progress)", "集合通信中卡住（初始化完成后无进展）", []string{"ch06", "ch12"}, []string{"firewall", "wrong-interface", "rank-desync"}},
	{"init-hang", "hang at communicator init (never reaches Init COMPLETE)", "通信器初始化卡住（没有 Init COMPLETE）", []string{"ch06", "ch07", "ch08"}, []string{"wrong-interface", "firewall", "peer-not-started"}},
	{"unexplained-error", "NCCL error code without the WARN that says why", "只有 NCCL 错误码，没有说明原因的 WARN", []string{"ch07", "ch12"}, []string{"shm-limit", "firewall", "driver-too-old", "peer-crash"}},
	{"healthy", "no failure in this input", "输入中没有故障", []string{"ch07", "ch14"}, nil},
	{"unrecognised", "nothing recognised", "没有识别出内容", []string{"ch07"}, nil},
}

// CauseInfo is one root cause with the commands that confirm or rule it out.
type CauseInfo struct {
	Title   string
	TitleZH string
	Why     string   // why this cause produces the symptom
	Check   []string // real commands, run on the node named in the evidence
}

// Causes is the fixed list of root causes.
var Causes = map[string]CauseInfo{
	"rank-device-mapping": {"each rank does not select its own GPU", "rank 与 GPU 的映射错误",
		"NCCL allows one rank per GPU in a communicator; ranks that never call torch.cuda.set_device(LOCAL_RANK), or a CUDA_VISIBLE_DEVICES that hides GPUs, land on the same device",
		[]string{"nvidia-smi --query-compute-apps=pid,gpu_bus_id --format=csv", "echo $CUDA_VISIBLE_DEVICES $LOCAL_RANK  # in each rank"}},
	"driver-too-old": {"the NVIDIA driver is older than the CUDA the job was built for", "NVIDIA 驱动过旧",
		"the CUDA runtime inside NCCL/PyTorch needs at least the driver of its CUDA major version (forward compatibility aside)",
		[]string{"nvidia-smi --query-gpu=driver_version --format=csv", "python -c 'import torch; print(torch.version.cuda, torch.cuda.nccl.version())'"}},
	"shm-limit": {"/dev/shm too small or full", "/dev/shm 太小或已满",
		"the SHM transport puts its buffers in /dev/shm; a container's default is 64 MiB (docker --shm-size, Kubernetes emptyDir medium: Memory)",
		[]string{"df -h /dev/shm", "ls -la /dev/shm | grep nccl", "docker inspect -f '{{.HostConfig.ShmSize}}' CONTAINER"}},
	"shm-namespace": {"ranks do not share an IPC namespace / /dev/shm", "rank 之间不共享 IPC 命名空间",
		"a segment one rank created is not visible to its peer when the ranks run in separate containers or mount different /dev/shm",
		[]string{"ls -l /proc/$PID/ns/ipc  # per rank", "findmnt /dev/shm", "NCCL_SHM_DISABLE=1 to confirm (P2P/NET take over)"}},
	"ifname-mismatch": {"NCCL_SOCKET_IFNAME matches no interface", "NCCL_SOCKET_IFNAME 不匹配任何网卡",
		"NCCL uses only interfaces whose names match the prefix list (^ excludes, = exact); a name that does not exist on this node leaves none",
		[]string{"ip -br addr", "env | grep NCCL_SOCKET_IFNAME"}},
	"no-ip-interface": {"no interface with an IP address (or only loopback)", "没有带 IP 的网卡",
		"bootstrap needs an IPv4/IPv6 address even for ranks on one node",
		[]string{"ip -br addr", "ip route"}},
	"memlock-limit": {"locked-memory limit too low for RDMA registration", "锁定内存上限过低",
		"ibv_reg_mr pins memory; with ulimit -l at the default (64 KiB or 8 MiB) registration fails with ENOMEM (Cannot allocate memory)",
		[]string{"ulimit -l  # inside the job, e.g. through mpirun/srun", "grep memlock /etc/security/limits.conf"}},
	"gid-index": {"wrong RoCE GID index", "RoCE GID 索引错误",
		"on RoCE the QP must use a GID of the right RoCE version and subnet; a wrong NCCL_IB_GID_INDEX breaks ibv_modify_qp or leaves packets unroutable",
		[]string{"show_gids", "ibv_devinfo -v | grep -A3 GID", "env | grep NCCL_IB_GID_INDEX"}},
	"rdma-unavailable": {"RDMA device or driver not available to the job", "RDMA 设备或驱动不可用",
		"no verbs device (driver not loaded, not passed into the container, libibverbs missing, NCCL_IB_DISABLE=1), so NCCL falls back to TCP",
		[]string{"ibv_devices", "ibv_devinfo", "ls /dev/infiniband", "env | grep NCCL_IB"}},
	"network-fault": {"the network path drops or breaks (link, cable, switch, PFC)", "网络路径丢包或中断（链路、线缆、交换机、PFC）",
		"RDMA retransmissions run out (status 12) or a TCP connection breaks when the fabric loses packets or a link flaps",
		[]string{"ibstat", "ibv_devinfo | grep -E 'state|active_mtu'", "ethtool -S IFACE | grep -iE 'err|drop|pause|discard'", "perfquery -x  # IB port counters", "ib_write_bw / ib_write_lat between the two nodes"}},
	"gpudirect-registration": {"GPUDirect RDMA memory registration/protection problem", "GPUDirect RDMA 内存注册或保护错误",
		"a local protection error (status 4) means the NIC could not access the registered buffer: nvidia-peermem missing, ACS/IOMMU in the path, or a dma-buf problem",
		[]string{"lsmod | grep -E 'nvidia_peermem|nv_peer_mem'", "lspci -vvv | grep ACSCtl", "NCCL_NET_GDR_LEVEL=LOC to confirm (disables GPUDirect RDMA)"}},
	"peer-crash": {"another rank died first", "另一个 rank 先崩溃",
		"errors that report a closed connection or a flushed queue are usually the echo of a peer process that exited (OOM, segfault, Python exception)",
		[]string{"grep -n 'WARN\\|Error\\|Traceback' each rank's log  # the earliest one", "dmesg -T | grep -iE 'oom|killed process|segfault|Xid'"}},
	"gpu-hardware": {"GPU hardware, power or thermal fault", "GPU 硬件、供电或温度故障",
		"Xid 79 (fell off the bus), 999 'unknown error', double-bit ECC: the GPU stopped answering",
		[]string{"dmesg -T | grep -E 'NVRM|Xid'", "nvidia-smi -q -d ECC,TEMPERATURE,POWER,PERFORMANCE", "nvidia-smi --query-gpu=index,pci.bus_id,pcie.link.gen.current,pcie.link.width.current --format=csv"}},
	"gpu-oom": {"GPU out of memory", "GPU 显存不足",
		"NCCL allocates its buffers (NCCL_BUFFSIZE per channel and peer) in GPU memory next to the model",
		[]string{"nvidia-smi --query-gpu=memory.used,memory.total --format=csv", "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"}},
	"nvls-unsupported": {"NVLink SHARP (NVLS) unavailable on this system", "NVLS 在此系统不可用",
		"NVLS needs NVSwitch systems with the fabric manager and a driver that supports multicast; elsewhere the cuMulticast calls fail with 'invalid argument'",
		[]string{"nvidia-smi -q | grep -i -A2 fabric", "systemctl status nvidia-fabricmanager", "NCCL_NVLS_ENABLE=0 to confirm"}},
	"cuda-build-mismatch": {"NCCL or the application built for another CUDA/GPU architecture", "NCCL 或应用与 CUDA/GPU 架构不匹配",
		"'named symbol not found' or 'no kernel image' mean the binary has no code for this GPU or this CUDA",
		[]string{"nvidia-smi --query-gpu=name,compute_cap --format=csv", "python -c 'import torch; print(torch.cuda.get_arch_list())'"}},
	"nvlink-hardware": {"NVLink or NVSwitch fault", "NVLink 或 NVSwitch 故障",
		"NVLink Xids mean a link retrained or failed; traffic over it stalls or the channel is torn down",
		[]string{"nvidia-smi nvlink -s", "nvidia-smi nvlink -e", "nvidia-smi topo -m", "dmesg -T | grep -E 'Xid|NVLink'"}},
	"pcie-link": {"PCIe link errors or a link trained below its capability", "PCIe 链路错误或降速",
		"AER errors and a LnkSta below LnkCap (speed or width) point at the slot, riser or card",
		[]string{"lspci -vvv -s BUS | grep -E 'LnkCap|LnkSta'", "dmesg -T | grep -i aer", "nvidia-smi -q -d PCIE"}},
	"nccl-version-mismatch": {"different NCCL versions across ranks", "rank 间 NCCL 版本不同",
		"ranks exchange NCCL-version-specific structures at init",
		[]string{"python -c 'import torch; print(torch.cuda.nccl.version())'  # on every node"}},
	"firewall": {"a firewall or security group drops NCCL's ports", "防火墙或安全组拦截了 NCCL 端口",
		"NCCL listens on ephemeral TCP ports for bootstrap and the socket transport; a filter that allows only MASTER_PORT breaks the rest",
		[]string{"nft list ruleset", "iptables -S", "nc -zv PEER PORT", "ss -tlnp | grep PID"}},
	"wrong-interface": {"NCCL picked an interface the peers cannot reach", "NCCL 选错了网卡",
		"without NCCL_SOCKET_IFNAME NCCL takes the first interface that is not lo or docker*; a bridge, veth, tunnel or management NIC may not route to the other nodes",
		[]string{"ip -br addr", "ip route get PEER_IP", "grep 'Bootstrap : Using\\|NET/Socket : Using' the log  # on every node"}},
	"peer-not-started": {"a peer rank never started or reached init late", "对端 rank 没有启动或迟到",
		"the root waits for every rank to check in; one that crashed before init or runs on a wrong MASTER_ADDR/PORT never arrives",
		[]string{"ps -ef | grep python  # on each node", "echo $MASTER_ADDR $MASTER_PORT $WORLD_SIZE $RANK  # each rank"}},
	"rank-desync": {"ranks are not running the same collectives (or one rank is late)", "各 rank 执行的集合通信不一致（或某 rank 落后）",
		"a collective completes only when every rank enters it; a rank that took another code path, or stalls in data loading, leaves the others waiting until the timeout",
		[]string{"compare 'last enqueued/completed NCCL work' across ranks", "TORCH_DISTRIBUTED_DEBUG=DETAIL", "py-spy dump --pid PID  # on the rank that is behind"}},
	"cuda-hang": {"a CUDA or NCCL call blocks (the GPU or a kernel hangs)", "CUDA/NCCL 调用阻塞（GPU 或 kernel 卡住）",
		"the watchdog cannot make progress while a CUDA call holds it; a hung kernel, a GPU fault or a deadlock with the GIL all look like this",
		[]string{"py-spy dump --native --pid PID", "nvidia-smi  # GPU-Util stuck at 100% with no progress", "dmesg -T | grep Xid"}},
	"p2p-corruption": {"data corrupted on the intra-node path (P2P through PCIe switches with ACS/IOMMU)", "节点内 P2P 路径数据损坏",
		"PCIe ACS or an IOMMU redirecting peer traffic can corrupt or drop P2P transfers on some platforms",
		[]string{"lspci -vvv | grep ACSCtl", "dmesg | grep -i -E 'iommu|DMAR'", "NCCL_P2P_DISABLE=1 all_reduce_perf -c 1 to confirm"}},
}

func symptomInfo(id string) (SymptomInfo, int) {
	for i, s := range Symptoms {
		if s.ID == id {
			return s, i
		}
	}
	return SymptomInfo{}, -1
}
