//go:build linux

package injector

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fakeSys writes a sysfs tree: PCI devices (address -> vendor, class, numa_node) and
// NUMA nodes (id -> cpulist), and points sysRoot at it for the test.
func fakeSys(t *testing.T, devs map[string][3]string, nodes map[int]string) {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for addr, d := range devs {
		dir := filepath.Join(root, "bus/pci/devices", addr)
		write(filepath.Join(dir, "vendor"), d[0])
		write(filepath.Join(dir, "class"), d[1])
		write(filepath.Join(dir, "numa_node"), d[2])
	}
	for id, cpus := range nodes {
		write(filepath.Join(root, "devices/system/node", "node"+strconv.Itoa(id), "cpulist"), cpus)
	}
	old := sysRoot
	sysRoot = root
	t.Cleanup(func() { sysRoot = old })
}

// twoSockets: GPUs 0 and 1 on node 0, GPU 2 on node 1; a Mellanox NIC and an
// NVIDIA audio function that are not GPUs.
var twoSockets = map[string][3]string{
	"0000:18:00.0": {"0x10de", "0x030200", "0"},
	"0000:3b:00.0": {"0x10de", "0x030200", "0"},
	"0000:3c:00.0": {"0x15b3", "0x020700", "0"},
	"0000:86:00.0": {"0x10de", "0x030000", "1"},
	"0000:86:00.1": {"0x10de", "0x040300", "1"},
}

func TestFarNUMANode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devs    map[string][3]string
		nodes   map[int]string
		gpu     int
		want    numaNode
		wantErr error
	}{
		{"gpu on node 0", twoSockets, map[int]string{0: "0-31,64-95", 1: "32-63,96-127"}, 0, numaNode{1, "32-63,96-127"}, nil},
		{"gpu on node 1", twoSockets, map[int]string{0: "0-31", 1: "32-63"}, 2, numaNode{0, "0-31"}, nil},
		{"memory-only node skipped", twoSockets, map[int]string{0: "0-31", 1: "32-63", 2: ""}, 1, numaNode{1, "32-63"}, nil},
		{"one socket", twoSockets, map[int]string{0: "0-15"}, 0, numaNode{}, ErrUnsupported},
		{"no NUMA node (VM)", map[string][3]string{"0000:00:06.0": {"0x10de", "0x030200", "-1"}}, map[int]string{0: "0-15"}, 0, numaNode{}, ErrUnsupported},
		{"no such GPU", twoSockets, map[int]string{0: "0-31", 1: "32-63"}, 3, numaNode{}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeSys(t, tc.devs, tc.nodes)
			got, err := farNUMANode(tc.gpu)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("farNUMANode(%d) = %v, %v; want %v", tc.gpu, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("farNUMANode(%d) = %+v, %v; want %+v", tc.gpu, got, err, tc.want)
			}
		})
	}
}

// TestNUMAMisbindRoundTrip binds a real lab cgroup. This host has one NUMA node, so
// the sysfs tree says the GPU sits on a second one and node 0 (CPU 0) is the far one.
func TestNUMAMisbindRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	fakeSys(t, map[string][3]string{"0000:86:00.0": {"0x10de", "0x030200", "1"}}, map[int]string{0: "0", 1: "1"})
	spin := l.startIn(t, "n1", "yes")
	status := "/proc/" + strconv.Itoa(spin.Process.Pid) + "/status"
	// The spinner has joined the cgroup once it runs yes (it joins, then execs).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(spin.Process.Pid) + "/comm"); string(b) == "yes\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spinner did not start yes within 5 s")
		}
	}
	roundTrip(t, l, in, "n1", mustParse(t, in, "numa-misbind", map[string]string{"gpu": "0"}), func(t *testing.T, e Entry) {
		b, err := os.ReadFile(status)
		if err != nil {
			t.Fatalf("the spinner: %v (%v)", err, spin.ProcessState)
		}
		mustContain(t, "/proc/<pid>/status", string(b), "Cpus_allowed_list:\t0\n")
		mustContain(t, "/proc/<pid>/status", string(b), "Mems_allowed_list:\t0\n")
		mustContain(t, "the command", e.Command[0], "echo 0 > ")
	})
}
