//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlLib is the part of go-nvml's library that commlab calls. Declared here
// so the collector can run on go-nvml's mock servers in tests.
type nvmlLib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetNVMLVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
}

// nvmlDevice is the part of go-nvml's device that commlab reads; read only:
// nothing here changes clocks, limits or modes.
type nvmlDevice interface {
	GetUUID() (string, nvml.Return)
	GetName() (string, nvml.Return)
	GetPciInfo() (nvml.PciInfo, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetCpuAffinity(int) ([]uint, nvml.Return)
	GetMemoryAffinity(int, nvml.AffinityScope) ([]uint, nvml.Return)
	GetNumaNodeId() (int, nvml.Return)
	GetTopologyCommonAncestor(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return)

	GetCurrPcieLinkGeneration() (int, nvml.Return)
	GetMaxPcieLinkGeneration() (int, nvml.Return)
	GetGpuMaxPcieLinkGeneration() (int, nvml.Return)
	GetCurrPcieLinkWidth() (int, nvml.Return)
	GetMaxPcieLinkWidth() (int, nvml.Return)
	GetPcieThroughput(nvml.PcieUtilCounter) (uint32, nvml.Return)
	GetPcieReplayCounter() (int, nvml.Return)

	GetNvLinkState(int) (nvml.EnableState, nvml.Return)
	GetNvLinkVersion(int) (uint32, nvml.Return)
	GetNvLinkRemotePciInfo(int) (nvml.PciInfo, nvml.Return)
	GetNvLinkRemoteDeviceType(int) (nvml.IntNvLinkDeviceType, nvml.Return)
	GetNvLinkErrorCounter(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return)

	GetEccMode() (nvml.EnableState, nvml.EnableState, nvml.Return)
	GetTotalEccErrors(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return)
	GetRetiredPages(nvml.PageRetirementCause) ([]uint64, nvml.Return)
	GetRetiredPagesPendingStatus() (nvml.EnableState, nvml.Return)
	GetRemappedRows() (int, int, bool, bool, nvml.Return)

	GetClockInfo(nvml.ClockType) (uint32, nvml.Return)
	GetMaxClockInfo(nvml.ClockType) (uint32, nvml.Return)
	GetCurrentClocksEventReasons() (uint64, nvml.Return)
	GetPerformanceState() (nvml.Pstates, nvml.Return)
	GetUtilizationRates() (nvml.Utilization, nvml.Return)
	GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return)
	GetPowerUsage() (uint32, nvml.Return)

	RegisterEvents(uint64, nvml.EventSet) nvml.Return
}

var (
	_ nvmlLib    = nvml.Interface(nil)
	_ nvmlDevice = nvml.Device(nil)
)

// NVML is an open NVML session.
type NVML struct {
	lib  nvmlLib
	sys  Sysfs
	once sync.Once
}

// Open loads libnvidia-ml.so.1 and initialises NVML. Without the library or
// the driver the error wraps ErrNoDriver and says so in words.
func Open() (*NVML, error) {
	return open(nvml.New(), Sysfs{})
}

// Count returns how many GPUs NVML sees, for deciding whether this host can run
// GPU labs. Without the driver, or with no GPU, the error wraps ErrNoDriver and
// says so in words a learner can act on ("GPU labs need a GPU node").
func Count() (int, error) {
	n, err := Open()
	if err != nil {
		return 0, err
	}
	defer n.Close()
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("count GPUs: %s", nvmlErr(ret))
	}
	if count == 0 {
		return 0, fmt.Errorf("%w: the driver is loaded but NVML sees no GPU (GPU labs need a GPU node)", ErrNoDriver)
	}
	return count, nil
}

func open(lib nvmlLib, sys Sysfs) (*NVML, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return &NVML{lib: lib, sys: sys}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("%w: libnvidia-ml.so.1 not found (GPU labs need a GPU node)", ErrNoDriver)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: libnvidia-ml.so.1 is present but the NVIDIA kernel driver is not loaded (GPU labs need a GPU node)", ErrNoDriver)
	case nvml.ERROR_NO_PERMISSION:
		return nil, fmt.Errorf("%w: no permission to open the NVIDIA devices (/dev/nvidia*)", ErrNoDriver)
	default:
		return nil, fmt.Errorf("initialise NVML: %s", nvmlErr(ret))
	}
}

// Close shuts NVML down; safe to call more than once.
func (n *NVML) Close() error {
	var err error
	n.once.Do(func() {
		if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
			err = fmt.Errorf("shut NVML down: %s", nvmlErr(ret))
		}
	})
	return err
}

