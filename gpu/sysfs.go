package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Sysfs reads PCI topology and network devices from a sysfs tree.
type Sysfs struct {
	// Root is prefixed to /sys; "" reads the host's own.
	Root string
}

var bdfRe = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// NormBusID turns NVML's "00000000:18:00.0" (or any case or domain width)
// into sysfs's "0000:18:00.0". It returns s unchanged when it is not a PCI
// address.
func NormBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return s
	}
	dom, err := strconv.ParseUint(parts[0], 16, 32)
	if err != nil {
		return s
	}
	bus, err := strconv.ParseUint(parts[1], 16, 8)
	if err != nil {
		return s
	}
	devfn := strings.SplitN(parts[2], ".", 2)
	if len(devfn) != 2 {
		return s
	}
	dev, err1 := strconv.ParseUint(devfn[0], 16, 8)
	fn, err2 := strconv.ParseUint(devfn[1], 16, 8)
	if err1 != nil || err2 != nil {
		return s
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn)
}

func (s Sysfs) path(p ...string) string {
	return filepath.Join(append([]string{s.Root, "/sys"}, p...)...)
}

// PCIPath returns the chain of PCI devices from the root complex down to the
// device at busID, e.g. ["pci0000:00", "0000:00:01.0", "0000:18:00.0"].
func (s Sysfs) PCIPath(busID string) ([]string, error) {
	real, err := filepath.EvalSymlinks(s.path("bus/pci/devices", NormBusID(busID)))
	if err != nil {
		return nil, fmt.Errorf("resolve PCI device %s in sysfs: %w", busID, err)
	}
	return pciChain(real), nil
}

// pciChain keeps the root complex and the PCI functions of a resolved
// /sys/devices path, dropping what lies below the last PCI function (a
// virtio bus, a net device).
func pciChain(real string) []string {
	var chain []string
	for _, c := range strings.Split(filepath.ToSlash(real), "/") {
		switch {
		case strings.HasPrefix(c, "pci") && len(chain) == 0:
			chain = append(chain, c)
		case bdfRe.MatchString(c) && len(chain) > 0:
			chain = append(chain, c)
		}
	}
	return chain
}

// NUMANode returns the NUMA node sysfs reports for a PCI device, -1 when it
// reports none.
func (s Sysfs) NUMANode(busID string) int {
	b, err := os.ReadFile(s.path("bus/pci/devices", NormBusID(busID), "numa_node"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// LocalCPUs returns sysfs's local_cpulist of a PCI device ("0-15"), "" when absent.
func (s Sysfs) LocalCPUs(busID string) string {
	b, err := os.ReadFile(s.path("bus/pci/devices", NormBusID(busID), "local_cpulist"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (s Sysfs) driver(busID string) string {
	p, err := os.Readlink(s.path("bus/pci/devices", busID, "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(p)
}

// NICs lists the network devices that sit on a PCI function: every RDMA
// device in /sys/class/infiniband (named as nvidia-smi names them), then
// every netdev in /sys/class/net on a PCI function no RDMA device claims.
// Virtual netdevs (lo, bridges, veth, ifb) have no PCI function and are left out.
func (s Sysfs) NICs() ([]NIC, error) {
	byBDF := map[string]*NIC{}
	var order []string

	ibs, err := os.ReadDir(s.path("class/infiniband"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	for _, e := range ibs {
		bdf, chain, ok := s.pciOf(s.path("class/infiniband", e.Name(), "device"))
		if !ok {
			continue
		}
		if _, dup := byBDF[bdf]; dup {
			continue
		}
		n := &NIC{Name: e.Name(), RDMA: true, BusID: bdf, PCIPath: chain, NUMANode: s.NUMANode(bdf), Driver: s.driver(bdf)}
		byBDF[bdf] = n
		order = append(order, bdf)
	}

	nets, err := os.ReadDir(s.path("class/net"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list network devices: %w", err)
	}
	names := make([]string, 0, len(nets))
	for _, e := range nets {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, name := range names {
		bdf, chain, ok := s.pciOf(s.path("class/net", name, "device"))
		if !ok {
			continue
		}
		if n, ok := byBDF[bdf]; ok {
			n.Netdevs = append(n.Netdevs, name)
			continue
		}
		n := &NIC{Name: name, Netdevs: []string{name}, BusID: bdf, PCIPath: chain, NUMANode: s.NUMANode(bdf), Driver: s.driver(bdf)}
		byBDF[bdf] = n
		order = append(order, bdf)
	}

	out := make([]NIC, 0, len(order))
	for _, bdf := range order {
		out = append(out, *byBDF[bdf])
	}
	return out, nil
}

// pciOf resolves a sysfs "device" link to the nearest PCI function above it.
func (s Sysfs) pciOf(link string) (bdf string, chain []string, ok bool) {
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		return "", nil, false
	}
	chain = pciChain(real)
	if len(chain) < 2 {
		return "", nil, false
	}
	return chain[len(chain)-1], chain, true
}

// PCIRelation is the nvidia-smi relation between two PCI devices, computed
// from their sysfs paths and NUMA nodes:
//
//	SYS   different NUMA nodes
//	NODE  same NUMA node, different host bridges (root complexes)
//	PHB   same host bridge, no bridge below it in common
//	PIX   at most one PCIe switch between them (each at most two levels
//	      below their lowest common bridge: a downstream port and the device)
//	PXB   several PCIe bridges, without the host bridge
//
// A PCIe switch shows in sysfs as an upstream port with downstream ports
// below it, hence "two levels" for one switch. Unknown paths give SYS, the
// most conservative answer.
func PCIRelation(a, b []string, numaA, numaB int) string {
	if numaA >= 0 && numaB >= 0 && numaA != numaB {
		return "SYS"
	}
	if len(a) < 2 || len(b) < 2 {
		return "SYS"
	}
	if a[0] != b[0] {
		return "NODE"
	}
	k := 0
	for k+1 < len(a) && k+1 < len(b) && a[k+1] == b[k+1] {
		k++
	}
	if k == 0 {
		return "PHB"
	}
	da, db := len(a)-1-k, len(b)-1-k
	if da <= 2 && db <= 2 {
		return "PIX"
	}
	return "PXB"
}
