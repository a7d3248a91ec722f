package gpu

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Matrix is the topology matrix of `nvidia-smi topo -m`: GPUs then NICs on
// both axes, each cell the relation between two devices.
type Matrix struct {
	Labels []string   // GPU0 … GPUn, NIC0 … NICm
	Cells  [][]string // Cells[i][j]: X, NV#, PIX, PXB, PHB, NODE or SYS
	NGPU   int
	// Per GPU row: the affinity columns nvidia-smi prints.
	CPUAffinity  []string
	NUMAAffinity []string
	GPUNUMAID    []string
	// NICNames are the NIC legend: NICNames[k] is NICk's device name.
	NICNames []string
	// Plain leaves out the underline escape (ESC[4m … ESC[0m) nvidia-smi
	// puts around the header, even when writing to a file.
	Plain bool
}

// MatrixOptions choose what BuildMatrix shows.
type MatrixOptions struct {
	// AllNICs adds the netdevs on a PCI function that no RDMA device claims
	// (plain Ethernet, virtio); nvidia-smi lists RDMA devices only.
	AllNICs bool
}

// BuildMatrix computes the matrix nvidia-smi prints for an inventory.
// GPU-GPU cells are NV# when NVLinks join the two GPUs (directly, or both
// through NVSwitches, where # is the links each GPU has into the switches),
// otherwise NVML's common PCI ancestor. Cells with a NIC come from the sysfs
// PCI paths and NUMA nodes (PCIRelation).
func BuildMatrix(inv *Inventory, opt MatrixOptions) Matrix {
	view := *inv
	view.NICs = nil
	for _, n := range inv.NICs {
		if n.RDMA || opt.AllNICs {
			view.NICs = append(view.NICs, n)
		}
	}
	inv = &view
	ng, nn := len(inv.GPUs), len(inv.NICs)
	m := Matrix{NGPU: ng}
	for i := range inv.GPUs {
		m.Labels = append(m.Labels, fmt.Sprintf("GPU%d", i))
	}
	for k, n := range inv.NICs {
		m.Labels = append(m.Labels, fmt.Sprintf("NIC%d", k))
		m.NICNames = append(m.NICNames, n.Name)
	}
	m.Cells = make([][]string, ng+nn)
	for i := range m.Cells {
		m.Cells[i] = make([]string, ng+nn)
		for j := range m.Cells[i] {
			if i == j {
				m.Cells[i][j] = "X"
				continue
			}
			m.Cells[i][j] = relation(inv, i, j)
		}
	}
	for _, g := range inv.GPUs {
		cpu := g.CPUAffinity
		if cpu == "" {
			cpu = "N/A"
		}
		m.CPUAffinity = append(m.CPUAffinity, cpu)
		numa := g.NUMAAffinity
		if numa == "" {
			numa = numaText(g.NUMANode)
		}
		m.NUMAAffinity = append(m.NUMAAffinity, numa)
		m.GPUNUMAID = append(m.GPUNUMAID, numaText(g.GPUNUMAID))
	}
	return m
}

func numaText(n int) string {
	if n < 0 {
		return "N/A"
	}
	return fmt.Sprint(n)
}

// relation is the cell between device a and b (GPUs first, then NICs).
func relation(inv *Inventory, a, b int) string {
	ng := len(inv.GPUs)
	if a < ng && b < ng {
		ga, gb := inv.GPUs[a], inv.GPUs[b]
		if n := nvlinksBetween(ga, gb); n > 0 {
			return fmt.Sprintf("NV%d", n)
		}
		if lvl, ok := ga.Ancestor[b]; ok {
			return lvl
		}
		return PCIRelation(ga.PCIPath, gb.PCIPath, ga.NUMANode, gb.NUMANode)
	}
	pa, na := devicePath(inv, a)
	pb, nb := devicePath(inv, b)
	return PCIRelation(pa, pb, na, nb)
}

func devicePath(inv *Inventory, i int) ([]string, int) {
	if i < len(inv.GPUs) {
		return inv.GPUs[i].PCIPath, inv.GPUs[i].NUMANode
	}
	n := inv.NICs[i-len(inv.GPUs)]
	return n.PCIPath, n.NUMANode
}

// nvlinksBetween counts the active NVLinks from a to b: links whose far end
// is b itself, or, on NVSwitch systems, the links both GPUs have into switches.
func nvlinksBetween(a, b GPU) int {
	direct, switchA := 0, 0
	for _, l := range a.NVLinks {
		if !l.Active {
			continue
		}
		switch {
		case l.RemoteBusID != "" && l.RemoteBusID == b.BusID:
			direct++
		case l.RemoteType == "SWITCH":
			switchA++
		}
	}
	if direct > 0 {
		return direct
	}
	switchB := 0
	for _, l := range b.NVLinks {
		if l.Active && l.RemoteType == "SWITCH" {
			switchB++
		}
	}
	return min(switchA, switchB)
}

// legend is nvidia-smi's legend, word for word.
const legend = `
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`

// Write prints the matrix as `nvidia-smi topo -m` does: tab-separated, the
// header underlined, the self cell as " X ", on GPU rows the affinity columns
// (with the empty column nvidia-smi leaves before GPU NUMA ID), on NIC rows
// the same columns empty; then the legend and, when there are NICs, the NIC
// legend and a blank line.
func (m Matrix) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	ul, end := "\x1b[4m", "\x1b[0m"
	if m.Plain {
		ul, end = "", ""
	}
	fmt.Fprintf(bw, "\t%s%s\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID%s\n", ul, strings.Join(m.Labels, "\t"), end)
	var b strings.Builder
	for i, label := range m.Labels {
		b.Reset()
		b.WriteString(label)
		for _, c := range m.Cells[i] {
			if c == "X" {
				c = " X "
			}
			b.WriteString("\t")
			b.WriteString(c)
		}
		if i < m.NGPU {
			fmt.Fprintf(&b, "\t%s\t%s\t\t%s", m.CPUAffinity[i], m.NUMAAffinity[i], m.GPUNUMAID[i])
		} else {
			b.WriteString("\t\t\t\t")
		}
		b.WriteString("\n")
		bw.WriteString(b.String())
	}
	bw.WriteString(legend)
	if len(m.NICNames) > 0 {
		bw.WriteString("\nNIC Legend:\n\n")
		for k, n := range m.NICNames {
			fmt.Fprintf(bw, "  NIC%d: %s\n", k, n)
		}
		bw.WriteString("\n")
	}
	return bw.Flush()
}