func nvmlErr(r nvml.Return) string {
	// go-nvml's String falls back to the constant's name when the library
	// is absent; with it, it is NVML's own sentence.
	return r.Error()
}

// Snapshot reads every GPU and every NIC once. A reading NVML refuses for a
// GPU (not supported on this model, no permission) is named in
// GPU.Unsupported rather than failing the whole snapshot.
func (n *NVML) Snapshot(ctx context.Context, opt SnapshotOptions) (*Inventory, error) {
	inv := &Inventory{Time: time.Now().UTC()}
	inv.Host, _ = os.Hostname()
	var ret nvml.Return
	if inv.Driver, ret = n.lib.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		inv.Unsupported = append(inv.Unsupported, "driver version: "+nvmlErr(ret))
	}
	if inv.NVML, ret = n.lib.SystemGetNVMLVersion(); ret != nvml.SUCCESS {
		inv.Unsupported = append(inv.Unsupported, "NVML version: "+nvmlErr(ret))
	}
	if inv.CUDADriver, ret = n.lib.SystemGetCudaDriverVersion(); ret != nvml.SUCCESS {
		inv.Unsupported = append(inv.Unsupported, "CUDA driver version: "+nvmlErr(ret))
	}
	handles, err := n.devices()
	if err != nil {
		return nil, err
	}
	for i, h := range handles {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		g, err := n.readGPU(i, h, opt)
		if err != nil {
			return nil, err
		}
		inv.GPUs = append(inv.GPUs, g)
	}
	for i := range handles {
		for j := range handles {
			if i == j {
				continue
			}
			lvl, ret := handles[i].GetTopologyCommonAncestor(handles[j])
			if ret != nvml.SUCCESS {
				continue
			}
			if inv.GPUs[i].Ancestor == nil {
				inv.GPUs[i].Ancestor = map[int]string{}
			}
			inv.GPUs[i].Ancestor[j] = topoLevelName(lvl)
		}
	}
	nics, err := n.sys.NICs()
	if err != nil {
		return nil, err
	}
	inv.NICs = nics
	return inv, nil
}

func (n *NVML) devices() ([]nvml.Device, error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs: %s", nvmlErr(ret))
	}
	hs := make([]nvml.Device, 0, count)
	for i := 0; i < count; i++ {
		h, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("open GPU %d: %s", i, nvmlErr(ret))
		}
		hs = append(hs, h)
	}
	return hs, nil
}

func topoLevelName(l nvml.GpuTopologyLevel) string {
	switch l {
	case nvml.TOPOLOGY_INTERNAL, nvml.TOPOLOGY_SINGLE:
		// INTERNAL is two GPUs on one board, behind one on-board switch.
		return "PIX"
	case nvml.TOPOLOGY_MULTIPLE:
		return "PXB"
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return "PHB"
	case nvml.TOPOLOGY_NODE:
		return "NODE"
	default:
		return "SYS"
	}
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// readGPU reads one GPU. Only the identity (UUID, PCI address) is required;
// everything else that NVML refuses is noted in Unsupported.
func (n *NVML) readGPU(idx int, d nvmlDevice, opt SnapshotOptions) (GPU, error) {
	g := GPU{Index: idx, NUMANode: -1, GPUNUMAID: -1, Pstate: -1, UtilGPU: -1, TempC: -1}
	miss := func(what string, r nvml.Return) {
		g.Unsupported = append(g.Unsupported, what+": "+nvmlErr(r))
	}
	var ret nvml.Return
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("read UUID of GPU %d: %s", idx, nvmlErr(ret))
	}
	pci, ret := d.GetPciInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("read PCI address of GPU %d: %s", idx, nvmlErr(ret))
	}
	g.BusID = NormBusID(cString(pci.BusId[:]))
	if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		miss("name", ret)
	}
	if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemTotalMiB = mem.Total >> 20
	} else {
		miss("memory", ret)
	}

	if path, err := n.sys.PCIPath(g.BusID); err == nil {
		g.PCIPath = path
	} else {
		g.Unsupported = append(g.Unsupported, "sysfs PCI path: "+err.Error())
	}
	g.NUMANode = n.sys.NUMANode(g.BusID)
	if words, ret := d.GetCpuAffinity(possible("cpu", 1024)); ret == nvml.SUCCESS {
		g.CPUAffinity = cpuList(words)
	} else {
		g.CPUAffinity = n.sys.LocalCPUs(g.BusID)
		miss("cpu affinity", ret)
	}
	// nvidia-smi's "NUMA Affinity" is NVML's memory affinity, which a VM
	// reports even where sysfs says numa_node -1.
	if words, ret := d.GetMemoryAffinity(possible("node", 64), nvml.AFFINITY_SCOPE_NODE); ret == nvml.SUCCESS {
		g.NUMAAffinity = cpuList(words)
	} else {
		miss("numa affinity", ret)
	}
	if id, ret := d.GetNumaNodeId(); ret == nvml.SUCCESS {
		g.GPUNUMAID = id
	}

	n.readPCIe(&g, d, opt, miss)
	n.readNVLinks(&g, d, miss)
	readECC(&g, d, miss)
	readClocks(&g, d, miss)
	return g, nil
}

