package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Inventory is one reading of a node's GPUs and NICs.
type Inventory struct {
	Time        time.Time `json:"time"`
	Host        string    `json:"host"`
	Driver      string    `json:"driver"`
	NVML        string    `json:"nvml"`
	CUDADriver  int       `json:"cuda_driver"` // e.g. 13000 for CUDA 13.0
	GPUs        []GPU     `json:"gpus"`
	NICs        []NIC     `json:"nics"`
	Unsupported []string  `json:"unsupported,omitempty"` // node-level readings NVML refused
}

// GPU is what NVML and sysfs say about one GPU.
type GPU struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	// BusID is the PCI address in sysfs form, 0000:18:00.0.
	BusID string `json:"bus_id"`
	// PCIPath is the chain of PCI devices from the root complex down to the
	// GPU, as in /sys/devices: ["pci0000:00", "0000:00:01.0", "0000:18:00.0"].
	PCIPath []string `json:"pci_path,omitempty"`
	// NUMANode is the NUMA node of the GPU's PCI device in sysfs (-1: none
	// reported).
	NUMANode int `json:"numa_node"`
	// NUMAAffinity lists the NUMA nodes NVML says are close to the GPU
	// ("0"), what nvidia-smi prints as NUMA Affinity.
	NUMAAffinity string `json:"numa_affinity,omitempty"`
	// CPUAffinity lists the CPUs NVML says are close to the GPU ("0-15,32-47").
	CPUAffinity string `json:"cpu_affinity,omitempty"`
	// GPUNUMAID is the NUMA node of the GPU's own memory on coherent
	// (C2C) platforms; -1 elsewhere, where nvidia-smi prints N/A.
	GPUNUMAID int `json:"gpu_numa_id"`
	// Ancestor is NVML's common PCI ancestor with each other GPU, by index:
	// X (same board), PIX, PXB, PHB, NODE or SYS.
	Ancestor map[int]string `json:"ancestor,omitempty"`

	PCIe    PCIe     `json:"pcie"`
	NVLinks []NVLink `json:"nvlinks,omitempty"`
	ECC     ECC      `json:"ecc"`
	Clocks  Clocks   `json:"clocks"`

	Pstate      int    `json:"pstate"`   // 0 (max performance) .. 15; -1 unknown
	UtilGPU     int    `json:"util_gpu"` // percent; -1 unknown
	TempC       int    `json:"temp_c"`   // -1 unknown
	PowerMilliW uint32 `json:"power_mw"` // 0 unknown
	MemTotalMiB uint64 `json:"mem_total_mib"`

	// Unsupported names the readings NVML refused for this GPU, with why
	// ("nvlink: Not Supported"), so a report can say what it could not see.
	Unsupported []string `json:"unsupported,omitempty"`
}

// PCIe is the state of a GPU's PCIe link.
type PCIe struct {
	CurGen    int `json:"cur_gen"`
	MaxGen    int `json:"max_gen"`     // the most this GPU in this slot can reach
	GPUMaxGen int `json:"gpu_max_gen"` // the most the GPU itself supports
	CurWidth  int `json:"cur_width"`
	MaxWidth  int `json:"max_width"`
	// TxKBps and RxKBps are NVML's PCIe throughput counters (KB/s over a
	// 20 ms window) at the time of the reading.
	TxKBps uint32 `json:"tx_kbps"`
	RxKBps uint32 `json:"rx_kbps"`
	// Replays counts PCIe replays (link-level retransmissions).
	Replays int `json:"replays"`
}

// NVLink is one NVLink of a GPU.
type NVLink struct {
	Link        int    `json:"link"`
	Active      bool   `json:"active"`
	Version     uint32 `json:"version,omitempty"`
	RemoteBusID string `json:"remote_bus_id,omitempty"`
	RemoteType  string `json:"remote_type,omitempty"` // GPU, SWITCH, IBMNPU, unknown
	// Errors are the data-link error counters: replay, recovery, crc_flit, crc_data.
	Errors map[string]uint64 `json:"errors,omitempty"`
}

// ECC is the memory-error state of a GPU.
type ECC struct {
	Supported            bool   `json:"supported"`
	Enabled              bool   `json:"enabled"`
	PendingEnabled       bool   `json:"pending_enabled"`
	VolatileCorrected    uint64 `json:"volatile_corrected"`
	VolatileUncorrected  uint64 `json:"volatile_uncorrected"`
	AggregateCorrected   uint64 `json:"aggregate_corrected"`
	AggregateUncorrected uint64 `json:"aggregate_uncorrected"`
	// Page retirement (before Ampere).
	RetiredSupported bool `json:"retired_supported"`
	RetiredSBE       int  `json:"retired_sbe"`
	RetiredDBE       int  `json:"retired_dbe"`
	RetiredPending   bool `json:"retired_pending"`
	// Row remapping (Ampere and later).
	RemapSupported     bool `json:"remap_supported"`
	RemapCorrectable   int  `json:"remap_correctable"`
	RemapUncorrectable int  `json:"remap_uncorrectable"`
	RemapPending       bool `json:"remap_pending"`
	RemapFailure       bool `json:"remap_failure"`
}

// Clocks are a GPU's current and maximum clocks and why they are held down.
type Clocks struct {
	SMMHz     uint32 `json:"sm_mhz"`
	MemMHz    uint32 `json:"mem_mhz"`
	MaxSMMHz  uint32 `json:"max_sm_mhz"`
	MaxMemMHz uint32 `json:"max_mem_mhz"`
	// Reasons is NVML's clocks-event (throttle) reason bitmask.
	Reasons uint64 `json:"reasons"`
}

// NIC is a network device with a PCI address: an RDMA device (named as in
// /sys/class/infiniband, like nvidia-smi) or a netdev without one.
type NIC struct {
	Name     string   `json:"name"`             // mlx5_0, or eth0 for a plain netdev
	Netdevs  []string `json:"netdevs"`          // the netdevs on this PCI function
	RDMA     bool     `json:"rdma"`             // listed in /sys/class/infiniband
	BusID    string   `json:"bus_id"`           // 0000:3b:00.0
	PCIPath  []string `json:"pci_path"`         // as GPU.PCIPath
	NUMANode int      `json:"numa_node"`        // -1: none reported
	Driver   string   `json:"driver,omitempty"` // mlx5_core, virtio-pci, ...
}

// ReadInventoryFile reads an inventory recorded as JSON (by `commlab gpu
// inventory --json`).
func ReadInventoryFile(path string) (*Inventory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	defer f.Close()
	inv, err := ReadInventory(f)
	if err != nil {
		return nil, fmt.Errorf("read inventory %s: %w", path, err)
	}
	return inv, nil
}

// ReadInventory decodes an inventory written by WriteJSON.
func ReadInventory(r io.Reader) (*Inventory, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var inv Inventory
	if err := dec.Decode(&inv); err != nil {
		return nil, fmt.Errorf("decode inventory JSON: %w", err)
	}
	return &inv, nil
}

// WriteJSON writes the inventory as indented JSON.
func (inv *Inventory) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(inv)
}

// ErrNoDriver says NVML could not be used: libnvidia-ml.so.1 is missing or
// the NVIDIA driver is not loaded. GPU labs need a GPU node.
var ErrNoDriver = errors.New("no NVIDIA driver")

// SnapshotOptions choose the optional, slower readings.
type SnapshotOptions struct {
	// Throughput reads the PCIe throughput counters; NVML samples them over
	// 20 ms per direction, so they dominate the cost of a reading.
	Throughput bool
}
