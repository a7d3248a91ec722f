package injector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// sysRoot is where sysfs is read from; tests point it at a recorded tree.
var sysRoot = "/sys"

// NUMAMisbind binds the node's workloads to the CPUs and memory of a NUMA node other
// than their GPU's, as a wrong numactl line or a scheduler's cpuset does: every copy
// between host memory and the GPU then crosses the socket interconnect (UPI, xGMI).
// The GPU's node is its PCI device's numa_node in sysfs; the far node is the first
// other node with CPUs. The prior cpuset.cpus and cpuset.mems are journaled and
// written back on revert.
type NUMAMisbind struct {
	GPU int `json:"gpu" param:"gpu" doc:"the GPU, numbered in PCI bus order as nvidia-smi and NVML do"`
}

var _ Fault = (*NUMAMisbind)(nil)

// NUMAMisbindKind registers numa-misbind.
func NUMAMisbindKind() Kind {
	return Kind{Name: "numa-misbind", Summary: "bind the workload cgroup to the CPUs and memory of a NUMA node far from its GPU",
		Needs: []Feature{NeedCgroup},
		New:   func() Fault { return &NUMAMisbind{} }, NewUndo: func() Undo { return &cgroupUndo{} }}
}

// Kind implements Fault.
func (f *NUMAMisbind) Kind() string { return "numa-misbind" }

// Validate implements Fault.
func (f *NUMAMisbind) Validate() error {
	if f.GPU < 0 || f.GPU > 63 {
		return invalid("gpu %d: want 0 to 63", f.GPU)
	}
	return nil
}

func (f *NUMAMisbind) claims() []string { return []string{"cgroup-cpuset"} }

// Command implements Fault.
func (f *NUMAMisbind) Command(t Target) []string {
	dir := cgroupPath("cpuset", t.Cgroup)
	far, err := farNUMANode(f.GPU)
	if err != nil {
		return []string{fmt.Sprintf("# numa-misbind: %v", err)}
	}
	return []string{
		fmt.Sprintf("echo %s > %s/cpuset.cpus", far.CPUs, dir),
		fmt.Sprintf("echo %d > %s/cpuset.mems", far.ID, dir),
	}
}

// Apply implements Fault.
func (f *NUMAMisbind) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	dir, err := needCgroup(t, "cpuset")
	if err != nil {
		return nil, err
	}
	far, err := farNUMANode(f.GPU)
	if err != nil {
		return nil, err
	}
	files := []cgFile{
		{Path: filepath.Join(dir, "cpuset.cpus"), Value: string(far.CPUs)},
		{Path: filepath.Join(dir, "cpuset.mems"), Value: strconv.Itoa(far.ID)},
	}
	return applyChecked(ctx, t, op, files)
}

// numaNode is one NUMA node of the host.
type numaNode struct {
	ID   int
	CPUs CPUList
}

// farNUMANode finds the NUMA node a workload using GPU gpu should not run on.
func farNUMANode(gpu int) (numaNode, error) {
	gpus, err := nvidiaGPUs()
	if err != nil {
		return numaNode{}, err
	}
	if gpu >= len(gpus) {
		return numaNode{}, invalid("gpu %d: this host has %d NVIDIA GPU(s) in sysfs", gpu, len(gpus))
	}
	b, err := os.ReadFile(filepath.Join(sysRoot, "bus/pci/devices", gpus[gpu], "numa_node"))
	if err != nil {
		return numaNode{}, fmt.Errorf("NUMA node of GPU %d (%s): %w", gpu, gpus[gpu], err)
	}
	local, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return numaNode{}, fmt.Errorf("NUMA node of GPU %d (%s): %q", gpu, gpus[gpu], b)
	}
	nodes, err := numaNodes()
	if err != nil {
		return numaNode{}, err
	}
	if local < 0 {
		return numaNode{}, fmt.Errorf("%w: GPU %d (%s) belongs to no NUMA node (numa_node is -1, as in a VM or on a one-socket host): numa-misbind needs two", ErrUnsupported, gpu, gpus[gpu])
	}
	for _, n := range nodes {
		if n.ID != local {
			return n, nil
		}
	}
	return numaNode{}, fmt.Errorf("%w: this host has one NUMA node with CPUs (node %d, GPU %d's own): numa-misbind needs two", ErrUnsupported, local, gpu)
}

// nvidiaGPUs lists the PCI addresses of NVIDIA display and 3D controllers, in bus order.
func nvidiaGPUs() ([]string, error) {
	dir := filepath.Join(sysRoot, "bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list PCI devices: %w", err)
	}
	var out []string
	for _, e := range ents {
		vendor, _ := os.ReadFile(filepath.Join(dir, e.Name(), "vendor"))
		class, _ := os.ReadFile(filepath.Join(dir, e.Name(), "class"))
		c := strings.TrimSpace(string(class))
		if strings.TrimSpace(string(vendor)) == "0x10de" && (strings.HasPrefix(c, "0x0300") || strings.HasPrefix(c, "0x0302")) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// numaNodes lists the NUMA nodes that have CPUs, by id.
func numaNodes() ([]numaNode, error) {
	paths, err := filepath.Glob(filepath.Join(sysRoot, "devices/system/node/node[0-9]*"))
	if err != nil {
		return nil, err
	}
	var out []numaNode
	for _, p := range paths {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("CPUs of NUMA node %d: %w", id, err)
		}
		if cpus := strings.TrimSpace(string(b)); cpus != "" {
			out = append(out, numaNode{ID: id, CPUs: CPUList(cpus)})
		}
	}
	slices.SortFunc(out, func(a, b numaNode) int { return a.ID - b.ID })
	return out, nil
}
