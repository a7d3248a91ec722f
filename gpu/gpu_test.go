//go:build linux && cgo

package gpu

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// Without libnvidia-ml (CI), Open says so in words and wraps ErrNoDriver.
func TestOpenWithoutDriver(t *testing.T) {
	n, err := Open()
	if err == nil {
		n.Close()
		t.Skip("this host has an NVIDIA driver")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("error %v does not wrap ErrNoDriver", err)
	}
	want := "no NVIDIA driver: libnvidia-ml.so.1 not found (GPU labs need a GPU node)"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := Count(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Count: %v, want ErrNoDriver", err)
	}
}

func TestNormBusID(t *testing.T) {
	cases := map[string]string{
		"00000000:18:00.0": "0000:18:00.0",
		"00000000:9A:00.0": "0000:9a:00.0",
		"0000:3b:00.1":     "0000:3b:00.1",
		"0001:00:1F.7":     "0001:00:1f.7",
		"not-a-bus-id":     "not-a-bus-id",
	}
	for in, want := range cases {
		if got := NormBusID(in); got != want {
			t.Errorf("NormBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCPUList(t *testing.T) {
	cases := []struct {
		words []uint
		want  string
	}{
		{[]uint{0xffff}, "0-15"},
		{[]uint{0xffff0000ffff}, "0-15,32-47"},
		{[]uint{0x5}, "0,2"},
		{[]uint{0, 1}, "64"},
		{[]uint{1 << 63, 1}, "63-64"},
		{[]uint{0}, ""},
	}
	for _, c := range cases {
		if got := cpuList(c.words); got != c.want {
			t.Errorf("cpuList(%x) = %q, want %q", c.words, got, c.want)
		}
	}
}

// The relation rules of PCIRelation on the shapes sysfs shows.
func TestPCIRelation(t *testing.T) {
	root := []string{"pci0000:00"}
	p := func(parts ...string) []string { return append(append([]string(nil), root...), parts...) }
	cases := []struct {
		name       string
		a, b       []string
		numaA, nmB int
		want       string
	}{
		{"different NUMA nodes", p("0000:00:01.0", "0000:18:00.0"), []string{"pci0000:80", "0000:80:01.0", "0000:9a:00.0"}, 0, 1, "SYS"},
		{"same NUMA, other host bridge", p("0000:00:01.0", "0000:18:00.0"), []string{"pci0000:40", "0000:40:01.0", "0000:4b:00.0"}, 0, 0, "NODE"},
		{"unknown NUMA, other host bridge", p("0000:00:01.0", "0000:18:00.0"), []string{"pci0000:40", "0000:40:01.0", "0000:4b:00.0"}, -1, -1, "NODE"},
		{"two root ports of one host bridge", p("0000:00:01.0", "0000:01:00.0"), p("0000:00:02.0", "0000:02:00.0"), 0, 0, "PHB"},
		{"devices straight on the root bus (VMs)", p("0000:00:05.0"), p("0000:00:03.0"), -1, -1, "PHB"},
		{"one switch", p("0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:03:00.0"), p("0000:00:01.0", "0000:01:00.0", "0000:02:02.0", "0000:04:00.0"), 0, 0, "PIX"},
		{"two functions of one device", p("0000:00:01.0", "0000:18:00.0"), p("0000:00:01.0", "0000:18:00.1"), 0, 0, "PIX"},
		{"two switch levels", p("0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:03:00.0", "0000:04:01.0", "0000:05:00.0"), p("0000:00:01.0", "0000:01:00.0", "0000:02:02.0", "0000:06:00.0"), 0, 0, "PXB"},
		{"unknown path", nil, p("0000:00:03.0"), 0, 0, "SYS"},
	}
	for _, c := range cases {
		if got := PCIRelation(c.a, c.b, c.numaA, c.nmB); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
		if got := PCIRelation(c.b, c.a, c.nmB, c.numaA); got != c.want {
			t.Errorf("%s (swapped): got %s, want %s", c.name, got, c.want)
		}
	}
}

// NIC discovery on this host's own sysfs: every NIC it finds sits on a PCI
// function whose path ends at its address; loopback and virtual devices are
// left out.
func TestNICsOnThisHost(t *testing.T) {
	nics, err := Sysfs{}.NICs()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nics {
		if !bdfRe.MatchString(n.BusID) || len(n.PCIPath) < 2 || n.PCIPath[len(n.PCIPath)-1] != n.BusID {
			t.Errorf("NIC %+v: bad PCI address or path", n)
		}
		if n.Name == "lo" || strings.HasPrefix(n.Name, "ifb") || strings.HasPrefix(n.Name, "veth") {
			t.Errorf("virtual device %s listed as a NIC", n.Name)
		}
	}
	// If eth0 is on PCI here, it must be found.
	if _, err := os.Stat("/sys/class/net/eth0/device"); err == nil {
		found := false
		for _, n := range nics {
			for _, d := range n.Netdevs {
				found = found || d == "eth0"
			}
		}
		if !found {
			t.Errorf("eth0 has a device but is not among %+v", nics)
		}
	}
}

func TestPCIeCeiling(t *testing.T) {
	cases := []struct {
		gen, width int
		want       float64
	}{
		{1, 1, 0.25},
		{2, 8, 4},
		{3, 16, 15.754},
		{4, 16, 31.508},
		{5, 16, 63.015},
		{5, 8, 31.508},
		{6, 16, 121},
	}
	for _, c := range cases {
		got, formula, err := PCIeCeiling(c.gen, c.width)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 0.001 {
			t.Errorf("Gen%d x%d: %.4f GB/s, want %.3f", c.gen, c.width, got, c.want)
		}
		if !strings.Contains(formula, "lanes") {
			t.Errorf("formula %q", formula)
		}
	}
	for _, bad := range [][2]int{{0, 16}, {7, 16}, {5, 0}, {5, 64}} {
		if _, _, err := PCIeCeiling(bad[0], bad[1]); err == nil {
			t.Errorf("Gen%d x%d: no error", bad[0], bad[1])
		}
	}
}

// A real kernel-log Xid line (from https://github.com/NVIDIA/NVSentinel/issues/155).
func TestScanKernelXids(t *testing.T) {
	log := "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n" +
		"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\n"
	ev, err := ScanKernelXids(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].Xid != 79 || ev[0].BusID != "0000:44:00" || ev[0].Text != "GPU has fallen off the bus" {
		t.Fatalf("got %+v", ev)
	}
	if !sameBus(ev[0].BusID, "0000:44:00.0") || sameBus(ev[0].BusID, "0000:45:00.0") {
		t.Error("kernel-log address does not match the GPU's")
	}
}
