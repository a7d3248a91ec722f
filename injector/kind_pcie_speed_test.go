//go:build linux

package injector

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rootPortConfig builds the config space of a PCIe root port laid out as the PCIe
// specification gives it: a capability list (status bit 4, pointer at 0x34) whose PCI
// Express capability at 0x40 has Link Control 2 = ctl2.
func rootPortConfig(ctl2 uint16) []byte {
	cfg := make([]byte, 256)
	binary.LittleEndian.PutUint16(cfg[0x00:], 0x8086) // vendor
	cfg[0x06] = 0x10                                  // status: capability list
	cfg[0x34] = 0x40
	cfg[0x40], cfg[0x41] = pcieCapID, 0                              // last capability
	binary.LittleEndian.PutUint16(cfg[0x40+pcieLinkStatus:], 0x1045) // Link Status: Gen5 x4
	binary.LittleEndian.PutUint16(cfg[0x40+pcieLinkCtl2:], ctl2)
	return cfg
}

// fakePCIeTree lays out a GPU under a root port as sysfs does (devices/pci0000:80/
// <port>/<gpu>, with bus/pci/devices links) and points sysRoot at it.
func fakePCIeTree(t *testing.T, portCfg []byte) (portConfig string) {
	t.Helper()
	root := t.TempDir()
	port, gpu := "0000:80:01.0", "0000:81:00.0"
	pdir := filepath.Join(root, "devices/pci0000:80", port)
	gdir := filepath.Join(pdir, gpu)
	for dir, files := range map[string]map[string]string{
		pdir: {"vendor": "0x8086", "class": "0x060400", "numa_node": "1"},
		gdir: {"vendor": "0x10de", "class": "0x030200", "numa_node": "1"},
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(pdir, "config"), portCfg, 0o644); err != nil {
		t.Fatal(err)
	}
	links := filepath.Join(root, "bus/pci/devices")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	for addr, dir := range map[string]string{port: pdir, gpu: gdir} {
		if err := os.Symlink(dir, filepath.Join(links, addr)); err != nil {
			t.Fatal(err)
		}
	}
	old := sysRoot
	sysRoot = root
	t.Cleanup(func() { sysRoot = old })
	return filepath.Join(links, port, "config")
}

func TestHardwareKindsAreOffByDefault(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	fakePCIeTree(t, rootPortConfig(5))
	_, err := in.Apply(ctxT(t), l.target("n1"), mustParse(t, in, "pcie-speed", map[string]string{"gen": "3"}), time.Minute)
	if !errors.Is(err, ErrHardwareOff) {
		t.Fatalf("pcie-speed without AllowHardware: %v, want ErrHardwareOff", err)
	}
	if left, _ := in.List(); len(left) > 0 {
		t.Errorf("a refused hardware fault was journaled: %+v", left)
	}
}

// TestPCIeSpeedRoundTrip applies pcie-speed to a port's config file in a sysfs tree laid
// out as the kernel's (writing a real port's config would retrain a real link).
func TestPCIeSpeedRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1")
	reg, _ := NewRegistry(Builtin()...)
	in, err := Open(Options{DataDir: t.TempDir(), Registry: reg, AllowHardware: true})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := fakePCIeTree(t, rootPortConfig(0x0045)) // Gen5 target, other bits set
	ctl := func() (ctl2, lnkCtl uint16) {
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint16(b[0x40+pcieLinkCtl2:]), binary.LittleEndian.Uint16(b[0x40+pcieLinkCtl:])
	}
	e, err := in.Apply(ctxT(t), l.target("n1"), mustParse(t, in, "pcie-speed", map[string]string{"gen": "3"}), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c2, lc := ctl(); c2 != 0x0043 || lc&retrainLink == 0 {
		t.Errorf("after apply: Link Control 2 %#04x (want 0x0043), Link Control %#04x (want retrain)", c2, lc)
	}
	mustContain(t, "the command", e.Command[0], "setpci -s 0000:80:01.0 CAP_EXP+0x30.w=0003:000f")
	if err := in.Revert(context.Background(), e.ID); err != nil {
		t.Fatal(err)
	}
	if c2, _ := ctl(); c2 != 0x0045 {
		t.Errorf("after revert: Link Control 2 %#04x, want 0x0045", c2)
	}
}

func TestPCIeSpeedNeedsAPort(t *testing.T) {
	// A GPU on a root bus (as the H200 VM's 0000:00:06.0) has no port to retrain.
	fakeSys(t, map[string][3]string{"0000:00:06.0": {"0x10de", "0x030200", "-1"}}, nil)
	if _, err := gpuPort(0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("gpuPort on a root bus: %v, want ErrUnsupported", err)
	}
}
