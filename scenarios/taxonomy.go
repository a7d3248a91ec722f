package scenarios

// Class is one entry of the fault taxonomy: what a learner diagnoses. Scenarios name the
// class they inject, the grader compares against it, and the course and the answer form
// list the same entries. Injector kinds are mechanisms; several can produce one class.
type Class struct {
	ID       string
	Category string // one of the Category* constants
	Position int    // fault position ① to ⑤ of the course panorama, 0 when none
	ZH, EN   string
	// Where says which location fields identify an instance of this class.
	Where []string
}

// Taxonomy categories.
const (
	CategoryNIC      = "nic"
	CategorySwitch   = "switch"
	CategoryLink     = "link"
	CategoryNVLink   = "nvlink"
	CategoryPCIe     = "pcie"
	CategoryHost     = "host"
	CategorySoftware = "software"
)

// Location fields.
const (
	WhereNode = "node"
	WhereNIC  = "nic"
	WhereGPU  = "gpu"
	WherePort = "port" // a switch port, named by the node whose NIC it faces
)

// Taxonomy is the one list of fault classes, in the order the answer form shows them.
var Taxonomy = []Class{
	{"nic-down", CategoryNIC, 1, "网卡链路断开（down）", "NIC link down", []string{WhereNode, WhereNIC}},
	{"nic-flapping", CategoryNIC, 1, "网卡链路抖动（flap）", "NIC link flapping", []string{WhereNode, WhereNIC}},
	{"nic-rate-limited", CategoryNIC, 1, "网卡被限速", "NIC rate-limited", []string{WhereNode, WhereNIC}},
	{"mtu-mismatch", CategoryNIC, 1, "MTU 不一致", "MTU mismatch", []string{WhereNode, WhereNIC}},
	{"wrong-interface", CategoryNIC, 1, "NCCL 选错网卡（NCCL_SOCKET_IFNAME / NCCL_IB_HCA）", "NCCL chose the wrong interface", []string{WhereNode}},
	{"wrong-route", CategoryNIC, 1, "路由错误：数据流量走了管理网", "Wrong route: data traffic via the management network", []string{WhereNode}},
	{"wrong-gid-index", CategoryNIC, 1, "RoCE GID 索引错误", "Wrong RoCE GID index", []string{WhereNode}},
	{"switch-congestion", CategorySwitch, 2, "交换机端口拥塞（incast / 竞争流量）", "Switch port congestion (incast, competing flows)", []string{WherePort}},
	{"pfc-ecn-misconfig", CategorySwitch, 2, "PFC / ECN 配置错误", "PFC/ECN misconfiguration", []string{WherePort}},
	{"link-loss", CategoryLink, 3, "链路随机丢包", "Random packet loss on a link", []string{WhereNode, WhereNIC}},
	{"roce-loss", CategoryLink, 3, "RoCE（UDP 4791）丢包导致重传超限", "RoCE (UDP 4791) drops causing retry-exceeded errors", []string{WhereNode, WhereNIC}},
	{"link-delay", CategoryLink, 3, "链路延迟 / 抖动", "Link delay or jitter", []string{WhereNode, WhereNIC}},
	{"link-corruption", CategoryLink, 3, "链路误码（CRC / 损坏）", "Link corruption (CRC errors)", []string{WhereNode, WhereNIC}},
	{"nvlink-down", CategoryNVLink, 4, "NVLink 链路断开", "NVLink link down", []string{WhereNode, WhereGPU}},
	{"p2p-disabled", CategoryNVLink, 4, "NCCL 被迫绕开 NVLink / P2P", "NCCL forced off NVLink/P2P", []string{WhereNode}},
	{"pcie-downgraded", CategoryPCIe, 5, "PCIe 链路降速 / 降宽", "PCIe link downgraded (speed or width)", []string{WhereNode, WhereGPU}},
	{"pcie-p2p-blocked", CategoryPCIe, 5, "PCIe P2P 被 ACS / IOMMU 阻断", "PCIe P2P blocked by ACS/IOMMU", []string{WhereNode}},
	{"cpu-starvation", CategoryHost, 0, "CPU 饥饿（代理线程 / rank 被限流）", "CPU starvation of proxy threads or a rank", []string{WhereNode}},
	{"numa-misbinding", CategoryHost, 0, "NUMA 绑定错误", "NUMA misbinding", []string{WhereNode}},
	{"shm-too-small", CategoryHost, 0, "/dev/shm 太小", "/dev/shm too small", []string{WhereNode}},
	{"memory-pressure", CategoryHost, 0, "内存压力", "Memory pressure", []string{WhereNode}},
	{"transport-forced", CategorySoftware, 0, "传输被强制切换（IB / SHM / P2P 关闭）", "Transport forced (IB, SHM or P2P disabled)", []string{WhereNode}},
	{"algo-proto-forced", CategorySoftware, 0, "算法 / 协议 / 通道数被强制（NCCL_ALGO / NCCL_PROTO / NCCL_MAX_NCHANNELS）", "Algorithm, protocol or channel count forced", []string{WhereNode}},
	// A whole job's placement, not one node's fault: located by nothing.
	{"comm-group-misplaced", CategorySoftware, 0, "通信组放错了位置：本应在机内的组（如 TP）跨了节点（rank 排布 / 拆分）", "Communicator group misplaced: a group meant to stay in a node (e.g. TP) spans nodes (rank order or split)", nil},
	{"bootstrap-port-blocked", CategorySoftware, 0, "bootstrap 端口被防火墙阻断", "Bootstrap port blocked by a firewall", []string{WhereNode}},
	{"version-mismatch", CategorySoftware, 0, "NCCL / 驱动版本不一致", "NCCL or driver version mismatch", []string{WhereNode}},
}

// ClassByID returns the taxonomy entry with the given id.
func ClassByID(id string) (Class, bool) {
	for _, c := range Taxonomy {
		if c.ID == id {
			return c, true
		}
	}
	return Class{}, false
}