func (n *NVML) readPCIe(g *GPU, d nvmlDevice, opt SnapshotOptions, miss func(string, nvml.Return)) {
	var ret nvml.Return
	p := &g.PCIe
	if p.CurGen, ret = d.GetCurrPcieLinkGeneration(); ret != nvml.SUCCESS {
		miss("pcie current generation", ret)
	}
	if p.MaxGen, ret = d.GetMaxPcieLinkGeneration(); ret != nvml.SUCCESS {
		miss("pcie max generation", ret)
	}
	if p.GPUMaxGen, ret = d.GetGpuMaxPcieLinkGeneration(); ret != nvml.SUCCESS {
		miss("pcie GPU max generation", ret)
	}
	if p.CurWidth, ret = d.GetCurrPcieLinkWidth(); ret != nvml.SUCCESS {
		miss("pcie current width", ret)
	}
	if p.MaxWidth, ret = d.GetMaxPcieLinkWidth(); ret != nvml.SUCCESS {
		miss("pcie max width", ret)
	}
	if p.Replays, ret = d.GetPcieReplayCounter(); ret != nvml.SUCCESS {
		miss("pcie replay counter", ret)
	}
	if opt.Throughput {
		if p.TxKBps, ret = d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); ret != nvml.SUCCESS {
			miss("pcie tx throughput", ret)
		}
		if p.RxKBps, ret = d.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); ret != nvml.SUCCESS {
			miss("pcie rx throughput", ret)
		}
	}
}

var nvlinkErrNames = []struct {
	c    nvml.NvLinkErrorCounter
	name string
}{
	{nvml.NVLINK_ERROR_DL_REPLAY, "replay"},
	{nvml.NVLINK_ERROR_DL_RECOVERY, "recovery"},
	{nvml.NVLINK_ERROR_DL_CRC_FLIT, "crc_flit"},
	{nvml.NVLINK_ERROR_DL_CRC_DATA, "crc_data"},
}

func (n *NVML) readNVLinks(g *GPU, d nvmlDevice, miss func(string, nvml.Return)) {
	var first nvml.Return = nvml.SUCCESS
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			// Links past the GPU's last answer INVALID_ARGUMENT or
			// NOT_SUPPORTED; a GPU without NVLink refuses link 0.
			if l == 0 {
				first = ret
			}
			continue
		}
		link := NVLink{Link: l, Active: st == nvml.FEATURE_ENABLED}
		if v, ret := d.GetNvLinkVersion(l); ret == nvml.SUCCESS {
			link.Version = v
		}
		if link.Active {
			if pci, ret := d.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
				link.RemoteBusID = NormBusID(cString(pci.BusId[:]))
			}
			if t, ret := d.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS {
				link.RemoteType = remoteTypeName(t)
			}
		}
		for _, e := range nvlinkErrNames {
			if v, ret := d.GetNvLinkErrorCounter(l, e.c); ret == nvml.SUCCESS {
				if link.Errors == nil {
					link.Errors = map[string]uint64{}
				}
				link.Errors[e.name] = v
			}
		}
		g.NVLinks = append(g.NVLinks, link)
	}
	if len(g.NVLinks) == 0 && first != nvml.SUCCESS {
		miss("nvlink", first)
	}
}

func remoteTypeName(t nvml.IntNvLinkDeviceType) string {
	switch t {
	case nvml.NVLINK_DEVICE_TYPE_GPU:
		return "GPU"
	case nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return "SWITCH"
	case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return "IBMNPU"
	default:
		return "unknown"
	}
}

func readECC(g *GPU, d nvmlDevice, miss func(string, nvml.Return)) {
	e := &g.ECC
	cur, pend, ret := d.GetEccMode()
	if ret != nvml.SUCCESS {
		miss("ecc mode", ret)
	} else {
		e.Supported = true
		e.Enabled = cur == nvml.FEATURE_ENABLED
		e.PendingEnabled = pend == nvml.FEATURE_ENABLED
	}
	if e.Enabled {
		counters := []struct {
			t   nvml.MemoryErrorType
			c   nvml.EccCounterType
			dst *uint64
		}{
			{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC, &e.VolatileCorrected},
			{nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC, &e.VolatileUncorrected},
			{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC, &e.AggregateCorrected},
			{nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC, &e.AggregateUncorrected},
		}
		for _, c := range counters {
			v, ret := d.GetTotalEccErrors(c.t, c.c)
			if ret != nvml.SUCCESS {
				miss("ecc counters", ret)
				break
			}
			*c.dst = v
		}
	}
	sbe, ret := d.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
	if ret == nvml.SUCCESS {
		dbe, _ := d.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
		pending, _ := d.GetRetiredPagesPendingStatus()
		e.RetiredSupported = true
		e.RetiredSBE, e.RetiredDBE = len(sbe), len(dbe)
		e.RetiredPending = pending == nvml.FEATURE_ENABLED
	} else {
		miss("retired pages", ret)
	}
	corr, unc, pending, failure, ret := d.GetRemappedRows()
	if ret == nvml.SUCCESS {
		e.RemapSupported = true
		e.RemapCorrectable, e.RemapUncorrectable = corr, unc
		e.RemapPending, e.RemapFailure = pending, failure
	} else {
		miss("remapped rows", ret)
	}
}

func readClocks(g *GPU, d nvmlDevice, miss func(string, nvml.Return)) {
	c := &g.Clocks
	var ret nvml.Return
	if c.SMMHz, ret = d.GetClockInfo(nvml.CLOCK_SM); ret != nvml.SUCCESS {
		miss("sm clock", ret)
	}
	if c.MemMHz, ret = d.GetClockInfo(nvml.CLOCK_MEM); ret != nvml.SUCCESS {
		miss("memory clock", ret)
	}
	if c.MaxSMMHz, ret = d.GetMaxClockInfo(nvml.CLOCK_SM); ret != nvml.SUCCESS {
		miss("max sm clock", ret)
	}
	if c.MaxMemMHz, ret = d.GetMaxClockInfo(nvml.CLOCK_MEM); ret != nvml.SUCCESS {
		miss("max memory clock", ret)
	}
	if c.Reasons, ret = d.GetCurrentClocksEventReasons(); ret != nvml.SUCCESS {
		miss("clock event reasons", ret)
	}
	if p, ret := d.GetPerformanceState(); ret == nvml.SUCCESS {
		g.Pstate = int(p)
	} else {
		miss("performance state", ret)
	}
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		g.UtilGPU = int(u.Gpu)
	} else {
		miss("utilization", ret)
	}
	if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		g.TempC = int(t)
	} else {
		miss("temperature", ret)
	}
	if p, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
		g.PowerMilliW = p
	} else {
		miss("power", ret)
	}
}

// possible counts the CPUs or NUMA nodes the kernel may bring online
// (/sys/devices/system/{cpu,node}/possible, e.g. "0-127"); NVML sizes its
// affinity masks from that count.
func possible(kind string, def int) int {
	n := 0
	b, err := os.ReadFile("/sys/devices/system/" + kind + "/possible")
	if err != nil {
		return def
	}
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		_, hi, found := strings.Cut(r, "-")
		if !found {
			hi = r
		}
		var v int
		if _, err := fmt.Sscan(hi, &v); err == nil && v+1 > n {
			n = v + 1
		}
	}
	if n == 0 {
		return def
	}
	return n
}

// cpuList renders a CPU or node bitmask (64-bit words, lowest first) as "0-15,32-47".
func cpuList(words []uint) string {
	var parts []string
	start := -1
	total := len(words) * 64
	for i := 0; i <= total; i++ {
		set := i < total && words[i/64]&(1<<(uint(i)%64)) != 0
		switch {
		case set && start < 0:
			start = i
		case !set && start >= 0:
			if i-1 == start {
				parts = append(parts, fmt.Sprint(start))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d", start, i-1))
			}
			start = -1
		}
	}
	return strings.Join(parts, ",")
}
